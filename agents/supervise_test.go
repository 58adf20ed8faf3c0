package agents

import (
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

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// fakeClaude writes a shell script that stands in for claude in these
// supervision tests: they are about processes, not about the CLI (the real
// CLI is driven in claude_test.go and package e2e).
func fakeClaude(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "claude")
	script := "#!/bin/sh\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

const resultLine = `{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.5,"result":"all done","session_id":"s-1"}`

// safetyDeadline ends a fake run whose timers failed to: its result then
// reads "cancelled", which no test expects.
const safetyDeadline = 8 * time.Second

func runFake(t *testing.T, opts Options, body string) (Result, string) {
	t.Helper()
	dir := t.TempDir()
	opts.Command = fakeClaude(t, body)
	if opts.KillGrace == 0 {
		opts.KillGrace = 200 * time.Millisecond
	}
	r := NewRunner(opts, nil)
	var started int
	// Every fake run ends within a second or two by itself or by its own
	// timeouts: a broken timer must fail the test here, not hang the suite.
	ctx, cancel := context.WithTimeout(context.Background(), safetyDeadline)
	defer cancel()
	res := r.Run(ctx, Spec{RunID: "run-000001", Role: role.Coder, SessionID: "s-0", Dir: dir, Prompt: "p", Token: "tok-1"},
		func(pid int) { started = pid }, nil)
	if res.Ended != EndStartFailed && started != res.PID {
		t.Errorf("onStart got %d, result says %d", started, res.PID)
	}
	return res, dir
}

func TestRunReadsResult(t *testing.T) {
	res, _ := runFake(t, Options{}, `echo '{"type":"system","subtype":"init","session_id":"s-1"}'; echo '`+resultLine+`'`)
	if !res.OK() || res.SessionID != "s-1" || res.CostUSD != 0.5 || res.NumTurns != 2 || res.Summary != "all done" {
		t.Errorf("result = %+v", res)
	}
}

func TestRunSeesEnvAndStdin(t *testing.T) {
	res, dir := runFake(t, Options{SocketPath: "/x.sock"}, `env > env.txt; cat > stdin.txt; echo '`+resultLine+`'`)
	if !res.OK() {
		t.Fatalf("result = %+v", res)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	for _, want := range []string{"CTXGRAPH_RUN=run-000001", "CTXGRAPH_AGENT=coding-agent", "CTXGRAPH_SOCKET=/x.sock", "CTXGRAPH_TOKEN=tok-1"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the run's environment lacks %s", want)
		}
	}
	if in, _ := os.ReadFile(filepath.Join(dir, "stdin.txt")); len(in) != 0 {
		t.Errorf("stdin was not empty: %q", in)
	}
}

// The CLI that cannot start its sandbox says so in its result line: no
// agent ran, and the run says why, for the daemon not to charge anyone.
func TestRunSandboxUnavailable(t *testing.T) {
	res, _ := runFake(t, Options{}, `echo 'Error: sandbox required but unavailable: bubblewrap (bwrap) not installed' >&2; `+
		`echo '{"type":"result","subtype":"success","is_error":true,"num_turns":0,"total_cost_usd":0,"startup_failure_reason":"sandbox_required_unavailable","result":"","session_id":"s-1"}'; exit 1`)
	if res.StartupFailure != "sandbox_required_unavailable" || res.OK() || !strings.Contains(res.StderrTail, "bwrap") {
		t.Errorf("result = %+v", res)
	}
}

func TestRunExitWithoutResult(t *testing.T) {
	res, _ := runFake(t, Options{}, `echo 'it broke' >&2; exit 3`)
	if res.OK() || res.SawResult || res.ExitCode != 3 || res.Ended != EndExited || !strings.Contains(res.Summary, "it broke") {
		t.Errorf("result = %+v", res)
	}
}

func TestRunStartFailure(t *testing.T) {
	r := NewRunner(Options{Command: filepath.Join(t.TempDir(), "no-such-claude")}, nil)
	res := r.Run(context.Background(), Spec{Dir: t.TempDir()}, func(int) { t.Error("onStart called") }, nil)
	if res.Ended != EndStartFailed || res.Err == nil {
		t.Errorf("result = %+v", res)
	}
}

// alive reports whether pid still runs (a zombie counts as gone).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	return !strings.Contains(string(stat), ") Z ")
}

func childPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatalf("the fake agent did not start its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		// Never hand 0 or a negative pid to kill: kill(0) signals the
		// test's own process group, go test and make with it.
		t.Fatalf("child.pid holds %q, not a pid", b)
	}
	return pid
}

// A run that goes quiet is killed after the idle timeout, with everything
// it started; one that talks but never ends is killed at the wall timeout.
func TestRunTimeoutsKillTheWholeGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		body string
		want EndReason
	}{
		{"idle", Options{IdleTimeout: 300 * time.Millisecond},
			`sleep 1000 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; echo '{"type":"system","subtype":"init"}'; wait`, EndIdleTimeout},
		{"wall", Options{Timeout: 500 * time.Millisecond, IdleTimeout: time.Minute},
			`sleep 1000 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; while :; do echo '{"type":"system","subtype":"status"}'; sleep 0.05; done`, EndWallTimeout},
		// A process that ignores SIGTERM gets SIGKILL after the grace.
		{"stubborn", Options{IdleTimeout: 200 * time.Millisecond},
			`trap '' TERM; sh -c 'trap "" TERM; sleep 1000' & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; sleep 1000`, EndIdleTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, dir := runFake(t, tc.opts, tc.body)
			if res.Ended != tc.want {
				t.Errorf("ended %s, want %s (a timer that does not fire ends the run at the safety deadline, as cancelled): %+v", res.Ended, tc.want, res)
			}
			if pid := childPID(t, dir); alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("child %d outlived its run", pid)
			}
			if procgroup.Alive(res.PID) {
				t.Errorf("process group %d still has members", res.PID)
			}
		})
	}
}

// A run that keeps streaming outlives agent.idle_timeout, however long it
// runs: each line it prints starts the silence over. The same run gone
// quiet is killed for it once all it said was read. (Real processes: a
// line every 0.1 s for 2 s against an idle timeout of 1 s.)
func TestStreamingRunOutlivesTheIdleTimeout(t *testing.T) {
	const talk = `i=0; while [ $i -lt 20 ]; do echo '{"type":"system","subtype":"status"}'; sleep 0.1; i=$((i+1)); done; ` +
		`echo '{"type":"assistant","message":{"content":[{"type":"text","text":"said it all"}]}}'; `
	for _, tc := range []struct {
		name, body string
		want       EndReason
	}{
		{"streaming", talk + `echo '` + resultLine + `'`, EndExited},
		{"quiet", talk + `sleep 1000`, EndIdleTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := runFake(t, Options{IdleTimeout: time.Second}, tc.body)
			if res.Ended != tc.want {
				t.Fatalf("ended %s, want %s: %+v", res.Ended, tc.want, res)
			}
			if tc.want == EndExited && !res.OK() {
				t.Errorf("a run that streamed to its end did not end well: %+v", res)
			}
			if tc.want == EndIdleTimeout && res.Text != "said it all" {
				t.Errorf("killed as idle before it went quiet (its last words: %q)", res.Text)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	dir := t.TempDir()
	r := NewRunner(Options{Command: fakeClaude(t, `sleep 1000 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; wait`), KillGrace: 200 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan int, 1)
	done := make(chan Result, 1)
	go func() { done <- r.Run(ctx, Spec{Dir: dir}, func(pid int) { started <- pid }, nil) }()
	<-started
	waitForFile(t, filepath.Join(dir, "child.pid")) // the child runs: now cancel
	cancel()
	res := <-done
	if res.Ended != EndCancelled {
		t.Errorf("ended %s", res.Ended)
	}
	if pid := childPID(t, dir); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("child %d outlived its cancelled run", pid)
	}
}

// Whatever a run leaves running in its group when it exits is killed with
// it: no orphan, ever.
func TestRunKillsLeftoversAfterExit(t *testing.T) {
	// env -i: the leftover has dropped the run's identity, so only the
	// kill of the run's process group reaches it.
	res, dir := runFake(t, Options{}, `env -i sleep 1000 >/dev/null 2>&1 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; echo '`+resultLine+`'`)
	if !res.OK() {
		t.Errorf("result = %+v", res)
	}
	pid := childPID(t, dir)
	if !eventually.Within(2*time.Second, func() bool { return !alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("leftover %d survived its run", pid)
	}
}

// A grandchild that left the group and holds stdout open cannot keep the
// run from ending.
// A process that leaves the run's group (setsid) holds its stdout open: Run
// does not wait for it, and kills it all the same, by the run's identity in
// its environment, so that it cannot change the project after the verdict.
func TestRunKillsWhatLeftItsGroup(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid(1) not available")
	}
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc: escapees are found by their environment there")
	}
	res, dir := runFake(t, Options{}, `setsid sleep 30 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; echo '`+resultLine+`'`)
	pid := childPID(t, dir)
	defer syscall.Kill(pid, syscall.SIGKILL)
	if !res.OK() {
		t.Errorf("result = %+v", res)
	}
	if res.Ended != EndExited {
		t.Errorf("the run waited for its escaped process until %s", res.Ended)
	}
	// SIGKILL is delivered asynchronously; the process is reaped by init.
	if !eventually.Within(5*time.Second, func() bool { return !alive(pid) }) {
		t.Errorf("the process that left the run's group (pid %d) outlived the run", pid)
	}
}

// Run ids count from run-000001 in every project: the end of a run kills
// what carries its identity, never a process of another project's run
// with the same id (nor one a person started with it by hand).
func TestRunSparesAnotherProjectsRun(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc: escapees are found by their environment there")
	}
	other := exec.Command("sleep", "30")
	other.Env = append(os.Environ(), "CTXGRAPH_RUN=run-000001", "CTXGRAPH_SOCKET=/run/ctxgraphd/other.sock")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { other.Process.Wait(); close(exited) }()
	defer func() { other.Process.Kill(); <-exited }()
	if res, _ := runFake(t, Options{SocketPath: "/run/ctxgraphd/mine.sock"}, `echo '`+resultLine+`'`); !res.OK() {
		t.Fatalf("result = %+v", res)
	}
	select {
	case <-exited:
		t.Error("the end of run-000001 killed another project's run-000001")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestKillGroupChecksTheRun(t *testing.T) {
	dir := t.TempDir()
	// The run answers SIGUSR1 with a file: a signal sent after a SIGKILL
	// is dropped (the group is already exiting), so the file shows that
	// no SIGKILL was sent before it, without waiting for one that might.
	script := fakeClaude(t, `trap 'echo > alive' USR1; while :; do sleep 1000 & wait; done`)
	const socket = "/run/ctxgraphd/a.sock"
	r := NewRunner(Options{Command: script, KillGrace: 100 * time.Millisecond, SocketPath: socket}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan int, 1)
	done := make(chan Result, 1)
	go func() { done <- r.Run(ctx, Spec{RunID: "run-000042", Dir: dir}, func(pid int) { started <- pid }, nil) }()
	pid := <-started
	// Another run's id, or the same id of another project's daemon: the
	// group is not that run's, so it is left alone.
	for _, other := range []struct{ run, socket string }{{"run-000041", socket}, {"run-000042", "/run/ctxgraphd/b.sock"}, {"run-00004", socket}} {
		if err := KillGroup(pid, other.run, other.socket); err != nil {
			t.Fatal(err)
		}
	}
	// KillGroup signals before it returns: a wrong kill is already on its
	// way, and the run answers the signal below only if there was none.
	if err := syscall.Kill(-pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(5*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "alive")); return err == nil }) {
		t.Fatal("KillGroup killed a group that belongs to another run")
	}
	if err := KillGroup(pid, "run-000042", socket); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.Ended != EndExited || res.ExitCode != -1 {
			t.Errorf("after KillGroup: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KillGroup did not kill the run")
	}
}

// waitForFile waits until path exists: the fake agent has got that far.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	eventually.True(t, 10*time.Second, func() bool { _, err := os.Stat(path); return err == nil }, "%s appearing", path)
}
