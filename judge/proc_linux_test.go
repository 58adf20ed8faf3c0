package judge

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
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

	token := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-2"})
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

// startChain starts a chain of n+1 shells, each the parent of the next,
// and returns their pids, the top first; the whole chain is killed when the
// test ends.
func startChain(t *testing.T, n int) []int {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "level.sh")
	// Each level says its pid, then starts the next and waits for it; the
	// last says it is done (whole, by a rename).
	body := `n=$1; echo "$n $$" >> ` + dir + `/pids
if [ "$n" -gt 0 ]; then sh ` + script + ` $((n-1)) & wait; else cp ` + dir + `/pids ` + dir + `/tmp && mv ` + dir + `/tmp ` + dir + `/done; sleep 300; fi
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", script, strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	chain := make([]int, n+1)
	for _, line := range strings.Split(strings.TrimSpace(waitForFile(t, filepath.Join(dir, "done"))), "\n") {
		var level, pid int
		if _, err := fmt.Sscan(line, &level, &pid); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		chain[n-level] = pid
	}
	for i := 1; i < len(chain); i++ {
		if got := parentOf(chain[i]); got != chain[i-1] {
			t.Fatalf("the parent of level %d (%d) is %d, want %d", i, chain[i], got, chain[i-1])
		}
	}
	return chain
}

// The walk up from a process is bounded: a run's process 63 generations
// up is found, 64 up is not (the walk reads at most 64 entries of /proc),
// and it stops below init, which is no run's.
func TestIsRunProcessWalkIsBounded(t *testing.T) {
	f := newFixture(t, nil)
	chain := startChain(t, 64)
	last := chain[len(chain)-1]
	tests := []struct {
		name string
		pid  int // the run's process
		from int // the process asked about
		want bool
	}{
		{"63 generations up", chain[1], last, true},
		{"64 generations up", chain[0], last, false},
		{"init, as an ancestor", 1, os.Getpid(), false},
		{"init itself", 1, 1, false},
	}
	for _, tt := range tests {
		f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
		f.j.Started("run-1", tt.pid)
		if got := f.j.IsRunProcess(tt.from); got != tt.want {
			t.Errorf("a run's process %s: IsRunProcess(%d) = %v, want %v", tt.name, tt.from, got, tt.want)
		}
		f.j.Forget("run-1")
	}
}

// The daemon's own test runs are refused what is for people too, and
// nothing in a test's environment says that it runs for the daemon. While
// a test runs, its processes are known by their ancestry (in the jail,
// every process it starts stays below its first: orphans go to the pid
// namespace's first process) and, unconfined, by its process group, which
// an orphan keeps unless it leaves it; the environment the test sees holds
// no variable that names the run or the daemon, and no CI. Once the run
// has ended, none of its processes is left.
func TestTestRunProcessesAreRunProcesses(t *testing.T) {
	for _, unconfined := range []bool{false, true} {
		t.Run(fmt.Sprintf("unconfined=%v", unconfined), func(t *testing.T) {
			meet := t.TempDir()
			f := newFixture(t, func(o *Options) {
				o.Jail.Off = unconfined
				o.Jail.Writable = append(o.Jail.Writable, meet)
			})
			if !unconfined && (f.j.opts.Jail.Off || !sandbox.Confines) {
				t.Skip("the test runs are not confined here")
			}
			token := uniqueSleep()
			// A child, an orphan (its parent, the subshell, has ended),
			// and the environment as the test's code sees it; then the
			// test holds until this test has looked.
			script := "sleep " + token + " & (sleep " + token + " &); env > " + meet + "/env; touch " + meet + "/ready; " +
				"while [ ! -e " + meet + "/go ]; do sleep 0.01; done"
			tree := f.snapshot()
			done := make(chan TestResult, 1)
			go func() { done <- f.j.RunTest(context.WithoutCancel(t.Context()), tree, script) }()
			released := false
			release := func() TestResult {
				if !released {
					released = true
					if err := os.WriteFile(filepath.Join(meet, "go"), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return <-done
			}
			defer func() {
				if !released {
					release()
				}
			}()
			waitForFile(t, filepath.Join(meet, "ready"))
			// The sleeps, and the shell (and bwrap) whose command line
			// holds the token too.
			var running []int
			eventually.True(t, 10*time.Second, func() bool {
				running = processesRunning(token)
				sleeps := 0
				for _, p := range running {
					if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); string(comm) == "sleep\n" {
						sleeps++
					}
				}
				return sleeps == 2
			}, "the test's two sleeps running")
			for _, p := range running {
				if !f.j.IsRunProcess(p) {
					ppid, pgrp := statOf(p)
					t.Errorf("process %d (parent %d, group %d) of a running test is not known as a run's", p, ppid, pgrp)
				}
			}
			if f.j.IsRunProcess(os.Getpid()) {
				t.Error("the daemon's own process is taken for a run's")
			}
			for _, kv := range strings.Split(strings.TrimSpace(waitForFile(t, filepath.Join(meet, "env"))), "\n") {
				name, _, _ := strings.Cut(kv, "=")
				if strings.Contains(strings.ToUpper(kv), "CTXGRAPH") || name == "CI" {
					t.Errorf("the test's environment holds %s", kv)
				}
			}
			if r := release(); !r.Passed() {
				t.Fatalf("the test: %s\n%s", r.Summary(), r.Output)
			}
			if left := processesRunning(token); len(left) > 0 {
				t.Errorf("processes %v of the test outlived it", left)
			}
		})
	}
}
