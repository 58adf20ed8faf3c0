package orchestrator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
)

// A tester finds the code wrong while ctl pause waits for its run: the
// failure is charged, and after ctl resume the retry is the coder's,
// told why, not the same tester's again.
func TestPauseKeepsATestersFailure(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	var mu sync.Mutex
	var runs []string
	note := func(spec agents.Spec) {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, string(spec.Role)+"/"+strconv.Itoa(spec.Attempt))
	}
	again := stopsWhenRedone(h)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		note(spec)
		if spec.Attempt > 1 && !strings.Contains(spec.Prompt, "the output is upside down") {
			h.t.Errorf("the retry was not told the tester's finding:\n%s", spec.Prompt)
		}
		return coderCompletes(ctx, spec, h)
	}
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		note(spec)
		if spec.Attempt > 1 {
			return testerRunsTheTest(ctx, spec, h)
		}
		if again(spec) {
			return agents.Result{}
		}
		if err := h.current.Pause(ctx); err != nil {
			h.t.Errorf("pause: %v", err)
		}
		go func() {
			statusWithin(h.current, 20*time.Second, func(st control.Status) bool {
				return st.State == "paused" && st.Current == nil && st.Working == ""
			})
			if err := h.current.Resume(context.Background()); err != nil {
				h.t.Errorf("resume: %v", err)
			}
		}()
		return agents.Result{Summary: "the output is upside down", NumTurns: 3}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Fatalf("features = %s", got)
	}
	if got, want := strings.Join(runs, " "), "coding-agent/1 tester-agent/1 coding-agent/2 tester-agent/2"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	st := h.session()
	if c := st.Counters["F-001"]; c.Failures != 1 {
		t.Errorf("F-001: %d failed attempts, want 1", c.Failures)
	}
}

// stopsWhenRedone returns a check for the scripts of a pause test: a run of
// the same role, feature and attempt as one before means that run's
// outcome was dropped, and the night would go round for ever; it fails
// the test and stops the session at once, so that the test fails in
// seconds.
func stopsWhenRedone(h *harness) func(spec agents.Spec) bool {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(spec agents.Spec) bool {
		key := fmt.Sprintf("%s %s %d", spec.Role, spec.FeatureID, spec.Attempt)
		mu.Lock()
		redone := seen[key]
		seen[key] = true
		mu.Unlock()
		if redone {
			h.t.Errorf("%s ran again: the outcome of the run before, which ended around a pause, was dropped", key)
			go h.current.Stop(context.Background())
		}
		return redone
	}
}
