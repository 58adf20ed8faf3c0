package orchestrator

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// hooksLiveCheck fires hooks_live_timeout after a run's first call of a
// tool its hooks gate.
type hooksLiveCheck struct{ runID string }

// hooksWatch follows a run's calls of the tools its PreToolUse hook gates
// (gates.Hooked), as its stream shows them: the hooks must show they run
// by then. Its methods are called from the runner's goroutine (seen) and
// the loop's (stop, usedHooked).
type hooksWatch struct {
	matcher string        // the run's PreToolUse matcher
	timeout time.Duration // 0: no kill for silence (hooks-live off)
	fire    func()        // sends the loop the run's hooksLiveCheck
	used    atomic.Bool   // a gated tool was called (usedGated)
	arm     sync.Once
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// newHooksWatch is the watch of runID's gated tool calls, whose PreToolUse
// matcher is matcher.
func (o *Orchestrator) newHooksWatch(runID, matcher string) *hooksWatch {
	w := &hooksWatch{matcher: matcher}
	if o.judge.Modes().Of(gates.HooksLive) == gates.Off || o.cfg.Agent.HooksLiveTimeout <= 0 {
		return w
	}
	events, quit := o.runEvents, o.quit
	w.timeout = o.cfg.Agent.HooksLiveTimeout
	w.fire = func() {
		select {
		case events <- hooksLiveCheck{runID: runID}:
		case <-quit: // the loop is gone
		}
	}
	return w
}

// seen takes a tool call of the run's stream. The first one its hooks gate
// starts the clock: Claude Code runs a call's PreToolUse hook before the
// tool, so a run whose hooks run has checked in by then, or within
// moments.
func (w *hooksWatch) seen(tool string) {
	if !gates.Hooked(w.matcher, tool) {
		return
	}
	w.used.Store(true)
	if w.fire == nil {
		return
	}
	w.arm.Do(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.stopped {
			w.timer = time.AfterFunc(w.timeout, w.fire)
		}
	})
}

// stop ends the watch: the run is over.
func (w *hooksWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// usedGated reports whether the run called a tool its hooks gate.
func (w *hooksWatch) usedGated() bool { return w != nil && w.used.Load() }

// onHooksLiveCheck kills a run that called a gated tool while none of its
// hooks reached the daemon: its gates are not running, so nothing it does
// can be trusted.
func (o *Orchestrator) onHooksLiveCheck(ev hooksLiveCheck) {
	if o.cur.active == nil || o.cur.active.run.ID != ev.runID || o.judge.IsLive(ev.runID) {
		return
	}
	run := o.cur.active.run
	what := fmt.Sprintf("no hook of %s reached the daemon within agent.hooks_live_timeout (%s) of its first call of a tool the hooks gate", run.ID, o.cfg.Agent.HooksLiveTimeout)
	if !o.hooksSilentViolation(run, what) {
		return
	}
	o.log.Warn("killing a run whose hooks did not check in", zap.String("run", run.ID), zap.Int("in_a_row", o.hooksSilent))
	o.cur.active.interrupt = what
	o.cur.active.hooksKilled = true
	o.cur.active.cancel()
}

// endedSilent catches the run that ended, by itself, before its hooks-live
// check: a quick run that called a gated tool while its hooks never
// checked in (hooks turned off by disableAllHooks, say) did its work
// without gates just as surely as a slow one. A run that called none did
// nothing a gate judges. It returns why the run is not to be judged, or
// "".
func (o *Orchestrator) endedSilent(act *activeRun, res agents.Result) string {
	if o.judge.Modes().Of(gates.HooksLive) == gates.Off || act.interrupt != "" || res.Ended == agents.EndStartFailed || res.StartupFailure != "" || !act.hooks.usedGated() || o.judge.IsLive(act.run.ID) {
		return ""
	}
	what := fmt.Sprintf("%s called tools the hooks gate, and none of its hooks ever reached the daemon", act.run.ID)
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
		Event:   store.TraceEvent{WhatHappened: what, WhatWasCorrect: "a run's hooks reach the daemon before the tools they gate run", Why: "gates that are not running must not be trusted"}})
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
