package orchestrator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
)

// apiFailure is a run that ended as the real CLI ends one on an API error:
// exit 1, a result line with is_error and terminal_reason api_error, and
// the error's name on the last assistant message.
func apiFailure(name string, status int, text string) agents.Result {
	return agents.Result{Ended: agents.EndExited, ExitCode: 1, SawInit: true, SawResult: true, IsError: true,
		Subtype: "success", TerminalReason: "api_error", APIError: name, APIErrorStatus: status, Text: text, Summary: text}
}

// failsFirst plays fail for the first n runs of its role, then play.
func failsFirst(n int32, fail agents.Result, play script) script {
	var runs atomic.Int32
	return func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if runs.Add(1) <= n {
			return fail
		}
		return play(ctx, spec, h)
	}
}

// Not logged in is no fault of the initializer: the session stops at once
// with what to do, and the initializer is not charged a run.
func TestNotLoggedInStopsTheSessionUncharged(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = failsFirst(99, apiFailure("authentication_failed", 0, "Not logged in · Please run /login"), nil)
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "could not authenticate: Not logged in") || !strings.Contains(err.Error(), "claude auth status") {
		t.Fatalf("loop ended with %v, want a stop saying how to log in", err)
	}
	if got, want := roles(h.runner.runs()), "initializer"; got != want {
		t.Errorf("runs = %s, want %s: nothing a person must fix is retried", got, want)
	}
	sess := h.session()
	if sess.Session.InitFailures != 0 {
		t.Errorf("init_failures = %d, want 0: the initializer did nothing wrong", sess.Session.InitFailures)
	}
	runs, _ := h.st.Runs()
	if len(runs) != 1 || runs[0].Failure != string(agents.FailAuth) {
		t.Errorf("runs %+v, want one whose failure is auth", runs)
	}
}

// On a project with a list, the same failure of a coder costs its feature
// nothing: it is not blocked, its counter is untouched.
func TestAuthFailureOfACoderChargesNoAttempt(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Coder] = failsFirst(99, apiFailure("", 401, "Invalid API key"), nil)
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "could not authenticate") {
		t.Fatalf("loop ended with %v, want a stop on authentication", err)
	}
	sess := h.session()
	if c := sess.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001 failures = %d (%q), want 0", c.Failures, c.LastFailure)
	}
	if got := summary(h.list()); strings.Contains(got, "blocked") {
		t.Errorf("features = %s: a feature was blocked for the account's failure", got)
	}
}

// Rate limits are waited out with the configured backoff, as often as they
// come, and never count against the feature; the run is then redone and
// the session goes on. The backoff starts over after a clean run.
func TestRateLimitsAreWaitedOut(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Backoff, h.cfg.Limits.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
	limited := apiFailure("rate_limit", 429, "API Error: Request rejected (429)")
	h.runner.script[role.Coder] = failsFirst(4, limited, coderCompletes)
	if err := h.runToEndWithin(20 * time.Second); err != nil {
		t.Fatalf("loop: %v", err)
	}
	if got, want := summary(h.list()), "F-001=tested F-002=tested"; got != want {
		t.Errorf("features = %s, want %s", got, want)
	}
	sess := h.session()
	if c := sess.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001 failures = %d, want 0", c.Failures)
	}
	if sess.Session.Backoffs != 0 {
		t.Errorf("backoffs = %d after clean runs, want 0", sess.Session.Backoffs)
	}
	trs, err := h.st.Transitions()
	if err != nil {
		t.Fatal(err)
	}
	var waits int
	for _, tr := range trs {
		if tr.Event == string(statemachine.Wait) {
			waits++
			if !strings.Contains(tr.Reason, "rate or usage limit reached (HTTP 429)") {
				t.Errorf("wait reason %q does not say why", tr.Reason)
			}
		}
	}
	if waits != 4 {
		t.Errorf("%d waits, want 4", waits)
	}
	runs, _ := h.st.Runs()
	var transient int
	for _, r := range runs {
		if r.Outcome == "transient" {
			transient++
			if r.Failure != string(agents.FailRateLimit) {
				t.Errorf("run %s failure %q, want rate_limit", r.ID, r.Failure)
			}
		}
	}
	if transient != 4 {
		t.Errorf("%d transient runs, want 4", transient)
	}
}

// A missing CLI stops the session at the first run, naming the setting.
func TestMissingCLIStopsTheSession(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = func(context.Context, agents.Spec, *harness) agents.Result {
		return agents.Result{Ended: agents.EndStartFailed, ExitCode: -1, Err: errNotFound}
	}
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "set agent.command") {
		t.Fatalf("loop ended with %v, want a stop naming agent.command", err)
	}
	sess, _ := h.st.Load()
	if sess.Session.InitFailures != 0 {
		t.Errorf("init_failures = %d, want 0", sess.Session.InitFailures)
	}
}

var errNotFound = &notFound{}

type notFound struct{}

func (*notFound) Error() string { return `exec: "claude": executable file not found in $PATH` }

// waitUntil doubles limits.backoff with each wait in a row up to
// limits.backoff_max, and never ends before the CLI's own retry delay or a
// usage limit's reset.
func TestWaitUntil(t *testing.T) {
	now := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	l := config.Limits{Backoff: 30 * time.Second, BackoffMax: 30 * time.Minute}
	tests := []struct {
		name string
		n    int
		l    config.Limits
		f    agents.Failure
		want time.Duration
	}{
		{"first wait", 1, l, agents.Failure{}, 30 * time.Second},
		{"second doubles", 2, l, agents.Failure{}, time.Minute},
		{"fourth", 4, l, agents.Failure{}, 4 * time.Minute},
		{"capped", 7, l, agents.Failure{}, 30 * time.Minute},
		{"far past the cap does not overflow", 200, l, agents.Failure{}, 30 * time.Minute},
		{"a cap near the largest duration does not overflow", 200,
			config.Limits{Backoff: time.Second, BackoffMax: 1<<63 - 1}, agents.Failure{}, 1<<63 - 1},
		{"cap equal to the first wait", 3, config.Limits{Backoff: time.Minute, BackoffMax: time.Minute}, agents.Failure{}, time.Minute},
		{"the CLI's retry delay when longer", 1, l, agents.Failure{RetryAfter: 90 * time.Second}, 90 * time.Second},
		{"the backoff when longer than the retry delay", 3, l, agents.Failure{RetryAfter: 90 * time.Second}, 2 * time.Minute},
		{"a usage limit's reset, past the cap", 1, l, agents.Failure{ResetsAt: now.Add(5 * time.Hour)}, 5 * time.Hour},
		{"a reset already behind the backoff", 2, l, agents.Failure{ResetsAt: now.Add(10 * time.Second)}, time.Minute},
		{"n below one is the first wait", 0, l, agents.Failure{}, 30 * time.Second},
		// What a run says (a worker's run's too) moves the session no
		// further than the daemon's own rules.
		{"a retry delay past the cap is the cap", 1, l, agents.Failure{RetryAfter: 5 * time.Hour}, 30 * time.Minute},
		{"a weekly limit's reset", 1, l, agents.Failure{ResetsAt: now.Add(maxUsageLimitWait)}, maxUsageLimitWait},
		{"a reset past a week is no reset", 1, l, agents.Failure{ResetsAt: now.Add(maxUsageLimitWait + time.Minute)}, 30 * time.Second},
		{"a reset in 2099 is no reset", 3, l, agents.Failure{ResetsAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := waitUntil(now, tt.n, tt.l, tt.f)
			if d := got.Sub(now); d != tt.want && !(tt.want == 1<<63-1 && got.After(now.Add(100*365*24*time.Hour))) {
				t.Errorf("wait %d: %s, want %s", tt.n, d, tt.want)
			}
		})
	}
}

// Features that depend on each other can never be worked: a problem of the
// list, for which the session stops for a person, never "done"; the other
// features are worked first.
func TestDependencyCycleIsNoSuccess(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := initializerWrites(3)(ctx, spec, h)
		h.edit(func(l *progress.List) {
			l.Features[0].DependsOn = []string{"F-002"}
			l.Features[1].DependsOn = []string{"F-001"}
		})
		return res
	}
	err := h.runToEnd()
	if !errors.Is(err, ErrSessionStopped) || !strings.Contains(err.Error(), "dependency cycle in feature-list.json: F-001 -> F-002 -> F-001") ||
		!strings.Contains(err.Error(), "ctl resume") {
		t.Fatalf("loop ended with %v, want a stop naming the cycle and what to do", err)
	}
	if got, want := summary(h.list()), "F-001=pending F-002=pending F-003=tested"; got != want {
		t.Errorf("features = %s, want %s", got, want)
	}
}

// A run stopped as stuck is the agent's doing: its feature is charged an
// attempt, and the retry is told what it went round in circles on.
func TestStuckRunIsCharged(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	stuck := agents.Result{Ended: agents.EndStuck, ExitCode: -1, SawInit: true, Stuck: "`Bash: make` failed 5 times in a row with nothing done in between"}
	h.runner.script[role.Coder] = failsFirst(1, stuck, coderCompletes)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	sess := h.session()
	c := sess.Counters["F-001"]
	if c.Failures != 1 || !strings.Contains(c.LastFailure, "stopped as stuck: `Bash: make` failed 5 times in a row") {
		t.Errorf("F-001: %d failures, last %q; want one, saying what it was stuck on", c.Failures, c.LastFailure)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
}

// A person who writes the feature list while a run is in flight, and is
// half-way when the run ends, keeps their file: it is not put back over
// their work, the run's agent is not blamed, and no run starts until the
// list is valid again. The agent's own writes of the list (Write, through
// its hooks) are told apart by their content.
func TestPersonsHalfWrittenListIsKept(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(2)
	half := `{"version": 1, "features": [{"id": "F-001", "title": "feat`
	wrote := make(chan struct{})
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID != "F-001" || spec.Attempt != 1 {
			return coderCompletes(ctx, spec, h)
		}
		// The agent completes the feature with its Write tool, as the
		// hooks see it…
		h.write("src/F-001.txt", "F-001 works\n")
		l := h.list()
		l.Feature("F-001").Status = progress.Completed
		content := string(l.Marshal())
		h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, ".claude/progress/feature-list.json"), "content": content}})
		h.write(".claude/progress/feature-list.json", content)
		// The watcher takes it (not t.Fatal: this is the run's goroutine)…
		if !eventually.Within(10*time.Second, func() bool {
			fs, _ := h.current.Features(ctx)
			return len(fs) > 0 && fs[0].Status == string(progress.Completed)
		}) {
			t.Error("the daemon never took the agent's write of the list")
		}
		// …then a person starts editing the list by hand, which the
		// daemon sees, while the run is still in flight.
		h.write(".claude/progress/feature-list.json", half)
		if !eventually.Within(10*time.Second, func() bool {
			s, _ := h.current.Status(ctx)
			return strings.Contains(s.Message, "written by a person")
		}) {
			t.Error("the daemon never saw the person's half-written list")
		}
		close(wrote)
		return agents.Result{Summary: "implemented", NumTurns: 3, CostUSD: 0.01}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := h.orchestrator(true)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	<-wrote
	// The run ended and was judged: the loop has nothing in flight and
	// holds on the person's file.
	eventually.True(t, 10*time.Second, func() bool {
		s, _ := o.Status(ctx)
		return strings.Contains(s.Message, "written by a person") && s.Current == nil && s.Working == ""
	}, "the loop idle, holding on the person's list")
	// Whatever the loop was told before this request, it has acted on
	// by the time it answers it: no run started meanwhile.
	runs := len(h.runner.runs())
	if err := o.do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if s, _ := o.Status(ctx); s.Current != nil || s.Working != "" || len(h.runner.runs()) != runs {
		t.Errorf("a run started while a person's list was invalid: %+v; runs %s", s.Current, roles(h.runner.runs()))
	}
	if data, _ := os.ReadFile(filepath.Join(h.proj.Progress(), progress.FeatureListFile)); string(data) != half {
		t.Fatalf("the person's half-written file was replaced by %q", data)
	}
	// The person finishes: the list as the agent left it, with an edit.
	l := h.listOf(t, o)
	l.Features[1].Description = "edited by a person"
	if _, err := progress.WriteFeatureList(h.proj.Progress(), l); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("loop: %v", err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s", got)
	}
	sess, _ := h.st.Load()
	if c := sess.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001 was charged %d failures (%q) for a person's edit", c.Failures, c.LastFailure)
	}
	if d := h.list().Feature("F-002").Description; d != "edited by a person" {
		t.Errorf("the person's edit was lost: %q", d)
	}
}

// listOf is the canonical list as the daemon holds it.
func (h *harness) listOf(t *testing.T, o *Orchestrator) *progress.List {
	t.Helper()
	st := h.session()
	l, err := progress.Parse(st.FeatureList)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Unconfined, any program of the agent's could have broken the list, and
// the break is taken for its doing: the last good list is put back and the
// attempt is charged. (Confined, its only way to the list is a file tool,
// whose gates refuse a write that would not parse.)
func TestUnconfinedBrokenListIsPutBack(t *testing.T) {
	h := newHarness(t)
	h.cfg.Sandbox.Enabled = false
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.Attempt == 1 {
			h.write(".claude/progress/feature-list.json", `{"version": 1, "features": [`) // by a Bash command
			return agents.Result{Summary: "wrote the list", NumTurns: 2}
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEndWithin(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	sess, _ := h.st.Load()
	if c := sess.Counters["F-001"]; c.Failures != 1 {
		t.Errorf("F-001: %d failures, want the broken attempt charged", c.Failures)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
}

// A store that refuses writes (a full disk) holds the session where it
// is, says why in the status, and tries again by itself.
func TestStoreThatCannotWriteHolds(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := h.orchestrator(false)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	eventually.True(t, 10*time.Second, func() bool { s, _ := o.Status(ctx); return s.State == "done" }, "the session done")
	h.st.Close() // every write fails from now on
	h.edit(func(l *progress.List) {
		l.Features = append(l.Features, progress.Feature{ID: "F-002", Title: "more", Test: "sh tests/F-002.sh", Status: progress.Pending})
	})
	eventually.True(t, 10*time.Second, func() bool {
		s, _ := o.Status(ctx)
		return strings.Contains(s.Message, "the daemon cannot save its state, so it is holding") && strings.Contains(s.Message, "tries again every 30s")
	}, "the status saying the daemon holds")
	if s, _ := o.Status(ctx); s.State != "done" || s.Current != nil {
		t.Errorf("status %+v: want the session held where it was, nothing started", s)
	}
	cancel()
	<-done
}

// A feature that waits on a blocked one is never worked: the session is
// done, and --exit-when-done says which features were left and does not
// end as a success.
func TestWaitOnBlockedIsNoSuccess(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxRetries = 0
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := initializerWrites(2)(ctx, spec, h)
		h.edit(func(l *progress.List) { l.Features[1].DependsOn = []string{"F-001"} })
		return res
	}
	h.runner.script[role.Tester] = testerClaims(false) // never a run of the test: F-001 ends blocked
	err := h.runToEnd()
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "(F-002)") || !strings.Contains(err.Error(), "F-002 waits on F-001 (blocked)") {
		t.Fatalf("loop ended with %v, want ErrUnfinished naming F-002", err)
	}
}

// A broken list that is gone no longer holds the loop: an empty file left
// as a person's (its writer was killed half-way, say), once removed, lets
// the initializer run again.
func TestABrokenListThatIsGoneHoldsNothing(t *testing.T) {
	h := newHarness(t)
	first := true
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if first {
			first = false
			h.write(".claude/progress/feature-list.json", "") // no hook saw it
			o := h.current
			go func() {
				// Once the loop holds on the broken file, it goes.
				// (Not eventually.True: t.Fatal belongs to the test's
				// goroutine; a loop that never holds fails the test at
				// its deadline.)
				eventually.Within(10*time.Second, func() bool {
					st, _ := o.Status(ctx)
					return strings.Contains(st.Message, "written by a person")
				})
				os.Remove(filepath.Join(h.proj.Progress(), progress.FeatureListFile))
			}()
			return agents.Result{Summary: "cut short"}
		}
		return initializerWrites(1)(ctx, spec, h)
	}
	if err := h.runToEndWithin(10 * time.Second); err != nil { // a few seconds when it works
		t.Fatalf("loop: %v", err)
	}
	if got := roles(h.runner.runs()); !strings.HasPrefix(got, "initializer initializer coding:F-001") {
		t.Errorf("runs = %s, want the initializer again once the broken file was gone", got)
	}
}

// TestARunThatCannotBeJudgedStopsTheSession: when the repository fails
// the judging of a run's work, nothing the run did is taken: the run is
// recorded as interrupted, the session stops for a person with the cause,
// and nothing is charged. A run that is judged is the other side (every
// other test of the loop).
func TestARunThatCannotBeJudgedStopsTheSession(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := coderCompletes(ctx, spec, h)
		// The repository's objects become unwritable: the snapshot of the
		// run's tree fails.
		objects := filepath.Join(h.proj.Dir, ".git", "objects")
		if err := os.Rename(objects, objects+".gone"); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(objects, nil, 0o644); err != nil {
			t.Error(err)
		}
		return res
	}
	err := h.runToEnd()
	if !errors.Is(err, ErrSessionStopped) || !strings.Contains(err.Error(), "could not be judged, so nothing it did is trusted") {
		t.Fatalf("loop = %v, want the session stopped: the run could not be judged", err)
	}
	runs, rerr := h.st.Runs()
	if rerr != nil {
		t.Fatal(rerr)
	}
	last := runs[len(runs)-1]
	if last.Role != string(role.Coder) || last.Outcome != "interrupted" {
		t.Errorf("last run = %s %s, want the coder's, interrupted", last.Role, last.Outcome)
	}
	st := h.session()
	if st.Session.Run != nil {
		t.Errorf("the session still records run %s in flight", st.Session.Run.ID)
	}
	if c := st.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001 charged %d failures for a run that could not be judged", c.Failures)
	}
}
