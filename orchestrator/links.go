package orchestrator

import (
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// The context graph's nodes are traces, linked by their parent: a
// feature's start, its attempts, each attempt's runs (their handoffs), and
// under a run what happened in it (a tool call refused, a verdict). What
// concerns a feature but no run hangs from its current attempt, or from
// the feature itself; a person's correction hangs from the block it
// answers. The loop keeps the feature's nodes in its counters, so that the
// links survive a restart.

// Tasks of the traces that are the graph's structural nodes.
const (
	taskFeature = "feature"
	taskAttempt = "attempt"
)

// trace stores a trace of this project and returns it with its id. A
// trace about a feature and no run, with no parent of its own, hangs from
// the feature's current node. Storage errors are logged, not fatal: the
// trace is a record, the state of record is elsewhere.
func (o *Orchestrator) trace(t control.Trace) control.Trace {
	if t.Parent == "" && t.Context.Run == "" && t.Context.Feature != "" {
		t.Parent = o.featureNode(t.Context.Feature)
	}
	return o.opts.Judge.Trace(t)
}

// featureNode is where what concerns a feature now hangs: its current
// attempt, or the feature itself before its first.
func (o *Orchestrator) featureNode(id string) string {
	if c := o.counters[id]; c.AttemptTrace != "" {
		return c.AttemptTrace
	}
	return o.featureRoot(id)
}

// featureRoot is the feature's node, recorded when something first
// concerns it.
func (o *Orchestrator) featureRoot(id string) string {
	c := o.counters[id]
	if c.Trace != "" {
		return c.Trace
	}
	what := id + " taken up"
	if f := o.canonical.Feature(id); f != nil && f.Title != "" {
		what += ": " + f.Title
	}
	t := o.opts.Judge.Trace(control.Trace{Type: control.TraceTransition, Source: control.SourceAuto,
		Context: control.TraceContext{Feature: id, Task: taskFeature}, Event: control.TraceEvent{WhatHappened: what}})
	if t.ID != "" {
		c = o.counters[id]
		c.Trace = t.ID
		o.setCounters(id, c)
	}
	return t.ID
}

// attemptNode is the node of the feature's attempt n, recorded when its
// first run starts; a run redone after an interruption stays in the same
// attempt, and a person's retry starts new ones.
func (o *Orchestrator) attemptNode(id string, n int) string {
	if c := o.counters[id]; c.AttemptTrace != "" && c.AttemptNo == n {
		return c.AttemptTrace
	}
	root := o.featureRoot(id)
	t := o.opts.Judge.Trace(control.Trace{Type: control.TraceTransition, Source: control.SourceAuto, Parent: root,
		Context: control.TraceContext{Feature: id, Task: taskAttempt, Attempt: n},
		Event:   control.TraceEvent{WhatHappened: fmt.Sprintf("%s attempt %d begins", id, n)}})
	if t.ID != "" {
		c := o.counters[id]
		c.AttemptTrace, c.AttemptNo = t.ID, n
		o.setCounters(id, c)
	}
	return t.ID
}

// runNode records a run's handoff, the node what happens in the run hangs
// from, and tells the judge, so that the run's hooks' traces hang from it
// too.
func (o *Orchestrator) runNode(run *store.Run, cmd agents.Command) {
	parent := ""
	if run.Feature != "" {
		parent = o.attemptNode(run.Feature, run.Attempt)
	}
	what := fmt.Sprintf("%s started as %s: %s", run.ID, run.Role, cmd.Task)
	if run.Feature != "" {
		what += fmt.Sprintf(" %s, attempt %d", run.Feature, run.Attempt)
	}
	if run.Resume {
		what += ", resuming the coding session"
	}
	t := o.opts.Judge.Trace(control.Trace{Type: control.TraceHandoff, Source: control.SourceAuto, Parent: parent,
		Context: control.TraceContext{Agent: run.Role, Feature: run.Feature, Run: run.ID, Task: cmd.Task, Attempt: run.Attempt},
		Event:   control.TraceEvent{WhatHappened: what, Why: fmt.Sprintf("its command carried %d line(s) of precedent", len(cmd.Precedent))}})
	run.Trace = t.ID
	o.opts.Judge.Link(run.ID, judge.RunLink{Trace: t.ID, Attempt: run.Attempt})
}

// answered is what a person's correction of a feature answers: its last
// block, or where the feature stands.
func (o *Orchestrator) answered(id string) string {
	if c := o.counters[id]; c.BlockTrace != "" {
		return c.BlockTrace
	}
	return o.featureNode(id)
}

// tracesTransition reports whether a move of the session is a trace of
// its own: the moves a person is told about, and a pause.
func tracesTransition(from, to statemachine.State) bool {
	_, told := sessionEvents[to]
	return from != to && (told || to == statemachine.Paused)
}
