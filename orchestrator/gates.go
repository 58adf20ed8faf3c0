package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

var _ control.GateBackend = (*Orchestrator)(nil)

// gates is what the hooks ask about, guarded by its own lock so that a hook
// is answered in milliseconds even while the loop is busy (re-running a
// feature's test, for instance). The loop publishes the canonical list into
// it and registers each run; hooks add what they saw.
type gates struct {
	mu    sync.Mutex
	modes guard.Modes
	list  *progress.List
	runs  map[string]*runGates
}

// runGates is what the gates know of one run.
type runGates struct {
	actor      guard.Actor
	commands   []guard.TestRecord
	stopBlocks int
	live       bool
}

func newGates(modes guard.Modes) *gates {
	return &gates{modes: modes, runs: map[string]*runGates{}}
}

func (g *gates) setList(l *progress.List) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l != nil {
		l = l.Clone()
	}
	g.list = l
}

func (g *gates) register(a guard.Actor) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs[a.Run] = &runGates{actor: a}
}

func (g *gates) forget(run string) *runGates {
	g.mu.Lock()
	defer g.mu.Unlock()
	rg := g.runs[run]
	delete(g.runs, run)
	return rg
}

func (g *gates) isLive(run string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	rg := g.runs[run]
	return rg == nil || rg.live // a forgotten run is over: nothing to kill
}

func (g *gates) commandsOf(run string) []guard.TestRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rg := g.runs[run]; rg != nil {
		return append([]guard.TestRecord(nil), rg.commands...)
	}
	return nil
}

// Hook implements control.GateBackend: one hook event of a run.
func (o *Orchestrator) Hook(ctx context.Context, req control.HookRequest) (control.HookResponse, error) {
	p, err := guard.ParsePayload(req.Event, req.Payload)
	if err != nil {
		return control.HookResponse{}, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: "bad_payload", Message: err.Error()}
	}
	actor := guard.Actor{Role: req.Role, Feature: req.Feature, Run: req.Run}
	g := o.gates
	g.mu.Lock()
	rg := g.runs[req.Run]
	if rg == nil {
		rg = &runGates{actor: actor} // an interactive session or a run of a previous daemon
	}
	state := guard.State{
		ProjectDir: o.opts.Project.Dir, List: g.list, Commands: rg.commands, StopBlocks: rg.stopBlocks,
		Protected: o.protected(),
	}
	var d *guard.Decision
	var rec *guard.TestRecord
	switch p.Event {
	case "PreToolUse":
		d = guard.PreToolUse(g.modes, actor, state, p)
	case "Stop", "SubagentStop":
		d = guard.Stop(g.modes, actor, state, p)
		if d.Blocks() {
			rg.stopBlocks++
		}
	case "PostToolUse", "PostToolUseFailure":
		test := ""
		if g.list != nil {
			if f := g.list.Feature(actor.Feature); f != nil {
				test = f.Test
			}
		}
		if r, ok := guard.RecordCommand(actor, test, p); ok {
			rg.commands = append(rg.commands, r)
			rec = &r
		}
	case "SessionStart":
		rg.live = true
	}
	g.mu.Unlock()

	if rec != nil {
		if err := o.st.AppendCommand(store.Command(*rec)); err != nil {
			o.log.Warn("could not record a command", zap.Error(err))
		}
	}
	if p.Event == "StopFailure" {
		o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceHook, Context: traceContext(actor),
			Event: store.TraceEvent{WhatHappened: fmt.Sprintf("the turn ended on an API error: %s", p.Error)}})
	}
	if d == nil {
		return control.HookResponse{}, nil
	}
	o.recordDecision(actor, p, d)
	return control.HookResponse{Decision: &control.HookDecision{Gate: d.Gate, Code: d.Code, Message: d.Message, Suggestion: d.Suggestion, Mode: string(d.Mode)}}, nil
}

// recordDecision keeps every denial (and every warning) as a violation.
func (o *Orchestrator) recordDecision(a guard.Actor, p *guard.Payload, d *guard.Decision) {
	what := fmt.Sprintf("%s %s was blocked by %s: %s", p.Event, p.ToolName, d.Gate, d.Message)
	if d.Mode == guard.Warn {
		what = fmt.Sprintf("%s %s broke %s (warn mode, let through): %s", p.Event, p.ToolName, d.Gate, d.Message)
	}
	o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceHook, Context: traceContext(a), Gate: d.Gate, Code: d.Code,
		Event: store.TraceEvent{WhatHappened: what, WhatWasCorrect: d.Suggestion, Why: "gate " + d.Gate}})
	o.log.Info("gate", zap.String("gate", d.Gate), zap.String("code", d.Code), zap.String("mode", string(d.Mode)),
		zap.String("role", a.Role), zap.String("feature", a.Feature), zap.String("run", a.Run))
}

func traceContext(a guard.Actor) store.TraceContext {
	return store.TraceContext{Agent: a.Role, Feature: a.Feature, Run: a.Run}
}

// trace stores a trace of this project; storage errors are logged, not
// fatal: the trace is a record, the state of record is elsewhere.
func (o *Orchestrator) trace(t store.Trace) {
	t.Project = o.opts.Project.ID
	if t.Timestamp.IsZero() {
		t.Timestamp = o.now().UTC()
	}
	if _, err := o.st.AppendTraces(t); err != nil {
		o.log.Warn("could not store a trace", zap.Error(err))
	}
}

// protected lists the daemon's own directories.
func (o *Orchestrator) protected() []string {
	return []string{o.opts.Project.StateDir, filepath.Dir(o.opts.Project.Socket)}
}

// Traces implements control.GateBackend.
func (o *Orchestrator) Traces(_ context.Context, q control.TraceQuery) ([]control.Trace, error) {
	ts, err := o.st.Traces(store.TraceFilter{Type: q.Type, Agent: q.Agent, Feature: q.Feature, Run: q.Run, Text: q.Text, Since: q.Since, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]control.Trace, 0, len(ts))
	for _, t := range ts {
		out = append(out, toWire(t, q.Level))
	}
	return out, nil
}

// Trace implements control.GateBackend.
func (o *Orchestrator) Trace(_ context.Context, id string) (control.Trace, error) {
	t, ok, err := o.st.Trace(id)
	if err != nil {
		return control.Trace{}, err
	}
	if !ok {
		return control.Trace{}, &control.APIError{HTTPStatus: http.StatusNotFound, Code: "unknown_trace", Message: fmt.Sprintf("no trace %q", id)}
	}
	return toWire(t, "full"), nil
}

// toWire renders a trace at a level of detail: metadata (who, what kind,
// when), summary (plus a one-line what happened), full (everything).
func toWire(t store.Trace, level string) control.Trace {
	w := control.Trace{ID: t.ID, Project: t.Project, Timestamp: t.Timestamp, Type: t.Type, Source: t.Source, Gate: t.Gate, Code: t.Code,
		Context: control.TraceContext(t.Context)}
	switch level {
	case "metadata":
	case "summary":
		w.Event.WhatHappened = shorten(t.Event.WhatHappened, 160)
	default:
		w.Event = control.TraceEvent(t.Event)
	}
	return w
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// hooksLiveCheck fires hooks_live_timeout after a run started.
type hooksLiveCheck struct{ runID string }

func (o *Orchestrator) armHooksLive(runID string) {
	mode := o.gates.modes.Of(guard.HooksLive)
	if mode == guard.Off || o.cfg.Agent.HooksLiveTimeout <= 0 {
		return
	}
	events := o.runEvents
	time.AfterFunc(o.cfg.Agent.HooksLiveTimeout, func() { events <- hooksLiveCheck{runID: runID} })
}

// onHooksLiveCheck kills a run whose hooks never checked in: its gates are
// not running, so nothing it does can be trusted.
func (o *Orchestrator) onHooksLiveCheck(ev hooksLiveCheck) {
	if o.active == nil || o.active.run.ID != ev.runID || o.gates.isLive(ev.runID) {
		return
	}
	run := o.active.run
	what := fmt.Sprintf("the hooks of %s did not check in within agent.hooks_live_timeout (%s)", run.ID, o.cfg.Agent.HooksLiveTimeout)
	if !o.hooksSilentViolation(run, what) {
		return
	}
	o.log.Warn("killing a run whose hooks did not check in", zap.String("run", run.ID), zap.Int("in_a_row", o.hooksSilent))
	o.active.interrupt = what
	o.active.cancel()
}

// endedSilent catches the run that ended, by itself, before its hooks-live
// check: a quick run whose hooks never checked in (hooks turned off by
// disableAllHooks, say) did its work without gates just as surely as a
// slow one. It returns why the run is not to be judged, or "".
func (o *Orchestrator) endedSilent(act *activeRun, res agents.Result) string {
	if o.gates.modes.Of(guard.HooksLive) == guard.Off || act.interrupt != "" || res.Ended == agents.EndStartFailed || o.gates.isLive(act.run.ID) {
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
	o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: guard.HooksLive, Code: "hooks_silent",
		Context: store.TraceContext{Agent: run.Role, Feature: run.Feature, Run: run.ID},
		Event:   store.TraceEvent{WhatHappened: what, WhatWasCorrect: "every run's SessionStart hook reaches the daemon", Why: "gates that are not running must not be trusted"}})
	if o.gates.modes.Of(guard.HooksLive) != guard.Enforce {
		o.log.Warn("hooks did not check in (hooks-live not enforced)", zap.String("run", run.ID))
		return false
	}
	o.hooksSilent++
	return true
}

// maxSilentHookRuns is how many runs in a row may lose their hooks before
// the session stops: a retry cures a slow start, not a broken install.
const maxSilentHookRuns = 3

// hookBinary names the binary the hooks run, for messages.
func hookBinary() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return "ctxgraphd"
}

// ingestSpool takes in what hooks recorded while the daemon was away: the
// commands they saw and the decisions they made alone become traces and
// command records, as if the daemon had answered.
func (o *Orchestrator) ingestSpool() {
	n := 0
	err := spool.Drain(o.opts.Project.StateDir, func(r spool.Record) error {
		n++
		actor := guard.Actor{Role: r.Role, Feature: r.Feature, Run: r.Run}
		p, err := guard.ParsePayload(r.Event, r.Payload)
		if err != nil {
			return nil // recorded by a hook that could not parse it either
		}
		if c, ok := guard.RecordCommand(actor, "", p); ok {
			c.Time = r.Time
			if err := o.st.AppendCommand(store.Command(c)); err != nil {
				return err
			}
		}
		if len(r.Decision) > 0 {
			var d guard.Decision
			if json.Unmarshal(r.Decision, &d) == nil {
				o.trace(store.Trace{Timestamp: r.Time, Type: store.TraceViolation, Source: store.SourceHook, Context: traceContext(actor),
					Gate: d.Gate, Code: d.Code,
					Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s %s was blocked by %s while the daemon was down: %s", p.Event, p.ToolName, d.Gate, d.Message),
						WhatWasCorrect: d.Suggestion, Why: "gate " + d.Gate + " (decided by the hook alone)"}})
			}
		}
		return nil
	})
	if err != nil {
		o.log.Warn("hook spool", zap.Error(err))
	}
	if n > 0 {
		o.log.Info("took in hook records spooled while the daemon was down", zap.Int("records", n))
	}
}
