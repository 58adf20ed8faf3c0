//go:build linux

package agents

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// sysProcAttr puts a run in its own process group, so that one signal
// reaches claude and everything it started, and has the kernel kill claude
// if the daemon dies without a chance to (kill -9); what claude started is
// found and killed by KillGroup when the daemon comes back.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// KillGroup kills what is left of an interrupted run: the process group
// pgid, but only if one of its processes carries CTXGRAPH_RUN=runID in its
// environment. Process ids are reused; a run id is not, so a group that
// belongs to someone else is never touched.
func KillGroup(pgid int, runID string) error {
	if pgid <= 0 {
		return nil
	}
	members, err := procgroup.Members(pgid)
	if err != nil {
		return err
	}
	want := []byte("CTXGRAPH_RUN=" + runID)
	for _, pid := range members {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
					return fmt.Errorf("kill process group %d of %s: %w", pgid, runID, err)
				}
				return nil
			}
		}
	}
	return nil
}

// killEscapees kills the processes that carry CTXGRAPH_RUN=runID but left
// the run's process group (setsid, a daemonising double fork): in the
// sandbox they die with their command anyway; unconfined, they would
// outlive the run and change the project after its verdict. It returns how
// many it killed.
func killEscapees(runID string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte("CTXGRAPH_RUN=" + runID)
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}
