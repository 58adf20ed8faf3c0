package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// spawn starts the run an action asks for. The run, its transition and the
// counters are committed before the process starts.
func (o *Orchestrator) spawn(a statemachine.Action) {
	role := map[statemachine.Kind]agents.Role{
		statemachine.SpawnInitializer: agents.Initializer,
		statemachine.SpawnCoder:       agents.Coder,
		statemachine.SpawnTester:      agents.Tester,
	}[a.Kind]
	prev := o.machine.State()

	o.lastRun++
	run := store.Run{
		Seq: o.lastRun, ID: store.RunID(o.lastRun), Role: string(role), Feature: a.Feature,
		Attempt: a.Attempt, SessionID: uuid.NewString(), StartedAt: o.now().UTC(),
	}
	listChanged := false
	if role == agents.Coder {
		c := o.counters[a.Feature]
		if a.Resume && c.CoderSession != "" {
			run.SessionID, run.Resume = c.CoderSession, true
		} else {
			c.CoderSession = run.SessionID
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
	o.session.Run = &run
	o.pending.Runs = append(o.pending.Runs, run)
	if !o.transition(a.Event(), a.Feature, a.String()) {
		o.session.Run = nil // refused or not persisted, and logged: do not act
		return
	}
	if listChanged {
		o.writeFeatureList()
	}

	ctx, cancel := context.WithCancel(context.Background())
	o.active = &activeRun{run: run, cancel: cancel}
	o.gates.register(guard.Actor{Role: string(role), Feature: a.Feature, Run: run.ID})
	o.armHooksLive(run.ID)
	o.claim = ""
	spec := agents.Spec{
		RunID: run.ID, Role: role, FeatureID: a.Feature, Attempt: a.Attempt,
		SessionID: run.SessionID, Resume: run.Resume, Prompt: prompt, SystemPrompt: system,
		Dir: o.opts.Project.Dir, Settings: o.opts.Settings, MaxBudgetUSD: o.cfg.Budget.RunUSD,
	}
	o.log.Info("run starting", zap.String("run", run.ID), zap.String("role", string(role)), zap.String("feature", a.Feature), zap.Int("attempt", a.Attempt), zap.Bool("resume", run.Resume), zap.String("session", run.SessionID))
	runner, events, log := o.opts.Runner, o.runEvents, o.log.With(zap.String("run", run.ID))
	go func() {
		res := runner.Run(ctx, spec,
			func(pid int) { events <- runStarted{runID: run.ID, pid: pid} },
			func(ev agents.Event) {
				if ev.Kind == "tool_use" {
					log.Debug("tool", zap.String("tool", ev.Tool), zap.String("detail", ev.Detail))
				}
			})
		events <- runEnded{runID: run.ID, result: res}
	}()
}

func (o *Orchestrator) onRunStarted(ev runStarted) {
	if o.active == nil || o.active.run.ID != ev.runID {
		return
	}
	o.active.run.PID = ev.pid
	o.session.Run.PID = ev.pid
	o.pending.Runs = append(o.pending.Runs, o.active.run)
	o.commit()
}

// onRunEnded judges a finished run and decides what comes next.
func (o *Orchestrator) onRunEnded(ev runEnded) {
	if o.active == nil || o.active.run.ID != ev.runID {
		return
	}
	act := o.active
	res := ev.result
	// Read the agent's last writes now rather than waiting for the watcher:
	// the verdict must see them, whatever the debounce.
	o.syncFeatureList(true)
	o.active = nil

	var out statemachine.Outcome
	if why := o.endedSilent(act, res); why != "" {
		// Its gates never ran: nothing the run claims is judged, and
		// the run is redone.
		out = statemachine.Outcome{Role: statemachine.Role(act.run.Role), Feature: act.run.Feature, Interrupted: true, Reason: why}
	} else {
		out = o.judge(act, res)
	}
	o.dropUnjudgedClaim()
	if o.gates.isLive(act.run.ID) {
		o.hooksSilent = 0
	}
	o.gates.forget(act.run.ID)
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
	o.pending.Runs = append(o.pending.Runs, run)
	o.session.Run = nil
	o.totalCost += res.CostUSD
	o.runCount++
	if run.Feature != "" {
		c := o.counters[run.Feature]
		c.CostUSD += res.CostUSD
		o.setCounters(run.Feature, c)
	}
	if !out.Transient {
		o.transient = 0
	}
	o.log.Info("run ended", zap.String("run", run.ID), zap.String("outcome", outcome), zap.String("ended", string(res.Ended)),
		zap.Int("exit", res.ExitCode), zap.Float64("cost_usd", res.CostUSD), zap.Int("turns", res.NumTurns), zap.String("summary", res.Summary))

	if res.Ended == agents.EndStartFailed {
		o.transition(statemachine.Stop, run.Feature, fmt.Sprintf("could not start %q: %v (set agent.command to the Claude Code binary)", o.cfg.Agent.Command, res.Err))
		return
	}
	if res.APIErrorStatus == 401 || res.APIErrorStatus == 403 {
		o.transition(statemachine.Stop, run.Feature, fmt.Sprintf("Claude Code could not authenticate (HTTP %d): %s", res.APIErrorStatus, res.Summary))
		return
	}
	if o.hooksSilent >= maxSilentHookRuns {
		o.hooksSilent = 0
		o.transition(statemachine.Stop, run.Feature, fmt.Sprintf(
			"the hooks of %d runs in a row never reached the daemon, so no gate was running: check that `%s hook session-start` works and that nothing (--bare, disableAllHooks, managed settings) turns hooks off",
			maxSilentHookRuns, hookBinary()))
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

// judge turns a run's result into the outcome the rules decide on.
func (o *Orchestrator) judge(act *activeRun, res agents.Result) statemachine.Outcome {
	run := act.run
	out := statemachine.Outcome{Role: statemachine.Role(run.Role), Feature: run.Feature}
	if act.interrupt != "" || res.Ended == agents.EndCancelled {
		out.Interrupted = true
		out.Reason = act.interrupt
		return out
	}
	if transient(res) {
		out.Transient = true
		out.Reason = fmt.Sprintf("API error (status %d): %s", res.APIErrorStatus, res.Summary)
		if !res.RateLimitResetsAt.IsZero() {
			o.retryAt = res.RateLimitResetsAt
		}
		return out
	}
	switch res.Ended {
	case agents.EndWallTimeout:
		out.Reason = fmt.Sprintf("the run exceeded agent.timeout (%s) and was killed", o.cfg.Agent.Timeout)
	case agents.EndIdleTimeout:
		out.Reason = fmt.Sprintf("the run was stuck: no output for agent.idle_timeout (%s)", o.cfg.Agent.IdleTimeout)
	}
	switch out.Role {
	case statemachine.Initializer:
		if o.canonical == nil {
			out.Reason = firstNonEmpty(out.Reason, o.problem, "the initializer ended without writing a valid feature-list.json")
		}
	case statemachine.Coder:
		if f := o.canonical.Feature(run.Feature); f != nil && f.Status != progress.Completed {
			out.Reason = firstNonEmpty(out.Reason, fmt.Sprintf("the coding run ended without setting %s to completed: %s", run.Feature, res.Summary))
		}
	case statemachine.Tester:
		out.Verdict, out.Reason = o.verdict(run.Feature, run.ID, res)
	}
	return out
}

// verdict accepts a tester's tested:true only when the daemon, re-running the
// feature's test itself, sees it pass and the tester left evidence. A
// rejected claim is reverted on disk.
func (o *Orchestrator) verdict(id, runID string, res agents.Result) (bool, string) {
	f := o.canonical.Feature(id)
	if f == nil {
		return false, ""
	}
	claimed := o.claim == id
	o.claim = ""
	if !claimed {
		return false, firstNonEmpty(res.Summary, fmt.Sprintf("the tester did not set tested: true for %s", id))
	}
	reject := func(why string) (bool, string) {
		o.log.Warn("tested:true rejected", zap.String("feature", id), zap.String("why", why))
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: guard.TestedNeedsEvidence, Code: "verdict_rejected",
			Context: store.TraceContext{Agent: string(agents.Tester), Feature: id, Run: runID},
			Event:   store.TraceEvent{WhatHappened: why, WhatWasCorrect: "tested: true only after the feature's own test passed in the tester's run, with evidence", Why: "tested must mean tested"}})
		o.writeFeatureList() // the canonical copy still says tested: false
		return false, why
	}
	mode := o.gates.modes.Of(guard.TestedNeedsEvidence)
	if mode == guard.Off {
		return o.accept(f)
	}
	if why := o.evidenceProblem(f, runID); why != "" {
		if mode == guard.Enforce {
			return reject(why)
		}
		o.trace(store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: guard.TestedNeedsEvidence, Code: "unverified",
			Context: store.TraceContext{Agent: string(agents.Tester), Feature: id, Run: runID},
			Event:   store.TraceEvent{WhatHappened: why + " (warn mode: accepted)"}})
		return o.accept(f)
	}
	if f.Test != "" {
		if ok, output := o.runTest(f.Test); !ok {
			return reject(fmt.Sprintf("the daemon re-ran `%s` and it failed: %s", f.Test, output))
		}
	}
	return o.accept(f)
}

// dropUnjudgedClaim takes a tester's tested: true off the disk when no
// verdict judged it: its run was interrupted, timed out or ran without
// hooks. Left there, it would read as tested to anyone who looks, and as a
// claim to the next tester run.
func (o *Orchestrator) dropUnjudgedClaim() {
	if o.claim == "" {
		return
	}
	o.log.Info("dropping an unjudged tested: true", zap.String("feature", o.claim))
	o.claim = ""
	o.writeFeatureList()
}

func (o *Orchestrator) accept(f *progress.Feature) (bool, string) {
	f.Tested = true
	o.pending.FeatureList = o.canonical.Marshal()
	o.commit()
	o.writeFeatureList()
	o.trace(store.Trace{Type: store.TraceApproval, Source: store.SourceAuto, Context: store.TraceContext{Agent: string(agents.Tester), Feature: f.ID},
		Event: store.TraceEvent{WhatHappened: fmt.Sprintf("%s accepted as tested", f.ID), Why: "the tester's test run passed, evidence was left, and the daemon's own run of the test passed"}})
	return true, ""
}

// evidenceProblem says why a tester run's tested:true is not backed by its
// own recorded test runs and evidence, or "" when it is.
func (o *Orchestrator) evidenceProblem(f *progress.Feature, runID string) string {
	if len(f.Evidence) == 0 {
		return fmt.Sprintf("tested: true for %s came without evidence", f.ID)
	}
	var ran, passed bool
	for _, c := range o.gates.commandsOf(runID) {
		if (f.Test != "" && guard.MatchesTest(c.Command, f.Test)) || (f.Test == "" && c.IsTest) {
			ran = true
			passed = passed || c.Passed()
		}
	}
	want := "a test command"
	if f.Test != "" {
		want = "`" + f.Test + "`"
	}
	switch {
	case !ran:
		return fmt.Sprintf("tested: true for %s, but its tester run never ran %s (as recorded by its hooks)", f.ID, want)
	case !passed:
		return fmt.Sprintf("tested: true for %s, but %s failed in its tester run", f.ID, want)
	}
	return ""
}

// runTest runs a feature's test command the way the tester should have, in
// the project directory, under the run timeout.
func (o *Orchestrator) runTest(command string) (bool, string) {
	timeout := o.cfg.Agent.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = o.opts.Project.Dir
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcessGroup(cmd)
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if len(text) > 400 {
		text = "…" + text[len(text)-400:]
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return false, fmt.Sprintf("exit %d: %s", ee.ExitCode(), text)
		}
		return false, err.Error()
	}
	return true, text
}

// transient reports results that waiting cures: rate limits, overload and
// server errors.
func transient(res agents.Result) bool {
	if !res.IsError {
		return false
	}
	s := res.APIErrorStatus
	return s == 429 || s == 529 || (s >= 500 && s < 600) || !res.RateLimitResetsAt.IsZero()
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
