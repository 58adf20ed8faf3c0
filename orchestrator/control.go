package orchestrator

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// The Orchestrator serves the control socket's loop routes: the session's
// commands, which run on the loop (control.Loop). The hooks are the judge's
// to answer and the records the records service's (package records).
var _ control.Loop = (*Orchestrator)(nil)

// publish refreshes the snapshot that control reads, so that ctl answers at
// once even while the loop is busy (verifying a test, for instance).
func (o *Orchestrator) publish() {
	st := control.Status{
		State:            o.session.State,
		Project:          o.opts.Project.Dir,
		ProjectID:        o.opts.Project.ID,
		PID:              os.Getpid(),
		StartedAt:        o.startedAt,
		BlockedInSession: o.session.BlockedInSession,
		Message:          o.session.Message,
		CostUSD:          o.tally.totalCost,
		Runs:             o.tally.runCount,
		Confined:         o.opts.Config.Sandbox.Enabled,
		PauseRequested:   o.session.PauseRequested,
	}
	var working []string
	for _, j := range o.lanes.jobs() {
		working = append(working, j.what)
	}
	st.Working = strings.Join(working, "; ")
	if o.listFile.problem != "" {
		st.Message = "feature-list.json: " + o.listFile.problem
	}
	if o.timers.unsaved != nil {
		// First: nothing else moves until the state is saved.
		st.Message = holdingMessage(o.timers.unsaved)
	}
	if !o.session.WaitingUntil.IsZero() {
		t := o.session.WaitingUntil
		st.WaitingUntil = &t
	}
	if r := o.session.Run; r != nil {
		st.Current = &control.RunInfo{ID: r.ID, Role: r.Role, Feature: r.Feature, Attempt: r.Attempt, SessionID: r.SessionID, PID: r.PID, StartedAt: r.StartedAt}
	}
	for _, rec := range o.lanes.records() {
		if r := rec.Run; r != nil {
			st.Lanes = append(st.Lanes, control.RunInfo{ID: r.ID, Role: r.Role, Feature: r.Feature, Attempt: r.Attempt, SessionID: r.SessionID, PID: r.PID, StartedAt: r.StartedAt})
		}
	}
	var feats []control.Feature
	if o.canonical != nil {
		c := o.canonical.Counts()
		st.Features = control.FeatureCounts{Total: c.Total, Pending: c.Pending, InProgress: c.InProgress, Completed: c.Completed, Tested: c.Tested, Blocked: c.Blocked}
		for _, f := range o.canonical.Features {
			ctr := o.counters[f.ID]
			attempts := ctr.Failures
			if f.Tested || f.Status == progress.InProgress || f.Status == progress.Completed {
				attempts++
			}
			feats = append(feats, control.Feature{
				ID: f.ID, Title: f.Title, Status: string(f.Status), Tested: f.Tested, DependsOn: f.DependsOn,
				Attempts: attempts, Retries: ctr.Failures, CostUSD: ctr.CostUSD, LastFailure: ctr.LastFailure, Note: ctr.Note,
			})
			if l := o.lanes.clones[f.ID]; l != nil {
				feats[len(feats)-1].Lane = l.dir
			}
		}
	}
	if feats == nil {
		feats = []control.Feature{}
	}
	o.opts.Judge.SetList(o.canonical)
	o.view.snap.Store(&st)
	o.view.features.Store(&feats)
	o.signalChange()
}

// liveRun is what a run's stream said last.
type liveRun struct {
	run       string
	toolCalls int
	lastTool  string
	worker    string // the worker running it (fleet), "" here
	waiting   bool   // on the fleet's queue, taken by no worker
}

// onRunEvent follows a run's stream, on the run's goroutine.
func (o *Orchestrator) onRunEvent(runID string, ev agents.Event) {
	var l liveRun
	if prev, ok := o.view.lives.Load(runID); ok {
		l = *prev.(*liveRun)
	}
	l.run = runID
	switch ev.Kind {
	case "tool_use":
		l.toolCalls++
		l.lastTool = ev.Tool
		if ev.Detail != "" {
			l.lastTool += ": " + ev.Detail
		}
	case agents.EventWorker:
		l.worker, l.waiting = ev.Detail, ev.Detail == ""
	default:
		return
	}
	o.view.lives.Store(runID, &l)
	o.signalChange()
}

// Changes implements control.Loop.
func (o *Orchestrator) Changes() <-chan struct{} {
	for {
		if ch := o.view.changed.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		o.view.changed.CompareAndSwap(nil, &ch)
	}
}

// signalChange wakes every watcher.
func (o *Orchestrator) signalChange() {
	ch := make(chan struct{})
	if old := o.view.changed.Swap(&ch); old != nil {
		close(*old)
	}
}

// writeMirror writes session-state.json, the human-readable mirror of the
// state of record. It is never read back.
func (o *Orchestrator) writeMirror() {
	s := progress.SessionState{
		Version:          1,
		Note:             "written by ctxgraphd as a mirror of its state; edits are ignored and overwritten",
		Project:          o.opts.Project.Dir,
		State:            o.session.State,
		UpdatedAt:        o.opts.Now().UTC(),
		BlockedInSession: o.session.BlockedInSession,
		Message:          o.session.Message,
	}
	if o.listFile.problem != "" {
		s.Message = "feature-list.json: " + o.listFile.problem
	}
	if o.canonical != nil {
		s.Features = o.canonical.Counts()
		s.FeatureStates = map[string]progress.FeatureState{}
		for _, f := range o.canonical.Features {
			c := o.counters[f.ID]
			s.FeatureStates[f.ID] = progress.FeatureState{Attempts: c.Runs, Retries: c.Failures, Status: string(f.Status), Tested: f.Tested, LastFailure: c.LastFailure}
		}
	}
	current := func(r *store.Run) *progress.CurrentRun {
		if r == nil {
			return nil
		}
		return &progress.CurrentRun{RunID: r.ID, Role: r.Role, FeatureID: r.Feature, Attempt: r.Attempt, SessionID: r.SessionID, StartedAt: r.StartedAt}
	}
	s.Current = current(o.session.Run)
	for _, l := range o.session.Lanes {
		s.Lanes = append(s.Lanes, progress.LaneState{FeatureID: l.Feature, Dir: l.Dir, Branch: l.Branch, Run: current(l.Run)})
	}
	if err := progress.WriteSessionState(o.opts.Project.Progress(), s); err != nil {
		o.opts.Log.Warn("could not write session-state.json", zap.Error(err))
	}
}

// Status implements control.Loop.
func (o *Orchestrator) Status(context.Context) (control.Status, error) {
	st := *o.view.snap.Load()
	withLive := func(r control.RunInfo) control.RunInfo {
		if l, ok := o.view.lives.Load(r.ID); ok {
			lr := l.(*liveRun)
			r.ToolCalls, r.LastTool, r.Worker, r.WaitingForWorker = lr.toolCalls, lr.lastTool, lr.worker, lr.waiting
		}
		return r
	}
	if cur := st.Current; cur != nil {
		c := withLive(*cur)
		st.Current = &c
	}
	lanes := make([]control.RunInfo, len(st.Lanes))
	for i, r := range st.Lanes {
		lanes[i] = withLive(r)
	}
	st.Lanes = lanes
	return st, nil
}

// Features implements control.Loop.
func (o *Orchestrator) Features(context.Context) ([]control.Feature, error) {
	return *o.view.features.Load(), nil
}

// Pause implements control.Loop: no new run starts; the one in flight
// finishes and is judged first.
func (o *Orchestrator) Pause(ctx context.Context) error {
	return o.do(ctx, func() error {
		switch statemachine.State(o.session.State) {
		case statemachine.Paused:
			return nil
		case statemachine.Stopped:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeBadState, Message: "the session is stopped; resume it first"}
		}
		if o.lanes.busy(o.lanes.home) || len(o.lanes.inFlight()) > 0 {
			o.session.PauseRequested = true
			o.persist()
			return nil
		}
		o.transition(o.lanes.home, statemachine.Pause, "", "paused by ctl")
		return nil
	})
}

// Resume implements control.Loop.
func (o *Orchestrator) Resume(ctx context.Context) error {
	return o.do(ctx, func() error {
		if o.waitsForApproval() {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeBadState,
				Message: "the plan waits for a person's approval, which resume does not give: read it, then `ctxgraphd ctl approve`"}
		}
		o.session.PauseRequested = false
		switch statemachine.State(o.session.State) {
		case statemachine.Paused, statemachine.Waiting:
		case statemachine.Stopped:
			o.session.BlockedInSession = 0
			o.session.InitFailures = 0
		default:
			o.persist()
			return nil
		}
		o.takeEdits("resumed by ctl")
		o.goOn("resumed by ctl")
		return nil
	})
}

// takeEdits takes what a person changed in the list while the session
// held (paused, most often), tests included: the record of the frozen
// tests follows a person.
func (o *Orchestrator) takeEdits(why string) {
	o.syncList(o.lanes.home, false)
	o.refreeze("", why)
}

// goOn ends a hold (a pause, a wait, a stop) on a person's word: the
// wait's timer is dropped, and the session decides again.
func (o *Orchestrator) goOn(why string) {
	if o.timers.wait != nil {
		o.timers.wait.Stop()
		o.timers.wait = nil
	}
	o.transition(o.lanes.home, statemachine.Advance, "", why)
	o.step(o.lanes.home, nil)
}

// Approve implements control.Loop: the plan that limits.approve_plan
// holds the session for is approved, once for the session's life, and the
// session goes on as after a resume, taking what a person changed in the
// list meanwhile (while paused, most often). The approval is a decision
// trace of a person's.
func (o *Orchestrator) Approve(ctx context.Context) error {
	return o.do(ctx, func() error {
		switch {
		case !o.opts.Config.Limits.ApprovePlan:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeBadState,
				Message: "limits.approve_plan is off: no plan waits for approval"}
		case o.session.PlanApproved:
			return nil
		case o.canonical == nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeBadState,
				Message: "there is no plan yet: the initializer has not written an accepted feature list"}
		}
		state := statemachine.State(o.session.State)
		holding := state == statemachine.Waiting || state == statemachine.Paused
		if holding {
			// The plan approved is the list as the person left it.
			o.takeEdits("plan approved by ctl")
		}
		o.session.PlanApproved = true
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceUser, Context: control.TraceContext{Task: "approve"},
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("a person approved the plan of %d features", len(o.canonical.Features)), Why: "limits.approve_plan"}})
		o.persist()
		if holding {
			o.session.PauseRequested = false
			o.goOn("plan approved by ctl")
		}
		return nil
	})
}

// Stop implements control.Loop: the run in flight is stopped (and redone
// after a resume, not counted) and the session waits for a person.
func (o *Orchestrator) Stop(ctx context.Context) error {
	return o.do(ctx, func() error {
		if statemachine.State(o.session.State) == statemachine.Stopped {
			return nil
		}
		running := false
		for _, l := range append(o.lanes.inFlight(), o.lanes.home) {
			if l.active != nil {
				l.active.interrupt = "stopped by ctl"
				l.active.cancel()
				running = true
			}
		}
		// The daemon's own work (a test it runs) ends with it.
		jobs := o.lanes.jobs()
		for _, j := range jobs {
			j.interrupt = "stopped by ctl"
			j.cancel()
		}
		if running || len(jobs) > 0 {
			o.stopAfter = true
			return nil
		}
		o.transition(o.lanes.home, statemachine.Stop, "", "stopped by ctl")
		return nil
	})
}

// Retry implements control.Loop: a feature's attempts start over.
func (o *Orchestrator) Retry(ctx context.Context, id string) error {
	return o.reopen(ctx, id, "", "retry")
}

// Unblock implements control.Loop: like Retry, with a note that the next
// coding agent reads.
func (o *Orchestrator) Unblock(ctx context.Context, id, note string) error {
	return o.reopen(ctx, id, note, "unblock")
}

func (o *Orchestrator) reopen(ctx context.Context, id, note, verb string) error {
	return o.do(ctx, func() error {
		f, err := o.feature(id)
		if err != nil {
			return err
		}
		if f.Tested {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: "already_tested", Message: fmt.Sprintf("%s is already tested", id)}
		}
		if verb == "unblock" && f.Status != progress.Blocked {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeNotBlocked, Message: fmt.Sprintf("%s is %s, not blocked", id, f.Status)}
		}
		if act := o.lanes.activeOf(id); act != nil {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning, Message: fmt.Sprintf("%s has a run in flight (%s); pause or wait for it", id, act.run.ID)}
		}
		if j := o.lanes.jobOf(id); j != nil {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning, Message: fmt.Sprintf("the daemon is %s; wait for it", j.what)}
		}
		f.Status = progress.Pending
		c := o.counters[id]
		c.Failures = 0
		c.CoderSession = ""
		// A person looked at it: its test is checked again (they may have
		// fixed it, and the record of frozen tests follows them).
		c.Red, c.RedDetail = string(statemachine.RedDue), ""
		c.Base, c.BaseHead = "", ""
		o.refreeze("", verb+" by ctl")
		if note != "" {
			c.Note = note
		}
		o.setCounters(id, c)
		o.pending.FeatureList = o.canonical.Marshal()
		o.persistList()
		o.opts.Log.Info("feature reopened", zap.String("feature", id), zap.String("by", verb), zap.String("note", note))
		o.trace(control.Trace{Type: control.TraceCorrection, Source: control.SourceUser, Context: control.TraceContext{Feature: id}, Parent: o.answered(id),
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s reopened by ctl %s", id, verb), WhatWasCorrect: note, Why: "a person looked at it"}})
		// Its attempts start over: the next is a new node of the graph.
		c = o.counters[id]
		c.AttemptTrace, c.AttemptNo, c.BlockTrace = "", 0, ""
		o.setCounters(id, c)
		o.persist()
		o.afterListChange(o.lanes.home)
		return nil
	})
}

// Skip implements control.Loop: the feature is set aside as blocked, by a
// person's choice (not counted against the session's blocked limit).
func (o *Orchestrator) Skip(ctx context.Context, id string) error {
	return o.do(ctx, func() error {
		f, err := o.feature(id)
		if err != nil {
			return err
		}
		if f.Tested {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: "already_tested", Message: fmt.Sprintf("%s is already tested", id)}
		}
		f.Status = progress.Blocked
		c := o.counters[id]
		c.LastFailure = "skipped by ctl"
		o.setCounters(id, c)
		o.pending.FeatureList = o.canonical.Marshal()
		o.persistList()
		o.trace(control.Trace{Type: control.TraceCorrection, Source: control.SourceUser, Context: control.TraceContext{Feature: id}, Parent: o.answered(id),
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s set aside by ctl skip", id), Why: "a person's choice"}})
		switch act, j := o.lanes.activeOf(id), o.lanes.jobOf(id); {
		case act != nil:
			act.interrupt = "feature skipped by ctl"
			act.cancel()
			return nil
		case j != nil:
			// The daemon's own work on it (a verdict, a test check) is
			// moot: stop it, whole.
			j.interrupt = "feature skipped by ctl"
			j.cancel()
			return nil
		}
		o.afterListChange(o.lanes.home)
		return nil
	})
}

func (o *Orchestrator) feature(id string) (*progress.Feature, error) {
	if o.canonical == nil {
		return nil, &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeNoFeatureList, Message: "there is no feature list yet"}
	}
	f := o.canonical.Feature(id)
	if f == nil {
		return nil, &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownFeat, Message: fmt.Sprintf("no feature %q in the feature list", id)}
	}
	return f, nil
}
