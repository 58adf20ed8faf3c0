package orchestrator

// A failure that is the machine's or the confinement's, not the code's: it
// stops the session for a person with the fix, and charges no attempt.

import (
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
	"go.uber.org/zap"
)

// testEnvironment is what of the machine or the confinement kept a
// tester's run from testing its feature, nil when nothing did: the
// daemon's own run of the test failed for it, or a test command of the
// tester's did and the daemon's run does not vouch for a claim. A change
// set that broke a rule is the tester's doing whatever else happened.
func (o *Orchestrator) testEnvironment(ev runJudged, jd judge.Judgement) *diagnose.Environment {
	if jd.Blocks() {
		return nil
	}
	if jd.Test != nil && jd.Test.Env != nil {
		return jd.Test.Env
	}
	if jd.Test != nil && jd.Test.Passed() && ev.claim != nil {
		return nil // tested after all: the verdict decides
	}
	return o.opts.Judge.Environment(ev.run.ID)
}

// environmentStop records that the machine or the confinement, not an
// agent, kept a feature's test from running (r: the daemon's own run of
// it, nil when a run's test command showed it), keeps the daemon's output
// for the person, and returns why the session stops, with the fix.
func (o *Orchestrator) environmentStop(run store.Run, e *diagnose.Environment, r *judge.TestResult) string {
	id := run.Feature
	why := fmt.Sprintf("%s's test could not run for want of something on this machine, not for its code (nothing charged): %s",
		id, e.Explain(o.opts.Config.Sandbox.AllowedDomains))
	note := ""
	if r != nil {
		if log, err := o.opts.Judge.WriteEvidence(id, run.Attempt, "environment", *r); err != nil {
			o.opts.Log.Warn("could not keep the test's output", zap.Error(err))
		} else {
			note = evidenceNote(log)
		}
	}
	o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: "test_environment",
		Context: control.TraceContext{Agent: run.Role, Feature: id, Run: run.ID},
		Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s's test could not run in %s: %s (%s)%s", id, e.Place, e.Line, e.Kind, note),
			WhatWasCorrect: e.Explain(o.opts.Config.Sandbox.AllowedDomains), Why: "no attempt can fix the machine: a person must"}})
	o.opts.Log.Warn("a feature's test could not run here; the session stops for a person", zap.String("feature", id), zap.String("kind", string(e.Kind)),
		zap.String("place", string(e.Place)), zap.String("line", e.Line))
	return why
}
