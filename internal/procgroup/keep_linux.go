package procgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KeepWorks reports whether Keep can hold a command's whole tree here: a
// child subreaper is Linux's.
const KeepWorks = true

// KeeperFD is the file descriptor on which Keep learns that whoever
// started it is gone: the read end of a pipe whose write end only the
// starter holds, open for as long as it lives (the kernel closes it with
// the process, however the process ends, kill -9 included).
const KeeperFD = 3

// Keep runs argv as its child and sees to it that nothing of the run
// outlives it, which a process group alone does not: what the child
// starts in a session of its own (bwrap's sandboxes, the sandbox
// runtime's helpers, a command an agent put in the background with
// setsid or a double fork) leaves the group, and, its starter killed with
// -9, would go on for ever, adopted by init.
//
// Keep makes itself a child subreaper, so that every process of the tree
// that loses its parent becomes its child rather than init's: the tree
// stays under it, whatever the processes do. When the child exits, or
// when KeeperFD reads end of file (the starter is gone), it kills every
// process under it, and then exits as the child did: with its exit status,
// or by the same signal. Signals that end a run (SIGTERM, SIGINT, SIGHUP,
// SIGQUIT) reach the child from the starter's signal to the process group,
// which the keeper leads; the keeper itself outlives them, so that it is
// there to kill what is left once the child is gone. Keep does not return.
func Keep(argv []string) {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "ctxgraphd keep: no command to run: want `ctxgraphd keep -- COMMAND [ARG...]`")
		os.Exit(2)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "ctxgraphd keep: could not become a child subreaper: %v\n", err)
		os.Exit(127)
	}
	// Caught, not ignored: an ignored signal stays ignored across exec,
	// and the child must die of them.
	ends := make(chan os.Signal, 4)
	signal.Notify(ends, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for range ends {
		}
	}()

	starterGone := make(chan struct{})
	// Only a pipe: without a starter's, the descriptor may be anything of
	// the runtime's (its epoll), whose read fails at once.
	var st unix.Stat_t
	if unix.Fstat(KeeperFD, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		starter := os.NewFile(KeeperFD, "starter")
		// Not the child's: it has no business with the starter.
		syscall.CloseOnExec(KeeperFD)
		go func() {
			io.Copy(io.Discard, starter)
			close(starterGone)
		}()
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "ctxgraphd keep: %v\n", err)
		os.Exit(127)
	}
	child := cmd.Process.Pid

	// The keeper reaps every process that comes to it, the child
	// among them, so it never calls cmd.Wait: that would wait for the
	// child alone, and race this loop for it.
	exited := make(chan syscall.WaitStatus, 1)
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: no child left, and none can come
			}
			if pid == child {
				exited <- ws
			}
		}
	}()

	var ws syscall.WaitStatus
	select {
	case ws = <-exited:
		killTree()
	case <-starterGone:
		killTree()
		ws = <-exited
	}
	switch {
	case ws.Exited():
		os.Exit(ws.ExitStatus())
	case ws.Signaled():
		sig := ws.Signal()
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
		// A signal the runtime keeps for itself, or one that does not
		// end a process: the shell's way of saying the same.
		time.Sleep(100 * time.Millisecond)
		os.Exit(128 + int(sig))
	}
	os.Exit(1)
}

// killRounds bounds killTree: a round kills every process under the
// keeper, and the next finds only what was forked while it did (a killed
// process forks no more) or a process the kernel has not finished with.
const killRounds = 100

// killTree kills every process under the keeper, round after round until
// none is left. It ends: a process killed forks no more, so each round
// finds only the children of forks that were under way during the one
// before, which come to the keeper as their parents die (it is their
// subreaper). What the keeper may not kill (a set-user-ID program) is
// given up on after killRounds.
func killTree() {
	self := os.Getpid()
	for range killRounds {
		under := descendants(self)
		if len(under) == 0 {
			return
		}
		for _, pid := range under {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendants are the live processes under pid, read from /proc: the
// parent links, followed down from pid. A zombie is not one: it is dead,
// and the keeper's wait reaps it.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold anything:
		// fields are counted from the last ')'. After it: state, ppid.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for next := []int{pid}; len(next) > 0; {
		p := next[0]
		next = next[1:]
		for _, c := range children[p] {
			out = append(out, c)
			next = append(next, c)
		}
	}
	return out
}
