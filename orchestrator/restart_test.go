package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/everyfield"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// A new daemon holds what the store holds, every field of it: the session
// (the run in flight, the limits' counts, the budget warned, the wait and
// its backoffs), each feature's counters (its spend, its budget warned),
// and what it sums from the runs: the session's spend, the runs counted,
// where run ids and transitions go on. Every field is filled by
// reflection: a field the loop forgets fails here by name.
func TestRestartReloadsTheStateOfRecord(t *testing.T) {
	h := newHarness(t)
	var sess store.Session
	everyfield.Fill(&sess)
	sess.State = string(statemachine.Paused) // a state New keeps
	var ctr store.FeatureCounters
	everyfield.Fill(&ctr)
	counters := map[string]store.FeatureCounters{"F-001": ctr}
	var a, b store.Run
	everyfield.Fill(&a)
	everyfield.Fill(&b)
	a.Seq, a.CostUSD, b.Seq, b.CostUSD = 3, 0.25, 5, 1.5
	var tr store.Transition
	everyfield.Fill(&tr)
	tr.Seq = 4
	if err := h.st.Apply(store.Batch{Session: &sess, Counters: counters, Runs: []store.Run{a, b}, Transitions: []store.Transition{tr}}); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	o := h.orchestrator(false)
	if d := everyfield.Diff(sess, o.session); len(d) > 0 {
		t.Errorf("the session the loop holds after a restart is not the one stored:\n\t%s", strings.Join(d, "\n\t"))
	}
	if d := everyfield.Diff(counters, o.counters); len(d) > 0 {
		t.Errorf("the counters the loop holds after a restart are not the ones stored:\n\t%s", strings.Join(d, "\n\t"))
	}
	if o.tally.totalCost != 1.75 || o.tally.runCount != 2 || o.tally.lastRun != 5 || o.tally.lastTrans != 4 {
		t.Errorf("after a restart the loop has spent %v in %d runs, last run %d, last transition %d; want 1.75 in 2, 5, 4", o.tally.totalCost, o.tally.runCount, o.tally.lastRun, o.tally.lastTrans)
	}
	if st, _ := o.Status(t.Context()); st.CostUSD != 1.75 || st.Runs != 2 {
		t.Errorf("ctl status after a restart: $%v in %d runs, want $1.75 in 2", st.CostUSD, st.Runs)
	}
}

// What the session spent before a crash counts against budget.session_usd
// after it: the budget does not start again from zero. The first daemon
// spends $0.01 on F-001's coder and dies during its tester; the second
// redoes the tester, spends $0.01 more on F-002's coder, and so stops
// before F-002's tester, where $0.015 is the budget.
func TestSessionBudgetSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	h.cfg.Budget.SessionUSD = 0.015
	ctx, crash := context.WithCancel(t.Context())
	defer crash()
	h.runner.script[role.Tester] = func(ctx context.Context, _ agents.Spec, _ *harness) agents.Result {
		crash()
		<-ctx.Done()
		return agents.Result{Ended: agents.EndCancelled}
	}
	if err := h.orchestrator(true).Run(ctx); err != nil {
		t.Fatalf("first daemon: %v", err)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 tester:F-001"; got != want {
		t.Fatalf("first daemon's runs = %s, want %s", got, want)
	}

	h.reopen()
	h.runner.script[role.Tester] = testerRunsTheTest
	first := len(h.runner.runs())
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "budget.session_usd") {
		t.Fatalf("second daemon ended with %v, want a stop naming budget.session_usd: the first daemon's spend was forgotten", err)
	}
	if got, want := roles(h.runner.runs()[first:]), "tester:F-001 coding:F-002"; got != want {
		t.Errorf("second daemon's runs = %s, want %s", got, want)
	}
}

// A wait survives a restart: a session waiting for a usage limit's reset
// is still waiting for it after one, until the same time, and starts
// nothing before.
func TestAWaitSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	resets := time.Now().Add(time.Hour).Truncate(time.Second)
	limited := apiFailure("rate_limit", 429, "API Error: Request rejected (429)")
	limited.RateLimitResetsAt = resets
	h.runner.script[role.Coder] = failsFirst(99, limited, coderCompletes)
	ctx, cancel := context.WithCancel(t.Context())
	o := h.orchestrator(false)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	eventually.True(t, 10*time.Second, func() bool { s, _ := o.Status(ctx); return s.State == string(statemachine.Waiting) }, "the session waiting")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runs := len(h.runner.runs())

	h.reopen()
	o = h.orchestrator(false)
	ctx = running(t, o)
	// Once the loop answers, it has recovered: it acted on the store.
	if err := o.do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	s, _ := o.Status(ctx)
	if s.State != string(statemachine.Waiting) || s.WaitingUntil == nil || !s.WaitingUntil.Equal(resets) {
		t.Errorf("after a restart: %s until %v, want waiting until the reset at %s", s.State, s.WaitingUntil, resets)
	}
	if got := roles(h.runner.runs()[runs:]); got != "" {
		t.Errorf("after a restart, before the reset, the daemon ran %s", got)
	}
	st := h.session()
	if st.Session.Backoffs != 1 {
		t.Errorf("backoffs = %d after a restart, want the 1 before it", st.Session.Backoffs)
	}
}
