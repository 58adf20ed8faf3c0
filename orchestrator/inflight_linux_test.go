package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// procStat returns the fields of /proc/<pid>/stat after the command name.
func procStat(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// processAlive reports whether pid is a process that has not exited (a
// zombie has).
func processAlive(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// groupOf returns the process group of pid, or 0.
func groupOf(pid int) int {
	f := procStat(pid)
	if len(f) < 3 {
		return 0
	}
	pgid, _ := strconv.Atoi(f[2])
	return pgid
}

// groupMembers lists the processes of group pgid that have not exited.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && groupOf(pid) == pgid && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// answered calls a control method with a one-second deadline: a loop that
// does not answer while the daemon's own work is in flight fails the test
// in a second rather than hanging it.
func answered(t *testing.T, what string, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := fn(ctx); err != nil {
		t.Fatalf("ctl %s: %v (within 1s)", what, err)
	}
}

// loopEnds waits for the loop to return once it was told to (ctl stop, a
// cancelled context): within a second, which killing a process group and
// committing to the store take a small part of.
func loopEnds(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatal("the loop did not end within 1s of being stopped while the daemon ran a test")
		return nil
	}
}

// ctl pause, ctl stop and a shutdown (SIGTERM cancels the loop's context)
// are answered at once while the daemon runs a feature's test itself,
// before its first coding attempt or to judge a tester's claim; stop and
// shutdown end the test's whole process group.
func TestControlAnswersWhileTheDaemonRunsATest(t *testing.T) {
	phases := []struct {
		name  string
		test  func(dir string) string
		roles string // the runs before the test hangs
	}{
		{name: "red-before-green check", roles: "initializer",
			test: hangingTest},
		// Red before any code; the re-run of the tester's claim hangs.
		{name: "verdict re-run", roles: "initializer coding:F-001 tester:F-001",
			test: func(dir string) string { return "grep -qx 'F-001 works' src/F-001.txt || exit 1\n" + hangingTest(dir) }},
	}
	for _, ph := range phases {
		// A shutdown is a cancellation of the loop's context, as SIGTERM
		// does; after a pause request it is the same.
		for _, action := range []string{"ctl stop", "ctl pause, then shutdown"} {
			t.Run(ph.name+"/"+action, func(t *testing.T) {
				h := newHarness(t)
				dir := t.TempDir()
				h.runner.script[role.Initializer] = initializerWithTests(ph.test(dir))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				o := h.orchestrator(true)
				done := make(chan error, 1)
				go func() { done <- o.Run(ctx) }()

				ps := waitForPids(t, dir)
				pgid := groupOf(ps[1])
				if pgid == 0 || pgid == groupOf(os.Getpid()) {
					t.Fatalf("the test runs in group %d, the daemon in %d: want a group of its own", pgid, groupOf(os.Getpid()))
				}
				if s, _ := o.Status(ctx); s.Working == "" {
					t.Errorf("status %+v does not say the daemon is running a test", s)
				}

				switch action {
				case "ctl stop":
					answered(t, "stop", o.Stop)
					if err := loopEnds(t, done); !errors.Is(err, ErrSessionStopped) {
						t.Errorf("loop ended with %v, want the session stopped", err)
					}
					st := h.session()
					if st.Session.State != "stopped" || st.Session.Run != nil {
						t.Errorf("stored session %+v, want stopped with no run in flight", st.Session)
					}
				case "ctl pause, then shutdown":
					answered(t, "pause", o.Pause)
					if s, _ := o.Status(ctx); !s.PauseRequested {
						t.Errorf("status %+v, want the pause requested", s)
					}
					cancel()
					if err := loopEnds(t, done); err != nil {
						t.Errorf("loop ended with %v", err)
					}
				}

				if left := groupMembers(pgid); len(left) > 0 {
					t.Errorf("processes %v of the test's group are still running", left)
				}
				for _, pid := range ps {
					if processAlive(pid) {
						t.Errorf("process %d of the test is still running", pid)
					}
				}
				if got := roles(h.runner.runs()); got != ph.roles {
					t.Errorf("runs = %s, want %s", got, ph.roles)
				}
				st := h.session()
				canonical, err := progress.Parse(st.FeatureList)
				if err != nil {
					t.Fatal(err)
				}
				if canonical.Feature("F-001").Tested {
					t.Error("F-001 is tested in the store though its test never finished")
				}
				// A claim no verdict judged is not left on disk once the
				// daemon is down: it would read as tested to anyone who looks.
				if h.list().Feature("F-001").Tested {
					t.Error("feature-list.json says F-001 is tested after the loop ended, though no verdict judged the tester's claim")
				}
				// A shutdown in the middle of judging a run leaves the run in
				// flight, to be judged and redone at the next start.
				if ph.name == "verdict re-run" && action != "ctl stop" {
					if r := st.Session.Run; r == nil || r.Role != string(role.Tester) || r.BaseTree == "" {
						t.Errorf("stored run in flight %+v, want the tester's, to redo", r)
					}
				}
				if action == "ctl pause, then shutdown" && !st.Session.PauseRequested {
					t.Error("the pause request was not kept")
				}
				// The daemon's own interrupted run says nothing about the
				// feature: no verdict, no red-before-green finding.
				if trs, _ := h.st.Traces(store.TraceFilter{Type: control.TraceViolation}); len(trs) != 0 {
					t.Errorf("violations %+v for an interrupted test", trs)
				}
			})
		}
	}
}
