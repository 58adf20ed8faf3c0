package orchestrator

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// coderRepeatsAMistake is a coder refused three times for the same write
// outside its scope before it completes.
func coderRepeatsAMistake(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
	for range 3 {
		h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, "src/shared.txt"), "content": "x"}})
	}
	return coderCompletes(ctx, spec, h)
}

// story is what `ctl why` tells of a feature's traces: each kind of
// refusal of each run, and every other trace.
func story(t *testing.T, st *store.Store, feature string) []string {
	t.Helper()
	trs, err := st.Traces(store.TraceFilter{Feature: feature})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tr := range trs {
		line := tr.Context.Run + " " + tr.Type + " " + tr.Gate + " " + tr.Code
		if tr.Type != control.TraceViolation {
			line += " " + tr.ID
		}
		if !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return out
}

// ctl traces --prune: the repeated refusals of finished features are
// folded, and the story of each feature is the same after.
func TestPruneTraces(t *testing.T) {
	h := newHarness(t)
	h.cfg.Graph.PrecedentTokens = 0
	h.runner.script[role.Coder] = coderRepeatsAMistake
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	before := map[string][]string{"F-001": story(t, h.st, "F-001"), "F-002": story(t, h.st, "F-002")}
	recs := h.records()
	res, err := recs.PruneTraces(context.Background(), control.PruneRequest{OlderThan: "0s"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Features, []string{"F-001", "F-002"}) || res.Folded != 4 || res.Examined != res.Folded+res.Dropped+res.Kept {
		t.Errorf("result %+v: want both features, two refusals folded in each coder's run", res)
	}
	for f, b := range before {
		if a := story(t, h.st, f); !slices.Equal(a, b) {
			t.Errorf("%s's story changed:\nbefore %q\n after %q", f, b, a)
		}
	}
	refusals, _ := h.st.Traces(store.TraceFilter{Type: control.TraceViolation, Gate: "scope"})
	for _, r := range refusals {
		if r.Count != 3 {
			t.Errorf("%s stands for %d refusals, want 3", r.ID, r.Count)
		}
	}

	for _, tt := range []struct {
		req  control.PruneRequest
		want string
	}{
		{control.PruneRequest{OlderThan: "30"}, `older_than "30": want a duration >= 0 with a unit`},
		{control.PruneRequest{OlderThan: "-1h"}, `older_than "-1h"`},
		{control.PruneRequest{}, "graph.retention is 0"},
	} {
		if _, err := recs.PruneTraces(context.Background(), tt.req); !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want a bad request saying %q", tt.req, err, tt.want)
		}
	}
}

// graph.retention is applied when the daemon starts: what aged while it
// was down is compacted.
func TestRetentionAppliedAtStart(t *testing.T) {
	h := newHarness(t)
	h.cfg.Graph.PrecedentTokens = 0
	h.runner.script[role.Coder] = coderRepeatsAMistake
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.st.Traces(store.TraceFilter{Type: control.TraceViolation, Gate: "scope"}); len(n) != 6 {
		t.Fatalf("%d scope refusals before the retention, want 6", len(n))
	}
	h.cfg.Graph.Retention = time.Nanosecond
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.st.Traces(store.TraceFilter{Type: control.TraceViolation, Gate: "scope"}); len(n) != 2 {
		t.Errorf("%d scope refusals after a start with graph.retention set, want 2 (one a run)", len(n))
	}
}

func TestRetentionEvery(t *testing.T) {
	for _, tt := range []struct{ retention, want time.Duration }{
		{time.Second, time.Minute},
		{time.Hour, 6 * time.Minute},
		{720 * time.Hour, 24 * time.Hour},
	} {
		if got := retentionEvery(tt.retention); got != tt.want {
			t.Errorf("retentionEvery(%s) = %s, want %s", tt.retention, got, tt.want)
		}
	}
}
