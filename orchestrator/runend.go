package orchestrator

// A run has ended: its process's result read, its changes judged by the
// gates (prejudge), what it left behind recorded, its claim checked before
// the verdict.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
	"go.uber.org/zap"
)

// onRunEnded takes a run that ended. One that ended by itself is judged by
// its outcome, off the loop (a snapshot, and for a tester's claim the
// daemon's own run of the test, take time); then finishRun decides. l is
// the run's lane.
func (o *Orchestrator) onRunEnded(l *lane, ev runEnded) {
	if l.active == nil || l.active.run.ID != ev.runID {
		return
	}
	act := l.active
	res := ev.result
	act.hooks.stop()
	if f, ok := res.Failure(l.deps.runs.StopFailure(act.run.ID)); ok && act.interrupt == "" {
		act.failure = &f
	}
	why := ""
	if act.failure == nil {
		why = o.endedSilent(l, act, res)
	}
	// A run killed because its hooks never checked in wrote without gates
	// just as surely as one that ended by itself first, and so did one
	// that ended on a failure or was stopped: nothing it wrote is taken,
	// however far it got. (A run endedSilent found is one of them.)
	act.silent = act.hooksKilled || l.untrusted(act, res)
	// Read the agent's last writes now rather than waiting for the watcher:
	// the verdict must see them, whatever the debounce.
	o.syncList(l, true)
	l.active = nil

	if why != "" {
		// Its gates never ran: nothing the run claims is judged, and the
		// run is redone; what it changed in the tree is still held to
		// the rules.
		o.setAsideUnjudgedList(act.run)
		act.controls = o.judgeLeftovers(l, act.run)
		o.finishRun(l, runEnd{act: act, res: res, out: statemachine.Outcome{Role: statemachine.Role(act.run.Role), Feature: act.run.Feature, Interrupted: true, Reason: why}})
		return
	}
	out := o.prejudge(act, res)
	if out.Interrupted || out.OutOfBudget != "" || act.failure != nil {
		if act.silent {
			o.setAsideUnjudgedList(act.run)
		}
		act.controls = o.judgeLeftovers(l, act.run)
		o.finishRun(l, runEnd{act: act, res: res, out: out})
		return
	}

	jg := l.judging(act, res, out, o.listOrEmpty(), o.counters[act.run.Feature])
	ctx, cancel := context.WithCancel(context.Background())
	o.lanes.job = &job{what: jg.what, feature: act.run.Feature, cancel: cancel, lane: l}
	o.publish()
	l.judge(ctx, cancel, jg, o.runEvents)
}

// judge runs jg, the judging of l's run that ended, off the loop, and
// sends its judgement to events (runJudged) when it is done or ctx is
// cancelled; cancel is ctx's, released at the end.
func (l *lane) judge(ctx context.Context, cancel context.CancelFunc, jg judging, events chan<- any) {
	j := l.deps.judge
	go func() {
		ev := jg.ev
		ev.jd = j.JudgeRun(ctx, jg.in)
		if ctx.Err() != nil || (ev.jd.Test != nil && ev.jd.Test.Interrupted) {
			ev.interrupted = "stopped"
		}
		cancel()
		events <- ev
	}()
}

// judging is how the daemon judges a run of a lane that ended by itself,
// off the loop: the judge's request, the event that reports its
// judgement, and what the job is called meanwhile.
type judging struct {
	in   judge.RunEnd
	ev   runJudged
	what string
}

// judging is how l's run act, which ended with res and was prejudged as
// out, is to be judged: on its change set against list, the canonical
// list, and for a tester's claim (l's, made by this run) with the daemon's
// own run of the test, on the candidate the branch would hold for a clone,
// beside the tree where the feature's work began (began, its counters)
// for the project's own tree. The claim is given all it is judged on here.
// The loop starts the job.
func (l *lane) judging(act *activeRun, res agents.Result, out statemachine.Outcome, list *progress.List, began store.FeatureCounters) judging {
	in := judge.RunEnd{
		Actor:   gates.Actor{Role: act.run.Role, Feature: act.run.Feature, Run: act.run.ID},
		Attempt: act.run.Attempt, Base: gitrepo.Tree(act.run.BaseTree), List: list, Root: l.root(),
	}
	ev2 := runJudged{run: act.run, res: res, out: out}
	if out.Role == statemachine.Tester {
		c := l.claim
		if c != nil && c.run.ID != act.run.ID {
			c = nil // not this run's: a claim is judged with the run that made it
		}
		if c != nil {
			c.problem = l.claimProblem(list.Feature(c.feature()), act.run.ID)
			c.base, c.baseHead = gitrepo.Tree(began.Base), began.BaseHead
		}
		// The daemon runs the test itself to judge a claim, and, when the
		// tester found a failure (or a claim is refused), so that the
		// retry reads the daemon's own output, not only the tester's word.
		// (A claim refused in warn mode is accepted all the same: no run.)
		switch mode := l.deps.judge.Modes().Of(gates.TestedNeedsEvidence); {
		case c == nil:
			in.Rerun = true
		case c.problem != "":
			in.Rerun = mode == gates.Enforce
		default:
			in.Rerun = mode != gates.Off
			// A claim is accepted only on a tree where every feature
			// tested before still passes its frozen test.
			in.Sweep = in.Rerun
		}
		if in.Sweep && !l.project {
			// The branch's head, read once: the candidate is merged onto
			// it, and the commit moves the branch only if it is still
			// there.
			head, headTree, _, err := l.deps.repo.Head(context.Background())
			if err != nil {
				l.deps.log.Warn("could not read the project's HEAD for a lane's verdict", zap.Error(err))
			}
			c.onto, c.ontoTree = head, headTree
		}
		if c != nil {
			c.request(&in, l)
		}
		ev2.claim = c
	}
	what := fmt.Sprintf("judging %s (%s %s)", act.run.ID, act.run.Role, act.run.Feature)
	switch {
	case in.Rerun && ev2.claim != nil && ev2.claim.problem == "":
		what = fmt.Sprintf("re-running the test of %s to judge its tester's claim", act.run.Feature)
	case in.Rerun:
		what = fmt.Sprintf("running the test of %s to diagnose its failure for the retry", act.run.Feature)
	}
	return judging{in: in, ev: ev2, what: what}
}

// listOrEmpty is the canonical list, or an empty one before the initializer.
func (o *Orchestrator) listOrEmpty() *progress.List {
	if o.canonical == nil {
		return &progress.List{Version: 1}
	}
	return o.canonical.Clone()
}

// runEnd is what the end of a run comes to, as its handlers decided it
// (onRunEnded, onRunJudged and the verdict), for finishRun to apply: the
// run and its result, the outcome the rules decide on, the verdict on its
// tester's claim (nil when none was judged), whether its coder's
// completed status is taken back, and why it could not be judged at all.
type runEnd struct {
	act *activeRun
	res agents.Result
	out statemachine.Outcome
	// claim is the verdict on the tester's claim; its acceptance and
	// reason are the outcome's Verdict and Reason.
	claim *claimOutcome
	// recode: the coder's change set was refused, so its feature is not
	// completed on terms the gates accept and goes back to in progress.
	recode bool
	// unjudged is why the run could not be judged at all: it is recorded
	// as interrupted, nothing of it is counted, and the session stops.
	unjudged string
}

// finishRun applies end, the end of l's run: the verdict on its claim
// (settle), the list, the run's record, the tally and the counters, then
// decides what comes next. It is the one place where a run's end changes
// the session.
func (o *Orchestrator) finishRun(l *lane, end runEnd) {
	act, res, out := end.act, end.res, end.out
	if end.unjudged != "" {
		o.finishRunRecord(&act.run, res, "interrupted")
		o.pending.Runs = append(o.pending.Runs, act.run)
		l.setRunRecord(nil)
		o.transition(l, statemachine.Stop, act.run.Feature, end.unjudged)
		return
	}
	if v := end.claim; v != nil {
		o.settle(l, act.run, *v)
		out.Verdict, out.Reason = v.accepted, v.why
	}
	if end.recode {
		if f := o.canonical.Feature(act.run.Feature); f != nil && f.Status == progress.Completed {
			f.Status = progress.InProgress
			o.pending.FeatureList = o.canonical.Marshal()
			o.writeFeatureList()
		}
	}
	o.dropUnjudgedClaim(l)
	if l.deps.judge.IsLive(act.run.ID) {
		o.hooksSilent = 0
	}
	l.deps.runs.Forget(act.run.ID)
	o.view.lives.Delete(act.run.ID)
	outcome := "ok"
	switch {
	case out.Interrupted, out.OutOfBudget != "":
		outcome = "interrupted"
	case out.Transient:
		outcome = "transient"
	case out.Reason != "" || (out.Role == statemachine.Tester && !out.Verdict):
		outcome = "failed"
	}
	run := act.run
	o.finishRunRecord(&run, res, outcome)
	if act.failure != nil {
		run.Failure = string(act.failure.Kind)
	}
	if act.env != nil {
		run.Failure = string(act.env.Kind)
	}
	if out.OutOfBudget != "" {
		run.Failure = "out_of_budget"
	}
	if out.Role == statemachine.Tester && out.Verdict {
		run.Commit = o.counters[run.Feature].Commit
		msg := run.Feature + " tested"
		if f := o.canonical.Feature(run.Feature); f != nil {
			msg = fmt.Sprintf("%s (%s) tested", f.ID, f.Title)
		}
		if run.Commit != "" {
			msg += "; committed as " + run.Commit
		}
		o.notify(notify.FeatureTested, run.Feature, msg)
	}
	o.pending.Runs = append(o.pending.Runs, run)
	l.setRunRecord(nil)
	o.tally.totalCost += res.CostUSD
	o.tally.runCount++
	if run.Feature != "" {
		c := o.counters[run.Feature]
		c.CostUSD += res.CostUSD
		o.setCounters(run.Feature, c)
	}
	o.warnBudgets(run.Feature)
	if !out.Transient && !out.Interrupted {
		o.session.Backoffs = 0
	}
	o.opts.Log.Info("run ended", zap.String("run", run.ID), zap.String("outcome", outcome), zap.String("ended", string(res.Ended)),
		zap.Int("exit", res.ExitCode), zap.Float64("cost_usd", res.CostUSD), zap.Int("turns", res.NumTurns), zap.String("summary", res.Summary))

	if f := act.failure; f != nil && !f.Waits() {
		// Only a person can fix it; the run is not charged, and the
		// session resumes where it was.
		why := f.Explain(o.opts.Config.Agent.Command)
		if f.Kind == agents.FailStartup && f.Code == "sandbox_required_unavailable" {
			why = "Claude Code could not start its sandbox, so no agent can run confined: " + f.Detail +
				" (on Linux: install bubblewrap and socat; see `ctxgraphd run`'s start-up check)"
		}
		o.transition(l, statemachine.Stop, run.Feature, why)
		return
	}
	if act.env != nil || act.controls != "" {
		// The same: the run is not charged, and a resume redoes it.
		o.transition(l, statemachine.Stop, run.Feature, firstNonEmpty(act.controls, out.Reason))
		return
	}
	if o.hooksSilent >= maxSilentHookRuns {
		o.hooksSilent = 0
		o.transition(l, statemachine.Stop, run.Feature, fmt.Sprintf(
			"the hooks of %d runs in a row never reached the daemon, so no gate was running: check that the hook program (`%s`) runs and that nothing (--bare, disableAllHooks, managed settings) turns hooks off",
			maxSilentHookRuns, o.opts.HookCommand))
		return
	}
	if act.interrupt != "" && o.stopAfter {
		o.stopAfter = false
		o.transition(l, statemachine.Stop, run.Feature, act.interrupt)
		return
	}
	o.step(l, &out)
}

func (o *Orchestrator) finishRunRecord(r *store.Run, res agents.Result, outcome string) {
	r.EndedAt = o.opts.Now().UTC()
	if res.Ended != agents.EndStartFailed && !res.EndedAt.IsZero() {
		r.AgentWall = res.EndedAt.Sub(res.StartedAt)
	}
	r.AgentCPU = res.CPU
	r.Outcome = outcome
	r.Ended = string(res.Ended)
	r.ExitCode = res.ExitCode
	r.IsError = res.IsError
	r.Subtype = res.Subtype
	r.CostUSD = res.CostUSD
	r.NumTurns = res.NumTurns
	r.ToolCalls = res.ToolCalls
	r.Summary = res.Summary
	if res.SessionID != "" {
		r.SessionID = res.SessionID
	}
	if res.Err != nil {
		r.Error = res.Err.Error()
	}
}

// prejudge turns a run's result into the outcome the rules decide on, as
// far as it can be told without judging the run's work: interrupted,
// transient, timed out, the initializer's list, the coder's status.
func (o *Orchestrator) prejudge(act *activeRun, res agents.Result) statemachine.Outcome {
	run := act.run
	out := statemachine.Outcome{Role: statemachine.Role(run.Role), Feature: run.Feature}
	if act.interrupt != "" || res.Ended == agents.EndCancelled {
		out.Interrupted = true
		out.Reason = act.interrupt
		return out
	}
	if res.Subtype == agents.SubtypeMaxBudget && act.cappedBy != "" {
		out.OutOfBudget = act.cappedBy
		out.Reason = "stopped at what was left of " + act.cappedBy
		return out
	}
	if f := act.failure; f != nil {
		// Not the agent's doing: never charged. What waiting cures is
		// waited for; the rest stops the session in finishRun.
		out.Transient = f.Waits()
		out.Reason = f.Explain(o.opts.Config.Agent.Command)
		o.timers.waitFor = *f
		return out
	}
	switch res.Ended {
	case agents.EndWallTimeout:
		out.Reason = fmt.Sprintf("the run exceeded agent.timeout (%s) and was killed", o.opts.Config.Agent.Timeout)
	case agents.EndIdleTimeout:
		out.Reason = fmt.Sprintf("the run was stuck: no output for agent.idle_timeout (%s)", o.opts.Config.Agent.IdleTimeout)
	case agents.EndStuck:
		out.Reason = fmt.Sprintf("the run was stopped as stuck: %s (agent.stuck_after: %d); try another way", res.Stuck, o.opts.Config.Agent.StuckAfter)
	}
	switch out.Role {
	case statemachine.Initializer:
		if o.canonical == nil && o.listFile.problem != "" && !o.listFile.problemFromAgent && out.Reason == "" {
			// A person was writing the list meanwhile: not the
			// initializer's failure. Redone once the list is valid, if
			// it is still needed.
			out.Interrupted = true
			out.Reason = "a person was writing feature-list.json during the run"
			return out
		}
		if o.canonical == nil {
			out.Reason = firstNonEmpty(out.Reason, o.listFile.problem, "the initializer ended without writing a valid feature-list.json")
		}
	case statemachine.Coder:
		if f := o.canonical.Feature(run.Feature); f != nil && f.Status != progress.Completed {
			out.Reason = firstNonEmpty(out.Reason, fmt.Sprintf("the coding run ended without setting %s to completed: %s", run.Feature, res.Summary))
		}
	}
	return out
}

// judgeLeftovers holds what a run that is not judged in full (interrupted,
// silent, lost in a crash) changed in the tree to the rules all the same,
// and puts back what they refuse: no route around a gate by dying. It
// returns why the session must stop for a person (recordControls), "" if
// nothing says so. l is the run's lane.
func (o *Orchestrator) judgeLeftovers(l *lane, r store.Run) (stop string) {
	if r.BaseTree == "" {
		return ""
	}
	jd := l.deps.judge.JudgeRun(context.Background(), judge.RunEnd{
		Actor: gates.Actor{Role: r.Role, Feature: r.Feature, Run: r.ID}, Attempt: r.Attempt,
		Base: gitrepo.Tree(r.BaseTree), List: o.listOrEmpty(), Root: l.root(), // a lane's run is judged, and put back, in its lane
	})
	if jd.Err != nil {
		o.opts.Log.Warn("could not judge what an interrupted run left", zap.String("run", r.ID), zap.Error(jd.Err))
		return ""
	}
	o.recordFindings(r, jd)
	if l.project {
		o.session.LastTree = string(jd.Tree) // the project's own tree's, not a lane's
	}
	return o.recordControls(r, jd)
}

// recordControls traces the repository's hooks and configuration that
// changed while r was in flight (judge.Judgement.Controls), and tells a
// person, whose git runs them; it returns why the session stops for them,
// "" when nothing changed. Agents' programs cannot write the repository's
// directory, so an agent that did came by a route the gates did not see;
// or a person changed them meanwhile, which is theirs to say.
func (o *Orchestrator) recordControls(r store.Run, jd judge.Judgement) string {
	if len(jd.Controls) == 0 {
		return ""
	}
	why := fmt.Sprintf("the repository's %s changed while %s (%s %s) was in flight, which no agent may do", strings.Join(jd.Controls, ", "), r.ID, r.Role, firstNonEmpty(r.Feature, "-"))
	if len(jd.Held) > 0 {
		why += fmt.Sprintf("; held so that git does not run them: %s", strings.Join(jd.Held, ", "))
	}
	why += ". Look at them (`git -C " + o.opts.Project.Dir + " config --list --local`, the hooks directory): if you made the change, put it back as you want it (a held hook: rename it without " + gitrepo.HeldSuffix + "); then `ctxgraphd ctl resume`"
	o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.RoleWritePolicy, Code: "git_internals", Path: ".git/" + jd.Controls[0],
		Context: control.TraceContext{Agent: r.Role, Feature: r.Feature, Run: r.ID},
		Event: control.TraceEvent{WhatHappened: why, WhatWasCorrect: "nothing of a run changes what git runs for a person: its hooks and configuration",
			Why: "git runs a repository's hooks, and what its configuration names, with the powers of whoever runs git there"}})
	o.opts.Log.Warn("the repository's hooks or configuration changed while a run was in flight", zap.String("run", r.ID), zap.Strings("changed", jd.Controls), zap.Strings("held", jd.Held))
	return why
}

// recordFindings keeps what the gates found in a run's change set as
// violations: what the run changed, by whatever route, and whether it was
// put back.
func (o *Orchestrator) recordFindings(r store.Run, jd judge.Judgement) {
	for _, f := range jd.Findings {
		what := fmt.Sprintf("%s (%s, %s) %s %s, found in the project's tree after the run: %s", r.Role, firstNonEmpty(r.Feature, "-"), r.ID, f.Kind, f.Path, f.Message)
		if f.Mode == gates.Enforce {
			what += "; put back as it was before the run"
		} else {
			what += " (warn mode: left as it is)"
		}
		o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: f.Gate, Code: f.Code, Path: f.Path,
			Context: control.TraceContext{Agent: r.Role, Feature: r.Feature, Run: r.ID},
			Event:   control.TraceEvent{WhatHappened: what, WhatWasCorrect: f.Suggestion, Why: "gate " + f.Gate + ": the outcome is judged, whatever route made it"}})
		o.opts.Log.Warn("violation found in the tree", zap.String("run", r.ID), zap.String("gate", f.Gate), zap.String("code", f.Code), zap.String("path", f.Path), zap.String("mode", string(f.Mode)))
	}
}

// findingsReason says in a sentence why a run's outcome was refused.
func findingsReason(jd judge.Judgement) string {
	var parts []string
	for _, f := range jd.Findings {
		if f.Mode == gates.Enforce {
			parts = append(parts, fmt.Sprintf("%s %s (%s: %s)", f.Kind, f.Path, f.Gate, f.Code))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the run changed what it must not, by whatever route; put back: " + strings.Join(parts, "; ")
}

// UnjudgedListFile is where the list of an initializer whose hooks never
// checked in is set aside: written without gates, it is not taken, by this
// daemon or, later, as a person's list by the next; a person who wants it
// renames it back.
const UnjudgedListFile = "feature-list.unjudged.json"

// setAsideUnjudgedList moves the list an initializer wrote without its gates
// running out of the way of the next initializer and of a restart.
func (o *Orchestrator) setAsideUnjudgedList(r store.Run) {
	if o.canonical != nil || role.Role(r.Role) != role.Initializer {
		return
	}
	from := o.opts.Project.Progress(progress.FeatureListFile)
	if _, err := os.Stat(from); err != nil {
		return
	}
	to := o.opts.Project.Progress(UnjudgedListFile)
	if err := os.Rename(from, to); err != nil {
		o.opts.Log.Warn("could not set aside a list written without gates", zap.Error(err))
		return
	}
	o.setProblem("")
	o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Context: control.TraceContext{Agent: r.Role, Run: r.ID},
		Event: control.TraceEvent{WhatHappened: fmt.Sprintf("the feature list %s wrote, without its hooks ever checking in, was set aside as %s", r.ID, UnjudgedListFile),
			WhatWasCorrect: "a first list is taken only from an initializer whose gates ran", Why: "gates that are not running must not be trusted; rename it back to keep it"}})
	o.opts.Log.Warn("a feature list written without gates was set aside", zap.String("run", r.ID), zap.String("as", to))
}
