package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// TestJail is how the daemon runs a feature's test: the agent's code runs
// there, and a test run has none of the daemon's powers. With bubblewrap
// (Linux), the test sees the whole filesystem read-only, except:
//
//   - Checkout, the throwaway copy of exactly the tree being judged, which
//     it sees at Mount (the project's own path, so that paths in the test
//     mean what they meant to the agent) and may write;
//   - a fresh, empty /tmp and /dev/shm, and Writable, which it may write;
//   - Caches (the verdict's own caches of compiled code), which it may
//     read only: filled by Warming's run of a command that compiles and
//     runs none of the project's code, never by a test, whose code could
//     otherwise leave an entry that vouches for another tree's build;
//   - Hide (the daemon's state and socket directories, /run), which it
//     sees as empty directories;
//   - ReadOnly (the agents' dependency caches: Go's module cache, which
//     the warm-up extracts the verdict's modules from), which it sees
//     read-only at their own path, even below /tmp;
//   - Secrets (credential files and directories in the home directory),
//     which it sees empty.
//
// It has no network at all (a network namespace of its own, with only a
// loopback), cannot create Unix sockets (the same seccomp rule as Claude
// Code's sandbox for agents), has no capabilities, and lives in a pid
// namespace of its own: when the test's shell ends, every process it
// started, detached ones included, is killed by the kernel. Its
// environment is Env, nothing more (see TestEnv), and Limits bound its
// processes, memory and files.
type TestJail struct {
	Checkout string
	Mount    string
	Writable []string
	Caches   []string
	// ReadOnly are directories outside the checkout that the test and the
	// warm-up read where they are, bound read-only: /tmp, which the jail
	// replaces, may hold them (a home or a GOMODCACHE below it, as in
	// demo, CI and tests), and a warm-up that cannot read the agents'
	// module cache fills the verdict's with nothing.
	ReadOnly []string
	// WarmEnv is what the warm-up's environment adds to Env: where it
	// fetches what the caches lack (Go's modules from the agents' module
	// cache, each checked against the tree's go.sum as Go extracts it).
	WarmEnv []string
	Hide    []string
	Secrets []string
	Env     []string
	Limits  Limits
	// Deps are directories of a work tree that a build needs and git does
	// not carry (node_modules, a virtualenv), bound read-only at the same
	// place in the checkout: the test uses them and cannot change them.
	// Absolute paths, below DepsFrom or below Mount's real directory.
	Deps []string
	// DepsFrom is the work tree Deps are in: the checkout's own (a lane's
	// linked work tree, whose checkout is seen at the project's path,
	// Mount), "" for Mount's real directory.
	DepsFrom string
	// Off runs the test unconfined, in its checkout with Env and Deps
	// linked in: the user turned confinement off (sandbox.enabled: false),
	// visibly, or runs the tests as themselves (verify --unconfined).
	Off bool
	// OwnPort gives each run, when Off, PORT: a port the kernel had free.
	// Confined, every run has a network of its own, and servers of tests
	// run at once (lanes, a sweep) cannot collide; unconfined they share
	// the machine's, and a test that listens on $PORT (or a fixed port
	// otherwise, as tests written for one checkout do) gets one of its
	// own.
	OwnPort bool
}

// FreePort is a TCP port of the loopback that the kernel had free a
// moment ago, 0 when it gave none: what a run that shares the machine's
// network is given as PORT.
func FreePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Warming is the jail in which a toolchain's warm-up command fills the
// caches (toolchain.Toolchain.Warm): j with its Caches writable. Only a
// command that runs none of the project's code may run there.
func (j TestJail) Warming() TestJail {
	j.Writable = append(slices.Clip(j.Writable), j.Caches...)
	j.Env = append(slices.Clip(j.Env), j.WarmEnv...)
	j.Caches, j.WarmEnv = nil, nil
	return j
}

// Confines reports whether TestJail confines a test on this system. Where
// it does not (bubblewrap is Linux's), a test runs in its throwaway
// checkout with TestEnv's environment, and nothing more: the daemon says so
// at start.
const Confines = confines

// ErrNoJail is what TestJail.Command's errors wrap when a confined test
// run cannot be made on this machine.
var ErrNoJail = errors.New("the daemon's test runs cannot be confined here")

// Command returns the command that runs script with /bin/sh -c in the
// jail, its working directory the checkout. The caller starts it in a
// process group of its own (procgroup.Prepare) and may set its output;
// what else it needs (the seccomp program) it carries in ExtraFiles, which
// the caller must not replace, and closes once the command has started or
// failed to (the child has its own copies).
func (j TestJail) Command(ctx context.Context, script string) (*JailCmd, error) {
	if !filepath.IsAbs(j.Checkout) || !filepath.IsAbs(j.Mount) && !j.Off && confines {
		return nil, fmt.Errorf("%w: checkout %q and mount %q must be absolute", ErrNoJail, j.Checkout, j.Mount)
	}
	if j.Off || !confines {
		return j.unconfined(ctx, script), nil
	}
	return j.command(ctx, script)
}

// unconfined runs script in the checkout with the jail's environment and
// its dependencies, nothing more: where the test runs cannot be confined,
// or the user turned confinement off.
func (j TestJail) unconfined(ctx context.Context, script string) *JailCmd {
	// The dependencies git does not carry are linked in where the jail
	// would bind them: without them, a test whose runner lives in
	// node_modules or a virtualenv would fail for want of what the work
	// tree has.
	from := j.DepsFrom
	if from == "" {
		from = j.Mount
	}
	for _, d := range j.Deps {
		for _, base := range []string{from, j.Mount} { // as the jail binds them
			if rel, err := filepath.Rel(base, d); err == nil && filepath.IsLocal(rel) {
				os.Symlink(d, filepath.Join(j.Checkout, rel))
				break
			}
		}
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir = j.Checkout
	cmd.Env = j.Env
	if j.OwnPort {
		if port := FreePort(); port != 0 {
			cmd.Env = append(slices.Clip(cmd.Env), fmt.Sprintf("PORT=%d", port))
		}
	}
	return &JailCmd{Cmd: cmd}
}

// Run runs script in the jail to its end, its output to out (nil: none),
// and returns once every process of the jail is gone, with the CPU time
// of its processes and the script's exit status: for what the daemon runs
// there and only waits for (a toolchain's warm-up).
func (j TestJail) Run(ctx context.Context, script string, out io.Writer) (time.Duration, error) {
	jc, err := j.Command(ctx, script)
	if err != nil {
		return 0, err
	}
	jc.Cmd.Stdout, jc.Cmd.Stderr = out, out
	procgroup.Prepare(jc.Cmd)
	err = jc.Cmd.Start()
	for _, f := range jc.Cmd.ExtraFiles {
		f.Close()
	}
	var cpu time.Duration
	if err == nil {
		err = jc.Cmd.Wait()
		cpu = jc.Cmd.ProcessState.UserTime() + jc.Cmd.ProcessState.SystemTime()
		procgroup.KillAndWait(jc.Cmd.Process.Pid, procgroup.WaitDelay)
	}
	jc.Gone(procgroup.WaitDelay)
	return cpu, err
}

// JailCmd is a test's command in its jail.
type JailCmd struct {
	Cmd         *exec.Cmd
	info, infoW *os.File // bwrap's --info-fd, read by Gone
}

// Limits bound what one confined process tree may take: an honest build
// never meets them, a runaway or hostile one is stopped by them. Zero is
// no bound. They are set as resource limits (setrlimit) on the first
// process, hard and soft alike, and every process inherits them.
type Limits struct {
	// Processes bounds the processes of the user (RLIMIT_NPROC). Linux
	// does not apply it to root: a daemon running as root has its process
	// trees bounded by their pid namespace's end only.
	Processes int
	// Memory bounds the data of each process (RLIMIT_DATA: its heap and
	// private writable mappings), in bytes.
	Memory int64
	// FileSize bounds each file a process writes (RLIMIT_FSIZE), in bytes:
	// a write past it fails with EFBIG (and SIGXFSZ).
	FileSize int64
}

// Wrap returns the command line that runs argv under l, with util-linux's
// prlimit, which sets the limits on itself and then executes argv. With
// no bound set, argv is returned as it is.
func (l Limits) Wrap(prlimit string, argv []string) []string {
	var opts []string
	add := func(flag string, v int64) {
		if v > 0 {
			n := strconv.FormatInt(v, 10)
			opts = append(opts, "--"+flag+"="+n+":"+n)
		}
	}
	add("nproc", int64(l.Processes))
	add("data", l.Memory)
	add("fsize", l.FileSize)
	if len(opts) == 0 {
		return argv
	}
	return slices.Concat([]string{prlimit}, opts, []string{"--"}, argv)
}

// String says the bounds in words, for logs and messages.
func (l Limits) String() string {
	var parts []string
	if l.Processes > 0 {
		parts = append(parts, fmt.Sprintf("%d processes", l.Processes))
	}
	if l.Memory > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB of memory per process", l.Memory>>20))
	}
	if l.FileSize > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB per file", l.FileSize>>20))
	}
	if len(parts) == 0 {
		return "no bounds"
	}
	return strings.Join(parts, ", ")
}

// testEnvNames are the variables a test run gets from the daemon's
// environment, and no others: what locates the toolchains, their caches
// and the locale. It is an allow-list on purpose. A secret has no
// recognisable name (ANTHROPIC_API_KEY, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY,
// a DSN with a password, a CI's own variables…), and the agent's code runs
// in the test: whatever reaches its environment, it can print into the
// evidence that later agents read. Names match exactly, case and all.
var testEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM",
	// The locale's categories (POSIX and glibc's), by name: LC_ is no
	// prefix of trust (ssh sends LC_* on, and people carry other values
	// through it for that reason).
	"LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC", "LC_TIME",
	"LC_ADDRESS", "LC_IDENTIFICATION", "LC_MEASUREMENT", "LC_NAME", "LC_PAPER", "LC_TELEPHONE",
	// Go
	"GOROOT", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK",
	"GOPRIVATE", "GONOPROXY", "GOSUMDB", "GOEXPERIMENT", "GOAMD64", "GOARM64", "CGO_ENABLED", "CC", "CXX",
	// Node
	"NODE_PATH", "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "FNM_DIR", "npm_config_cache", "NPM_CONFIG_CACHE",
	"YARN_CACHE_FOLDER", "PNPM_HOME",
	// Python
	"PYENV_ROOT", "PYENV_VERSION", "VIRTUAL_ENV", "CONDA_PREFIX", "UV_CACHE_DIR", "PIP_CACHE_DIR",
	// Rust
	"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN",
	// JVM and others
	"JAVA_HOME", "GRADLE_USER_HOME", "MAVEN_OPTS", "DOTNET_ROOT",
}

// TestEnv returns the environment of a confined test run: from env (the
// daemon's, captured at its start) only the variables named in
// testEnvNames, then TMPDIR=/tmp (the jail's fresh /tmp) where env sets a
// TMPDIR, and extra, which wins. PATH keeps only the directories
// VerdictEnv keeps (none an agent can write).
//
// It adds nothing a person's shell would not hold: the test's code must not
// be able to tell the daemon's run from a person's by its environment, or
// code could pass there alone. So no CI=true (test runners do not watch
// or prompt anyway: a test's stdin is /dev/null, no terminal, and a runner
// that watches unless told otherwise, as react-scripts test does, watches
// in a person's shell too: the test command says --watchAll=false, or
// CI=true, itself, and the timeout ends one that does not), and no
// variable that names the run: the daemon knows its test runs' processes
// by their ancestry and process group (judge.IsRunProcess).
func TestEnv(env []string, projectDir string, agentWritable []string, extra ...string) []string {
	allowed := make(map[string]bool, len(testEnvNames))
	for _, n := range testEnvNames {
		allowed[n] = true
	}
	var out []string
	tmpdir := false
	for _, kv := range VerdictEnv(env, projectDir, agentWritable) {
		k, _, ok := strings.Cut(kv, "=")
		tmpdir = tmpdir || ok && k == "TMPDIR"
		if ok && allowed[k] {
			out = append(out, kv)
		}
	}
	if tmpdir {
		out = append(out, "TMPDIR=/tmp")
	}
	return append(out, extra...)
}

// SecretPaths are the credential stores under home that a test run sees
// empty: an agent's code has no use for them, and whatever it reads it can
// print into evidence that people and later agents read. Claude Code's
// own credentials are among them.
func SecretPaths(home string) []string {
	if !filepath.IsAbs(home) {
		return nil
	}
	var out []string
	for _, p := range []string{
		".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".npmrc", ".pypirc",
		".git-credentials", ".claude", ".claude.json", ".config/gh", ".config/gcloud",
		".config/ctxgraphd", ".local/share/keyrings", ".cargo/credentials", ".cargo/credentials.toml",
	} {
		out = append(out, filepath.Join(home, p))
	}
	return out
}

// NewLimits returns the limits of the configuration's keys
// (sandbox.max_processes, sandbox.max_memory_mb, sandbox.max_file_mb):
// 0 is no bound, but for memory, where 0 is half the machine's memory
// (as far as it can be known here) and -1 no bound.
func NewLimits(processes, memoryMB, fileMB int) Limits {
	l := Limits{Processes: max(processes, 0), FileSize: int64(max(fileMB, 0)) << 20}
	switch {
	case memoryMB > 0:
		l.Memory = int64(memoryMB) << 20
	case memoryMB == 0:
		l.Memory = machineMemory() / 2
	}
	return l
}

// Check runs a test that does nothing in the jail, so that a machine where
// the daemon's test runs cannot be confined is found at start, with why,
// rather than at the first verdict.
func (j TestJail) Check(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "ctxgraphd-jail-check-")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoJail, err)
	}
	defer os.RemoveAll(dir)
	j.Checkout, j.Mount = dir, dir
	jc, err := j.Command(ctx, "true")
	if err != nil {
		return err
	}
	var stderr strings.Builder
	jc.Cmd.Stderr = &stderr
	err = jc.Cmd.Start()
	for _, f := range jc.Cmd.ExtraFiles {
		f.Close()
	}
	if err == nil {
		err = jc.Cmd.Wait()
	}
	jc.Gone(time.Second)
	if err != nil {
		return fmt.Errorf("%w: a test that does nothing failed in it (%v): %s", ErrNoJail, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
