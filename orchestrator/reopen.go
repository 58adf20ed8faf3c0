package orchestrator

// Blaming the right feature. A tested feature's frozen test that fails on
// a claim's candidate is the claim's doing only when it passes without the
// claim's change and fails with it twice (judge.Regression.Blame). When it
// fails without the change too, or fails and passes on the same tree, the
// earlier feature's own verdict did not hold (a time bomb set off since, a
// flaky test, a change in the environment): charging the claim would block
// whichever honest feature came next. The earlier feature is reopened
// instead, and the claim is judged as if it were not tested.

import (
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// The codes of the traces of a reopening: the earlier feature's (a
// violation of tested-needs-evidence: its tested: true is taken back) and
// the claim's (a decision: it was not charged).
const (
	codeReopened   = "tested_reopened"
	codeFlaky      = "flaky_test"
	codeNotCharged = "not_charged"
	// codeSelectionMissed: a full sweep found a test failing that a
	// selected sweep had skipped, and the bisection blamed the landing
	// that broke it (judge.Miss).
	codeSelectionMissed = "selection_missed"
)

// reopening is a feature tested before whose verdict a claim's sweep
// found no longer holds, for the loop to apply (reopenTested): its counters as
// they are to be (the failure charged, unless the machine was at fault,
// and its diagnosis), the traces of both sides, and why it is blocked
// instead when its retries are used up ("": it goes back to pending).
type reopening struct {
	feature  string
	counters store.FeatureCounters
	traces   []control.Trace
	code     string // the code of its trace, for the log
	block    string
}

// reopenings takes back tested: true from each feature of broken (not
// the claim's doing: judge.Judgement.Reopen), found by claimant's run. Its
// failure is its own attempt's (statemachine.Reopen): it goes back to
// pending and is coded again, told why, or is blocked once its retries
// are used up. Both sides are traced: ctl why and the report say it. The
// tests' output is kept as the feature's evidence; the rest is returned
// for the loop to apply (reopenTested).
func (o *Orchestrator) reopenings(l *lane, claimant string, run store.Run, broken []judge.Regression) []reopening {
	var out []reopening
	for _, b := range broken {
		f := o.canonical.Feature(b.Feature)
		if f == nil || !f.Tested {
			continue // a person settled it meanwhile
		}
		c := o.counters[b.Feature]
		why, code, shown := reopenReason(claimant, b)
		var logs []string
		tag := claimant
		if run.ID == "" {
			tag = "last-sweep" // the session's last sweep: no claim
		}
		for _, e := range []struct {
			what string
			r    *judge.TestResult
		}{{"sweep-of-" + tag, &b.Test}, {"without-" + tag, b.Alone}, {"sweep-of-" + tag + "-again", b.Again}} {
			if e.r == nil || run.ID == "" && e.what == "without-"+tag { // (the tip is the tree without a claim)
				continue
			}
			if l, err := o.opts.Judge.WriteEvidence(b.Feature, c.Failures+1, e.what, *e.r); err == nil {
				logs = append(logs, l)
			} else {
				o.opts.Log.Warn("could not keep a reopened feature's test output", zap.String("feature", b.Feature), zap.Error(err))
			}
		}
		note := ""
		if len(logs) > 0 {
			note = fmt.Sprintf(" (output in %s)", strings.Join(logs, ", "))
		}
		// What the machine kept from running (a runner gone, a disk full)
		// is no one's failure: the feature is reopened uncharged, and its
		// next verdict stops the session for a person, with the fix, as
		// any test the machine keeps from running does.
		machine := b.Test.Env != nil || (b.Alone != nil && b.Alone.Env != nil)
		// A test a landing's change broke is that landing's feature's
		// failure, not its own (withCulprits).
		innocent := b.Miss != nil && b.Miss.Feature != "" && b.Miss.Feature != b.Feature
		a := statemachine.Reopen(o.decisionInput(l, nil), b.Feature, why)
		d := diagnose.Read(shown.Command, shown.ExitCode, shown.Output)
		d.Message = fmt.Sprintf("%s's test passed its verdict but no longer passes on the branch: %s", b.Feature, firstNonEmpty(d.Message, shown.Summary()))
		if !machine && !innocent {
			c.Failures++
		}
		c.LastFailure = why
		c.Diagnosis = &d
		// Tested names a commit; this one's verdict no longer holds. The
		// commit stays in the history and under its tested ref.
		c.Commit, c.Branch, c.OffBranch = "", "", ""
		r := reopening{feature: b.Feature, counters: c, code: code}
		r.traces = append(r.traces, control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: code,
			Context: control.TraceContext{Agent: string(role.Tester), Feature: b.Feature},
			Event: control.TraceEvent{WhatHappened: why + note,
				WhatWasCorrect: "a tested feature's frozen test passes on the branch, whenever and however often it runs",
				Why:            "tested must mean tested on the branch a person reads, not only at its verdict"}})
		if run.ID != "" { // a claim's sweep, not the session's last
			r.traces = append(r.traces, control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: codeNotCharged,
				Context: control.TraceContext{Agent: string(role.Tester), Feature: claimant, Run: run.ID},
				Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s was not charged with the failing frozen test of %s, tested before it: %s", claimant, b.Feature, why),
					Why: "a claim is charged only with what its own change broke"}})
		}
		if a.Kind == statemachine.BlockFeature && !machine && !innocent {
			r.block = a.Reason
		}
		out = append(out, r)
	}
	return out
}

// reopenTested applies the reopenings of claimant's verdict (settle), in
// order: each feature's counters and traces, then its block, or its
// tested: true taken back and the list written.
func (o *Orchestrator) reopenTested(claimant string, rs []reopening) {
	changed := false
	for _, r := range rs {
		o.setCounters(r.feature, r.counters)
		for _, t := range r.traces {
			o.trace(t)
		}
		o.opts.Log.Warn("a tested feature's verdict did not hold; reopened", zap.String("feature", r.feature), zap.String("found_by", claimant), zap.String("code", r.code))
		if r.block != "" {
			o.block(r.feature, r.block, true)
			continue
		}
		f := o.canonical.Feature(r.feature)
		f.Tested, f.Status = false, progress.Pending
		changed = true
	}
	if changed {
		o.pending.FeatureList = o.canonical.Marshal()
		o.persistList()
	}
}

// reopenReason says why b's feature is reopened, the code of its trace,
// and the test run its next coder is told about.
func reopenReason(claimant string, b judge.Regression) (why, code string, shown judge.TestResult) {
	if m := b.Miss; m != nil && m.Feature != "" {
		finder := claimant + "'s full sweep"
		if claimant == lastSweep {
			finder = lastSweep
		}
		missed := fmt.Sprintf("selection missed %s at landing %d: %s's change, landed there, broke its frozen test (%s), and that landing's sweep skipped it; %s found it and bisected it to that landing (%s)",
			m.Of, m.Landing, m.Feature, b.Test.Command, finder, b.Test.Summary())
		if b.Feature == m.Feature {
			return fmt.Sprintf("%s reopened: %s; make %s's test pass again with %s's change", b.Feature, missed, m.Of, b.Feature), codeSelectionMissed, b.Test
		}
		return fmt.Sprintf("%s reopened, not charged: %s; %s is reopened to mend it", b.Feature, missed, m.Feature), codeSelectionMissed, b.Test
	}
	if b.Blame() == judge.BlameFlaky {
		return fmt.Sprintf("%s reopened: its frozen test (%s) is flaky: on %s's candidate it failed, then passed, and it passes without %s's change; a test that passes and fails on the same tree proves nothing, so %s's verdict does not hold (%s)",
			b.Feature, b.Test.Command, claimant, claimant, b.Feature, b.Test.Summary()), codeFlaky, b.Test
	}
	return fmt.Sprintf("%s reopened: its frozen test (%s) fails on the branch without %s's change too, as on %s's candidate: it no longer passes on the branch (a time-dependent test, a flaky one, or a change in the environment), so %s's verdict does not hold (%s)",
		b.Feature, b.Test.Command, claimant, claimant, b.Feature, b.Alone.Summary()), codeReopened, *b.Alone
}
