// Package procgroup runs a command in a process group of its own, so that
// stopping it (a cancelled context, a timeout) stops everything it started,
// not only the first process: a test script's children, a build's workers.
// On Linux it is also the keeper agents run under (Keep), which holds a
// run's whole tree, whatever left the group, and ends it with the run or
// with the daemon that started it.
package procgroup

import (
	"os/exec"
	"syscall"
	"time"
)

// WaitDelay bounds the wait for a command's output after it was killed: a
// process that left the group may hold the pipes open for ever.
const WaitDelay = 2 * time.Second

// Prepare sets cmd up to run in its own process group, which a cancellation
// of the command's context kills whole. cmd must come from
// exec.CommandContext for the cancellation to apply.
func Prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		Kill(cmd.Process.Pid)
		return nil
	}
	cmd.WaitDelay = WaitDelay
}

// Kill kills every process of the group led by pgid. A group that is
// already gone is not an error: that is the state wanted.
func Kill(pgid int) { Signal(pgid, syscall.SIGKILL) }

// Signal sends sig to every process of the group led by pgid.
func Signal(pgid int, sig syscall.Signal) {
	if pgid <= 0 {
		return
	}
	_ = syscall.Kill(-pgid, sig)
}

// KillAndWait kills the group and waits, up to within, until no live
// process is left in it: SIGKILL is delivered asynchronously, and "the
// command is over" must mean nothing of it runs on.
func KillAndWait(pgid int, within time.Duration) {
	if pgid <= 0 {
		return
	}
	for deadline := time.Now().Add(within); ; {
		Kill(pgid)
		if !Alive(pgid) || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
