package orchestrator

// The frozen acceptance tests: frozen again when the list changes, drift
// adopted, and each test's check before any code (red before green).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
	"go.uber.org/zap"
)

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
		if tree, err = o.opts.Repo.Snapshot(ctx); err != nil {
			o.opts.Log.Warn("could not record the frozen tests", zap.Error(err))
			return
		}
	}
	fz, err := o.opts.Judge.Freeze(ctx, o.canonical, tree)
	if err != nil {
		o.opts.Log.Warn("could not record the frozen tests", zap.Error(err))
		return
	}
	if err := o.opts.Judge.SetFrozen(fz); err != nil {
		o.opts.Log.Warn("could not leave the frozen tests where the hooks find them", zap.Error(err))
	}
	data, _ := json.Marshal(fz)
	o.pending.Frozen = data
	o.opts.Log.Info("frozen tests recorded", zap.String("why", why), zap.Int("files", len(fz.Files)))
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
	drift, err := o.opts.Judge.Drift(ctx, base)
	if err != nil || len(drift) == 0 {
		return
	}
	if last := o.session.LastTree; last != "" {
		between, err := o.opts.Repo.Changes(ctx, gitrepo.Tree(last), base)
		if err != nil {
			o.opts.Log.Warn("could not tell a person's changes of the tests from an agent's", zap.Error(err))
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
	fz, err := o.opts.Judge.Adopt(ctx, base, drift)
	if err != nil {
		o.opts.Log.Warn("could not record a person's change of the tests", zap.Error(err))
		return
	}
	data, _ := json.Marshal(fz)
	o.pending.Frozen = data
	o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto,
		Event: control.TraceEvent{WhatHappened: fmt.Sprintf("frozen tests changed while no agent ran: %s; the record follows them", strings.Join(drift, ", ")),
			Why: "tests are a person's to change"}})
	o.opts.Log.Info("a person's change of frozen tests taken into the record", zap.Strings("paths", drift))
}

// testChecked is a feature's test, run before its first coding attempt,
// and the work tree it ran on (recorded at at; "" if it could not be).
type testChecked struct {
	feature string
	setup   setupRun // the tree's setup step, run before the test
	result  judge.TestResult
	tree    gitrepo.Tree
	at      time.Time
}

// checkTest runs a feature's test once before any code is written for it
// (gate red-before-green), off the loop, in l's tree.
func (o *Orchestrator) checkTest(l *lane, a statemachine.Action) {
	f := o.canonical.Feature(a.Feature)
	if f == nil {
		return
	}
	test := f.Test
	ctx, cancel := context.WithCancel(context.Background())
	jb := &job{what: fmt.Sprintf("running the test of %s before its first coding attempt", a.Feature), feature: a.Feature, cancel: cancel, lane: l}
	if !l.project {
		// A lane's check reads only its own tree: other lanes' work,
		// and the job that moves the branch, go on beside it.
		l.check = jb
	} else {
		o.lanes.job = jb
	}
	o.opts.Log.Info("checking a feature's test before any code", zap.String("feature", a.Feature), zap.String("test", test))
	o.publish()
	// The tree is set up first, as the coder that follows will find it.
	script, from := o.namedSetup()
	pol, setup, log := o.policy(l, role.Coder, ""), o.opts.Setup, o.opts.Log
	// The test runs on the project's tree as it is now (no run is in
	// flight): a snapshot, checked out apart from the work tree; the one
	// the run that just ended was judged on, when that was a moment ago
	// (startTree).
	ev := testChecked{feature: a.Feature}
	if r := o.takeRecent(l); r != nil {
		ev.tree, ev.at = r.tree, r.at
	}
	l.runCheck(ctx, cancel, test, ev, func(ctx context.Context, dir, done string) setupRun {
		// The tree's files decide the step: read here, off the loop.
		return runSetup(ctx, setup, log, setupIn(dir, script, from), pol, dir, done)
	}, o.runEvents)
}

// runCheck runs test, l's feature's test before its first coding
// attempt, off the loop: the tree set up first (setUp, in l's work tree,
// from the setup that last succeeded there), then the test on ev's tree,
// or on a snapshot of l's tree when ev has none; the result goes to events
// in ev (testChecked). cancel is ctx's, released at the end.
func (l *lane) runCheck(ctx context.Context, cancel context.CancelFunc, test string, ev testChecked, setUp func(ctx context.Context, dir, done string) setupRun, events chan<- any) {
	j, repo, root, dir, done := l.deps.judge, l.repo, l.root(), l.dir, l.setupDone
	go func() {
		defer func() {
			cancel()
			events <- ev
		}()
		if ev.setup = setUp(ctx, dir, done); ev.setup.failed != "" {
			return
		}
		if ev.tree == "" {
			var err error
			if ev.tree, err = repo.Snapshot(ctx); err != nil {
				ev.tree = ""
				ev.result = judge.TestResult{Command: test, ExitCode: -1, Interrupted: ctx.Err() != nil,
					CannotRun: "the project's tree could not be read: " + err.Error()}
			}
			ev.at = time.Now()
		}
		if ev.tree != "" {
			ev.result = j.RunTestIn(ctx, root, ev.tree, test)
		}
	}()
}

// onTestChecked takes the result of the check of l's feature's test.
func (o *Orchestrator) onTestChecked(l *lane, ev testChecked) {
	jb := o.lanes.checkDone(l)
	o.setupTaken(l, ev.setup)
	if ev.setup.failed != "" {
		// The check is still due, and a resume sets the tree up again.
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: "setup_failed", Context: control.TraceContext{Feature: ev.feature},
			Event: control.TraceEvent{WhatHappened: ev.setup.failed, WhatWasCorrect: "a tree is set up before its tests run", Why: "no attempt can fix how the project is prepared: a person must"}})
		o.transition(l, statemachine.Stop, ev.feature, ev.setup.failed)
		return
	}
	r := ev.result
	if r.Interrupted {
		if jb != nil && jb.interrupt != "" && o.stopAfter {
			o.stopAfter = false
			o.transition(l, statemachine.Stop, ev.feature, jb.interrupt)
			return
		}
		o.step(l, nil) // checked again
		return
	}
	// The coding run decided on below starts from the tree the test ran
	// on (startTree).
	defer o.holdRecent(l, ev.tree, ev.at)()
	found := l.checked(ev.feature, r, o.canonical, l.setupDone != "")
	if r.Env != nil {
		// The machine, not the test, failed: the check is still due, and
		// a resume runs it again.
		why := o.environmentStop(store.Run{Feature: ev.feature}, r.Env, nil)
		o.transition(l, statemachine.Stop, ev.feature, why)
		return
	}
	c := o.counters[ev.feature]
	c.Red, c.RedDetail = string(found.red), found.detail
	o.setCounters(ev.feature, c)
	if found.code != "" {
		o.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.RedBeforeGreen, Code: found.code,
			Context: control.TraceContext{Feature: ev.feature},
			Event:   control.TraceEvent{WhatHappened: c.RedDetail, WhatWasCorrect: "a feature's test runs, and fails, until the feature exists", Why: "a test that cannot fail, or cannot run, makes nothing tested"}})
		o.opts.Log.Warn("a feature's test is not red before any code", zap.String("feature", ev.feature), zap.String("code", found.code), zap.String("detail", c.RedDetail))
	} else {
		o.opts.Log.Info("a feature's test fails before any code, as it should", zap.String("feature", ev.feature))
	}
	o.step(l, nil)
}

// redCheck is what the check of a feature's test before its code found,
// for the loop to apply to the feature's counters: its red state, what
// it says, and the violation's code when the test is not red as it
// should be ("" when it fails).
type redCheck struct {
	red          statemachine.RedState
	detail, code string
}

// checked takes r, the result of the check of feature's test before its
// code in l's tree: its output is kept as evidence, and what it found
// returned. list is the canonical list (nil before the initializer).
//
// A test whose program lies in a dependency directory that is not there
// (judge.TestResult.NotSetUp) is not set up yet where no setup ran in the
// tree: the coder's environment makes it, and the test is failing, as it
// should be, until then. Where a setup ran, it cannot run, as any other.
func (l *lane) checked(feature string, r judge.TestResult, list *progress.List, setUp bool) (found redCheck) {
	if _, err := l.deps.judge.WriteEvidence(feature, 0, "before-code", r); err != nil {
		l.deps.log.Warn("could not keep the test's output", zap.Error(err))
	}
	switch {
	case r.Passed():
		found.red, found.code = statemachine.RedPasses, "vacuous_test"
		found.detail = fmt.Sprintf("%s's test `%s` passes before any code was written for it: it tests nothing the feature adds (or the feature is already there). Make the test fail until the feature exists, then `ctxgraphd ctl retry %s`", feature, r.Command, feature)
	case r.NotSetUp != "" && !setUp:
		found.red = statemachine.RedFailing
		found.detail = fmt.Sprintf("%s's test `%s` is not set up yet: %s; the project has no setup that makes %s, so its coder's work does (a setup: in .claude/ctxgraphd.yaml would make it before any code)", feature, r.Command, r.CannotRun, r.NotSetUp)
	case r.CannotRun != "":
		found.red, found.code = statemachine.RedCannotRun, "test_cannot_run"
		found.detail = cannotRunDetail(feature, r, list)
		if r.NotSetUp != "" {
			found.detail += fmt.Sprintf(" (the project's setup ran, and did not make %s)", r.NotSetUp)
		}
	default:
		found.red = statemachine.RedFailing
		found.detail = r.Summary()
	}
	return found
}

// cannotRunDetail says why a test cannot run and what to do about it.
func cannotRunDetail(id string, r judge.TestResult, list *progress.List) string {
	if strings.TrimSpace(r.Command) != "" {
		return fmt.Sprintf("%s's test `%s` cannot run: %s. Fix the test command or add what it needs, then `ctxgraphd ctl retry %s`", id, r.Command, r.CannotRun, id)
	}
	if list != nil && list.Format == progress.FormatQuickstart {
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
