package orchestrator

// The verdict on a claim: the daemon's own run of the frozen test, the
// regression sweep, acceptance and the commit, or the diagnosis the next
// attempt is given.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
	"go.uber.org/zap"
)

// runJudged is a run whose outcome was judged off the loop.
type runJudged struct {
	run     store.Run
	res     agents.Result
	out     statemachine.Outcome
	claimed bool   // the tester claimed tested: true
	refused string // why the claim was refused before the outcome was judged
	jd      judge.Judgement
	// onto is the commit a lane's claim was judged onto (judge.RunEnd.Onto).
	onto string
	// interrupted: the judging was stopped (ctl stop, a shutdown): the
	// run is redone.
	interrupted string
}

// onRunJudged takes the outcome of a run of l as the judge found it.
func (o *Orchestrator) onRunJudged(l *lane, ev runJudged) {
	jb := o.lanes.job
	o.lanes.job = nil
	act := &activeRun{run: ev.run}
	out := ev.out
	if ev.interrupted != "" {
		if jb != nil && jb.interrupt != "" {
			act.interrupt = jb.interrupt
		}
		o.dropUnjudgedClaim(l)
		o.finishRun(l, act, ev.res, statemachine.Outcome{Role: out.Role, Feature: out.Feature, Interrupted: true, Reason: "the judging of the run was stopped"})
		return
	}
	jd := ev.jd
	if jd.Err != nil {
		o.opts.Log.Error("a run could not be judged", zap.String("run", ev.run.ID), zap.Error(jd.Err))
		o.dropUnjudgedClaim(l)
		o.finishRunRecord(&act.run, ev.res, "interrupted")
		o.pending.Runs = append(o.pending.Runs, act.run)
		l.setRunRecord(nil)
		o.transition(l, statemachine.Stop, ev.run.Feature, fmt.Sprintf("the outcome of %s could not be judged, so nothing it did is trusted: %v (is the project's git repository in order?)", ev.run.ID, jd.Err))
		return
	}
	// The run that comes next (or the check of the next feature's test)
	// starts from the tree this one was judged on (startTree).
	defer o.holdRecent(l, jd.Tree, jd.TreeAt)()
	o.recordFindings(ev.run, jd)
	if why := o.recordControls(ev.run, jd); why != "" {
		// Nothing of the run is taken: a person looks first, and a
		// resume redoes it, not charged.
		act.controls = why
		o.dropUnjudgedClaim(l)
		o.finishRun(l, act, ev.res, statemachine.Outcome{Role: out.Role, Feature: out.Feature, Interrupted: true, Reason: why})
		return
	}
	if err := o.proposeGuards(); err != nil { // what the run did may complete a pattern
		o.opts.Log.Warn("could not propose guards", zap.Error(err))
	}
	if l.project {
		o.session.LastTree = string(jd.Tree) // the project's own tree's, not a lane's
	}
	switch out.Role {
	case statemachine.Initializer:
		if o.canonical != nil {
			o.afterInitializer(ev.run, jd)
		}
	case statemachine.Coder:
		if jd.Blocks() {
			out.Reason = firstNonEmpty(findingsReason(jd), out.Reason)
			if f := o.canonical.Feature(ev.run.Feature); f != nil && f.Status == progress.Completed {
				// Not completed on terms the gates accept: the retry
				// starts from the report.
				f.Status = progress.InProgress
				o.pending.FeatureList = o.canonical.Marshal()
				o.writeFeatureList()
			}
		}
	case statemachine.Tester:
		if e := o.testEnvironment(ev, jd); e != nil {
			// Not the tester's doing, nor the code's: no verdict, nothing
			// charged; the session stops in finishRun.
			act.env = e
			out.Reason = o.environmentStop(ev.run, e, jd.Test)
			break
		}
		out.Verdict, out.Reason = o.verdict(l, ev, jd)
	}
	o.finishRun(l, act, ev.res, out)
}

// verdict accepts a tester's tested: true only when the run's own record
// holds (its test ran and passed, evidence left), its change set broke no
// rule, and the daemon, running the feature's test itself on exactly the
// tree it then commits, sees it pass. A rejected claim is taken off the
// disk.
func (o *Orchestrator) verdict(l *lane, ev runJudged, jd judge.Judgement) (bool, string) {
	id, run := ev.run.Feature, ev.run
	f := o.canonical.Feature(id)
	if f == nil || f.Status == progress.Blocked {
		l.claim = ""
		return false, "" // gone, or set aside by a person meanwhile: nothing to judge
	}
	l.claim = ""
	o.diagnose(id, run, failing(jd))
	if c := o.counters[id]; c.Diagnosis != nil && jd.Test != nil && jd.Test.Passed() && len(jd.Regressions) > 0 {
		c.Diagnosis.Message = fmt.Sprintf("%s's own test passes, but the change breaks the frozen test of %s, a feature tested before it; keep that feature working: %s",
			id, jd.Regressions[0].Feature, firstNonEmpty(c.Diagnosis.Message, jd.Regressions[0].Test.Summary()))
		o.setCounters(id, c)
	}
	if !ev.claimed {
		if jd.Blocks() {
			return false, findingsReason(jd)
		}
		return false, firstNonEmpty(ev.res.Summary, fmt.Sprintf("the tester did not set tested: true for %s", id))
	}
	reject := func(why, output string) (bool, string) {
		return o.refuse(run, refusal{why: why, code: "verdict_rejected", happened: why + output,
			correct: "tested: true only after the feature's own test passed in the tester's run, with evidence, and in the daemon's own run",
			because: "tested must mean tested",
			log:     "tested:true rejected", logged: []zap.Field{zap.String("feature", id), zap.String("why", why)}})
	}
	mode := o.opts.Judge.Modes().Of(gates.TestedNeedsEvidence)
	if jd.Blocks() {
		return reject(findingsReason(jd), "")
	}
	if len(jd.Conflicts) > 0 {
		// The branch took another change of the same lines since the
		// lane was made: the next attempt starts from the branch as it
		// is, in a fresh lane, and is told where.
		why := fmt.Sprintf("%s's change conflicts with what the branch took since its work began, in %s; its work is kept at %s, and the next attempt starts from the branch as it is now: make the change again on top of it",
			id, firstN(jd.Conflicts, 5), branch.LaneRef(id))
		o.rebaseLane(l, why)
		c := o.counters[id]
		c.Diagnosis = &diagnose.Diagnosis{Message: why}
		o.setCounters(id, c)
		return reject(why, "")
	}
	if ev.refused != "" {
		if mode == gates.Enforce {
			return reject(ev.refused, "")
		}
		o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: "unverified",
			Context: control.TraceContext{Agent: string(role.Tester), Feature: id, Run: run.ID},
			Event:   control.TraceEvent{WhatHappened: ev.refused + " (warn mode: accepted)"}})
		return o.accept(l, f, run, jd, nil, ev.onto)
	}
	if mode == gates.Off {
		return o.accept(l, f, run, jd, nil, ev.onto)
	}
	if jd.Test == nil {
		return reject("the daemon did not run the test", "")
	}
	log, err := o.opts.Judge.WriteEvidence(id, run.Attempt, "verdict", *jd.Test)
	if err != nil {
		o.opts.Log.Warn("could not keep the daemon's test output", zap.Error(err))
	}
	if !jd.Test.Passed() {
		return reject(fmt.Sprintf("the daemon ran the test itself and it did not pass: %s", jd.Test.Summary()), evidenceNote(log))
	}
	// An earlier feature whose test fails without this claim's change too,
	// or is flaky, is reopened: the claim is judged without it.
	o.reopenTested(l, id, run, jd.Reopen)
	if len(jd.Regressions) > 0 {
		// The next attempt starts in a fresh lane from the branch as it
		// is, whether or not the branch moved meanwhile: one rule, not a
		// race between this verdict and another lane's landing. The
		// refused change is kept under the lane's ref, and the coder,
		// resumed, is told what it broke.
		why := fmt.Sprintf("%s's change breaks a feature tested before it", id)
		if ev.onto != "" && ev.onto != l.baseHead {
			why = fmt.Sprintf("%s's change breaks, merged onto the branch, a feature tested since its work began", id)
		}
		o.rebaseLane(l, why)
		return o.refuse(run, o.rejectRegressions(id, run, jd.Regressions))
	}
	return o.accept(l, f, run, jd, &log, ev.onto)
}

// refusal is a claim the verdict refused, for the loop to apply
// (refuse): the reason the run is told, the trace of gate
// tested-needs-evidence it leaves, and the warning logged.
type refusal struct {
	why                        string // the verdict's reason
	code                       string // the trace's code
	happened, correct, because string // the trace's event
	log                        string
	logged                     []zap.Field
}

// refuse applies r, a refusal of run's claim: it is logged and traced,
// and the list written back, since the canonical copy still says
// tested: false. It returns the verdict (refused, and why).
func (o *Orchestrator) refuse(run store.Run, r refusal) (bool, string) {
	o.opts.Log.Warn(r.log, r.logged...)
	o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: r.code,
		Context: control.TraceContext{Agent: string(role.Tester), Feature: run.Feature, Run: run.ID},
		Event:   control.TraceEvent{WhatHappened: r.happened, WhatWasCorrect: r.correct, Why: r.because}})
	o.writeFeatureList()
	return false, r.why
}

// rejectRegressions refuses a claim whose own test passed on a tree where
// features tested before it fail theirs: the project's branch holds only
// trees on which every tested feature passes. It is the attempt's failure,
// charged like a failing test (the coder's change broke them), and the
// retry is told which tests broke and how (the diagnosis, from the first).
// The output of each broken test is kept as the feature's evidence; the
// refusal is returned for the loop to apply (refuse).
func (o *Orchestrator) rejectRegressions(id string, run store.Run, broken []judge.Regression) refusal {
	var names, logs []string
	for _, b := range broken {
		names = append(names, b.Feature)
		if l, err := o.opts.Judge.WriteEvidence(id, run.Attempt, "sweep-"+b.Feature, b.Test); err == nil {
			logs = append(logs, l)
		}
	}
	why := fmt.Sprintf("%s's own test passed, but on its tree the frozen test of %s, tested before it, does not: %s",
		id, strings.Join(names, ", "), broken[0].Test.Summary())
	return refusal{why: why, code: "breaks_tested", happened: why + " (output in " + strings.Join(logs, ", ") + ")",
		correct: "a feature is tested only on a tree where every feature tested before it still passes its frozen test",
		because: "the branch only ever holds trees on which every tested feature passes",
		log:     "tested:true rejected: it breaks features tested before it", logged: []zap.Field{zap.String("feature", id), zap.Strings("broken", names)}}
}

// failing is the daemon's test run that a retry must hear about: the
// feature's own when it did not pass, else the first frozen test of a
// feature tested before that its tree broke; nil when none failed.
func failing(jd judge.Judgement) *judge.TestResult {
	if jd.Test != nil && jd.Test.Passed() && len(jd.Regressions) > 0 {
		return &jd.Regressions[0].Test
	}
	return jd.Test
}

// diagnose keeps, for the feature's next coding attempt, what the
// daemon's own run of its test said when it failed (the retry's
// reflexion), with what the attempt's coding agent believed; a test that
// passed, or did not run, leaves nothing to diagnose.
func (o *Orchestrator) diagnose(id string, run store.Run, r *judge.TestResult) {
	attempt := run.Attempt
	c := o.counters[id]
	c.Diagnosis = nil
	if r != nil && !r.Passed() && !r.Interrupted {
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Context: control.TraceContext{Agent: run.Role, Feature: id, Run: run.ID},
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s attempt %d failed its test: %s", id, attempt, r.Summary()), Why: "the daemon ran the feature's test itself after its tester's run"}})
		d := diagnose.Read(r.Command, r.ExitCode, r.Output)
		switch {
		case r.CannotRun != "":
			d.Message = "the test cannot run: " + r.CannotRun
		case r.TimedOut:
			d.Message = "the test did not finish in time"
		}
		if _, err := o.opts.Judge.WriteEvidence(id, attempt, "diagnosis", *r); err != nil {
			o.opts.Log.Warn("could not keep the failing test's output", zap.String("feature", id), zap.Error(err))
		}
		if s := o.coderSummary(id, attempt); s != "" {
			d.FailedAssumption = fmt.Sprintf("attempt %d's coding agent ended believing its work was done (%q); the test says otherwise", attempt, textcut.Line(s, 200))
		}
		c.Diagnosis = &d
	}
	o.setCounters(id, c)
}

// coderSummary is what the coding agent of a feature's attempt said at
// its end.
func (o *Orchestrator) coderSummary(id string, attempt int) string {
	runs, err := o.opts.Store.Runs()
	if err != nil {
		o.opts.Log.Warn("could not read the runs for a diagnosis", zap.Error(err))
		return ""
	}
	for _, r := range slices.Backward(runs) {
		if r.Role == string(role.Coder) && r.Feature == id && r.Attempt == attempt {
			return r.Summary
		}
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func evidenceNote(log string) string {
	if log == "" {
		return ""
	}
	return " (output in " + log + ")"
}

// accept makes a verdict of l's canonical and, unless git.commit is off,
// commits exactly the tree the daemon's test ran on.
func (o *Orchestrator) accept(l *lane, f *progress.Feature, run store.Run, jd judge.Judgement, log *string, onto string) (bool, string) {
	why := "the tester's test run passed, evidence was left, and the daemon's own run of the test passed"
	if jd.Test != nil {
		why = "the tester's test run passed, evidence was left, and " + jd.Test.Summary() + " when the daemon ran it itself"
	}
	tr := o.trace(control.Trace{Type: control.TraceApproval, Source: control.SourceAuto, Context: control.TraceContext{Agent: string(role.Tester), Feature: f.ID, Run: run.ID},
		Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s accepted as tested (attempt %d)%s", f.ID, run.Attempt, evidenceNote(deref(log))), Why: why}})
	c := o.counters[f.ID]
	if !l.project {
		defer func() {
			l.copyEvidence(f.ID)
			o.closeLane(l, "")
		}()
	}
	if o.opts.Config.Git.Commit && jd.Tree != "" {
		v := branch.Verdict{
			Feature: f, Attempt: run.Attempt, Run: run.ID, Trace: tr.ID, Tree: jd.Tree,
			Base: gitrepo.Tree(c.Base), BaseHead: c.BaseHead,
		}
		done, err := l.commit(context.Background(), v, jd, onto)
		switch {
		case err != nil:
			o.opts.Log.Error("could not commit a tested feature", zap.String("feature", f.ID), zap.Error(err))
		default:
			c.Commit, c.Branch, c.OffBranch = done.Commit, done.Branch, done.OffBranch
			where := "on " + done.Branch
			if done.Branch == "" {
				where = "under " + done.Ref + " only: " + done.OffBranch
			}
			o.opts.Log.Info("tested feature committed", zap.String("feature", f.ID), zap.String("commit", done.Commit), zap.String("where", where))
			o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Context: control.TraceContext{Agent: string(role.Tester), Feature: f.ID, Run: run.ID},
				Parent: tr.ID, Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s committed as %s, %s (verdict %s)", f.ID, done.Commit, where, tr.ID), Why: "tested names a commit: exactly the tree the daemon's test ran on"}})
		}
	}
	// Tested once its commit is made, in the same write as the commit's
	// record: with lanes the commit is where its code then is, and a
	// crash before this point has the feature worked again, never tested
	// with its code gone.
	f.Tested = true
	if log != nil && *log != "" && !slices.Contains(f.Evidence, *log) {
		f.Evidence = append(f.Evidence, *log)
	}
	c.Base, c.BaseHead = "", ""
	o.setCounters(f.ID, c)
	o.pending.FeatureList = o.canonical.Marshal()
	o.persist()
	o.writeFeatureList()
	return true, ""
}

// afterInitializer freezes the acceptance tests the initializer wrote with
// the list and, when the tree held nothing but HEAD before it ran, commits
// its work, so that the features' commits start from a clean tree.
func (o *Orchestrator) afterInitializer(run store.Run, jd judge.Judgement) {
	o.refreeze(jd.Tree, "the feature list was accepted")
	if !o.opts.Config.Git.Commit || jd.Tree == "" || len(jd.Changes) == 0 {
		return
	}
	c, err := branch.CommitScaffold(context.Background(), o.opts.Repo, jd.Tree, gitrepo.Tree(run.BaseTree), run.ID, len(o.canonical.Features))
	switch {
	case err != nil:
		o.opts.Log.Warn("could not commit the initializer's work", zap.Error(err))
	case c != "":
		o.opts.Log.Info("initializer's work committed", zap.String("commit", c))
	}
}
