package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// needsRunner is an initializer whose features' tests need a runner that
// is not installed until installed exists, from the start (before any
// code) or only once there is code to test (afterCode).
func needsRunner(installed string, afterCode bool) script {
	return func(_ context.Context, _ agents.Spec, h *harness) agents.Result {
		l := &progress.List{Version: 1}
		for i := 1; i <= 2; i++ {
			id := fmt.Sprintf("F-%03d", i)
			runner := fmt.Sprintf("[ -e %s ] || { ctxgraphd-test-runner-not-installed; exit 127; }", installed)
			if afterCode {
				runner = fmt.Sprintf("[ ! -e src/%s.txt ] || %s", id, runner)
			}
			h.write("tests/"+id+".sh", fmt.Sprintf("#!/bin/sh\n%s\ngrep -qx '%s works' src/%s.txt\n", runner, id, id))
			l.Features = append(l.Features, progress.Feature{ID: id, Title: "feature " + id, Test: "sh tests/" + id + ".sh",
				Status: progress.Pending, Scope: []string{"src/" + id + ".txt"}})
		}
		progress.WriteFeatureList(h.proj.Progress(), l)
		return agents.Result{Summary: "wrote the list", NumTurns: 2}
	}
}

// stoppedFor waits until the session stops and returns why; a session
// that settles every feature instead fails the test.
func stoppedFor(t *testing.T, o *Orchestrator) string {
	t.Helper()
	var st control.Status
	eventually.True(t, 30*time.Second, func() bool {
		st, _ = o.Status(context.Background())
		return st.State == string(statemachine.Stopped) || st.State == string(statemachine.Done)
	}, "the session stopped")
	if st.State != string(statemachine.Stopped) {
		t.Fatalf("the session is %s (%s), want it stopped for a person", st.State, st.Message)
	}
	return st.Message
}

// done waits until every feature is settled.
func done(t *testing.T, o *Orchestrator) {
	t.Helper()
	eventually.True(t, 30*time.Second, func() bool {
		st, err := o.Status(context.Background())
		return err == nil && st.State == string(statemachine.Done)
	}, "the session was done")
}

// environmentTraces are the traces that say the machine kept a test from
// running.
func environmentTraces(t *testing.T, h *harness) []control.Trace {
	t.Helper()
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceDecision})
	if err != nil {
		t.Fatal(err)
	}
	var out []control.Trace
	for _, tr := range trs {
		if tr.Code == "test_environment" {
			out = append(out, tr)
		}
	}
	return out
}

// A feature's test that cannot run on this machine, before any code, is
// no fault of the test: the session stops for a person with what to
// install, the feature is neither blocked nor charged, and once the
// runner is there, `ctl resume` checks the test again and goes on.
func TestRunnerMissingBeforeAnyCodeStopsForAPerson(t *testing.T) {
	h := newHarness(t)
	installed := filepath.Join(t.TempDir(), "runner-installed")
	h.runner.script[role.Initializer] = needsRunner(installed, false)
	o := h.orchestrator(false)
	ctx := running(t, o)

	why := stoppedFor(t, o)
	for _, want := range []string{"F-001's test could not run", "needs `ctxgraphd-test-runner-not-installed`", "Install it where the daemon's PATH finds it", "`ctxgraphd ctl resume`"} {
		if !strings.Contains(why, want) {
			t.Errorf("the session stopped saying %q; want it to hold %q", why, want)
		}
	}
	if got := roles(h.runner.runs()); got != "initializer" {
		t.Errorf("runs = %s: nothing should run until the machine is fixed", got)
	}
	sess := h.session()
	if c := sess.Counters["F-001"]; c.Failures != 0 || c.Red != string(statemachine.RedDue) {
		t.Errorf("F-001: %d failures, red %q; want none, and its check still due", c.Failures, c.Red)
	}
	if got := summary(h.list()); strings.Contains(got, "blocked") {
		t.Errorf("features = %s: a feature was blocked for the machine's failure", got)
	}
	if trs := environmentTraces(t, h); len(trs) != 1 || trs[0].Context.Feature != "F-001" || !strings.Contains(trs[0].Event.WhatHappened, string(diagnose.EnvNoRunner)) {
		t.Errorf("traces %+v, want one saying what kept F-001's test from running", trs)
	}

	if err := os.WriteFile(installed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := o.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, o)
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s after the runner was installed", got)
	}
	if got := roles(h.runner.runs()); !strings.HasPrefix(got, "initializer coding:F-001 tester:F-001") {
		t.Errorf("runs = %s, want F-001's work to start once resumed", got)
	}
}

// The daemon's own run of a test that the machine keeps from running, at
// the verdict, charges no one: the tester's claim is not taken, the
// feature keeps its attempt, the session stops saying what to install, and
// `ctl resume` redoes the tester's run at the same attempt.
func TestRunnerMissingAtTheVerdictStopsForAPerson(t *testing.T) {
	h := newHarness(t)
	installed := filepath.Join(t.TempDir(), "runner-installed")
	h.runner.script[role.Initializer] = needsRunner(installed, true)
	o := h.orchestrator(false)
	ctx := running(t, o)

	why := stoppedFor(t, o)
	if !strings.Contains(why, "F-001's test could not run") || !strings.Contains(why, "`ctxgraphd-test-runner-not-installed`") {
		t.Errorf("the session stopped saying %q; want F-001's test and the runner named", why)
	}
	sess := h.session()
	if c := sess.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001: %d failures (%q), want none", c.Failures, c.LastFailure)
	}
	if f := h.list().Feature("F-001"); f.Tested || f.Status != progress.Completed {
		t.Errorf("F-001 on disk: tested %v, status %s; want the claim dropped and the coder's work kept", f.Tested, f.Status)
	}
	runs, err := h.st.Runs()
	if err != nil {
		t.Fatal(err)
	}
	if last := runs[len(runs)-1]; last.Role != string(role.Tester) || last.Failure != string(diagnose.EnvNoRunner) {
		t.Errorf("last run %+v, want the tester's, its failure %s", last, diagnose.EnvNoRunner)
	}

	if err := os.WriteFile(installed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := o.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, o)
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s after the runner was installed", got)
	}
	var testers []int
	for _, s := range h.runner.runs() {
		if s.Role == role.Tester && s.FeatureID == "F-001" {
			testers = append(testers, s.Attempt)
		}
	}
	if fmt.Sprint(testers) != "[1 1]" {
		t.Errorf("F-001's tester runs were at attempts %v, want the same attempt redone: [1 1]", testers)
	}
}

// A tester whose own run of the test the sandbox kept from running (a
// cache it could not write) reports a failure that is not the code's: the
// session stops with the key and the value to set, nothing is charged,
// and a resume redoes the tester's run.
func TestTestersSandboxFailureStopsForAPerson(t *testing.T) {
	h := newHarness(t)
	var testers atomic.Int32
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if testers.Add(1) > 1 {
			return testerRunsTheTest(ctx, spec, h)
		}
		h.hook("post-tool-use-failure", spec, map[string]any{"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "sh tests/" + spec.FeatureID + ".sh"},
			"error":      "Exit code 1\nfailed to initialize build cache at /opt/ctxgraphd-test/go-build: mkdir /opt/ctxgraphd-test/go-build: read-only file system"})
		return agents.Result{Summary: "the test could not run: the build cache is read-only", NumTurns: 2}
	}
	o := h.orchestrator(false)
	ctx := running(t, o)

	why := stoppedFor(t, o)
	if !strings.Contains(why, "`sandbox.allow_write: [/opt/ctxgraphd-test/go-build]` in .claude/ctxgraphd.yaml") {
		t.Errorf("the session stopped saying %q; want the key and the value to set", why)
	}
	sess := h.session()
	if c := sess.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001: %d failures (%q), want none", c.Failures, c.LastFailure)
	}
	if err := o.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, o)
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s", got)
	}
	if got := roles(h.runner.runs()); !strings.HasPrefix(got, "initializer coding:F-001 tester:F-001 tester:F-001 coding:F-002") {
		t.Errorf("runs = %s, want F-001's tester redone, and no coding retry", got)
	}
}
