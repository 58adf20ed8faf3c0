package orchestrator

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// pathOf is the path that led to a trace, as "type/task" steps.
func pathOf(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	l, ok, err := graph.LinksOf(st, id)
	if err != nil || !ok {
		t.Fatalf("LinksOf(%s) = %v, %v", id, ok, err)
	}
	var out []string
	for _, p := range l.Path {
		out = append(out, p.Type+"/"+p.Context.Task)
	}
	return out
}

// The traces of a night form a graph: a refusal hangs from its run, the run
// from its attempt, the attempt from its feature; the verdict from the
// tester's run; the block from the attempt it ended; a person's correction
// from the block it answers; and a retry's attempt is a new node.
func TestTracesFormAGraph(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxRetries = 0
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if d := h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, "src/shared.txt"), "content": "x"}}); d == nil || d.Gate != "scope" {
			h.t.Errorf("the write outside the scope was not refused: %+v", d)
		}
		return coderCompletes(ctx, spec, h)
	}
	h.runner.script[role.Tester] = testerClaims(false) // a claim without a test run: refused, then blocked
	o := h.orchestrator(false)
	ctx := running(t, o)
	eventually.True(t, 10*time.Second, func() bool {
		ts, _ := h.st.Traces(store.TraceFilter{Type: control.TraceTransition, Text: "from next to done"})
		return len(ts) == 1
	}, "the session done")

	one := func(f store.TraceFilter, code, what string) control.Trace {
		t.Helper()
		ts, err := h.st.Traces(f)
		ts = slices.DeleteFunc(ts, func(tr control.Trace) bool { return code != "" && tr.Code != code })
		if err != nil || len(ts) != 1 {
			t.Fatalf("%s: %d traces, %v; want one", what, len(ts), err)
		}
		return ts[0]
	}
	runOf := func(role role.Role) string {
		for _, s := range h.runner.runs() {
			if s.Role == role {
				return s.RunID
			}
		}
		t.Fatalf("no %s run", role)
		return ""
	}
	coderRun, testerRun := runOf(role.Coder), runOf(role.Tester)
	feature := []string{"transition/feature", "transition/attempt"}

	refusal := one(store.TraceFilter{Gate: "scope", Feature: "F-001"}, "", "the scope refusal")
	if got, want := pathOf(t, h.st, refusal.ID), append(slices.Clone(feature), "handoff/implement_feature"); !slices.Equal(got, want) {
		t.Errorf("path to the refusal = %v, want %v", got, want)
	}
	if refusal.Tool == nil || refusal.Tool.Name != "Write" || !strings.HasSuffix(refusal.Tool.Input, "src/shared.txt") || refusal.Context.Attempt != 1 || refusal.Path != "src/shared.txt" {
		t.Errorf("refusal's tool call, attempt and file = %+v, %d, %q", refusal.Tool, refusal.Context.Attempt, refusal.Path)
	}
	if p, _, _ := h.st.Trace(refusal.Parent); p.Context.Run != coderRun {
		t.Errorf("the refusal hangs from %s (%s), not from its run %s", refusal.Parent, p.Context.Run, coderRun)
	}
	verdict := one(store.TraceFilter{Type: control.TraceViolation}, "verdict_rejected", "the refused verdict")
	if got, want := pathOf(t, h.st, verdict.ID), append(slices.Clone(feature), "handoff/validate_feature"); !slices.Equal(got, want) {
		t.Errorf("path to the refused verdict = %v, want %v", got, want)
	}
	if p, _, _ := h.st.Trace(verdict.Parent); p.Context.Run != testerRun {
		t.Errorf("the verdict hangs from %s (%s), not from the tester's run %s", verdict.Parent, p.Context.Run, testerRun)
	}
	block := one(store.TraceFilter{Type: control.TraceDecision}, "feature_blocked", "the block")
	if got := pathOf(t, h.st, block.ID); !slices.Equal(got, feature) {
		t.Errorf("path to the block = %v, want %v", got, feature)
	}

	if err := o.Unblock(ctx, "F-001", "use the v2 API"); err != nil {
		t.Fatal(err)
	}
	correction := one(store.TraceFilter{Type: control.TraceCorrection}, "", "the correction")
	if correction.Parent != block.ID {
		t.Errorf("the correction hangs from %q, want the block it answers %s", correction.Parent, block.ID)
	}
	eventually.True(t, 10*time.Second, func() bool {
		ts, _ := h.st.Traces(store.TraceFilter{Feature: "F-001", Type: control.TraceTransition})
		return len(slices.DeleteFunc(ts, func(tr control.Trace) bool { return tr.Context.Task != "attempt" })) == 2
	}, "F-001's second attempt traced")
	l, _, err := graph.LinksOf(h.st, pathRoot(t, h.st, refusal.ID))
	if err != nil {
		t.Fatal(err)
	}
	var attempts []string
	for _, f := range l.Followed {
		attempts = append(attempts, f.Event.WhatHappened)
	}
	if want := []string{"F-001 attempt 1 begins", "F-001 attempt 1 begins"}; !slices.Equal(attempts, want) {
		// A person's unblock starts the attempts over: two nodes, both "1".
		t.Errorf("the feature's attempts = %q, want %q", attempts, want)
	}
}

func pathRoot(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	l, _, err := graph.LinksOf(st, id)
	if err != nil || len(l.Path) == 0 {
		t.Fatalf("no path to %s: %v", id, err)
	}
	return l.Path[0].ID
}
