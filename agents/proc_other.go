//go:build unix && !linux

package agents

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts a run in its own process group, so that one signal
// reaches claude and everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// KillGroup kills what is left of an interrupted run: the process group
// pgid, but only if one of its processes carries CTXGRAPH_RUN=runID in its
// environment (read with ps, as there is no /proc here). Process ids are
// reused; a run id is not.
func KillGroup(pgid int, runID string) error {
	if pgid <= 0 || !groupExists(pgid) {
		return nil
	}
	out, err := exec.Command("ps", "-E", "-ww", "-o", "pgid=,command=", "-g", strconv.Itoa(pgid)).Output()
	if err != nil {
		return nil // nothing left to match
	}
	if !strings.Contains(string(out), "CTXGRAPH_RUN="+runID) {
		return nil
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// groupExists reports whether the group has any process left, zombies
// included.
func groupExists(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killEscapees cannot read other processes' environments here (no /proc):
// the run's process group is what is killed.
func killEscapees(string) int { return 0 }
