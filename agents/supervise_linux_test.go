//go:build linux

package agents

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// These find a run's processes by their environment, in /proc.

// What an interrupted run left outside its process group dies too, with
// the group known or not: a command of the run's sandbox, which bwrap
// starts in a session of its own, goes on when its claude is killed under
// it (the daemon killed with -9), and the next daemon must end it. Another
// run's, or another project's, is left alone.
func TestKillGroupKillsWhatLeftTheGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc: escapees cannot be found here")
	}
	const socket = "/run/ctxgraphd/a.sock"
	start := func(run, sock string) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = append(os.Environ(), "CTXGRAPH_RUN="+run, "CTXGRAPH_SOCKET="+sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	escaped := start("run-000042", socket)
	another := start("run-000042", "/run/ctxgraphd/b.sock")
	exited := make(chan error, 1)
	go func() { exited <- escaped.Wait() }()
	eventually.True(t, 10*time.Second, func() bool { return carriesRun(escaped.Process.Pid, "run-000042", socket) }, "the sleeper's environment showing")
	if err := KillGroup(0, "run-000042", socket); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("KillGroup left a process of the run that is outside its group")
	}
	if !procgroup.Alive(another.Process.Pid) {
		t.Error("KillGroup killed another project's run-000042")
	}
}

// TestKillRunsKillsEveryRunOfASocket: a worker started again kills what
// the runs of the one killed before it left, whatever their runs, and
// nothing that does not carry both a run and its relay's socket.
func TestKillRunsKillsEveryRunOfASocket(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc: runs cannot be found here")
	}
	const socket = "/tmp/ctxgraphd-worker-0a1b2c/hook.sock"
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	one := start("CTXGRAPH_RUN=run-000001", "CTXGRAPH_SOCKET="+socket)
	two := start("CTXGRAPH_RUN=run-000007", "CTXGRAPH_SOCKET="+socket)
	noRun := start("CTXGRAPH_SOCKET=" + socket)
	otherSocket := start("CTXGRAPH_RUN=run-000001", "CTXGRAPH_SOCKET="+socket+"2")
	for _, c := range []*exec.Cmd{one, two, noRun, otherSocket} {
		eventually.True(t, 10*time.Second, func() bool {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Process.Pid))
			return strings.Contains(string(env), "CTXGRAPH_SOCKET=")
		}, "the sleepers' environments showing")
	}
	if n := KillRuns(socket); n != 2 {
		t.Errorf("KillRuns killed %d processes, want 2", n)
	}
	for _, c := range []*exec.Cmd{one, two} {
		c.Wait()
	}
	for _, c := range []*exec.Cmd{noRun, otherSocket} {
		if !procgroup.Alive(c.Process.Pid) {
			t.Errorf("KillRuns killed %v, which is no run of the socket", c.Env[len(c.Env)-2:])
		}
	}
}
