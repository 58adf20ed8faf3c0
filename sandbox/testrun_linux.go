package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

const confines = true

func (j TestJail) command(ctx context.Context, script string) (*JailCmd, error) {
	bwrap, ok := paths.LookPath("bwrap", os.Getenv("PATH"))
	if !ok {
		return nil, fmt.Errorf("%w: bwrap was not found on PATH; install bubblewrap (apt install bubblewrap), which the agents' sandbox needs too", ErrNoJail)
	}
	filter, err := unixSocketFilter(runtime.GOARCH)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoJail, err)
	}
	args := j.bwrapArgs(script)
	argv := append([]string{bwrap}, args...)
	if prlimit, ok := paths.LookPath("prlimit", os.Getenv("PATH")); ok {
		argv = j.Limits.Wrap(prlimit, argv)
	} else if j.Limits != (Limits{}) {
		return nil, fmt.Errorf("%w: prlimit (util-linux) was not found on PATH, and the test runs' limits (%s) are set by it", ErrNoJail, j.Limits)
	}
	// The seccomp program reaches bwrap as fd 3, a pipe it reads to the
	// end; it is a few dozen bytes, far below a pipe's buffer.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoJail, err)
	}
	if _, err := w.Write(filter); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoJail, err)
	}
	w.Close()
	// bwrap tells the pid of the namespace's first process on fd 4.
	infoR, infoW, err := os.Pipe()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoJail, err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{r, infoW}
	cmd.Env = j.Env
	cmd.Dir = "/"
	return &JailCmd{Cmd: cmd, info: infoR, infoW: infoW}, nil
}

// Gone waits, up to within, until every process of the jail has ended.
// When the namespace's first process ends, the kernel kills every other
// process in it and ends the namespace only once they are all gone; bwrap
// normally waits for that, but not when it was itself killed (a timeout,
// a cancellation). Call it after the command has ended; it returns
// whether the namespace is gone.
func (c *JailCmd) Gone(within time.Duration) bool {
	// (An unconfined test has no info pipe: nothing beyond its group.)
	if c.info == nil {
		return true
	}
	// The parent's copy of the write end goes first (whether or not the
	// caller closed ExtraFiles): the read ends when bwrap's copy does.
	c.infoW.Close()
	data, _ := io.ReadAll(c.info)
	c.info.Close()
	c.info = nil
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if json.Unmarshal(data, &info) != nil || info.ChildPid <= 0 {
		return true // it never started
	}
	deadline := time.Now().Add(within)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", info.ChildPid))
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bwrapArgs is the jail in bubblewrap's words. Order matters: later
// mounts cover earlier ones, so the read-only root comes first, the holes
// in it after.
//
// The test's shell is the namespace's first process (--as-pid-1), with no
// init of bwrap's between: its CPU time, and that of what it waited for,
// reaches the daemon through wait (through an init, it did not), and when
// it ends the kernel ends every other process of the namespace as before.
func (j TestJail) bwrapArgs(script string) []string {
	args := []string{
		"--die-with-parent", "--new-session", "--as-pid-1",
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--tmpfs", "/run",
	}
	for _, h := range j.Hide {
		if isDir(h) {
			args = append(args, "--tmpfs", h)
		}
	}
	for _, r := range j.ReadOnly {
		if isDir(r) {
			args = append(args, "--ro-bind", r, r)
		}
	}
	for _, w := range j.Writable {
		if isDir(w) {
			args = append(args, "--bind", w, w)
		}
	}
	for _, c := range j.Caches {
		if isDir(c) {
			args = append(args, "--ro-bind", c, c)
		}
	}
	args = append(args,
		"--bind", j.Checkout, j.Mount,
	)
	from := j.DepsFrom
	if from == "" {
		from = j.Mount
	}
	for _, d := range j.Deps {
		// Below DepsFrom, or below Mount's real directory (the project's
		// own, lent to a lane's run that has none of its own).
		for _, base := range []string{from, j.Mount} {
			if rel, err := filepath.Rel(base, d); err == nil && isDir(d) && !strings.HasPrefix(rel, "..") {
				args = append(args, "--ro-bind", d, filepath.Join(j.Mount, rel))
				break
			}
		}
	}
	// The credential stores last, so that no bind above brings one back
	// (a writable directory of sandbox.allow_write that holds the home
	// directory or ~/.config): a directory is an empty one, a file an
	// empty file. One that is a link (a dotfiles repository's) is hidden
	// where it leads, which the read-only root would show otherwise.
	for _, s := range j.Secrets {
		p := secretPath(s)
		switch fi, err := os.Stat(p); {
		case err != nil:
		case fi.IsDir():
			args = append(args, "--tmpfs", p)
		default:
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	// A hidden directory is an empty one that nothing can be written to
	// but what is bound below it (a cache, the checkout when the
	// project lies there): made read-only last, once bwrap has made the
	// mount points in it.
	for _, h := range j.Hide {
		if isDir(h) {
			args = append(args, "--remount-ro", h)
		}
	}
	args = append(args,
		"--chdir", j.Mount,
		"--seccomp", "3", "--info-fd", "4",
		"--", "/bin/sh", "-c", script)
	return args
}

// secretPath is where the jail must hide the credential store s: where s
// leads, when it is a link or lies below one (bwrap cannot mount over a
// link, and the link then leads to what is hidden), or s itself.
func secretPath(s string) string {
	if r, err := filepath.EvalSymlinks(s); err == nil {
		return r
	}
	return s
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir() && filepath.IsAbs(p)
}

// unixSocketFilter is a seccomp program (classic BPF, as bwrap --seccomp
// reads it: struct sock_filter records in the machine's byte order) that
// makes socket(AF_UNIX, …) and io_uring fail with EPERM and allows
// everything else: the
// rule Claude Code's sandbox applies to agents' commands, so that a test's
// code cannot reach a Unix socket, the daemon's or any other, that it can
// see. A system call of another architecture's table (32-bit calls on a
// 64-bit kernel, which have their own socketcall) fails the same way.
func unixSocketFilter(goarch string) ([]byte, error) {
	var arch, socket uint32
	switch goarch {
	case "amd64":
		arch, socket = unix.AUDIT_ARCH_X86_64, 41
	case "arm64":
		arch, socket = unix.AUDIT_ARCH_AARCH64, 198
	default:
		return nil, fmt.Errorf("no seccomp rule for %s: the daemon's test runs are confined on amd64 and arm64", goarch)
	}
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // seccomp_data.args[0], its low 32 bits on these little-endian machines
		x32Bit  = 0x40000000
		// io_uring's system calls, the same numbers on both machines: its
		// socket and connect operations make a Unix socket without
		// socket(2), so io_uring is refused whole (no test needs it).
		ioUringSetup, ioUringRegister = 425, 427
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	ld := uint16(unix.BPF_LD | unix.BPF_W | unix.BPF_ABS)
	jeq := uint16(unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K)
	jge := uint16(unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K)
	ret := uint16(unix.BPF_RET | unix.BPF_K)
	prog := []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, Jt: 1, Jf: 0, K: arch}, // native: go on; else deny
		/* 2 */ {Code: ret, K: deny},
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jge, Jt: 7, Jf: 0, K: x32Bit}, // the x32 table: deny
		/* 5 */ {Code: jge, Jt: 0, Jf: 2, K: ioUringSetup},
		/* 6 */ {Code: jge, Jt: 1, Jf: 0, K: ioUringRegister + 1},
		/* 7 */ {Code: ret, K: deny}, // io_uring_setup, _enter, _register
		/* 8 */ {Code: jeq, Jt: 0, Jf: 2, K: socket},
		/* 9 */ {Code: ld, K: offArg0},
		/* 10 */ {Code: jeq, Jt: 1, Jf: 0, K: unix.AF_UNIX},
		/* 11 */ {Code: ret, K: allow},
		/* 12 */ {Code: ret, K: deny},
	}
	buf := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		buf = binary.NativeEndian.AppendUint16(buf, in.Code)
		buf = append(buf, in.Jt, in.Jf)
		buf = binary.NativeEndian.AppendUint32(buf, in.K)
	}
	return buf, nil
}

// machineMemory is the machine's RAM in bytes, 0 when unknown.
func machineMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
