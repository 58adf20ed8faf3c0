package orchestrator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// awaitsApproval reports whether a status is the wait for the plan's
// approval, which says how to give it.
func awaitsApproval(st control.Status) bool {
	return st.State == string(statemachine.Waiting) && st.WaitingUntil == nil && st.Current == nil &&
		strings.Contains(st.Message, "ctxgraphd ctl approve")
}

// loopInBackground runs a loop of h with ExitWhenDone in the background,
// for at most a minute, telling a person through tell (nil: nobody).
// ended waits for it to end by itself and fails the test, with the status,
// when it does not; stop shuts it down.
func loopInBackground(t *testing.T, h *harness, tell func(notify.Event)) (o *Orchestrator, ended func(), stop func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	o = h.orchestrator(true)
	o.opts.Notify = tell
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	ended = func() {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			st, _ := o.Status(context.Background())
			t.Fatalf("the night did not end: %+v", st)
		}
	}
	stop = func() error { cancel(); return <-done }
	t.Cleanup(func() { cancel() })
	return o, ended, stop
}

// With limits.approve_plan, the session waits once the initializer's list
// is accepted, saying so, and nothing of any feature is worked: no coder,
// no tester, no check of a test. The wait outlives a restart without a
// transition of its own, and ctl resume does not end it (it says to
// approve); ctl approve does,
// as a person's decision on the record, and the night then goes on to
// done as one without the setting.
func TestAPlanWaitsForItsApproval(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.ApprovePlan = true
	roles := func() []string {
		h.runner.mu.Lock()
		defer h.runner.mu.Unlock()
		var out []string
		for _, s := range h.runner.specs {
			out = append(out, string(s.Role))
		}
		return out
	}
	transitions := func() int {
		ts, err := h.st.Transitions()
		if err != nil {
			t.Fatal(err)
		}
		return len(ts)
	}
	tl := &told{}
	start := func() (*Orchestrator, func() error) {
		o, _, stop := loopInBackground(t, h, tl.notify)
		return o, stop
	}

	o, stop := start()
	if !statusWithin(o, 20*time.Second, awaitsApproval) {
		st, _ := o.Status(t.Context())
		t.Fatalf("status %+v, want the wait for ctl approve", st)
	}
	if got := strings.Join(roles(), " "); got != string(role.Initializer) {
		t.Errorf("runs before the approval: %q, want the initializer's alone", got)
	}
	// The status is published with the transition, the person told
	// right after it.
	waitTold := func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.events) == 1 && tl.events[0].Event == notify.SessionWaiting && strings.Contains(tl.events[0].Message, "ctxgraphd ctl approve")
	}
	if !eventually.Within(10*time.Second, waitTold) {
		t.Errorf("told %q, want the wait for the approval, once", tl.String())
	}
	var api *control.APIError
	if err := o.Resume(t.Context()); !errors.As(err, &api) || api.Code != control.CodeBadState || !strings.Contains(api.Message, "ctxgraphd ctl approve") {
		t.Errorf("ctl resume while the plan waits: %v, want bad_state saying to approve", err)
	}
	if st, _ := o.Status(t.Context()); !awaitsApproval(st) || len(roles()) != 1 {
		t.Errorf("after ctl resume: %+v, %d runs; want the plan still waiting, no run", st, len(roles()))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A restart finds the plan still waiting, and moves nothing.
	before := transitions()
	h.reopen()
	o, stop = start()
	if !statusWithin(o, 20*time.Second, awaitsApproval) {
		st, _ := o.Status(t.Context())
		t.Fatalf("after a restart: %+v, want the wait for ctl approve", st)
	}
	if n := transitions(); n != before {
		t.Errorf("a restart while the plan waited made %d transitions", n-before)
	}
	if len(roles()) != 1 {
		t.Errorf("runs after the restart: %q", roles())
	}

	if err := o.Approve(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := o.Approve(t.Context()); err != nil {
		t.Errorf("a second approval: %v, want none", err)
	}
	if !statusWithin(o, 30*time.Second, func(st control.Status) bool { return st.State == string(statemachine.Done) }) {
		st, _ := o.Status(t.Context())
		t.Fatalf("after ctl approve: %+v, want the night done", st)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s", got)
	}
	if got, want := tl.String(), "session_waiting, feature_tested F-001, feature_tested F-002, session_done"; got != want {
		t.Errorf("told: %s\nwant:  %s (the wait told once, across the restart)", got, want)
	}
	if got, want := strings.Join(roles(), " "), "initializer-agent coding-agent tester-agent coding-agent tester-agent"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	if !h.session().Session.PlanApproved {
		t.Error("the approval is not in the store")
	}
	decisions, err := h.st.Traces(store.TraceFilter{Type: control.TraceDecision})
	if err != nil {
		t.Fatal(err)
	}
	var approved int
	for _, d := range decisions {
		if d.Source == control.SourceUser && strings.Contains(d.Event.WhatHappened, "approved the plan of 2 features") {
			approved++
		}
	}
	if approved != 1 {
		t.Errorf("%d decisions of a person approving the plan, want 1: %+v", approved, decisions)
	}
}

// ctl approve where no plan waits says why: the setting is off.
func TestApproveWithoutTheSettingSaysSo(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := h.orchestrator(false)
	ended := make(chan error, 1)
	go func() { ended <- o.Run(ctx) }()
	err := o.Approve(ctx)
	var api *control.APIError
	if !errors.As(err, &api) || api.Code != control.CodeBadState || !strings.Contains(api.Message, "limits.approve_plan is off") {
		t.Errorf("ctl approve with limits.approve_plan off: %v, want bad_state naming the setting", err)
	}
	cancel()
	<-ended
	if h.session().Session.PlanApproved {
		t.Error("the refused approval is in the store")
	}
}

// A person who pauses while the plan waits, edits the list and approves
// gets the night going on from the pause, with their edit: approve is the
// go-ahead from paused as from waiting.
func TestAnApprovalWhilePausedTakesTheEdits(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.ApprovePlan = true
	ctx := t.Context()
	o, ended, _ := loopInBackground(t, h, nil)
	if !statusWithin(o, 20*time.Second, awaitsApproval) {
		t.Fatal("the plan did not wait for its approval")
	}
	if err := o.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if !statusWithin(o, 20*time.Second, func(st control.Status) bool { return st.State == string(statemachine.Paused) }) {
		t.Fatal("the session did not pause")
	}
	h.edit(func(l *progress.List) { l.Feature("F-002").Title = "as the person wants it" })
	if err := o.Approve(ctx); err != nil {
		t.Fatal(err)
	}
	ended()
	l := h.list()
	if got := summary(l); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s", got)
	}
	if title := l.Feature("F-002").Title; title != "as the person wants it" {
		t.Errorf("F-002's title = %q, want the edit made while paused", title)
	}
}

// With lanes the plan waits the same: no lane starts before the approval,
// and after it the features are worked in lanes to the end.
func TestAPlanWaitsForItsApprovalWithLanes(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.ApprovePlan = true
	h.cfg.Limits.Parallel = 2
	ctx := t.Context()
	o, ended, _ := loopInBackground(t, h, nil)
	if !statusWithin(o, 20*time.Second, func(st control.Status) bool { return awaitsApproval(st) && len(st.Lanes) == 0 }) {
		st, _ := o.Status(ctx)
		t.Fatalf("status %+v, want the wait for ctl approve with no lane", st)
	}
	h.runner.mu.Lock()
	runs := len(h.runner.specs)
	h.runner.mu.Unlock()
	if runs != 1 {
		t.Errorf("%d runs before the approval, want the initializer's alone", runs)
	}
	if err := o.Approve(ctx); err != nil {
		t.Fatal(err)
	}
	ended()
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s", got)
	}
}
