package orchestrator

// The verdict on a claim: the daemon's own run of the frozen test, the
// regression sweep, acceptance and the commit, or the diagnosis the next
// attempt is given.

import (
	"context"
	"fmt"
	"maps"
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
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
	"go.uber.org/zap"
)

// runJudged is a run whose outcome was judged off the loop.
type runJudged struct {
	run store.Run
	res agents.Result
	out statemachine.Outcome
	// claim is the tester's tested: true, judged with the run; nil when
	// the run made none.
	claim *claim
	jd    judge.Judgement
	// interrupted: the judging was stopped (ctl stop, a shutdown): the
	// run is redone.
	interrupted string
}

// onRunJudged takes the outcome of a run of l as the judge found it, and
// decides what the run's end comes to (for a tester, the verdict on its
// claim), for finishRun to apply.
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
		o.finishRun(l, runEnd{act: act, res: ev.res, out: statemachine.Outcome{Role: out.Role, Feature: out.Feature, Interrupted: true, Reason: "the judging of the run was stopped"}})
		return
	}
	jd := ev.jd
	if jd.Err != nil {
		o.opts.Log.Error("a run could not be judged", zap.String("run", ev.run.ID), zap.Error(jd.Err))
		o.dropUnjudgedClaim(l)
		o.finishRun(l, runEnd{act: act, res: ev.res, out: out,
			unjudged: fmt.Sprintf("the outcome of %s could not be judged, so nothing it did is trusted: %v (is the project's git repository in order?)", ev.run.ID, jd.Err)})
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
		o.finishRun(l, runEnd{act: act, res: ev.res, out: statemachine.Outcome{Role: out.Role, Feature: out.Feature, Interrupted: true, Reason: why}})
		return
	}
	if err := o.proposeGuards(); err != nil { // what the run did may complete a pattern
		o.opts.Log.Warn("could not propose guards", zap.Error(err))
	}
	if l.project {
		o.session.LastTree = string(jd.Tree) // the project's own tree's, not a lane's
	}
	end := runEnd{act: act, res: ev.res}
	switch out.Role {
	case statemachine.Initializer:
		if o.canonical != nil {
			o.afterInitializer(ev.run, jd)
		}
	case statemachine.Coder:
		if jd.Blocks() {
			out.Reason = firstNonEmpty(findingsReason(jd), out.Reason)
			// Not completed on terms the gates accept: the retry starts
			// from the report.
			end.recode = true
		}
	case statemachine.Tester:
		if e := o.testEnvironment(ev, jd); e != nil {
			// Not the tester's doing, nor the code's: no verdict, nothing
			// charged; the session stops in finishRun.
			act.env = e
			out.Reason = o.environmentStop(ev.run, e, jd.Test)
			break
		}
		v := o.verdict(l, ev, jd)
		end.claim = &v
	}
	end.out = out
	o.finishRun(l, end)
}

// claimOutcome is the verdict on a tester's claim and everything it
// changes, decided by the verdict without touching the session and
// applied by the loop in one place (Orchestrator.settle, from finishRun):
// accepted or refused and why, the counters it leaves, the traces it
// writes, the features tested before that it reopens, the lane it starts
// again from the branch, and the refusal or the acceptance (with its
// commit) to apply.
type claimOutcome struct {
	accepted bool
	why      string // the verdict's reason: "" when accepted, or when nothing was judged
	// counters are the claim's feature's counters as the verdict leaves
	// them (its diagnosis), by feature; the reopened features' are in
	// reopened.
	counters map[string]store.FeatureCounters
	// traces are written first, in order: the diagnosis, a claim let
	// through in warn mode.
	traces []control.Trace
	// reopened are the features tested before whose verdict the claim's
	// sweep found no longer holds (reopenings).
	reopened []reopening
	// rebase, when set, is why the claim's lane starts again from the
	// branch, its work kept (rebaseLane).
	rebase string
	// refused is the refusal to apply (refusal), nil unless refused by
	// a gate; accept the acceptance, nil unless accepted.
	refused *refusal
	accept  *acceptance
}

// setCounters stages id's counters as the verdict leaves them.
func (v *claimOutcome) setCounters(id string, c store.FeatureCounters) {
	if v.counters == nil {
		v.counters = map[string]store.FeatureCounters{}
	}
	v.counters[id] = c
}

// refuse makes v a refusal: r is applied (logged, traced, the list
// written back) and r.why is the verdict's reason.
func (v *claimOutcome) refuse(r refusal) claimOutcome {
	v.refused, v.why = &r, r.why
	return *v
}

// verdict accepts a tester's tested: true only when the run's own record
// holds (its test ran and passed, evidence left), its change set broke no
// rule, and the daemon, running the feature's test itself on exactly the
// tree it then commits, sees it pass. A rejected claim is taken off the
// disk. It decides and keeps the daemon's test output as evidence; what
// the verdict comes to, the loop applies (settle).
func (o *Orchestrator) verdict(l *lane, ev runJudged, jd judge.Judgement) claimOutcome {
	id, run := ev.run.Feature, ev.run
	var v claimOutcome
	f := o.canonical.Feature(id)
	if f == nil || f.Status == progress.Blocked {
		return v // gone, or set aside by a person meanwhile: nothing to judge
	}
	c := o.diagnose(&v, id, run, failing(jd))
	if c.Diagnosis != nil && jd.Test != nil && jd.Test.Passed() && len(jd.Regressions) > 0 {
		c.Diagnosis.Message = fmt.Sprintf("%s's own test passes, but the change breaks the frozen test of %s, a feature tested before it; keep that feature working: %s",
			id, jd.Regressions[0].Feature, firstNonEmpty(c.Diagnosis.Message, jd.Regressions[0].Test.Summary()))
	}
	v.setCounters(id, c)
	cl := ev.claim
	if cl == nil {
		if jd.Blocks() {
			v.why = findingsReason(jd)
			return v
		}
		v.why = firstNonEmpty(ev.res.Summary, fmt.Sprintf("the tester did not set tested: true for %s", id))
		return v
	}
	cl.jd = jd
	reject := func(why, output string) claimOutcome {
		return v.refuse(refusal{why: why, code: "verdict_rejected", happened: why + output,
			correct: "tested: true only after the feature's own test passed in the tester's run, with evidence, and in the daemon's own run",
			because: "tested must mean tested",
			log:     "tested:true rejected", logged: []zap.Field{zap.String("feature", id), zap.String("why", why)}})
	}
	mode := l.deps.judge.Modes().Of(gates.TestedNeedsEvidence)
	if jd.Blocks() {
		return reject(findingsReason(jd), "")
	}
	if len(jd.Conflicts) > 0 {
		// The branch took another change of the same lines since the
		// lane was made: the next attempt starts from the branch as it
		// is, in a fresh lane, and is told where.
		why := fmt.Sprintf("%s's change conflicts with what the branch took since its work began, in %s; its work is kept at %s, and the next attempt starts from the branch as it is now: make the change again on top of it",
			id, textcut.FirstN(jd.Conflicts, 5), branch.LaneRef(id))
		v.rebase = why
		c.Diagnosis = &diagnose.Diagnosis{Message: why}
		v.setCounters(id, c)
		return reject(why, "")
	}
	if cl.problem != "" {
		if mode == gates.Enforce {
			return reject(cl.problem, "")
		}
		v.traces = append(v.traces, control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: "unverified",
			Context: control.TraceContext{Agent: string(role.Tester), Feature: id, Run: run.ID},
			Event:   control.TraceEvent{WhatHappened: cl.problem + " (warn mode: accepted)"}})
		return v.approve(f, cl, "", o.opts.Config.Git.Commit)
	}
	if mode == gates.Off {
		return v.approve(f, cl, "", o.opts.Config.Git.Commit)
	}
	if jd.Test == nil {
		return reject("the daemon did not run the test", "")
	}
	log, err := l.deps.judge.WriteEvidence(id, run.Attempt, "verdict", *jd.Test)
	if err != nil {
		o.opts.Log.Warn("could not keep the daemon's test output", zap.Error(err))
	}
	if !jd.Test.Passed() {
		return reject(fmt.Sprintf("the daemon ran the test itself and it did not pass: %s", jd.Test.Summary()), evidenceNote(log))
	}
	// An earlier feature whose test fails without this claim's change too,
	// or is flaky, is reopened: the claim is judged without it.
	v.reopened = o.reopenings(l, id, run, withCulprits(jd.Reopen))
	if len(jd.Regressions) > 0 {
		// The next attempt starts in a fresh lane from the branch as it
		// is, whether or not the branch moved meanwhile: one rule, not a
		// race between this verdict and another lane's landing. The
		// refused change is kept under the lane's ref, and the coder,
		// resumed, is told what it broke.
		why := fmt.Sprintf("%s's change breaks a feature tested before it", id)
		if cl.onto != "" && cl.onto != l.baseHead {
			why = fmt.Sprintf("%s's change breaks, merged onto the branch, a feature tested since its work began", id)
		}
		v.rebase = why
		return v.refuse(o.rejectRegressions(id, run, jd.Regressions))
	}
	return v.approve(f, cl, log, o.opts.Config.Git.Commit)
}

// refusal is a claim the verdict refused, for the loop to apply (settle):
// the reason the run is told, the trace of gate tested-needs-evidence it
// leaves, and the warning logged.
type refusal struct {
	why                        string // the verdict's reason
	code                       string // the trace's code
	happened, correct, because string // the trace's event
	log                        string
	logged                     []zap.Field
}

// acceptance is a claim the verdict accepted, for the loop to apply
// (settle): the claim, judged; the trace of its approval; whether its
// tree is committed (git.commit is on, and a tree was recorded); and the
// evidence the verdict kept.
type acceptance struct {
	claim    *claim
	approval control.Trace
	commit   bool
	evidence string // the daemon's test output, "" when not kept
}

// settle applies v, the verdict on the claim of run, l's tester's: the
// claim is taken off the lane, the counters and traces written, the
// features it reopened reopened (or blocked), the lane started again from
// the branch, and the refusal or the acceptance applied. It is the one
// place where a verdict changes the session; it runs on the loop, from
// finishRun.
func (o *Orchestrator) settle(l *lane, run store.Run, v claimOutcome) {
	l.claim = nil
	for _, id := range slices.Sorted(maps.Keys(v.counters)) {
		o.setCounters(id, v.counters[id])
	}
	for _, t := range v.traces {
		o.trace(t)
	}
	o.reopenTested(run.Feature, v.reopened)
	if v.rebase != "" {
		o.rebaseLane(l, v.rebase)
	}
	switch r := v.refused; {
	case r != nil:
		// The canonical copy still says tested: false: the list is
		// written back.
		o.opts.Log.Warn(r.log, r.logged...)
		o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: r.code,
			Context: control.TraceContext{Agent: string(role.Tester), Feature: run.Feature, Run: run.ID},
			Event:   control.TraceEvent{WhatHappened: r.happened, WhatWasCorrect: r.correct, Why: r.because}})
		o.writeFeatureList()
	case v.accept != nil:
		o.accept(l, run, *v.accept)
	}
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

// diagnose is feature id's counters as the verdict leaves them for its
// next coding attempt: with what the daemon's own run of its test said
// when it failed (the retry's reflexion) and what the attempt's coding
// agent believed, whose trace it adds to v; a test that passed, or did not
// run, leaves nothing to diagnose. The failing test's output is kept as
// evidence.
func (o *Orchestrator) diagnose(v *claimOutcome, id string, run store.Run, r *judge.TestResult) store.FeatureCounters {
	attempt := run.Attempt
	c := o.counters[id]
	c.Diagnosis = nil
	if r != nil && !r.Passed() && !r.Interrupted {
		v.traces = append(v.traces, control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Context: control.TraceContext{Agent: run.Role, Feature: id, Run: run.ID},
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
	return c
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

func evidenceNote(log string) string {
	if log == "" {
		return ""
	}
	return " (output in " + log + ")"
}

// approve makes v the acceptance of c, f's claim, judged, with log the
// daemon's test output kept as its evidence ("" when none was); commit:
// git.commit is on, so its tree is committed.
func (v *claimOutcome) approve(f *progress.Feature, c *claim, log string, commit bool) claimOutcome {
	why := "the tester's test run passed, evidence was left, and the daemon's own run of the test passed"
	if t := c.jd.Test; t != nil {
		why = "the tester's test run passed, evidence was left, and " + t.Summary() + " when the daemon ran it itself"
	}
	v.accepted = true
	v.accept = &acceptance{claim: c, evidence: log, commit: commit && c.jd.Tree != "",
		approval: control.Trace{Type: control.TraceApproval, Source: control.SourceAuto, Context: control.TraceContext{Agent: string(role.Tester), Feature: f.ID, Run: c.run.ID},
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s accepted as tested (attempt %d)%s", f.ID, c.run.Attempt, evidenceNote(log)), Why: why}}}
	return *v
}

// accept applies a, the acceptance of l's claim of run (settle): its
// approval traced, its tree committed (in the lane's way, lane.commit),
// then its feature made tested, in the same write as the commit's record;
// a clone's evidence is copied into the project and the lane closed.
func (o *Orchestrator) accept(l *lane, run store.Run, a acceptance) {
	id := run.Feature
	tr := o.trace(a.approval)
	c := o.counters[id]
	if !l.project {
		defer func() {
			l.copyEvidence(id)
			o.closeLane(l, "")
		}()
	}
	if a.commit {
		done, err := l.commit(context.Background(), a.claim, o.canonical.Feature(id), tr.ID)
		switch {
		case err != nil:
			o.opts.Log.Error("could not commit a tested feature", zap.String("feature", id), zap.Error(err))
		default:
			c.Commit, c.Branch, c.OffBranch = done.Commit, done.Branch, done.OffBranch
			where := "on " + done.Branch
			if done.Branch == "" {
				where = "under " + done.Ref + " only: " + done.OffBranch
			}
			o.opts.Log.Info("tested feature committed", zap.String("feature", id), zap.String("commit", done.Commit), zap.String("where", where))
			o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Context: control.TraceContext{Agent: string(role.Tester), Feature: id, Run: run.ID},
				Parent: tr.ID, Event: control.TraceEvent{WhatHappened: fmt.Sprintf("%s committed as %s, %s (verdict %s)", id, done.Commit, where, tr.ID), Why: "tested names a commit: exactly the tree the daemon's test ran on"}})
			if !l.project && done.Branch != "" {
				o.landDeps(l)
			}
		}
	}
	// Tested once its commit is made, in the same write as the commit's
	// record: with lanes the commit is where its code then is, and a
	// crash before this point has the feature worked again, never tested
	// with its code gone.
	// The branch's tree is the candidate now: the judge's sweeps bisect
	// over what landed, and the session's last sweep is of the last.
	o.opts.Judge.Landed(id, a.claim.jd.Candidate)
	f := o.canonical.Feature(id)
	f.Tested = true
	if a.evidence != "" && !slices.Contains(f.Evidence, a.evidence) {
		f.Evidence = append(f.Evidence, a.evidence)
	}
	c.Base, c.BaseHead = "", ""
	o.setCounters(id, c)
	o.pending.FeatureList = o.canonical.Marshal()
	o.persistList()
}

// landDeps gives the project's work tree, just brought forward to l's
// landed commit, the dependency directories l's claim was judged with
// (toolchain.LandDeps): a later lane that installs nothing is lent them,
// and the person finds the branch's tests ready to run. A failure leaves
// the project's as they were, and is said.
func (o *Orchestrator) landDeps(l *lane) {
	landed, err := toolchain.LandDeps(l.dir, o.opts.Project.Dir)
	if err != nil {
		o.opts.Log.Warn("could not bring a lane's dependencies into the project's work tree; later lanes are lent the project's own", zap.String("feature", l.feature), zap.Error(err))
	}
	if len(landed) > 0 {
		o.opts.Log.Info("dependencies landed in the project's work tree", zap.String("feature", l.feature), zap.Strings("dirs", landed))
	}
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
