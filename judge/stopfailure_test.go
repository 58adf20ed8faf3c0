package judge

import (
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
)

// The API error a run's StopFailure hook reports is kept for that run, and
// only for it: another run, a run the judge does not know, and a run whose
// turn did not end on an error have none. A person's StopFailure (no token)
// belongs to no run.
func TestStopFailureIsKeptForItsRun(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-2"})
	if got := f.j.StopFailure("run-1"); got != "" {
		t.Fatalf("StopFailure(run-1) = %q before any StopFailure hook", got)
	}

	f.mustHook("", "stop-failure", map[string]any{"hook_event_name": "StopFailure", "error": "billing_error"})
	f.mustHook(tok, "stop-failure", map[string]any{"hook_event_name": "StopFailure", "error": "rate_limit"})

	for run, want := range map[string]string{"run-1": "rate_limit", "run-2": "", "run-404": ""} {
		if got := f.j.StopFailure(run); got != want {
			t.Errorf("StopFailure(%s) = %q, want %q", run, got, want)
		}
	}
}
