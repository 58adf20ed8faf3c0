package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Hook implements control.GateBackend: the judge answers the hooks.
func (o *Orchestrator) Hook(ctx context.Context, token string, req control.HookRequest) (control.HookResponse, error) {
	return o.judge.Hook(ctx, token, req)
}

// IsRunProcess implements control.RunPeers.
func (o *Orchestrator) IsRunProcess(pid int) bool { return o.judge.IsRunProcess(pid) }

// Traces implements control.GateBackend.
func (o *Orchestrator) Traces(_ context.Context, q control.TraceQuery) ([]control.Trace, error) {
	if err := control.CheckTraceType(q.Type); err != nil {
		return nil, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: err.Error()}
	}
	if err := control.CheckLevel(q.Level); err != nil {
		return nil, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: err.Error()}
	}
	ts, err := o.st.Traces(store.TraceFilter{Type: q.Type, Agent: q.Agent, Feature: q.Feature, Run: q.Run, Gate: q.Gate, Text: q.Text, Since: q.Since, Until: q.Until, Limit: q.Limit})
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
		return control.Trace{}, &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownTrace, Message: fmt.Sprintf("no trace %q", id)}
	}
	return toWire(t, control.LevelFull), nil
}

// TraceLinks implements control.TraceLinksBackend: the trace in full, the
// path that led to it and what followed, each in a line (summary).
func (o *Orchestrator) TraceLinks(_ context.Context, id string) (control.TraceLinks, error) {
	l, ok, err := graph.LinksOf(o.st, id)
	if err != nil {
		return control.TraceLinks{}, err
	}
	if !ok {
		return control.TraceLinks{}, &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownTrace, Message: fmt.Sprintf("no trace %q", id)}
	}
	summary := func(ts []control.Trace) []control.Trace {
		out := make([]control.Trace, 0, len(ts))
		for _, t := range ts {
			out = append(out, toWire(t, control.LevelSummary))
		}
		return out
	}
	return control.TraceLinks{Trace: toWire(l.Trace, control.LevelFull), Path: summary(l.Path), Followed: summary(l.Followed), Next: summary(l.Next)}, nil
}

// toWire cuts a trace (the store keeps the wire's type, whole) to a level
// of detail: metadata (who, what kind, when), summary (plus a one-line
// what happened), full (everything).
func toWire(t control.Trace, level string) control.Trace {
	if t.Tool != nil {
		tool := *t.Tool // the store's copy is not the answer's
		t.Tool = &tool
	}
	switch level {
	case control.LevelMetadata:
		t.Event = control.TraceEvent{}
		if t.Tool != nil {
			t.Tool.Input = ""
		}
	case control.LevelSummary:
		t.Event = control.TraceEvent{WhatHappened: textcut.Runes(t.Event.WhatHappened, 160)}
	}
	return t
}

// ingestSpool takes in what hooks recorded while the daemon was away: the
// commands they saw and the decisions they made alone become traces and
// command records, as if the daemon had answered. A record is believed to
// be a run's only when it carries that run's token hash; the rest is kept
// as a person's.
func (o *Orchestrator) ingestSpool() {
	byHash := map[string]store.Run{}
	if runs, err := o.st.Runs(); err == nil {
		for _, r := range runs {
			if r.TokenHash != "" {
				byHash[r.TokenHash] = r
			}
		}
	}
	n := 0
	err := spool.Drain(o.opts.Project.StateDir, func(r spool.Record) error {
		n++
		actor, node := gates.Actor{}, store.Run{}
		if run, ok := byHash[r.TokenHash]; ok && r.TokenHash != "" {
			actor, node = gates.Actor{Role: run.Role, Feature: run.Feature, Run: run.ID}, run
		}
		p, err := gates.ParsePayload(r.Event, r.Payload)
		if err != nil {
			return nil // recorded by a hook that could not parse it either
		}
		if c, ok := gates.RecordCommand(actor, "", "", p); ok && actor.Run != "" {
			c.Time = r.Time
			if err := o.st.AppendCommand(c); err != nil {
				return err
			}
		}
		if len(r.Decision) > 0 {
			var d gates.Decision
			if json.Unmarshal(r.Decision, &d) == nil {
				tc := judge.TraceContext(actor)
				tc.Attempt = node.Attempt
				o.trace(control.Trace{Timestamp: r.Time, Type: control.TraceViolation, Source: control.SourceHook, Context: tc,
					Gate: d.Gate, Code: d.Code, Parent: node.Trace, Tool: judge.ToolCall(p),
					Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s %s was blocked by %s while the daemon was down: %s", p.Event, p.ToolName, d.Gate, d.Message),
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
