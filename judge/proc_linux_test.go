package judge

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guard"
)

// startProc starts a long-running process with env added to the test's
// own, and kills it when the test ends.
func startProc(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// startTree starts `sh` with a background child and returns the shell and
// its child's pid; both are killed when the test ends.
func startTree(t *testing.T) (parent *exec.Cmd, child int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	cmd.Env = os.Environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("reading the child's pid: %v", err)
	}
	child, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(child); err == nil {
			p.Kill()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, child
}

// A process is a run's when it carries a registered run's token, or when a
// run's process (as Started recorded it) is among its ancestors.
func TestIsRunProcess(t *testing.T) {
	f := newFixture(t, nil)
	unrelated := startProc(t, nil, "sleep", "300")
	tokenless := startProc(t, []string{control.RunTokenEnv + "=" + strings.Repeat("cd", 32)}, "sleep", "300")
	if f.j.IsRunProcess(unrelated.Process.Pid) || f.j.IsRunProcess(os.Getpid()) {
		t.Fatal("a process is a run's while no run is registered")
	}

	token := f.j.Register(guard.Actor{Role: guard.Coder, Feature: "F-001", Run: "run-1"})
	f.j.Register(guard.Actor{Role: guard.Tester, Feature: "F-001", Run: "run-2"})
	carrier := startProc(t, []string{control.RunTokenEnv + "=" + token}, "sleep", "300")
	parent, grandchild := startTree(t)
	_, stranger := startTree(t)
	f.j.Started("run-2", parent.Process.Pid)

	tests := []struct {
		name string
		pid  int
		want bool
	}{
		{"carries a registered token", carrier.Process.Pid, true},
		{"carries a token nobody registered", tokenless.Process.Pid, false},
		{"started by the run's process", grandchild, true},
		{"the run's process itself", parent.Process.Pid, true},
		{"an unrelated process", unrelated.Process.Pid, false},
		{"the child of an unrelated shell", stranger, false},
		{"the daemon itself", os.Getpid(), false},
		{"no such process", 1 << 30, false},
	}
	for _, tt := range tests {
		if got := f.j.IsRunProcess(tt.pid); got != tt.want {
			t.Errorf("%s (pid %d): IsRunProcess = %v, want %v", tt.name, tt.pid, got, tt.want)
		}
	}

	// Once the runs are forgotten, their processes are nobody's.
	f.j.Forget("run-1")
	f.j.Forget("run-2")
	for _, pid := range []int{carrier.Process.Pid, grandchild, parent.Process.Pid} {
		if f.j.IsRunProcess(pid) {
			t.Errorf("pid %d is a run's after its run was forgotten", pid)
		}
	}
}
