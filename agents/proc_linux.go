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

// keeperProcAttr puts a run's keeper (Options.Keeper) in a group of its
// own, claude's too, and gives it no death signal: the keeper learns of
// the daemon's death from its pipe, and must live to kill the run's tree.
func keeperProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// KillGroup kills what is left of an interrupted run: the process group
// pgid, but only if one of its processes carries the run's identity in its
// environment (see carriesRun), and every process that carries it outside
// the group (pgid 0: the group is not known). Process ids are reused; a
// run's identity is not, so a group that belongs to someone else is never
// touched. Outside the group are the commands of the run's sandbox, which
// bwrap starts in a session of their own: with their claude killed under
// them (its daemon killed with -9) they go on, a command waiting for a
// lane that is gone waits for ever.
func KillGroup(pgid int, runID, socket string) error {
	defer killEscapees(runID, socket)
	if pgid <= 0 {
		return nil
	}
	members, err := procgroup.Members(pgid)
	if err != nil {
		return err
	}
	for _, pid := range members {
		if carriesRun(pid, runID, socket) {
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("kill process group %d of %s: %w", pgid, runID, err)
			}
			return nil
		}
	}
	return nil
}

// carriesRun reports whether process pid belongs to the run: it carries
// both CTXGRAPH_RUN=runID (any run's, when runID is "") and
// CTXGRAPH_SOCKET=socket. The run id alone is
// not enough: ids count from run-000001 in every project, and the daemon
// of one project must never kill another project's runs (or a hook a
// person started by hand with such an id); the socket names the daemon.
func carriesRun(pid int, runID, socket string) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false // gone, or not ours to read
	}
	var run, sock bool
	for _, kv := range bytes.Split(env, []byte{0}) {
		run = run || string(kv) == "CTXGRAPH_RUN="+runID || (runID == "" && bytes.HasPrefix(kv, []byte("CTXGRAPH_RUN=")))
		sock = sock || string(kv) == "CTXGRAPH_SOCKET="+socket
	}
	return run && sock
}

// KillRuns kills every process of a run whose hooks ask on socket,
// whatever its run: what the runs of a worker killed with -9 left, which
// the worker started again finds by its relay's socket. It returns how
// many it killed.
func KillRuns(socket string) int { return killEscapees("", socket) }

// killEscapees kills the processes that carry the run's identity but left
// the run's process group (setsid, a daemonising double fork, bwrap's own
// session): in the sandbox they die with their command while claude lives;
// unconfined, or with claude killed, they would outlive the run and change
// the project after its verdict. It returns how many it killed.
func killEscapees(runID, socket string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if carriesRun(pid, runID, socket) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
