package orchestrator

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// hooksLiveCheck asks the loop whether a run's hooks have checked in: a
// gated call of the run was answered without them, or has been going on
// for hooks_live_timeout.
type hooksLiveCheck struct{ runID string }

// hooksWatch follows a run's calls of the tools its PreToolUse hook gates
// (gates.Hooked), as its stream shows them, from the runner's goroutine
// (seen), for the loop's (stop, usedGated). Claude Code runs a call's
// PreToolUse hook, and waits for the daemon's answer, before the tool
// runs: when the stream shows the call's result, a run whose hooks run
// has checked in. A file tool's call that failed may have been refused on
// its input before its hook, and did nothing (gates.FailsInert): it is not
// counted. A call still going on checks the run after hooks_live_timeout.
type hooksWatch struct {
	matcher string      // the run's PreToolUse matcher
	live    func() bool // whether a hook of the run reached the daemon
	// check sends the loop the run's hooksLiveCheck; nil when hooks-live
	// is off.
	check   func()
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]string // gated calls without a result: id → tool
	counted bool              // a gated call did something (usedGated)
	timer   *time.Timer
	stopped bool
}

// watchHooks is the watch of runID's gated tool calls in l, whose
// PreToolUse matcher is matcher: with hooks-live on, a gated call
// answered without the run's hooks, or going on for timeout, sends the
// loop (events) the run's hooksLiveCheck, unless the loop is gone (quit).
func (l *lane) watchHooks(runID, matcher string, timeout time.Duration, events chan<- any, quit <-chan struct{}) *hooksWatch {
	j := l.deps.judge
	w := &hooksWatch{matcher: matcher, live: func() bool { return j.IsLive(runID) }, pending: map[string]string{}}
	if j.Modes().Of(gates.HooksLive) == gates.Off {
		return w
	}
	w.timeout = timeout
	w.check = func() {
		select {
		case events <- hooksLiveCheck{runID: runID}:
		case <-quit: // the loop is gone
		}
	}
	return w
}

// seen takes an event of the run's stream: a tool call, or a call's
// result; it ignores the others.
func (w *hooksWatch) seen(ev agents.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Kind {
	case "tool_use":
		if !gates.Hooked(w.matcher, ev.Tool) {
			return
		}
		w.pending[ev.ToolUseID] = ev.Tool
		if w.timer == nil && !w.stopped && w.check != nil && w.timeout > 0 {
			w.timer = time.AfterFunc(w.timeout, w.check)
		}
	case "tool_result":
		tool, ok := w.pending[ev.ToolUseID]
		if !ok {
			return
		}
		delete(w.pending, ev.ToolUseID)
		if !(ev.IsError && gates.FailsInert(tool)) {
			w.counted = true
			if !w.stopped && w.check != nil && !w.live() {
				go w.check() // answered without its hook: at once
			}
		}
		if len(w.pending) == 0 && w.timer != nil {
			// Nothing gated is going on: the clock starts again at the
			// next gated call.
			w.timer.Stop()
			w.timer = nil
		}
	}
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

// usedGated reports whether the run called a tool its hooks gate and the
// call did something, or may have: it was answered, and not as a file
// tool's failure, or it never was.
func (w *hooksWatch) usedGated() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counted || len(w.pending) > 0
}

// onHooksLiveCheck kills a run that called a gated tool while none of its
// hooks reached the daemon: its gates are not running, so nothing it does
// can be trusted. l is the run's lane.
func (o *Orchestrator) onHooksLiveCheck(l *lane, ev hooksLiveCheck) {
	if l.active == nil || l.active.run.ID != ev.runID || l.deps.judge.IsLive(ev.runID) {
		return
	}
	run := l.active.run
	what := fmt.Sprintf("%s called tools the hooks gate and no hook of it reached the daemon (by the call's answer, or within agent.hooks_live_timeout, %s)", run.ID, o.opts.Config.Agent.HooksLiveTimeout)
	if !o.hooksSilentViolation(run, what) {
		return
	}
	o.opts.Log.Warn("killing a run whose hooks did not check in", zap.String("run", run.ID), zap.Int("in_a_row", o.hooksSilent))
	l.active.interrupt = what
	l.active.hooksKilled = true
	l.active.cancel()
}

// endedSilent catches the run that ended, by itself, before its hooks-live
// check: a quick run that did gated work while its hooks never checked in
// (hooks turned off by disableAllHooks, say) did it without gates just as
// surely as a slow one. It returns why act, l's run, is not to be judged,
// or "".
func (o *Orchestrator) endedSilent(l *lane, act *activeRun, res agents.Result) string {
	if act.interrupt != "" || res.Ended == agents.EndStartFailed || res.StartupFailure != "" || !l.ungated(act, res) {
		return ""
	}
	what := fmt.Sprintf("%s did work the hooks gate, and none of its hooks ever reached the daemon", act.run.ID)
	if !o.hooksSilentViolation(act.run, what) {
		return ""
	}
	return what
}

// untrusted reports whether nothing act, l's run, wrote may be taken: it
// did gated work without its hooks (ungated), and hooks-live is enforced.
func (l *lane) untrusted(act *activeRun, res agents.Result) bool {
	return l.deps.judge.Modes().Of(gates.HooksLive) == gates.Enforce && l.ungated(act, res)
}

// ungated reports whether the run did work its hooks gate while none of
// them reached the daemon (hooks-live not off): it called a gated tool
// (hooksWatch.usedGated), or it is a tester that ended by itself, which
// it does through its Stop hook, a gate (tester-must-test). A run that did
// neither (its text alone, a Glob, the daemon's MCP tools) did nothing a
// gate judges.
func (l *lane) ungated(act *activeRun, res agents.Result) bool {
	if j := l.deps.judge; j.Modes().Of(gates.HooksLive) == gates.Off || j.IsLive(act.run.ID) {
		return false
	}
	testerEnd := role.Role(act.run.Role) == role.Tester && res.Ended == agents.EndExited && res.ExitCode == 0
	return act.hooks.usedGated() || testerEnd
}

// hooksSilentViolation records a run whose gates were not running and, in
// enforce mode, counts it; it reports whether the run must be treated as
// interrupted.
func (o *Orchestrator) hooksSilentViolation(run store.Run, what string) bool {
	o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.HooksLive, Code: "hooks_silent",
		Context: control.TraceContext{Agent: run.Role, Feature: run.Feature, Run: run.ID},
		Event:   control.TraceEvent{WhatHappened: what, WhatWasCorrect: "a run's hooks reach the daemon before the tools they gate run", Why: "gates that are not running must not be trusted"}})
	if o.opts.Judge.Modes().Of(gates.HooksLive) != gates.Enforce {
		o.opts.Log.Warn("hooks did not check in (hooks-live not enforced)", zap.String("run", run.ID))
		return false
	}
	o.hooksSilent++
	return true
}

// maxSilentHookRuns is how many runs in a row may lose their hooks before
// the session stops: a retry cures a slow start, not a broken install.
const maxSilentHookRuns = 3
