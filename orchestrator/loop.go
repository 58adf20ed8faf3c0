package orchestrator

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// maxStepsPerDecision bounds the decide-act loop of one step: blocking a
// feature leads to another decision, but never to more than one per feature.
const maxStepsPerDecision = 10000

// step decides what to do after out (nil: decide afresh) and does it, in
// l, the lane of the event in flight; with lanes, it then starts work in
// as many more as are free and have work.
func (o *Orchestrator) step(l *lane, out *statemachine.Outcome) {
	defer o.persist() // whatever else happened rides with a final persist
	if o.canonical != nil {
		o.closeSettledLane(l)
	}
	o.decide(l, out)
	if o.lanesMode() {
		o.fillLanes()
	}
}

// fillLanes starts work in lanes while fewer than limits.parallel have
// some, the job that judges and moves the branch is not in flight (it
// goes one at a time, and a lane is made from the branch) and Decide
// names a feature to start. The lanes' checks of their tests run beside
// each other.
func (o *Orchestrator) fillLanes() {
	for o.lanes.job == nil && o.lanes.home.active == nil && o.lanes.atWork() < o.opts.Config.Limits.Parallel {
		before := o.lanes.atWork()
		o.decide(nil, nil) // the action names the feature, and its lane
		if o.lanes.job == nil && o.lanes.atWork() == before {
			return // nothing started
		}
	}
}

// decide is step's decision and action in l; l nil: lanes are being
// filled, the action names its lane, and the session's state is another
// lane's.
func (o *Orchestrator) decide(l *lane, out *statemachine.Outcome) {
	filling := l == nil
	for i := 0; i < maxStepsPerDecision; i++ {
		if o.lanes.job != nil || (l != nil && o.lanes.busy(l)) {
			return
		}
		state := statemachine.State(o.session.State)
		if o.stopAfter {
			o.stopAfter = false
			o.transition(l, statemachine.Stop, "", "stopped by ctl")
			return
		}
		// A pause holds what would start next, not what ended: the outcome
		// of a run that ends while the session is paused (or pausing) is
		// decided and counted like any other, so that a failure is
		// charged and its retry told why once the session resumes.
		holding := o.session.PauseRequested || state == statemachine.Paused
		if state == statemachine.Stopped || state == statemachine.Waiting || (holding && out == nil) {
			o.pauseIfRequested(l)
			return
		}
		if !filling && (state == statemachine.Init || state == statemachine.Code || state == statemachine.Test) {
			// The run of this state has ended: the session is choosing what
			// comes next, and the log says so.
			if !o.transition(l, statemachine.Advance, o.session.Feature, "run ended") {
				return
			}
			state = statemachine.Next
		}
		if o.listFile.problem != "" && !o.listFile.problemFromAgent {
			// A person's list is there but broken, half-written perhaps:
			// an initializer would overwrite their work, an agent would
			// work from a list they are changing. Hold until it is fixed.
			return
		}
		a := statemachine.Decide(o.decisionInput(l, out))
		out = nil
		o.opts.Log.Debug("decided", zap.String("action", a.String()))
		o.count(a)
		if holding && a.Kind != statemachine.BlockFeature && a.Kind != statemachine.StopSession {
			// Held: a resume decides again, from the counters just
			// committed, and comes to the same start.
			o.pauseIfRequested(l)
			return
		}
		switch a.Kind {
		case statemachine.BlockFeature:
			o.block(a.Feature, a.Reason, !a.NotCharged)
			continue
		case statemachine.CheckTest:
			if in := o.laneFor(l, a.Feature); in != nil {
				o.checkTest(in, a)
			}
			return
		case statemachine.SpawnInitializer, statemachine.SpawnCoder, statemachine.SpawnTester:
			if in := o.laneFor(l, a.Feature); in != nil {
				o.spawn(in, a)
			}
			return
		case statemachine.WaitForLanes:
			return // a lane's end decides again
		case statemachine.FinishAll:
			if o.sweepTip(l) {
				return // its end decides again
			}
			if state != statemachine.Done || o.session.Message != a.Reason {
				o.transition(l, statemachine.Finish, "", a.Reason)
				o.opts.Log.Info("session done", zap.String("why", a.Reason))
			}
			return
		case statemachine.StopSession:
			o.transition(l, statemachine.Stop, "", a.Reason)
			o.opts.Log.Warn("session stopped; a person is needed", zap.String("why", a.Reason))
			return
		case statemachine.WaitAndRetry:
			o.wait(l, a)
			return
		case statemachine.AwaitApproval:
			// A wait with no end: ctl approve ends it (Approve).
			if state != statemachine.Waiting || o.session.Message != a.Reason {
				o.transition(l, statemachine.Wait, "", a.Reason)
				o.opts.Log.Info("the plan waits for a person's approval", zap.String("how", "ctxgraphd ctl approve"))
			}
			return
		default:
			return
		}
	}
	o.opts.Log.Error("decision loop did not settle", zap.Int("steps", maxStepsPerDecision))
}

// pauseIfRequested takes the session to paused when ctl pause asked for it
// while a run (of l) was in flight.
func (o *Orchestrator) pauseIfRequested(l *lane) {
	if o.session.PauseRequested && statemachine.State(o.session.State) != statemachine.Stopped {
		o.session.PauseRequested = false
		o.transition(l, statemachine.Pause, "", "paused by ctl")
	}
}

// decisionInput is what Decide decides on, for l (nil: a lane to be).
func (o *Orchestrator) decisionInput(l *lane, out *statemachine.Outcome) statemachine.Input {
	counters := make(map[string]statemachine.Counters, len(o.counters))
	for id, c := range o.counters {
		counters[id] = statemachine.Counters{Failures: c.Failures, CostUSD: c.CostUSD, Red: statemachine.RedState(c.Red), RedDetail: c.RedDetail}
	}
	red := o.opts.Judge.Modes().Of(gates.RedBeforeGreen)
	return statemachine.Input{
		List:             o.canonical,
		Counters:         counters,
		InitFailures:     o.session.InitFailures,
		BlockedInSession: o.session.BlockedInSession,
		InFlight:         o.lanes.others(o.canonical, l),
		InFlightCapUSD:   o.lanes.inFlightCap(l),
		MaxRetries:       o.opts.Config.Limits.MaxRetries,
		MaxBlocked:       o.opts.Config.Limits.MaxBlocked,
		RunBudgetUSD:     o.opts.Config.Budget.RunUSD,
		FeatureBudgetUSD: o.opts.Config.Budget.FeatureUSD,
		SessionBudgetUSD: o.opts.Config.Budget.SessionUSD,
		SessionCostUSD:   o.tally.totalCost,
		CheckTests:       red != gates.Off,
		TestsMustFail:    red == gates.Enforce,
		AwaitApproval:    o.awaitingApproval(),
		Outcome:          out,
	}
}

// awaitingApproval reports whether the plan waits for a person's approval
// (limits.approve_plan) before any feature's work starts.
func (o *Orchestrator) awaitingApproval() bool {
	return o.opts.Config.Limits.ApprovePlan && !o.session.PlanApproved
}

// waitsForApproval reports whether the session is in the wait for the
// plan's approval: waiting, with no end, while the plan awaits it.
func (o *Orchestrator) waitsForApproval() bool {
	return statemachine.State(o.session.State) == statemachine.Waiting && o.session.WaitingUntil.IsZero() && o.awaitingApproval()
}

// count applies the counter changes of an action; they are committed with
// the action's transition, before its side effect.
func (o *Orchestrator) count(a statemachine.Action) {
	if a.CountFailure {
		c := o.counters[a.Feature]
		c.Failures++
		c.LastFailure = a.Reason
		o.setCounters(a.Feature, c)
		// A failed attempt sends the feature back to coding whatever the
		// agent left its status at: the list says so from now, so that a
		// decision taken again (after a pause, a restart) retries the
		// coder, not the tester that found it wrong.
		if f := o.canonical.Feature(a.Feature); a.Kind == statemachine.SpawnCoder && f != nil && f.Status == progress.Completed {
			f.Status = progress.InProgress
			o.pending.FeatureList = o.canonical.Marshal()
			o.writeFeatureList()
		}
	}
	if a.CountInitFailure {
		o.session.InitFailures++
	}
}

func (o *Orchestrator) setCounters(id string, c store.FeatureCounters) {
	o.counters[id] = c
	if o.pending.Counters == nil {
		o.pending.Counters = map[string]store.FeatureCounters{}
	}
	o.pending.Counters[id] = c
}

// transition moves the state machine along e, persisting the move (and all
// pending changes) before the machine itself moves; the move names l's run
// in flight, if any (l nil: none).
func (o *Orchestrator) transition(l *lane, e statemachine.Event, feature, reason string) bool {
	from := o.machine.State()
	to, err := o.machine.Target(e)
	if err != nil {
		// A bug, not an input problem: log it loudly and stay put.
		o.opts.Log.Error("refused transition", zap.Error(err))
		return false
	}
	o.tally.lastTrans++
	t := store.Transition{Seq: o.tally.lastTrans, Time: o.opts.Now().UTC(), Event: string(e), From: string(from), To: string(to), Feature: feature, Reason: reason}
	if l != nil {
		if r := l.runRecord(); r != nil {
			t.Run = r.ID
		}
	}
	o.pending.Transitions = append(o.pending.Transitions, t)
	o.session.State = string(to)
	o.session.Feature = feature
	o.session.Message = reason
	if to != statemachine.Waiting {
		o.session.WaitingUntil = time.Time{}
	}
	if err := o.persistErr(); err != nil {
		// Not persisted: do not move, do not act. The transition will be
		// decided again on the next event, or when the retry timer fires
		// (a full disk sends no event when it is freed).
		o.tally.lastTrans--
		o.pending.Transitions = o.pending.Transitions[:len(o.pending.Transitions)-1]
		o.session.State = string(from)
		o.opts.Log.Error("could not persist transition; staying put", zap.String("event", string(e)), zap.Error(err))
		o.persistFailed(err)
		return false
	}
	if err := o.machine.Fire(e); err != nil {
		o.opts.Log.Error("state machine refused a persisted transition", zap.Error(err))
	}
	o.opts.Log.Info("transition", zap.String("event", string(e)), zap.String("from", string(from)), zap.String("to", string(to)), zap.String("feature", feature), zap.String("reason", reason))
	if tracesTransition(from, to) {
		o.trace(control.Trace{Type: control.TraceTransition, Source: control.SourceAuto, Context: control.TraceContext{Feature: feature, Task: string(e)},
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("the session went from %s to %s", from, to), Why: reason}})
	}
	if kind, ok := sessionEvents[to]; ok && from != to {
		o.notify(kind, feature, reason)
	}
	if to == statemachine.Waiting || to == statemachine.Stopped {
		o.holdLanes(fmt.Sprintf("the session is %s: %s", to, reason))
	}
	return true
}

// persist flushes pending changes and the session to the store, then
// refreshes the mirror and the control snapshot.
func (o *Orchestrator) persist() {
	if err := o.persistErr(); err != nil {
		o.opts.Log.Error("could not persist state", zap.Error(err))
	}
}

// persistList is persist after a change of the canonical list, with the
// project's feature-list.json written once the store holds the change and
// before anyone is told of it (the status, ctl): a person who reads the
// status and then saves the file saves over the daemon's write, never
// under it.
func (o *Orchestrator) persistList() {
	if err := o.persistThen(o.writeFeatureList); err != nil {
		o.opts.Log.Error("could not persist state", zap.Error(err))
	}
}

// persistRetry is how soon the loop tries again after the store refused a
// write (a full disk, most often). A variable so that the tests of the
// retry wait less.
var persistRetry = 30 * time.Second

// persistFailed shows why the session is not moving and arms a retry.
func (o *Orchestrator) persistFailed(err error) {
	if o.timers.persist == nil {
		o.timers.persist = time.NewTimer(persistRetry)
	}
	o.timers.unsaved = err
	o.publish()
}

// holdingMessage is what the status says while the loop holds because the
// store refused a move (timers.unsaved).
func holdingMessage(err error) string {
	return fmt.Sprintf("the daemon cannot save its state, so it is holding: %v (a full disk? free some space; it tries again every %s)", err, persistRetry)
}

func (o *Orchestrator) persistC() <-chan time.Time {
	if o.timers.persist == nil {
		return nil
	}
	return o.timers.persist.C
}

func (o *Orchestrator) persistErr() error { return o.persistThen(nil) }

// persistThen is persistErr with then run after the store's write (or its
// failure: the file follows the canonical state in memory, as it always
// did) and before the mirror and the control snapshot are refreshed.
func (o *Orchestrator) persistThen(then func()) error {
	o.session.UpdatedAt = o.opts.Now().UTC()
	o.session.Lanes = o.lanes.records()
	c := o.pending
	sess := o.session
	c.Session = &sess
	err := o.opts.Store.Apply(c)
	if then != nil {
		then()
	}
	if err != nil {
		return err
	}
	if len(c.Transitions) > 0 {
		o.timers.unsaved = nil // the move that was held is made
	}
	o.pending = store.Batch{}
	o.writeMirror()
	o.publish()
	return nil
}

// block marks a feature blocked: its attempts are used up (charged), or
// its test makes it unworkable (not charged against the session's limit).
// Its work is kept under a ref and the work tree put back as it was when
// the feature's work began, so that the next feature starts clean.
func (o *Orchestrator) block(id, reason string, charged bool) {
	f := o.canonical.Feature(id)
	if f == nil {
		return
	}
	f.Status = progress.Blocked
	f.Tested = false
	if charged {
		o.session.BlockedInSession++
	}
	c := o.counters[id]
	c.LastFailure = reason
	kept := ""
	if l := o.lanes.clones[id]; l != nil {
		// Its work goes with its lane, kept under a ref; the project's
		// work tree never held it.
		if commit := o.closeLane(l, branch.BlockedRef(id)); commit != "" {
			kept = fmt.Sprintf("; its work is kept as %s (%s)", gitrepo.Short(commit), branch.BlockedRef(id))
		}
		c.Base, c.BaseHead = "", ""
	} else if c.Base != "" {
		o.lanes.home.recent = nil // Preserve puts files back: what comes next records the tree anew
		commit, restored, err := branch.Preserve(context.Background(), o.opts.Repo, id, reason, gitrepo.Tree(c.Base), c.BaseHead)
		switch {
		case err != nil:
			o.opts.Log.Warn("could not keep a blocked feature's work aside; it stays in the work tree", zap.String("feature", id), zap.Error(err))
		case commit != "":
			kept = fmt.Sprintf("; its work (%d files) is kept as %s (%s) and the work tree was put back as it was before it", len(restored), commit, branch.BlockedRef(id))
		}
		c.Base, c.BaseHead = "", ""
	}
	o.setCounters(id, c)
	o.pending.FeatureList = o.canonical.Marshal()
	o.persistList()
	bt := o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: "feature_blocked", Context: control.TraceContext{Feature: id},
		Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s blocked: %s%s", id, reason, kept), Why: "a person should look at it"}})
	c = o.counters[id]
	c.BlockTrace = bt.ID
	o.setCounters(id, c)
	o.persist()
	o.opts.Log.Warn("feature blocked", zap.String("feature", id), zap.String("why", reason), zap.Bool("charged", charged))
	o.notify(notify.FeatureBlocked, id, fmt.Sprintf("%s blocked: %s%s", id, reason, kept))
}

// wait holds the session after a failure that waiting cures (in l): until
// a usage limit's reset time when the run reported one, else for the
// backoff.
func (o *Orchestrator) wait(l *lane, a statemachine.Action) {
	o.session.Backoffs++
	until := waitUntil(o.opts.Now(), o.session.Backoffs, o.opts.Config.Limits, o.timers.waitFor)
	o.timers.waitFor = agents.Failure{}
	o.session.WaitingUntil = until
	o.transition(l, statemachine.Wait, a.Feature, fmt.Sprintf("%s; retrying at %s", a.Reason, until.UTC().Format(time.RFC3339)))
	if o.timers.wait != nil {
		o.timers.wait.Stop()
	}
	o.timers.wait = time.NewTimer(until.Sub(o.opts.Now()))
}

// maxUsageLimitWait is the furthest a usage limit's reset is believed to
// be: Claude's usage limits reset within a week at most. A reset said to
// be further (a run's word, or a worker's) is no reset the daemon waits
// for.
const maxUsageLimitWait = 7 * 24 * time.Hour

// waitUntil is when the n-th wait in a row ends: limits.backoff doubled
// with each, capped at limits.backoff_max, and never before the CLI's own
// next try (which honours the API's retry-after, up to backoff_max) or a
// usage limit's reset, whatever the cap: a run started before the reset
// fails again. A reset beyond maxUsageLimitWait is not believed: the
// backoff holds. What a run on a worker says is held to the same rules.
func waitUntil(now time.Time, n int, l config.Limits, f agents.Failure) time.Time {
	d := min(l.Backoff, l.BackoffMax)
	for i := 1; i < n && d < l.BackoffMax; i++ {
		if d > l.BackoffMax/2 {
			d = l.BackoffMax // and no overflow on the way there
			break
		}
		d *= 2
	}
	d = max(d, min(f.RetryAfter, l.BackoffMax))
	until := now.Add(d)
	if f.ResetsAt.After(until) && !f.ResetsAt.After(now.Add(maxUsageLimitWait)) {
		until = f.ResetsAt
	}
	return until
}

// sessionEvents are the states a person is told the session entered.
var sessionEvents = map[statemachine.State]string{
	statemachine.Done:    notify.SessionDone,
	statemachine.Stopped: notify.SessionStopped,
	statemachine.Waiting: notify.SessionWaiting,
}

// notify tells a person, if the daemon was given a way to.
func (o *Orchestrator) notify(kind, feature, message string) {
	if o.opts.Notify == nil {
		return
	}
	o.opts.Notify(notify.Event{Event: kind, Project: o.opts.Project.ID, Dir: o.opts.Project.Dir, Feature: feature, Message: message, Time: o.opts.Now().UTC()})
}
