package statemachine

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/progress"
)

// list builds a feature list from "ID:status[:tested][:dep,dep][:scope=glob,glob]"
// specs.
func list(specs ...string) *progress.List {
	l := &progress.List{Version: 1}
	for _, s := range specs {
		parts := strings.Split(s, ":")
		f := progress.Feature{ID: parts[0], Title: parts[0], Status: progress.Status(parts[1])}
		for _, p := range parts[2:] {
			switch {
			case p == "tested":
				f.Tested = true
			case strings.HasPrefix(p, "scope="):
				f.Scope = strings.Split(strings.TrimPrefix(p, "scope="), ",")
			case p != "":
				f.DependsOn = strings.Split(p, ",")
			}
		}
		l.Features = append(l.Features, f)
	}
	return l
}

// lanes builds the features in flight from "ID[:glob,glob]" specs (no
// globs: no scope).
func lanes(specs ...string) []InFlight {
	var out []InFlight
	for _, s := range specs {
		id, globs, scoped := strings.Cut(s, ":")
		g := InFlight{Feature: id}
		if scoped {
			g.Scope = strings.Split(globs, ",")
		}
		out = append(out, g)
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Action
	}{
		{
			name: "no feature list: spawn the initializer",
			in:   Input{},
			want: Action{Kind: SpawnInitializer, Reason: "no feature list yet"},
		},
		{
			name: "first pending feature whose dependencies are tested",
			in:   Input{List: list("F-1:pending:F-2", "F-2:pending")},
			want: Action{Kind: SpawnCoder, Feature: "F-2", Attempt: 1},
		},
		{
			name: "dependency tested: the dependent feature is next",
			in:   Input{List: list("F-1:pending:F-2", "F-2:completed:tested")},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "a completed feature that is not tested goes to the tester",
			in:   Input{List: list("F-1:completed")},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1},
		},
		{
			name: "an in-progress feature (interrupted earlier) is picked up at its attempt",
			in:   Input{List: list("F-1:in_progress"), Counters: map[string]Counters{"F-1": {Failures: 1}}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 2},
		},
		{
			name: "coding run ended with the feature completed: spawn the tester",
			in: Input{List: list("F-1:completed"), MaxRetries: 2,
				Outcome: &Outcome{Role: Coder, Feature: "F-1"}},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1},
		},
		{
			name: "coding run ended without completing: a failed attempt, resumed",
			in: Input{List: list("F-1:in_progress"), MaxRetries: 2,
				Outcome: &Outcome{Role: Coder, Feature: "F-1", Reason: "stopped early"}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 2, Resume: true, CountFailure: true, Reason: "stopped early"},
		},
		{
			name: "tested accepted: select the next feature",
			in: Input{List: list("F-1:completed:tested", "F-2:pending"), MaxRetries: 2,
				Outcome: &Outcome{Role: Tester, Feature: "F-1", Verdict: true}},
			want: Action{Kind: SpawnCoder, Feature: "F-2", Attempt: 1},
		},
		{
			name: "test failed with retries left: resume the coder with the report",
			in: Input{List: list("F-1:completed"), MaxRetries: 2, Counters: map[string]Counters{"F-1": {Failures: 1}},
				Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "test exited 1"}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 3, Resume: true, CountFailure: true, Reason: "test exited 1"},
		},
		{
			name: "test failed and retries exhausted: block",
			in: Input{List: list("F-1:completed"), MaxRetries: 2, Counters: map[string]Counters{"F-1": {Failures: 2}},
				Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "test exited 1"}},
			want: Action{Kind: BlockFeature, Feature: "F-1", CountFailure: true, Reason: "3 of 3 attempts failed; last: test exited 1"},
		},
		{
			name: "max_retries 0: the first failure blocks",
			in: Input{List: list("F-1:completed"), MaxRetries: 0,
				Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "no verdict"}},
			want: Action{Kind: BlockFeature, Feature: "F-1", CountFailure: true, Reason: "1 of 1 attempts failed; last: no verdict"},
		},
		{
			name: "tester ended without a verdict counts as a failure",
			in: Input{List: list("F-1:completed"), MaxRetries: 2,
				Outcome: &Outcome{Role: Tester, Feature: "F-1"}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 2, Resume: true, CountFailure: true,
				Reason: "the tester run ended without an accepted verdict for F-1"},
		},
		{
			name: "interrupted coding run is redone at the same attempt, not counted",
			in: Input{List: list("F-1:in_progress"), MaxRetries: 2, Counters: map[string]Counters{"F-1": {Failures: 1}},
				Outcome: &Outcome{Role: Coder, Feature: "F-1", Interrupted: true}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 2, Redo: true, Reason: "the coding run was interrupted"},
		},
		{
			name: "interrupted coding run that had completed the feature goes on to the tester",
			in: Input{List: list("F-1:completed"), MaxRetries: 2,
				Outcome: &Outcome{Role: Coder, Feature: "F-1", Interrupted: true}},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1},
		},
		{
			name: "interrupted tester run is redone",
			in: Input{List: list("F-1:completed"), MaxRetries: 2,
				Outcome: &Outcome{Role: Tester, Feature: "F-1", Interrupted: true}},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1, Redo: true, Reason: "the tester run was interrupted"},
		},
		{
			name: "transient API error: wait and redo",
			in: Input{List: list("F-1:in_progress"), MaxRetries: 2,
				Outcome: &Outcome{Role: Coder, Feature: "F-1", Transient: true, Reason: "rate limited"}},
			want: Action{Kind: WaitAndRetry, Feature: "F-1", Redo: true, Reason: "rate limited"},
		},
		{
			name: "initializer wrote the list: go on to the first feature",
			in:   Input{List: list("F-1:pending"), MaxRetries: 2, Outcome: &Outcome{Role: Initializer}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "initializer wrote nothing: run it again, counted",
			in:   Input{MaxRetries: 2, Outcome: &Outcome{Role: Initializer, Reason: "no feature-list.json"}},
			want: Action{Kind: SpawnInitializer, CountInitFailure: true, Reason: "no feature-list.json"},
		},
		{
			name: "initializer failed too often: stop for a person",
			in:   Input{MaxRetries: 2, InitFailures: 2, Outcome: &Outcome{Role: Initializer, Reason: "invalid JSON"}},
			want: Action{Kind: StopSession, CountInitFailure: true,
				Reason: "the initializer did not write a valid feature list in 3 runs: invalid JSON"},
		},
		{
			name: "too many blocked features: stop the session",
			in:   Input{List: list("F-1:blocked", "F-2:blocked", "F-3:blocked", "F-4:pending"), MaxBlocked: 3, BlockedInSession: 3},
			want: Action{Kind: StopSession, Reason: "3 features were blocked in this session (limit 3); a person should look at them"},
		},
		{
			name: "every feature tested or blocked: done",
			in:   Input{List: list("F-1:completed:tested", "F-2:blocked")},
			want: Action{Kind: FinishAll, Reason: "every feature is tested or blocked"},
		},
		{
			name: "empty list: done",
			in:   Input{List: &progress.List{Version: 1}},
			want: Action{Kind: FinishAll, Reason: "every feature is tested or blocked"},
		},
		{
			name: "a feature waiting on a blocked one is reported, not looped on",
			in:   Input{List: list("F-1:blocked", "F-2:pending:F-1")},
			want: Action{Kind: FinishAll, Reason: "F-2 waits on F-1 (blocked)"},
		},
		{
			name: "a dependency cycle is reported, not looped on",
			in:   Input{List: list("F-1:pending:F-2", "F-2:pending:F-1")},
			want: Action{Kind: StopSession, Reason: "dependency cycle in feature-list.json: F-1 -> F-2 -> F-1: none of these features can ever start. Remove one depends_on of each cycle, then `ctxgraphd ctl resume` (F-1 waits on F-2 (pending); F-2 waits on F-1 (pending))"},
		},
		{
			name: "a dependency that is completed but not tested is not met",
			in:   Input{List: list("F-1:pending:F-2", "F-2:completed")},
			want: Action{Kind: SpawnTester, Feature: "F-2", Attempt: 1},
		},
		{
			name: "a dependency that is blocked is not met: nothing to do",
			in:   Input{List: list("F-1:pending:F-2", "F-2:blocked")},
			want: Action{Kind: FinishAll, Reason: "F-1 waits on F-2 (blocked)"},
		},
		{
			name: "red-before-green: a feature's test is checked before its first coding attempt",
			in:   Input{List: list("F-1:pending"), CheckTests: true, TestsMustFail: true, Counters: map[string]Counters{"F-1": {Red: RedDue}}},
			want: Action{Kind: CheckTest, Feature: "F-1", Reason: "its test must run, and fail, before any code is written for it"},
		},
		{
			name: "red-before-green: a failing test means work to do",
			in:   Input{List: list("F-1:pending"), CheckTests: true, TestsMustFail: true, Counters: map[string]Counters{"F-1": {Red: RedFailing}}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "red-before-green: a test that passes before any code blocks the feature, not charged",
			in: Input{List: list("F-1:pending", "F-2:pending"), CheckTests: true, TestsMustFail: true,
				Counters: map[string]Counters{"F-1": {Red: RedPasses, RedDetail: "vacuous"}, "F-2": {Red: RedFailing}}},
			want: Action{Kind: BlockFeature, Feature: "F-1", NotCharged: true, Reason: "vacuous"},
		},
		{
			name: "red-before-green: a test that cannot run blocks the feature, not charged",
			in: Input{List: list("F-1:pending"), CheckTests: true, TestsMustFail: true,
				Counters: map[string]Counters{"F-1": {Red: RedCannotRun, RedDetail: "tests/a.sh does not exist"}}},
			want: Action{Kind: BlockFeature, Feature: "F-1", NotCharged: true, Reason: "tests/a.sh does not exist"},
		},
		{
			name: "red-before-green in warn mode: a vacuous test is let through",
			in:   Input{List: list("F-1:pending"), CheckTests: true, Counters: map[string]Counters{"F-1": {Red: RedPasses}}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "red-before-green off: nothing is checked",
			in:   Input{List: list("F-1:pending"), Counters: map[string]Counters{"F-1": {Red: RedDue}}},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "red-before-green: a completed feature goes to its tester unchecked",
			in:   Input{List: list("F-1:completed"), CheckTests: true, TestsMustFail: true, Counters: map[string]Counters{"F-1": {Red: RedDue}}},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1},
		},
		{
			name: "red-before-green: a feature from before the gate (never due) is not checked",
			in:   Input{List: list("F-1:in_progress"), CheckTests: true, TestsMustFail: true},
			want: Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1},
		},
		{
			name: "feature skipped by a person while its tester ran: move on",
			in: Input{List: list("F-1:blocked", "F-2:pending"), MaxRetries: 2,
				Outcome: &Outcome{Role: Tester, Feature: "F-1"}},
			want: Action{Kind: SpawnCoder, Feature: "F-2", Attempt: 1},
		},
		{
			name: "lanes: a feature whose scope is apart starts beside one in flight",
			in:   Input{List: list("F-1:in_progress:scope=api/**", "F-2:pending:scope=web/**"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: SpawnCoder, Feature: "F-2", Attempt: 1},
		},
		{
			name: "lanes: a completed feature whose scope is apart goes to its tester beside one in flight",
			in:   Input{List: list("F-1:in_progress:scope=api/**", "F-2:completed:scope=web/*.js"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: SpawnTester, Feature: "F-2", Attempt: 1},
		},
		{
			name: "lanes: a feature whose scope overlaps one in flight waits, the next apart starts",
			in: Input{List: list("F-1:in_progress:scope=api/**", "F-2:pending:scope=api/auth/**", "F-3:pending:scope=web/**"),
				InFlight: lanes("F-1:api/**")},
			want: Action{Kind: SpawnCoder, Feature: "F-3", Attempt: 1},
		},
		{
			name: "lanes: a feature whose scope overlaps one in flight waits for a lane",
			in:   Input{List: list("F-1:in_progress:scope=api/**", "F-2:pending:scope=api/auth/**"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits for F-1 (in flight): their scopes overlap (in flight: F-1)"},
		},
		{
			name: "lanes: a feature without scope waits while anything is in flight",
			in:   Input{List: list("F-1:in_progress:scope=api/**", "F-2:pending"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits for F-1 (in flight): F-2 has no scope, so runs alone (in flight: F-1)"},
		},
		{
			name: "lanes: nothing starts while a feature without scope is in flight",
			in:   Input{List: list("F-1:in_progress", "F-2:pending:scope=web/**"), InFlight: lanes("F-1")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits for F-1 (in flight): F-1 has no scope, so runs alone (in flight: F-1)"},
		},
		{
			name: "lanes: a dependency in flight is not met: wait, not finish",
			in:   Input{List: list("F-1:completed:scope=api/**", "F-2:pending:F-1:scope=web/**"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits on F-1 (in flight) (in flight: F-1)"},
		},
		{
			name: "lanes: a dependency in flight is not met even when the list says it is tested",
			in:   Input{List: list("F-1:completed:tested:scope=api/**", "F-2:pending:F-1:scope=web/**"), InFlight: lanes("F-1:api/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits on F-1 (in flight) (in flight: F-1)"},
		},
		{
			name: "lanes: features that wait on one another and on a lane: wait, not the cycle's stop",
			in: Input{List: list("F-1:in_progress:scope=api/**", "F-2:pending:F-1,F-3:scope=web/**", "F-3:pending:F-2:scope=docs/**"),
				InFlight: lanes("F-1:api/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-2 waits on F-1 (in flight), F-3 (pending); F-3 waits on F-2 (pending) (in flight: F-1)"},
		},
		{
			name: "lanes: every feature left is in flight",
			in: Input{List: list("F-1:in_progress:scope=api/**", "F-2:completed:scope=web/**", "F-3:blocked"),
				InFlight: lanes("F-1:api/**", "F-2:web/**")},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: in flight: F-1, F-2"},
		},
		{
			name: "lanes: too many blocked features stop the session, lanes in flight or not",
			in: Input{List: list("F-1:blocked", "F-2:in_progress:scope=api/**", "F-3:pending:scope=web/**"), MaxBlocked: 1, BlockedInSession: 1,
				InFlight: lanes("F-2:api/**")},
			want: Action{Kind: StopSession, Reason: "1 features were blocked in this session (limit 1); a person should look at them"},
		},
		{
			name: "lanes: the coder of one lane completed: its tester, whatever is in flight",
			in: Input{List: list("F-1:completed:scope=api/**", "F-2:in_progress:scope=web/**"), MaxRetries: 2,
				InFlight: lanes("F-2:web/**"), Outcome: &Outcome{Role: Coder, Feature: "F-1"}},
			want: Action{Kind: SpawnTester, Feature: "F-1", Attempt: 1},
		},
		{
			name: "lanes: one lane failed for good: blocked, whatever is in flight",
			in: Input{List: list("F-1:completed:scope=api/**", "F-2:in_progress:scope=web/**"), MaxRetries: 0,
				InFlight: lanes("F-2:web/**"), Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "test exited 1"}},
			want: Action{Kind: BlockFeature, Feature: "F-1", CountFailure: true, Reason: "1 of 1 attempts failed; last: test exited 1"},
		},
		{
			name: "lanes: one lane's feature tested, the next overlaps the lane in flight: wait",
			in: Input{List: list("F-1:completed:tested:scope=api/**", "F-2:in_progress:scope=web/**", "F-3:pending:scope=web/x.js"), MaxRetries: 2,
				InFlight: lanes("F-2:web/**"), Outcome: &Outcome{Role: Tester, Feature: "F-1", Verdict: true}},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: F-3 waits for F-2 (in flight): their scopes overlap (in flight: F-2)"},
		},
		{
			name: "lanes: one lane's feature tested, nothing else left: wait for the lane in flight, not finish",
			in: Input{List: list("F-1:completed:tested:scope=api/**", "F-2:in_progress:scope=web/**"), MaxRetries: 2,
				InFlight: lanes("F-2:web/**"), Outcome: &Outcome{Role: Tester, Feature: "F-1", Verdict: true}},
			want: Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: in flight: F-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			if got != tt.want {
				t.Fatalf("Decide:\n got  %+v\n want %+v", got, tt.want)
			}
			if got.Kind == WaitForLanes && len(tt.in.InFlight) == 0 {
				t.Fatalf("Decide waits for lanes with none in flight, for ever: %+v", got)
			}
			if got2 := Decide(tt.in); got2 != got {
				t.Fatalf("Decide is not deterministic: %+v then %+v", got, got2)
			}
		})
	}
}

// TestAttemptsAreBounded walks one feature that never passes through the
// rules and checks it gets exactly max_retries+1 attempts.
func TestAttemptsAreBounded(t *testing.T) {
	for _, maxRetries := range []int{0, 1, 2, 5} {
		t.Run(fmt.Sprintf("max_retries=%d", maxRetries), func(t *testing.T) {
			if got := codingAttempts(t, maxRetries); got != maxRetries+1 {
				t.Errorf("%d coding attempts, want %d", got, maxRetries+1)
			}
		})
	}
}

// codingAttempts plays a feature that never passes until the loop is done
// with it, and counts its coding runs.
func codingAttempts(t *testing.T, maxRetries int) int {
	t.Helper()
	l := list("F-1:pending")
	counters := map[string]Counters{}
	in := Input{List: l, Counters: counters, MaxRetries: maxRetries, MaxBlocked: 3}
	codingRuns := 0
	for step := 0; step < 100; step++ {
		a := Decide(in)
		if a.CountFailure {
			c := counters[a.Feature]
			c.Failures++
			counters[a.Feature] = c
		}
		switch a.Kind {
		case SpawnCoder:
			codingRuns++
			l.Features[0].Status = progress.Completed
			in.Outcome = &Outcome{Role: Coder, Feature: "F-1"}
		case SpawnTester:
			in.Outcome = &Outcome{Role: Tester, Feature: "F-1", Reason: "failed"}
		case BlockFeature:
			l.Features[0].Status = progress.Blocked
			in.Outcome = nil
		case FinishAll:
			return codingRuns
		default:
			t.Fatalf("unexpected action %v", a)
		}
	}
	t.Fatalf("no end after 100 steps")
	return codingRuns
}

// TestInitializerRunsAreBounded plays an initializer that never writes a
// valid list and checks it gets exactly max_retries+1 runs, as a feature
// gets max_retries+1 coding attempts, before the session stops.
func TestInitializerRunsAreBounded(t *testing.T) {
	for _, maxRetries := range []int{0, 1, 2, 5} {
		t.Run(fmt.Sprintf("max_retries=%d", maxRetries), func(t *testing.T) {
			in := Input{MaxRetries: maxRetries}
			runs := 0
			for step := 0; step < 100; step++ {
				a := Decide(in)
				if a.CountInitFailure {
					in.InitFailures++
				}
				switch a.Kind {
				case SpawnInitializer:
					runs++
					in.Outcome = &Outcome{Role: Initializer, Reason: "invalid JSON"}
				case StopSession:
					if runs != maxRetries+1 {
						t.Errorf("%d initializer runs before the stop, want %d", runs, maxRetries+1)
					}
					if in.InitFailures != runs {
						t.Errorf("%d failures counted for %d failed runs", in.InitFailures, runs)
					}
					return
				default:
					t.Fatalf("unexpected action %v", a)
				}
			}
			t.Fatalf("no stop after 100 steps")
		})
	}
}

// TestActionString: the debug log's "decided" line says what is done, to
// which feature, at which attempt, and why, and leaves out what is unset.
func TestActionString(t *testing.T) {
	tests := []struct {
		a    Action
		want string
	}{
		{Action{Kind: FinishAll}, "finish"},
		{Action{Kind: SpawnInitializer, Reason: "no feature list yet"}, "spawn initializer: no feature list yet"},
		{Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 1}, "spawn coder F-1 attempt 1"},
		{Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 3, Resume: true, Reason: "test exited 1"},
			"spawn coder F-1 attempt 3 (resume): test exited 1"},
		{Action{Kind: BlockFeature, Feature: "F-2", Reason: "3 of 3 attempts failed"}, "block feature F-2: 3 of 3 attempts failed"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.a, got, tt.want)
		}
	}
}

func TestActionEvents(t *testing.T) {
	m := New(Next)
	for _, k := range []Kind{SpawnInitializer, SpawnCoder, SpawnTester, FinishAll, StopSession, WaitAndRetry} {
		if (Action{Kind: k}).Event() == "" {
			t.Errorf("%v has no event", k)
		}
	}
	if (Action{Kind: BlockFeature}).Event() != "" || (Action{Kind: Nothing}).Event() != "" || (Action{Kind: WaitForLanes}).Event() != "" {
		t.Error("block, nothing and waiting for lanes must not move the session by themselves")
	}
	_ = m
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Kind
		feat string
		why  string
	}{
		{"no budgets: work goes on", Input{List: list("F-1:pending"), SessionCostUSD: 1e6}, SpawnCoder, "F-1", ""},
		{"under the feature budget", Input{List: list("F-1:pending"), FeatureBudgetUSD: 2, Counters: map[string]Counters{"F-1": {CostUSD: 1.99}}}, SpawnCoder, "F-1", ""},
		{"feature over its budget is blocked", Input{List: list("F-1:pending", "F-2:pending"), FeatureBudgetUSD: 2, Counters: map[string]Counters{"F-1": {CostUSD: 2}}}, BlockFeature, "F-1", "budget.feature_usd"},
		{"only that feature: the next is not charged", Input{List: list("F-1:blocked", "F-2:pending"), FeatureBudgetUSD: 2, Counters: map[string]Counters{"F-1": {CostUSD: 5}}}, SpawnCoder, "F-2", ""},
		{"a retry over budget is blocked, and the failure still counts", Input{List: list("F-1:completed"), FeatureBudgetUSD: 1, MaxRetries: 2,
			Counters: map[string]Counters{"F-1": {CostUSD: 1.5}}, Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "failed"}}, BlockFeature, "F-1", "budget.feature_usd"},
		{"session over its budget stops", Input{List: list("F-1:pending"), SessionBudgetUSD: 10, SessionCostUSD: 10}, StopSession, "", "budget.session_usd"},
		{"session budget does not stop a finished session", Input{List: list("F-1:completed:tested"), SessionBudgetUSD: 10, SessionCostUSD: 11}, FinishAll, "", ""},
		{"the initializer is charged to the session", Input{SessionBudgetUSD: 1, SessionCostUSD: 1}, StopSession, "", "budget.session_usd"},
		{"a run that reached the session's rest stops the session, uncharged", Input{List: list("F-1:pending"), SessionBudgetUSD: 1, SessionCostUSD: 0.995,
			Outcome: &Outcome{Role: Coder, Feature: "F-1", OutOfBudget: SessionBudgetKey}}, StopSession, "", "budget.session_usd"},
		{"lanes: the session's rest, less the caps in flight, pays a run", Input{List: list("F-1:in_progress:scope=a/**", "F-2:pending:scope=b/**"),
			SessionBudgetUSD: 1, SessionCostUSD: 0.5, InFlight: lanes("F-1:a/**"), InFlightCapUSD: 0.45}, SpawnCoder, "F-2", ""},
		{"lanes: the caps in flight hold the session's rest: wait for a lane, not stop", Input{List: list("F-1:in_progress:scope=a/**", "F-2:pending:scope=b/**"),
			SessionBudgetUSD: 1, SessionCostUSD: 0.5, InFlight: lanes("F-1:a/**"), InFlightCapUSD: 0.5}, WaitForLanes, "", "the runs in flight may spend $0.50"},
		{"lanes: a retry the caps in flight leave no room for waits, and the failure still counts", Input{List: list("F-1:completed:scope=a/**", "F-2:in_progress:scope=b/**"),
			MaxRetries: 2, SessionBudgetUSD: 1, SessionCostUSD: 0.6, InFlight: lanes("F-2:b/**"), InFlightCapUSD: 0.4,
			Outcome: &Outcome{Role: Tester, Feature: "F-1", Reason: "failed"}}, WaitForLanes, "F-1", "budget.session_usd"},
		{"lanes: a spent session still stops", Input{List: list("F-1:in_progress:scope=a/**", "F-2:pending:scope=b/**"),
			SessionBudgetUSD: 1, SessionCostUSD: 1, InFlight: lanes("F-1:a/**"), InFlightCapUSD: 0.5}, StopSession, "", "budget.session_usd"},
		{"a run that reached the feature's rest blocks it, uncharged", Input{List: list("F-1:pending", "F-2:pending"), FeatureBudgetUSD: 1, Counters: map[string]Counters{"F-1": {CostUSD: 0.999}},
			Outcome: &Outcome{Role: Tester, Feature: "F-1", OutOfBudget: FeatureBudgetKey}}, BlockFeature, "F-1", "budget.feature_usd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Decide(tt.in)
			if a.Kind != tt.want || a.Feature != tt.feat || !strings.Contains(a.Reason, tt.why) {
				t.Errorf("Decide = %+v, want %v %s with %q", a, tt.want, tt.feat, tt.why)
			}
			if o := tt.in.Outcome; o != nil && a.CountFailure == (o.OutOfBudget != "") {
				t.Errorf("CountFailure = %v after %+v: want a failed attempt counted, a spent budget not: %+v", a.CountFailure, o, a)
			}
			if o := tt.in.Outcome; o != nil && o.OutOfBudget != "" && a.Kind == BlockFeature && !a.NotCharged {
				t.Errorf("a feature whose budget ran out mid-run was blocked as charged: %+v", a)
			}
		})
	}
}

func TestRunCap(t *testing.T) {
	costs := func(f float64) map[string]Counters { return map[string]Counters{"F-1": {CostUSD: f}} }
	for _, tt := range []struct {
		name    string
		in      Input
		feature string
		want    float64
		by      string
	}{
		{"no budgets: no cap", Input{SessionCostUSD: 5}, "F-1", 0, ""},
		{"the run's own cap", Input{RunBudgetUSD: 2}, "F-1", 2, ""},
		{"the session's rest, without a run cap", Input{SessionBudgetUSD: 10, SessionCostUSD: 7}, "F-1", 3, SessionBudgetKey},
		{"the session's rest, below the run cap", Input{RunBudgetUSD: 2, SessionBudgetUSD: 10, SessionCostUSD: 9}, "F-1", 1, SessionBudgetKey},
		{"the run cap, below the session's rest", Input{RunBudgetUSD: 2, SessionBudgetUSD: 10, SessionCostUSD: 1}, "F-1", 2, ""},
		{"the feature's rest, lowest", Input{RunBudgetUSD: 2, SessionBudgetUSD: 10, SessionCostUSD: 1, FeatureBudgetUSD: 3, Counters: costs(2.5)}, "F-1", 0.5, FeatureBudgetKey},
		{"no feature's budget holds the initializer", Input{RunBudgetUSD: 2, FeatureBudgetUSD: 1}, "", 2, ""},
		{"a budget spent: a cent, never 0 (no cap)", Input{SessionBudgetUSD: 1, SessionCostUSD: 1}, "F-1", MinRunUSD, SessionBudgetKey},
		{"lanes: the session's rest less the caps in flight", Input{SessionBudgetUSD: 1, SessionCostUSD: 0.5, InFlightCapUSD: 0.45}, "F-2", 0.05, SessionBudgetKey},
		{"lanes: the run's own cap, below the session's rest less the caps in flight", Input{RunBudgetUSD: 0.2, SessionBudgetUSD: 10, SessionCostUSD: 5, InFlightCapUSD: 4}, "F-2", 0.2, ""},
		{"lanes: no session budget, the caps in flight change nothing", Input{RunBudgetUSD: 2, InFlightCapUSD: 4}, "F-2", 2, ""},
	} {
		got, by := RunCap(tt.in, tt.feature)
		if math.Abs(got-tt.want) > 1e-9 || by != tt.by {
			t.Errorf("%s: RunCap = %v by %q, want %v by %q", tt.name, got, by, tt.want, tt.by)
		}
	}
}

// A tested feature whose verdict did not hold (reopened by a later claim's
// sweep) fails an attempt of its own: coded again in a session of its own,
// or blocked once its retries are used up; always counted.
func TestReopen(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		want     Action
	}{
		{"first verdict did not hold: attempt 2, a fresh session", 0,
			Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 2, CountFailure: true, Reason: "why"}},
		{"the last retry left: attempt 3", 1,
			Action{Kind: SpawnCoder, Feature: "F-1", Attempt: 3, CountFailure: true, Reason: "why"}},
		{"retries used up: blocked for a person", 2,
			Action{Kind: BlockFeature, Feature: "F-1", CountFailure: true, Reason: "3 of 3 attempts failed; last: why"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{List: list("F-1:completed:tested"), MaxRetries: 2, Counters: map[string]Counters{"F-1": {Failures: tt.failures}}}
			if got := Reopen(in, "F-1", "why"); got != tt.want {
				t.Errorf("Reopen = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// runStarts are the situations a run starts from, for the budget
// properties below: each spawns a run for F-2 when the budgets let it.
func runStarts(in Input) map[string]Input {
	pending, completed, retry := in, in, in
	pending.List = list("F-1:in_progress:scope=a/**", "F-2:pending:scope=b/**")
	completed.List = list("F-1:in_progress:scope=a/**", "F-2:completed:scope=b/**")
	retry.List = list("F-1:in_progress:scope=a/**", "F-2:completed:scope=b/**")
	retry.MaxRetries = 2
	retry.Outcome = &Outcome{Role: Tester, Feature: "F-2", Reason: "test exited 1"}
	return map[string]Input{"a pending feature": pending, "a completed feature": completed, "a failed attempt's retry": retry}
}

// TestDecideNeverWaitsForLanesWithNoneInFlight: a session whose budget has
// less than a run's least cap left, but no lane in flight, starts the run
// (capped at MinRunUSD) or stops; waiting for lanes there would wait for
// ever, as no lane ends to wake it.
func TestDecideNeverWaitsForLanesWithNoneInFlight(t *testing.T) {
	for _, budget := range []struct{ budget, spent float64 }{
		{1, 0}, {1, 0.5}, {1, 0.995}, {1, 0.999}, {1, 1}, {1, 2}, {0.01, 0}, {0.01, 0.005}, {0.04, 0.03}, {0.005, 0},
	} {
		for name, in := range runStarts(Input{SessionBudgetUSD: budget.budget, SessionCostUSD: budget.spent}) {
			if a := Decide(in); a.Kind == WaitForLanes {
				t.Errorf("%s, session budget $%v, spent $%v, no lane in flight: %+v, a wait no lane ends", name, budget.budget, budget.spent, a)
			}
		}
	}
}

// TestARunBesideLanesStartsWhenItsCapFits: beside lanes in flight, a run
// starts exactly when the cap RunCap gives it (at least MinRunUSD) fits in
// what the session has left after the caps in flight; otherwise it waits
// for a lane. Down to the cent: a rest of exactly MinRunUSD pays a run.
func TestARunBesideLanesStartsWhenItsCapFits(t *testing.T) {
	exact := false
	for _, b := range []struct{ budget, spent, inFlight float64 }{
		{1, 0.5, 0.45},     // five cents left
		{1, 0.5, 0.495},    // half a cent left
		{1, 0.5, 0.5},      // nothing left, though the session has spent only half
		{1, 0, 0.999},      // a tenth of a cent
		{0.04, 0.02, 0.01}, // a cent, exactly
		{0.02, 0.01, 0},    // a cent, the lane in flight uncapped (its test checked)
		{0.01, 0, 0},       // a cent, nothing spent
		{0.02, 0, 0.01},    // a cent, all of it the lanes'
		{0.04, 0, 0.02},    // two cents
	} {
		rest := b.budget - b.spent - b.inFlight
		exact = exact || rest == MinRunUSD
		for name, in := range runStarts(Input{SessionBudgetUSD: b.budget, SessionCostUSD: b.spent, InFlight: lanes("F-1:a/**"), InFlightCapUSD: b.inFlight}) {
			capUSD, _ := RunCap(in, "F-2")
			fits := capUSD <= rest+1e-9 // RunCap adds what is held before it subtracts: a rounding apart
			a := Decide(in)
			starts := a.Kind == SpawnCoder || a.Kind == SpawnTester
			if starts != fits || (!starts && a.Kind != WaitForLanes) {
				t.Errorf("%s, session $%v, spent $%v, $%v in flight (left $%v, cap $%v): %+v; want a run started only when its cap fits, else a wait for a lane",
					name, b.budget, b.spent, b.inFlight, rest, capUSD, a)
			}
			if in.Outcome != nil && (!a.CountFailure || a.Feature != "F-2") {
				t.Errorf("%s, left $%v: the failed attempt was not counted against F-2: %+v", name, rest, a)
			}
		}
	}
	if !exact {
		t.Fatal("no case leaves exactly MinRunUSD: the bound itself is untested")
	}
}

// TestRunCapNamesTheBudgetThatLowersIt: the cap is the least of the run's
// own, the session's rest and the feature's rest, and by names a budget
// only when its rest is below every cap before it (the run's own, then the
// session's). At a tie with the run's own cap, that cap alone would have
// stopped the run: what it spent is the agent's, charged as any failed
// attempt; a tie of the session's and the feature's is the session's, which
// stops the session rather than blocking the feature.
func TestRunCapNamesTheBudgetThatLowersIt(t *testing.T) {
	rests := []float64{0, 1, 2} // 0: no such budget
	for _, run := range rests {
		for _, session := range rests {
			for _, feature := range rests {
				// Rests as budgets less what was spent: 10-8 and 3-1 are 2 exactly.
				in := Input{RunBudgetUSD: run, Counters: map[string]Counters{"F-1": {CostUSD: 1}}}
				if session > 0 {
					in.SessionBudgetUSD, in.SessionCostUSD = 8+session, 8
				}
				if feature > 0 {
					in.FeatureBudgetUSD = 1 + feature
				}
				want, wantBy := 0.0, ""
				for _, c := range []struct {
					usd float64
					by  string
				}{{run, ""}, {session, SessionBudgetKey}, {feature, FeatureBudgetKey}} {
					if c.usd > 0 && (want == 0 || c.usd < want) {
						want, wantBy = c.usd, c.by
					}
				}
				if got, by := RunCap(in, "F-1"); got != want || by != wantBy {
					t.Errorf("run cap $%v, session's rest $%v, feature's rest $%v: RunCap = $%v by %q, want $%v by %q", run, session, feature, got, by, want, wantBy)
				}
			}
		}
	}
}

// TestAPlanAwaitingApprovalStartsNothing: while the plan waits for a
// person's approval, every start of a feature's work (the check of its
// test, a coder, a tester, a retry) is the wait instead, which goes to
// waiting and says how to approve; what starts nothing (the initializer
// when there is no list, blocking, finishing, stopping) is decided as
// ever. Once approved, the same inputs start the same work.
func TestAPlanAwaitingApprovalStartsNothing(t *testing.T) {
	starts := runStarts(Input{})
	check := Input{List: list("F-1:pending"), CheckTests: true, Counters: map[string]Counters{"F-1": {Red: RedDue}}}
	starts["a test checked before any code"] = check
	for name, in := range starts {
		before := Decide(in)
		if before.Kind != CheckTest && before.Kind != SpawnCoder && before.Kind != SpawnTester {
			t.Fatalf("%s: %+v, want the start of a feature's work", name, before)
		}
		in.AwaitApproval = true
		a := Decide(in)
		n := fmt.Sprintf("its %d features", len(in.List.Features))
		if a.Kind != AwaitApproval || a.Event() != Wait || !strings.Contains(a.Reason, "ctxgraphd ctl approve") || !strings.Contains(a.Reason, "limits.approve_plan") || !strings.Contains(a.Reason, n) {
			t.Errorf("%s, awaiting approval: %+v, want the wait for ctl approve", name, a)
		}
		// A retry's failure is still counted, against its feature.
		if a.CountFailure != before.CountFailure || (before.CountFailure && a.Feature != before.Feature) {
			t.Errorf("%s, awaiting approval: %+v lost the failure of %+v", name, a, before)
		}
	}
	for name, in := range map[string]Input{
		"no list yet":          {},
		"too many blocked":     {List: list("F-1:pending", "F-2:blocked"), MaxBlocked: 1, BlockedInSession: 1},
		"every feature tested": {List: list("F-1:completed:tested")},
		"a test that passes before any code": {List: list("F-1:pending"), CheckTests: true, TestsMustFail: true,
			Counters: map[string]Counters{"F-1": {Red: RedPasses}}},
	} {
		want := Decide(in)
		in.AwaitApproval = true
		if got := Decide(in); got.Kind != want.Kind || got.Kind == AwaitApproval {
			t.Errorf("%s, awaiting approval: %+v, want %+v as without", name, got, want)
		}
	}
}
