package orchestrator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/store"
)

type told struct {
	mu     sync.Mutex
	events []notify.Event
}

func (t *told) notify(e notify.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, e)
}

func (t *told) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s []string
	for _, e := range t.events {
		s = append(s, strings.TrimSpace(e.Event+" "+e.Feature))
	}
	return strings.Join(s, ", ")
}

// A person is told of each feature tested or blocked and of the session's
// waits and end, once each, with the project and what happened.
func TestPersonIsTold(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Backoff, h.cfg.Limits.BackoffMax = 10*time.Millisecond, 10*time.Millisecond
	h.runner.script[role.Initializer] = failsFirst(1, apiFailure("overloaded", 529, "Overloaded"), initializerWrites(2))
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		return testerClaims(spec.FeatureID == "F-001")(ctx, spec, h)
	}
	tl := &told{}
	o := h.orchestrator(true)
	o.opts.Notify = tl.notify
	if err := o.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := tl.String(), "session_waiting, feature_tested F-001, feature_blocked F-002, session_done"; got != want {
		t.Errorf("told: %s\nwant:  %s", got, want)
	}
	for _, e := range tl.events {
		if e.Project != h.proj.ID || e.Dir != h.proj.Dir || e.Message == "" || e.Time.IsZero() {
			t.Errorf("event %+v misses what it is about", e)
		}
	}
	if e := tl.events[1]; !strings.HasPrefix(e.Message, "F-001 (feature F-001) tested; committed as ") {
		t.Errorf("tested: %q", e.Message)
	}
}

// A budget nearly spent (80 %) is said once, before the limit stops
// anything: a trace, the log, a notification; for the session and for each
// feature.
func TestBudgetsWarnBeforeTheyStop(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(3)
	h.cfg.Budget.SessionUSD = 0.024 // each coder costs 0.01: warned after two, stopped after three
	h.cfg.Budget.FeatureUSD = 0.012 // warned after its coder
	tl := &told{}
	o := h.orchestrator(true)
	o.opts.Notify = tl.notify
	err := o.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "budget.session_usd") {
		t.Fatalf("loop ended with %v, want the session budget to stop it", err)
	}
	want := "budget_warning F-001, feature_tested F-001, budget_warning, budget_warning F-002, feature_tested F-002, budget_warning F-003, session_stopped"
	if got := tl.String(); got != want {
		t.Errorf("told: %s\nwant:  %s", got, want)
	}
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceDecision})
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for _, tr := range trs {
		if tr.Code == "budget_warning" {
			warnings = append(warnings, tr.Event.WhatHappened)
		}
	}
	if len(warnings) != 4 {
		t.Errorf("budget warnings traced: %q, want 4", warnings)
	}
	var session bool
	for _, w := range warnings {
		session = session || strings.HasPrefix(w, "the session has spent $0.02 of its budget.session_usd of $0.02 (83%)")
	}
	if !session {
		t.Errorf("no trace says the session's budget is nearly spent: %q", warnings)
	}
}
