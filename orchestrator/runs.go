package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// spawn starts the run an action asks for. The run (with the work tree it
// starts from), its transition and the counters are committed before the
// process starts.
func (o *Orchestrator) spawn(a statemachine.Action) {
	role := map[statemachine.Kind]agents.Role{
		statemachine.SpawnInitializer: agents.Initializer,
		statemachine.SpawnCoder:       agents.Coder,
		statemachine.SpawnTester:      agents.Tester,
	}[a.Kind]
	prev := o.machine.State()
	o.loadGuardFile() // a person's change of guards.yaml holds from the next run
	if role == agents.Initializer {
		if _, err := progress.ReadGoal(o.opts.Project.Progress()); err != nil {
			// An initializer without a goal would invent a project.
			why := err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				why = "the project has no goal (" + filepath.Join(paths.ProgressDir, progress.GoalFile) + ")"
			}
			o.transition(statemachine.Stop, "", fmt.Sprintf("no initializer started: %s; run `ctxgraphd init --goal TEXT` (or write the file), then `ctxgraphd ctl resume`", why))
			return
		}
	}

	// What the run changes is judged against the tree it starts from.
	base, err := o.repo.Snapshot(context.Background())
	if err != nil {
		o.transition(statemachine.Stop, a.Feature, fmt.Sprintf("could not record the project's work tree before a run, so the run could not be judged: %v", err))
		return
	}
	o.adoptFrozenDrift(base)

	o.lastRun++
	run := store.Run{
		Seq: o.lastRun, ID: store.RunID(o.lastRun), Role: string(role), Feature: a.Feature,
		Attempt: a.Attempt, SessionID: uuid.NewString(), StartedAt: o.now().UTC(), BaseTree: string(base),
	}
	listChanged := false
	if role == agents.Coder {
		c := o.counters[a.Feature]
		if a.Resume && c.CoderSession != "" {
			run.SessionID, run.Resume = c.CoderSession, true
		} else {
			c.CoderSession = run.SessionID
		}
		if c.Base == "" {
			// The feature's work begins: what a verdict may commit on the
			// branch is measured from here.
			head, _, _, err := o.repo.Head(context.Background())
			if err != nil {
				o.log.Warn("could not read HEAD", zap.Error(err))
			}
			c.Base, c.BaseHead = string(base), head
		}
		c.Runs++
		o.setCounters(a.Feature, c)
		if f := o.canonical.Feature(a.Feature); f != nil && f.Status != progress.InProgress {
			f.Status = progress.InProgress
			listChanged = true
		}
	} else if a.Feature != "" {
		c := o.counters[a.Feature]
		c.Runs++
		o.setCounters(a.Feature, c)
	}
	if listChanged {
		o.pending.FeatureList = o.canonical.Marshal()
	}
	cmd := o.command(role, a, prev)
	prompt, system, err := o.prompts(role, cmd)
	if err != nil {
		o.lastRun--
		o.transition(statemachine.Stop, a.Feature, err.Error())
		return
	}
	settings, denied, err := o.runSettingsDenied(role, a.Feature)
	if err != nil {
		o.lastRun--
		o.transition(statemachine.Stop, a.Feature, err.Error())
		return
	}
	o.runNode(&run, cmd)
	actor := gates.Actor{Role: string(role), Feature: a.Feature, Run: run.ID}
	token := o.judge.Register(actor)
	o.judge.Confine(token, denied)
	run.TokenHash = control.TokenHash(token)
	o.session.Run = &run
	o.pending.Runs = append(o.pending.Runs, run)
	if !o.transition(a.Event(), a.Feature, a.String()) {
		o.session.Run = nil // refused or not persisted, and logged: do not act
		o.judge.Forget(run.ID)
		return
	}
	if listChanged {
		o.writeFeatureList()
	}

	ctx, cancel := context.WithCancel(context.Background())
	o.active = &activeRun{run: run, cancel: cancel}
	o.armHooksLive(run.ID)
	o.claim = ""
	spec := agents.Spec{
		RunID: run.ID, Role: role, FeatureID: a.Feature, Attempt: a.Attempt,
		SessionID: run.SessionID, Resume: run.Resume, Prompt: prompt, SystemPrompt: system,
		Dir: o.opts.Project.Dir, Settings: settings, Token: token, MaxBudgetUSD: o.cfg.Budget.RunUSD,
		MCPConfig: o.mcpConfig(token),
	}
	o.log.Info("run starting", zap.String("run", run.ID), zap.String("role", string(role)), zap.String("feature", a.Feature), zap.Int("attempt", a.Attempt),
		zap.Bool("resume", run.Resume), zap.String("session", run.SessionID), zap.Bool("confined", o.cfg.Sandbox.Enabled))
	runner, events, log := o.opts.Runner, o.runEvents, o.log.With(zap.String("run", run.ID))
	go func() {
		res := runner.Run(ctx, spec,
			func(pid int) { events <- runStarted{runID: run.ID, pid: pid} },
			func(ev agents.Event) {
				if ev.Kind == "tool_use" {
					log.Debug("tool", zap.String("tool", ev.Tool), zap.String("detail", ev.Detail))
				}
				o.onRunEvent(run.ID, ev)
			})
		events <- runEnded{runID: run.ID, result: res}
	}()
}

// runSettings is the --settings of a run: ctxgraphd's hooks and, unless the
// user turned confinement off, the sandbox that holds every program the
// agent runs to what it may touch.
func (o *Orchestrator) runSettings(role agents.Role, feature string) (string, error) {
	s, _, err := o.runSettingsDenied(role, feature)
	return s, err
}

// runSettingsDenied is runSettings and what the run's sandbox denies it
// (empty when confinement is off): the hooks believe a refusal the run's
// commands print only there. Claude Code's sandbox holds .claude/ read
// only by itself. The directories the run may write besides the project
// are made here, once per run (sandbox.Policy.Prepare).
func (o *Orchestrator) runSettingsDenied(role agents.Role, feature string) (string, []string, error) {
	var hooks map[string]any
	if o.opts.Hook.Path != "" {
		hooks = gates.RunHooks(o.opts.Hook, string(role))
	}
	settings := map[string]any{"hooks": hooks}
	denied := []string{}
	if o.cfg.Sandbox.Enabled {
		pol := o.policy(role, feature)
		// Made before the run, or the sandbox holds them read-only.
		if err := pol.Prepare(); err != nil {
			o.log.Warn("a directory runs may write could not be made; the tools that need it fail in the sandbox", zap.Error(err))
		}
		settings["sandbox"] = pol.Settings()
		denied = append(slices.Clone(pol.DenyWrite), filepath.Join(o.opts.Project.Dir, ".claude"))
	}
	data, err := json.Marshal(settings)
	if err != nil {
		return "", nil, fmt.Errorf("the settings of a run: %w", err)
	}
	return string(data), denied, nil
}

// policy is what a run's programs may touch: the project but for what is
// the daemon's, Claude Code's and the frozen tests'; the temp and cache
// directories honest builds need; the hosts the user allows. The daemon's
// state and socket can be neither read nor written.
func (o *Orchestrator) policy(role agents.Role, feature string) sandbox.Policy {
	dir := o.opts.Project.Dir
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	deny := []string{
		in(".claude/progress/" + progress.FeatureListFile), in(".claude/progress/" + progress.SessionStateFile),
		in(".claude/progress/" + progress.GoalFile),
		in(".claude/ctxgraphd.yaml"), in(".claude/ctxgraphd"), in(".claude/settings.json"), in(".claude/settings.local.json"),
		in(".mcp.json"), in(".git"), in("CLAUDE.md"), in("CLAUDE.local.md"),
		o.opts.Project.StateDir, o.opts.Project.Socket,
	}
	for _, p := range o.judge.Frozen().Sorted() {
		deny = append(deny, in(p))
	}
	if o.canonical != nil && role != agents.Initializer {
		// Where tests live as a whole directory (tests/**), the sandbox
		// keeps new files out too, not only the verdict afterwards.
		for _, g := range o.cfg.Protected {
			if d, ok := strings.CutSuffix(g, "/**"); ok && !strings.ContainsAny(d, "*?[{") {
				if fi, err := os.Stat(in(d)); err == nil && fi.IsDir() {
					deny = append(deny, in(d))
				}
			}
		}
	}
	// The project's enforced deny guards on a file, for this role: held
	// whatever program writes, as the built-in gates' files are.
	deny = append(deny, o.guardDenies(string(role))...)
	allow := slices.Clone(o.opts.Writable)
	if role == agents.Tester && feature != "" {
		// Its own evidence, which Claude Code's sandbox would otherwise
		// keep it from writing with Bash (it holds .claude/ read-only).
		allow = append(allow, in(".claude/progress/"+progress.EvidenceDir+"/"+feature))
	}
	return sandbox.Policy{
		ProjectDir:     dir,
		DenyWrite:      deny,
		DenyRead:       []string{o.opts.Project.StateDir, o.opts.Project.Socket},
		AllowWrite:     allow,
		AllowedDomains: o.cfg.Sandbox.AllowedDomains,
	}
}

func (o *Orchestrator) onRunStarted(ev runStarted) {
	if o.active == nil || o.active.run.ID != ev.runID {
		return
	}
	o.judge.Started(ev.runID, ev.pid)
	o.active.run.PID = ev.pid
	o.session.Run.PID = ev.pid
	o.pending.Runs = append(o.pending.Runs, o.active.run)
	o.persist()
}

// runJudged is a run whose outcome was judged off the loop.
type runJudged struct {
	run     store.Run
	res     agents.Result
	out     statemachine.Outcome
	claimed bool   // the tester claimed tested: true
	refused string // why the claim was refused before the outcome was judged
	jd      judge.Judgement
	// interrupted: the judging was stopped (ctl stop, a shutdown): the
	// run is redone.
	interrupted string
}

// onRunEnded takes a run that ended. One that ended by itself is judged by
// its outcome, off the loop (a snapshot, and for a tester's claim the
// daemon's own run of the test, take time); then finishRun decides.
func (o *Orchestrator) onRunEnded(ev runEnded) {
	if o.active == nil || o.active.run.ID != ev.runID {
		return
	}
	act := o.active
	res := ev.result
	if act.liveTimer != nil {
		act.liveTimer.Stop()
	}
	if f, ok := res.Failure(o.judge.StopFailure(act.run.ID)); ok && act.interrupt == "" {
		act.failure = &f
	}
	why := ""
	if act.failure == nil {
		why = o.endedSilent(act, res)
	}
	// A run killed because its hooks never checked in wrote without gates
	// just as surely as one that ended by itself first: nothing it wrote
	// is taken, however far it got.
	act.silent = why != "" || act.hooksKilled
	// Read the agent's last writes now rather than waiting for the watcher:
	// the verdict must see them, whatever the debounce.
	o.syncFeatureList(true)
	o.active = nil

	if why != "" {
		// Its gates never ran: nothing the run claims is judged, and the
		// run is redone; what it changed in the tree is still held to
		// the rules.
		o.setAsideUnjudgedList(act.run)
		o.judgeLeftovers(act.run)
		o.finishRun(act, res, statemachine.Outcome{Role: statemachine.Role(act.run.Role), Feature: act.run.Feature, Interrupted: true, Reason: why})
		return
	}
	out := o.prejudge(act, res)
	if out.Interrupted || act.failure != nil {
		if act.hooksKilled {
			o.setAsideUnjudgedList(act.run)
		}
		o.judgeLeftovers(act.run)
		o.finishRun(act, res, out)
		return
	}

	in := judge.RunEnd{
		Actor:   gates.Actor{Role: act.run.Role, Feature: act.run.Feature, Run: act.run.ID},
		Attempt: act.run.Attempt, Base: gitrepo.Tree(act.run.BaseTree), List: o.listOrEmpty(),
	}
	ev2 := runJudged{run: act.run, res: res, out: out}
	if out.Role == statemachine.Tester {
		ev2.claimed = o.claim == act.run.Feature
		if ev2.claimed {
			ev2.refused = o.claimProblem(act.run.Feature, act.run.ID)
		}
		// The daemon runs the test itself to judge a claim, and, when the
		// tester found a failure (or a claim is refused), so that the
		// retry reads the daemon's own output, not only the tester's word.
		// (A claim refused in warn mode is accepted all the same: no run.)
		switch mode := o.judge.Modes().Of(gates.TestedNeedsEvidence); {
		case !ev2.claimed:
			in.Rerun = true
		case ev2.refused != "":
			in.Rerun = mode == gates.Enforce
		default:
			in.Rerun = mode != gates.Off
			// A claim is accepted only on a tree where every feature
			// tested before still passes its frozen test.
			in.Sweep = in.Rerun
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.job = &job{what: fmt.Sprintf("judging %s (%s %s)", act.run.ID, act.run.Role, act.run.Feature), feature: act.run.Feature, cancel: cancel}
	switch {
	case in.Rerun && ev2.claimed && ev2.refused == "":
		o.job.what = fmt.Sprintf("re-running the test of %s to judge its tester's claim", act.run.Feature)
	case in.Rerun:
		o.job.what = fmt.Sprintf("running the test of %s to diagnose its failure for the retry", act.run.Feature)
	}
	o.publish()
	j, events := o.judge, o.runEvents
	go func() {
		ev2.jd = j.JudgeRun(ctx, in)
		if ctx.Err() != nil || (ev2.jd.Test != nil && ev2.jd.Test.Interrupted) {
			ev2.interrupted = "stopped"
		}
		cancel()
		events <- ev2
	}()
}

// onRunJudged takes the outcome of a run as the judge found it.
func (o *Orchestrator) onRunJudged(ev runJudged) {
	jb := o.job
	o.job = nil
	act := &activeRun{run: ev.run}
	out := ev.out
	if ev.interrupted != "" {
		if jb != nil && jb.interrupt != "" {
			act.interrupt = jb.interrupt
		}
		o.dropUnjudgedClaim()
		o.finishRun(act, ev.res, statemachine.Outcome{Role: out.Role, Feature: out.Feature, Interrupted: true, Reason: "the judging of the run was stopped"})
		return
	}
	jd := ev.jd
	if jd.Err != nil {
		o.log.Error("a run could not be judged", zap.String("run", ev.run.ID), zap.Error(jd.Err))
		o.dropUnjudgedClaim()
		o.finishRunRecord(&act.run, ev.res, "interrupted")
		o.pending.Runs = append(o.pending.Runs, act.run)
		o.session.Run = nil
		o.transition(statemachine.Stop, ev.run.Feature, fmt.Sprintf("the outcome of %s could not be judged, so nothing it did is trusted: %v (is the project's git repository in order?)", ev.run.ID, jd.Err))
		return
	}
	o.recordFindings(ev.run, jd)
	if err := o.proposeGuards(); err != nil { // what the run did may complete a pattern
		o.log.Warn("could not propose guards", zap.Error(err))
	}
	o.session.LastTree = string(jd.Tree)
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
		out.Verdict, out.Reason = o.verdict(ev, jd)
	}
	o.finishRun(act, ev.res, out)
}

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
	if jd.Test != nil && jd.Test.Passed() && ev.claimed {
		return nil // tested after all: the verdict decides
	}
	return o.judge.Environment(ev.run.ID)
}

// environmentStop records that the machine or the confinement, not an
// agent, kept a feature's test from running (r: the daemon's own run of
// it, nil when a run's test command showed it), keeps the daemon's output
// for the person, and returns why the session stops, with the fix.
func (o *Orchestrator) environmentStop(run store.Run, e *diagnose.Environment, r *judge.TestResult) string {
	id := run.Feature
	why := fmt.Sprintf("%s's test could not run for want of something on this machine, not for its code (nothing charged): %s",
		id, e.Explain(o.cfg.Sandbox.AllowedDomains))
	note := ""
	if r != nil {
		if log, err := o.judge.WriteEvidence(id, run.Attempt, "environment", *r); err != nil {
			o.log.Warn("could not keep the test's output", zap.Error(err))
		} else {
			note = evidenceNote(log)
		}
	}
	o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto, Code: "test_environment",
		Context: store.TraceContext{Agent: run.Role, Feature: id, Run: run.ID},
		Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s's test could not run in %s: %s (%s)%s", id, e.Place, e.Line, e.Kind, note),
			WhatWasCorrect: e.Explain(o.cfg.Sandbox.AllowedDomains), Why: "no attempt can fix the machine: a person must"}})
	o.log.Warn("a feature's test could not run here; the session stops for a person", zap.String("feature", id), zap.String("kind", string(e.Kind)),
		zap.String("place", string(e.Place)), zap.String("line", e.Line))
	return why
}

// listOrEmpty is the canonical list, or an empty one before the initializer.
func (o *Orchestrator) listOrEmpty() *progress.List {
	if o.canonical == nil {
		return &progress.List{Version: 1}
	}
	return o.canonical.Clone()
}

// finishRun records a run's end and decides what comes next.
func (o *Orchestrator) finishRun(act *activeRun, res agents.Result, out statemachine.Outcome) {
	o.dropUnjudgedClaim()
	if o.judge.IsLive(act.run.ID) {
		o.hooksSilent = 0
	}
	o.judge.Forget(act.run.ID)
	outcome := "ok"
	switch {
	case out.Interrupted:
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
	o.session.Run = nil
	o.totalCost += res.CostUSD
	o.runCount++
	if run.Feature != "" {
		c := o.counters[run.Feature]
		c.CostUSD += res.CostUSD
		o.setCounters(run.Feature, c)
	}
	o.warnBudgets(run.Feature)
	if !out.Transient && !out.Interrupted {
		o.session.Backoffs = 0
	}
	o.log.Info("run ended", zap.String("run", run.ID), zap.String("outcome", outcome), zap.String("ended", string(res.Ended)),
		zap.Int("exit", res.ExitCode), zap.Float64("cost_usd", res.CostUSD), zap.Int("turns", res.NumTurns), zap.String("summary", res.Summary))

	if f := act.failure; f != nil && !f.Waits() {
		// Only a person can fix it; the run is not charged, and the
		// session resumes where it was.
		why := f.Explain(o.cfg.Agent.Command)
		if f.Kind == agents.FailStartup && f.Code == "sandbox_required_unavailable" {
			why = "Claude Code could not start its sandbox, so no agent can run confined: " + f.Detail +
				" (on Linux: install bubblewrap and socat; see `ctxgraphd run`'s start-up check)"
		}
		o.transition(statemachine.Stop, run.Feature, why)
		return
	}
	if act.env != nil {
		// The same: the run is not charged, and a resume redoes it.
		o.transition(statemachine.Stop, run.Feature, out.Reason)
		return
	}
	if o.hooksSilent >= maxSilentHookRuns {
		o.hooksSilent = 0
		o.transition(statemachine.Stop, run.Feature, fmt.Sprintf(
			"the hooks of %d runs in a row never reached the daemon, so no gate was running: check that `%s` works and that nothing (--bare, disableAllHooks, managed settings) turns hooks off",
			maxSilentHookRuns, o.opts.HookCommand+" session-start"))
		return
	}
	if act.interrupt != "" && o.stopAfter {
		o.stopAfter = false
		o.transition(statemachine.Stop, run.Feature, act.interrupt)
		return
	}
	o.step(&out)
}

func (o *Orchestrator) finishRunRecord(r *store.Run, res agents.Result, outcome string) {
	r.EndedAt = o.now().UTC()
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
	if f := act.failure; f != nil {
		// Not the agent's doing: never charged. What waiting cures is
		// waited for; the rest stops the session in finishRun.
		out.Transient = f.Waits()
		out.Reason = f.Explain(o.cfg.Agent.Command)
		o.waitFor = *f
		return out
	}
	switch res.Ended {
	case agents.EndWallTimeout:
		out.Reason = fmt.Sprintf("the run exceeded agent.timeout (%s) and was killed", o.cfg.Agent.Timeout)
	case agents.EndIdleTimeout:
		out.Reason = fmt.Sprintf("the run was stuck: no output for agent.idle_timeout (%s)", o.cfg.Agent.IdleTimeout)
	case agents.EndStuck:
		out.Reason = fmt.Sprintf("the run was stopped as stuck: %s (agent.stuck_after: %d); try another way", res.Stuck, o.cfg.Agent.StuckAfter)
	}
	switch out.Role {
	case statemachine.Initializer:
		if o.canonical == nil && o.problem != "" && !o.problemFromAgent && out.Reason == "" {
			// A person was writing the list meanwhile: not the
			// initializer's failure. Redone once the list is valid, if
			// it is still needed.
			out.Interrupted = true
			out.Reason = "a person was writing feature-list.json during the run"
			return out
		}
		if o.canonical == nil {
			out.Reason = firstNonEmpty(out.Reason, o.problem, "the initializer ended without writing a valid feature-list.json")
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
// and puts back what they refuse: no route around a gate by dying.
func (o *Orchestrator) judgeLeftovers(r store.Run) {
	if r.BaseTree == "" {
		return
	}
	jd := o.judge.JudgeRun(context.Background(), judge.RunEnd{
		Actor: gates.Actor{Role: r.Role, Feature: r.Feature, Run: r.ID}, Attempt: r.Attempt,
		Base: gitrepo.Tree(r.BaseTree), List: o.listOrEmpty(),
	})
	if jd.Err != nil {
		o.log.Warn("could not judge what an interrupted run left", zap.String("run", r.ID), zap.Error(jd.Err))
		return
	}
	o.recordFindings(r, jd)
	o.session.LastTree = string(jd.Tree)
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
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: f.Gate, Code: f.Code, Path: f.Path,
			Context: store.TraceContext{Agent: r.Role, Feature: r.Feature, Run: r.ID},
			Event:   store.TraceEvent{WhatHappened: what, WhatWasCorrect: f.Suggestion, Why: "gate " + f.Gate + ": the outcome is judged, whatever route made it"}})
		o.log.Warn("violation found in the tree", zap.String("run", r.ID), zap.String("gate", f.Gate), zap.String("code", f.Code), zap.String("path", f.Path), zap.String("mode", string(f.Mode)))
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

// claimProblem says why a tester's tested: true is not backed by its own
// recorded test runs and evidence, or "" when it is. The run's record is
// gates.RanTest's, as the hook reads it: a run whose outcome its status did
// not tell goes on to the daemon's own run of the test, which decides.
func (o *Orchestrator) claimProblem(id, runID string) string {
	f := o.canonical.Feature(id)
	if f == nil {
		return ""
	}
	if strings.TrimSpace(f.Test) == "" && o.judge.Modes().Of(gates.RedBeforeGreen) == gates.Enforce {
		return fmt.Sprintf("%s has no test command, and a feature without one cannot be accepted as tested", id)
	}
	if len(f.Evidence) == 0 {
		return fmt.Sprintf("tested: true for %s came without evidence", id)
	}
	runs := gates.RanTest(o.judge.Commands(runID), f.Test, o.opts.Project.Dir)
	switch {
	case !runs.Ran:
		return fmt.Sprintf("tested: true for %s, but its tester run never ran %s (as recorded by its hooks)", id, gates.TestName(f.Test))
	case !runs.Claimable():
		return fmt.Sprintf("tested: true for %s, but %s failed in its tester run", id, gates.TestName(f.Test))
	}
	return ""
}

// verdict accepts a tester's tested: true only when the run's own record
// holds (its test ran and passed, evidence left), its change set broke no
// rule, and the daemon, running the feature's test itself on exactly the
// tree it then commits, sees it pass. A rejected claim is taken off the
// disk.
func (o *Orchestrator) verdict(ev runJudged, jd judge.Judgement) (bool, string) {
	id, run := ev.run.Feature, ev.run
	f := o.canonical.Feature(id)
	if f == nil || f.Status == progress.Blocked {
		o.claim = ""
		return false, "" // gone, or set aside by a person meanwhile: nothing to judge
	}
	o.claim = ""
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
		o.log.Warn("tested:true rejected", zap.String("feature", id), zap.String("why", why))
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: "verdict_rejected",
			Context: store.TraceContext{Agent: string(agents.Tester), Feature: id, Run: run.ID},
			Event:   store.TraceEvent{WhatHappened: why + output, WhatWasCorrect: "tested: true only after the feature's own test passed in the tester's run, with evidence, and in the daemon's own run", Why: "tested must mean tested"}})
		o.writeFeatureList() // the canonical copy still says tested: false
		return false, why
	}
	mode := o.judge.Modes().Of(gates.TestedNeedsEvidence)
	if jd.Blocks() {
		return reject(findingsReason(jd), "")
	}
	if ev.refused != "" {
		if mode == gates.Enforce {
			return reject(ev.refused, "")
		}
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: "unverified",
			Context: store.TraceContext{Agent: string(agents.Tester), Feature: id, Run: run.ID},
			Event:   store.TraceEvent{WhatHappened: ev.refused + " (warn mode: accepted)"}})
		return o.accept(f, run, jd, nil)
	}
	if mode == gates.Off {
		return o.accept(f, run, jd, nil)
	}
	if jd.Test == nil {
		return reject("the daemon did not run the test", "")
	}
	log, err := o.judge.WriteEvidence(id, run.Attempt, "verdict", *jd.Test)
	if err != nil {
		o.log.Warn("could not keep the daemon's test output", zap.Error(err))
	}
	if !jd.Test.Passed() {
		return reject(fmt.Sprintf("the daemon ran the test itself and it did not pass: %s", jd.Test.Summary()), evidenceNote(log))
	}
	if len(jd.Regressions) > 0 {
		return o.rejectRegressions(id, run, jd.Regressions)
	}
	return o.accept(f, run, jd, &log)
}

// rejectRegressions refuses a claim whose own test passed on a tree where
// features tested before it fail theirs: the project's branch holds only
// trees on which every tested feature passes. It is the attempt's failure,
// charged like a failing test (the coder's change broke them), and the
// retry is told which tests broke and how (the diagnosis, from the first).
func (o *Orchestrator) rejectRegressions(id string, run store.Run, broken []judge.Regression) (bool, string) {
	var names, logs []string
	for _, b := range broken {
		names = append(names, b.Feature)
		if l, err := o.judge.WriteEvidence(id, run.Attempt, "sweep-"+b.Feature, b.Test); err == nil {
			logs = append(logs, l)
		}
	}
	why := fmt.Sprintf("%s's own test passed, but on its tree the frozen test of %s, tested before it, does not: %s",
		id, strings.Join(names, ", "), broken[0].Test.Summary())
	o.log.Warn("tested:true rejected: it breaks features tested before it", zap.String("feature", id), zap.Strings("broken", names))
	o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gates.TestedNeedsEvidence, Code: "breaks_tested",
		Context: store.TraceContext{Agent: string(agents.Tester), Feature: id, Run: run.ID},
		Event: store.TraceEvent{WhatHappened: why + " (output in " + strings.Join(logs, ", ") + ")",
			WhatWasCorrect: "a feature is tested only on a tree where every feature tested before it still passes its frozen test",
			Why:            "the branch only ever holds trees on which every tested feature passes"}})
	o.writeFeatureList() // the canonical copy still says tested: false
	return false, why
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
		o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto, Context: store.TraceContext{Agent: run.Role, Feature: id, Run: run.ID},
			Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s attempt %d failed its test: %s", id, attempt, r.Summary()), Why: "the daemon ran the feature's test itself after its tester's run"}})
		d := diagnose.Read(r.Command, r.ExitCode, r.Output)
		switch {
		case r.CannotRun != "":
			d.Message = "the test cannot run: " + r.CannotRun
		case r.TimedOut:
			d.Message = "the test did not finish in time"
		}
		if _, err := o.judge.WriteEvidence(id, attempt, "diagnosis", *r); err != nil {
			o.log.Warn("could not keep the failing test's output", zap.String("feature", id), zap.Error(err))
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
	runs, err := o.st.Runs()
	if err != nil {
		o.log.Warn("could not read the runs for a diagnosis", zap.Error(err))
		return ""
	}
	for _, r := range slices.Backward(runs) {
		if r.Role == string(agents.Coder) && r.Feature == id && r.Attempt == attempt {
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

// accept makes a verdict canonical and, unless git.commit is off, commits
// exactly the tree the daemon's test ran on.
func (o *Orchestrator) accept(f *progress.Feature, run store.Run, jd judge.Judgement, log *string) (bool, string) {
	f.Tested = true
	if log != nil && *log != "" && !slices.Contains(f.Evidence, *log) {
		f.Evidence = append(f.Evidence, *log)
	}
	o.pending.FeatureList = o.canonical.Marshal()
	o.persist()
	o.writeFeatureList()
	why := "the tester's test run passed, evidence was left, and the daemon's own run of the test passed"
	if jd.Test != nil {
		why = "the tester's test run passed, evidence was left, and " + jd.Test.Summary() + " when the daemon ran it itself"
	}
	tr := o.trace(store.Trace{Type: store.TraceApproval, Source: store.SourceAuto, Context: store.TraceContext{Agent: string(agents.Tester), Feature: f.ID, Run: run.ID},
		Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s accepted as tested (attempt %d)%s", f.ID, run.Attempt, evidenceNote(deref(log))), Why: why}})
	c := o.counters[f.ID]
	if o.cfg.Git.Commit && jd.Tree != "" {
		done, err := o.judge.Commit(context.Background(), judge.Verdict{
			Feature: f, Attempt: run.Attempt, Run: run.ID, Trace: tr.ID, Tree: jd.Tree,
			Base: gitrepo.Tree(c.Base), BaseHead: c.BaseHead,
		})
		switch {
		case err != nil:
			o.log.Error("could not commit a tested feature", zap.String("feature", f.ID), zap.Error(err))
		default:
			c.Commit, c.Branch = done.Commit, done.Branch
			where := "on " + done.Branch
			if done.Branch == "" {
				where = "under " + done.Ref + " only: " + done.NotOnBranch
			}
			o.log.Info("tested feature committed", zap.String("feature", f.ID), zap.String("commit", done.Commit), zap.String("where", where))
			o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto, Context: store.TraceContext{Agent: string(agents.Tester), Feature: f.ID, Run: run.ID},
				Parent: tr.ID, Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s committed as %s, %s (verdict %s)", f.ID, done.Commit, where, tr.ID), Why: "tested names a commit: exactly the tree the daemon's test ran on"}})
		}
	}
	c.Base, c.BaseHead = "", ""
	o.setCounters(f.ID, c)
	o.persist()
	return true, ""
}

// afterInitializer freezes the acceptance tests the initializer wrote with
// the list and, when the tree held nothing but HEAD before it ran, commits
// its work, so that the features' commits start from a clean tree.
func (o *Orchestrator) afterInitializer(run store.Run, jd judge.Judgement) {
	o.refreeze(jd.Tree, "the feature list was accepted")
	if !o.cfg.Git.Commit || jd.Tree == "" || len(jd.Changes) == 0 {
		return
	}
	ctx := context.Background()
	head, headTree, branch, err := o.repo.Head(ctx)
	if err != nil || branch == "" || string(headTree) != run.BaseTree {
		return // a person's work was in the tree: it is not ours to commit
	}
	var parents []string
	if head != "" {
		parents = []string{head}
	}
	msg := fmt.Sprintf("ctxgraphd: the feature list's acceptance tests and scaffolding\n\nWritten by the initializer (%s) for %d features.\n\nctxgraphd-run: %s\n", run.ID, len(o.canonical.Features), run.ID)
	c, err := o.repo.Commit(ctx, jd.Tree, parents, msg, judge.Author)
	if err == nil {
		_, err = o.repo.AdvanceBranch(ctx, head, c)
	}
	if err != nil {
		o.log.Warn("could not commit the initializer's work", zap.Error(err))
		return
	}
	o.log.Info("initializer's work committed", zap.String("commit", c))
}

// refreeze records the acceptance tests as tree holds them: when the list is
// accepted, and whenever a person may have changed a test (the record
// follows a person, never an agent).
func (o *Orchestrator) refreeze(tree gitrepo.Tree, why string) {
	if o.canonical == nil {
		return
	}
	ctx := context.Background()
	if tree == "" {
		var err error
		if tree, err = o.repo.Snapshot(ctx); err != nil {
			o.log.Warn("could not record the frozen tests", zap.Error(err))
			return
		}
	}
	fz, err := o.judge.Freeze(ctx, o.canonical, tree)
	if err != nil {
		o.log.Warn("could not record the frozen tests", zap.Error(err))
		return
	}
	if err := o.judge.SetFrozen(fz); err != nil {
		o.log.Warn("could not leave the frozen tests where the hooks find them", zap.Error(err))
	}
	data, _ := json.Marshal(fz)
	o.pending.Frozen = data
	o.log.Info("frozen tests recorded", zap.String("why", why), zap.Int("files", len(fz.Files)))
}

// adoptFrozenDrift takes a frozen test that changed between runs as a
// person's change: what changed from the tree the last judged run left to
// the tree the next one starts from was changed while no agent ran. A
// frozen test an agent changed and a gate in warn mode let stand is not a
// person's, and the record keeps what it held.
func (o *Orchestrator) adoptFrozenDrift(base gitrepo.Tree) {
	if string(base) == o.session.LastTree {
		return // nothing changed since the last judged run: no person's change to take
	}
	ctx := context.Background()
	drift, err := o.judge.Drift(ctx, base)
	if err != nil || len(drift) == 0 {
		return
	}
	if last := o.session.LastTree; last != "" {
		between, err := o.repo.Changes(ctx, gitrepo.Tree(last), base)
		if err != nil {
			o.log.Warn("could not tell a person's changes of the tests from an agent's", zap.Error(err))
			return
		}
		changed := map[string]bool{}
		for _, c := range between {
			changed[c.Path] = true
		}
		drift = slices.DeleteFunc(drift, func(p string) bool { return !changed[p] })
		if len(drift) == 0 {
			return
		}
	}
	fz, err := o.judge.Adopt(ctx, base, drift)
	if err != nil {
		o.log.Warn("could not record a person's change of the tests", zap.Error(err))
		return
	}
	data, _ := json.Marshal(fz)
	o.pending.Frozen = data
	o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto,
		Event: store.TraceEvent{WhatHappened: fmt.Sprintf("frozen tests changed while no agent ran: %s; the record follows them", strings.Join(drift, ", ")),
			Why: "tests are a person's to change"}})
	o.log.Info("a person's change of frozen tests taken into the record", zap.Strings("paths", drift))
}

// testChecked is a feature's test, run before its first coding attempt.
type testChecked struct {
	feature string
	result  judge.TestResult
}

// checkTest runs a feature's test once before any code is written for it
// (gate red-before-green), off the loop.
func (o *Orchestrator) checkTest(a statemachine.Action) {
	f := o.canonical.Feature(a.Feature)
	if f == nil {
		return
	}
	test := f.Test
	ctx, cancel := context.WithCancel(context.Background())
	o.job = &job{what: fmt.Sprintf("running the test of %s before its first coding attempt", a.Feature), feature: a.Feature, cancel: cancel}
	o.log.Info("checking a feature's test before any code", zap.String("feature", a.Feature), zap.String("test", test))
	o.publish()
	j, repo, events, id := o.judge, o.repo, o.runEvents, a.Feature
	go func() {
		// The test runs on the project's tree as it is now (no run is in
		// flight): a snapshot, checked out apart from the work tree.
		var r judge.TestResult
		if tree, err := repo.Snapshot(ctx); err != nil {
			r = judge.TestResult{Command: test, ExitCode: -1, Interrupted: ctx.Err() != nil,
				CannotRun: "the project's tree could not be read: " + err.Error()}
		} else {
			r = j.RunTest(ctx, tree, test)
		}
		cancel()
		events <- testChecked{feature: id, result: r}
	}()
}

func (o *Orchestrator) onTestChecked(ev testChecked) {
	jb := o.job
	o.job = nil
	r := ev.result
	if r.Interrupted {
		if jb != nil && jb.interrupt != "" && o.stopAfter {
			o.stopAfter = false
			o.transition(statemachine.Stop, ev.feature, jb.interrupt)
			return
		}
		o.step(nil) // checked again
		return
	}
	if _, err := o.judge.WriteEvidence(ev.feature, 0, "before-code", r); err != nil {
		o.log.Warn("could not keep the test's output", zap.Error(err))
	}
	if r.Env != nil {
		// The machine, not the test, failed: the check is still due, and
		// a resume runs it again.
		why := o.environmentStop(store.Run{Feature: ev.feature}, r.Env, nil)
		o.transition(statemachine.Stop, ev.feature, why)
		return
	}
	c := o.counters[ev.feature]
	code := ""
	switch {
	case r.Passed():
		c.Red, code = string(statemachine.RedPasses), "vacuous_test"
		c.RedDetail = fmt.Sprintf("%s's test `%s` passes before any code was written for it: it tests nothing the feature adds (or the feature is already there). Make the test fail until the feature exists, then `ctxgraphd ctl retry %s`", ev.feature, r.Command, ev.feature)
	case r.CannotRun != "":
		c.Red, code = string(statemachine.RedCannotRun), "test_cannot_run"
		c.RedDetail = o.cannotRunDetail(ev.feature, r)
	default:
		c.Red = string(statemachine.RedFailing)
		c.RedDetail = r.Summary()
	}
	o.setCounters(ev.feature, c)
	if code != "" {
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gates.RedBeforeGreen, Code: code,
			Context: store.TraceContext{Feature: ev.feature},
			Event:   store.TraceEvent{WhatHappened: c.RedDetail, WhatWasCorrect: "a feature's test runs, and fails, until the feature exists", Why: "a test that cannot fail, or cannot run, makes nothing tested"}})
		o.log.Warn("a feature's test is not red before any code", zap.String("feature", ev.feature), zap.String("code", code), zap.String("detail", c.RedDetail))
	} else {
		o.log.Info("a feature's test fails before any code, as it should", zap.String("feature", ev.feature))
	}
	o.step(nil)
}

// cannotRunDetail says why a test cannot run and what to do about it.
func (o *Orchestrator) cannotRunDetail(id string, r judge.TestResult) string {
	if strings.TrimSpace(r.Command) != "" {
		return fmt.Sprintf("%s's test `%s` cannot run: %s. Fix the test command or add what it needs, then `ctxgraphd ctl retry %s`", id, r.Command, r.CannotRun, id)
	}
	if o.canonical != nil && o.canonical.Format == progress.FormatQuickstart {
		return fmt.Sprintf("%s has no test command: feature-list.json is in the quickstart format, which has none. Rewrite it as {\"version\": 1, \"features\": [...]} and give each feature a \"test\" (one shell command that fails until the feature works), then `ctxgraphd ctl retry %s`", id, id)
	}
	return fmt.Sprintf("%s has no test command, and a feature without one can never be accepted as tested. Give it a \"test\" in feature-list.json (one shell command that fails until the feature works), then `ctxgraphd ctl retry %s`", id, id)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// UnjudgedListFile is where the list of an initializer whose hooks never
// checked in is set aside: written without gates, it is not taken, by this
// daemon or, later, as a person's list by the next; a person who wants it
// renames it back.
const UnjudgedListFile = "feature-list.unjudged.json"

// setAsideUnjudgedList moves the list an initializer wrote without its gates
// running out of the way of the next initializer and of a restart.
func (o *Orchestrator) setAsideUnjudgedList(r store.Run) {
	if o.canonical != nil || agents.Role(r.Role) != agents.Initializer {
		return
	}
	from := o.opts.Project.Progress(progress.FeatureListFile)
	if _, err := os.Stat(from); err != nil {
		return
	}
	to := o.opts.Project.Progress(UnjudgedListFile)
	if err := os.Rename(from, to); err != nil {
		o.log.Warn("could not set aside a list written without gates", zap.Error(err))
		return
	}
	o.setProblem("")
	o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto, Context: store.TraceContext{Agent: r.Role, Run: r.ID},
		Event: store.TraceEvent{WhatHappened: fmt.Sprintf("the feature list %s wrote, without its hooks ever checking in, was set aside as %s", r.ID, UnjudgedListFile),
			WhatWasCorrect: "a first list is taken only from an initializer whose gates ran", Why: "gates that are not running must not be trusted; rename it back to keep it"}})
	o.log.Warn("a feature list written without gates was set aside", zap.String("run", r.ID), zap.String("as", to))
}

// budgetWarnAt is the share of a budget spent at which a person is warned,
// before anything is stopped for it.
const budgetWarnAt = 0.8

// nearlySpent reports whether spent is past the warning share of budget
// (0: no budget).
func nearlySpent(spent, budget float64) bool {
	return budget > 0 && spent >= budgetWarnAt*budget
}

// warnBudgets warns a person, once each, when the session's or feature's
// budget is nearly spent: a trace, the log, a notification.
func (o *Orchestrator) warnBudgets(feature string) {
	warn := func(id, what string, spent, budget float64, key string) {
		msg := fmt.Sprintf("%s has spent $%.2f of its %s of $%.2f (%.0f%%); at the limit it is stopped", what, spent, key, budget, 100*spent/budget)
		o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceAuto, Code: "budget_warning", Context: store.TraceContext{Feature: id},
			Event: store.TraceEvent{WhatHappened: msg, Why: "a person may want to raise the budget, or look, before the limit stops the work"}})
		o.log.Warn("budget nearly spent", zap.String("feature", id), zap.Float64("spent_usd", spent), zap.Float64("budget_usd", budget), zap.String("key", key))
		o.notify(notify.BudgetWarning, id, msg)
	}
	if !o.session.BudgetWarned && nearlySpent(o.totalCost, o.cfg.Budget.SessionUSD) {
		o.session.BudgetWarned = true
		warn("", "the session", o.totalCost, o.cfg.Budget.SessionUSD, "budget.session_usd")
	}
	if c := o.counters[feature]; feature != "" && !c.BudgetWarned && nearlySpent(c.CostUSD, o.cfg.Budget.FeatureUSD) {
		c.BudgetWarned = true
		o.setCounters(feature, c)
		warn(feature, feature, c.CostUSD, o.cfg.Budget.FeatureUSD, "budget.feature_usd")
	}
}
