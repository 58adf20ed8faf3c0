//go:build unix && !linux

package agents

import (
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// keeperProcAttr is never used here (procgroup.KeepWorks is false).
func keeperProcAttr() *syscall.SysProcAttr { return sysProcAttr() }

// sysProcAttr puts a run in its own process group, so that one signal
// reaches claude and everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// KillGroup kills what is left of an interrupted run: the process group
// pgid, but only if one of its processes carries both CTXGRAPH_RUN=runID
// and CTXGRAPH_SOCKET=socket in its environment (read with ps, as there is
// no /proc here). Process ids are reused, and run ids repeat from project
// to project; the pair does not.
func KillGroup(pgid int, runID, socket string) error {
	if pgid <= 0 || !groupExists(pgid) {
		return nil
	}
	out, err := exec.Command("ps", "-E", "-ww", "-o", "pgid=,command=", "-g", strconv.Itoa(pgid)).Output()
	if err != nil {
		return nil // nothing left to match
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if slices.Contains(fields, "CTXGRAPH_RUN="+runID) && slices.Contains(fields, "CTXGRAPH_SOCKET="+socket) {
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
				return err
			}
			return nil
		}
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
func killEscapees(string, string) int { return 0 }

// KillRuns kills every process of a run whose hooks ask on socket (see
// proc_linux.go), read with ps: each process whose command line carries
// CTXGRAPH_SOCKET=socket and a CTXGRAPH_RUN. It returns how many it
// killed.
func KillRuns(socket string) int {
	out, err := exec.Command("ps", "-E", "-ww", "-A", "-o", "pid=,command=").Output()
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || !slices.Contains(fields, "CTXGRAPH_SOCKET="+socket) ||
			!slices.ContainsFunc(fields, func(f string) bool { return strings.HasPrefix(f, "CTXGRAPH_RUN=") }) {
			continue
		}
		if pid, err := strconv.Atoi(fields[0]); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
