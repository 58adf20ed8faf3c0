package orchestrator

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// hooksLiveCheck fires hooks_live_timeout after a run started.
type hooksLiveCheck struct{ runID string }

func (o *Orchestrator) armHooksLive(runID string) {
	mode := o.judge.Modes().Of(gates.HooksLive)
	if mode == gates.Off || o.cfg.Agent.HooksLiveTimeout <= 0 {
		return
	}
	events, quit := o.runEvents, o.quit
	t := time.AfterFunc(o.cfg.Agent.HooksLiveTimeout, func() {
		select {
		case events <- hooksLiveCheck{runID: runID}:
		case <-quit: // the loop is gone
		}
	})
	if o.cur.active != nil {
		o.cur.active.liveTimer = t
	}
}

// onHooksLiveCheck kills a run whose hooks never checked in: its gates are
// not running, so nothing it does can be trusted.
func (o *Orchestrator) onHooksLiveCheck(ev hooksLiveCheck) {
	if o.cur.active == nil || o.cur.active.run.ID != ev.runID || o.judge.IsLive(ev.runID) {
		return
	}
	run := o.cur.active.run
	what := fmt.Sprintf("the hooks of %s did not check in within agent.hooks_live_timeout (%s)", run.ID, o.cfg.Agent.HooksLiveTimeout)
	if !o.hooksSilentViolation(run, what) {
		return
	}
	o.log.Warn("killing a run whose hooks did not check in", zap.String("run", run.ID), zap.Int("in_a_row", o.hooksSilent))
	o.cur.active.interrupt = what
	o.cur.active.hooksKilled = true
	o.cur.active.cancel()
}

// endedSilent catches the run that ended, by itself, before its hooks-live
// check: a quick run whose hooks never checked in (hooks turned off by
// disableAllHooks, say) did its work without gates just as surely as a
// slow one. It returns why the run is not to be judged, or "".
func (o *Orchestrator) endedSilent(act *activeRun, res agents.Result) string {
	if o.judge.Modes().Of(gates.HooksLive) == gates.Off || act.interrupt != "" || res.Ended == agents.EndStartFailed || res.StartupFailure != "" || o.judge.IsLive(act.run.ID) {
		return ""
	}
	what := fmt.Sprintf("%s ended without its hooks ever checking in (no SessionStart reached the daemon)", act.run.ID)
	if !o.hooksSilentViolation(act.run, what) {
		return ""
	}
	return what
}

// hooksSilentViolation records a run whose gates were not running and, in
// enforce mode, counts it; it reports whether the run must be treated as
// interrupted.
func (o *Orchestrator) hooksSilentViolation(run store.Run, what string) bool {
	o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gates.HooksLive, Code: "hooks_silent",
		Context: store.TraceContext{Agent: run.Role, Feature: run.Feature, Run: run.ID},
		Event:   store.TraceEvent{WhatHappened: what, WhatWasCorrect: "every run's SessionStart hook reaches the daemon", Why: "gates that are not running must not be trusted"}})
	if o.judge.Modes().Of(gates.HooksLive) != gates.Enforce {
		o.log.Warn("hooks did not check in (hooks-live not enforced)", zap.String("run", run.ID))
		return false
	}
	o.hooksSilent++
	return true
}

// maxSilentHookRuns is how many runs in a row may lose their hooks before
// the session stops: a retry cures a slow start, not a broken install.
const maxSilentHookRuns = 3
