package orchestrator

import (
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// ingestSpool takes in what hooks recorded while the daemon was away: the
// commands they saw and the decisions they made alone become traces and
// command records, as if the daemon had answered. A record is believed to
// be a run's only when it carries that run's token hash; the rest is kept
// as a person's.
func (o *Orchestrator) ingestSpool() {
	byHash := map[string]store.Run{}
	if runs, err := o.opts.Store.Runs(); err == nil {
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
			if err := o.opts.Store.AppendCommand(c); err != nil {
				return err
			}
		}
		if len(r.Decision) > 0 {
			var d control.HookDecision
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
		o.opts.Log.Warn("hook spool", zap.Error(err))
	}
	if n > 0 {
		o.opts.Log.Info("took in hook records spooled while the daemon was down", zap.Int("records", n))
	}
}
