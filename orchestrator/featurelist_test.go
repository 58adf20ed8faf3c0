package orchestrator

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/internal/eventually"
)

// A run writes the feature list in pieces (Claude Code's Write tool), and
// the watcher may read it half-way: that is nobody's broken file, least of
// all a person's. Nothing is reported or warned while the run is in
// flight, and the list is taken as the run left it when it ends. (A
// person's half-written file, which is no start of what the run's hooks
// saw it write, is reported at once: TestPersonsHalfWrittenListIsKept.)
func TestAListHalfWrittenByTheRunInFlightIsNoPersonsProblem(t *testing.T) {
	h := newHarness(t)
	core, logs := observer.New(zap.DebugLevel)
	h.logOpts = []zap.Option{zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })}
	var seen, shown atomic.Bool
	h.runner.script[agents.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		// The Write its hooks let through, landing in two pieces.
		full := `{"version": 1, "features": [{"id": "F-001", "title": "feature F-001", "test": "sh tests/F-001.sh", "status": "pending", "scope": ["src/F-001.txt"]}]}`
		h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, ".claude/progress/feature-list.json"), "content": full}})
		h.write(".claude/progress/feature-list.json", full[:40])
		// The watcher reads it while the run is in flight.
		seen.Store(eventually.Within(10*time.Second, func() bool {
			return logs.FilterMessageSnippet("feature-list.json is invalid").Len() > 0
		}))
		if st, err := h.current.Status(ctx); err == nil && strings.Contains(st.Message, "feature-list.json") {
			shown.Store(true)
		}
		h.write("tests/F-001.sh", "#!/bin/sh\ngrep -qx 'F-001 works' src/F-001.txt\n")
		h.write(".claude/progress/feature-list.json", full)
		return agents.Result{Summary: "wrote the list", NumTurns: 2}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatalf("loop: %v", err)
	}
	if !seen.Load() {
		t.Fatal("the watcher never read the half-written list: the test saw nothing")
	}
	if shown.Load() {
		t.Error("the status showed a problem of the list while the run that was writing it was in flight")
	}
	for _, e := range logs.FilterMessageSnippet("feature-list.json").All() {
		if e.Level >= zapcore.WarnLevel {
			t.Errorf("logged %s %q %v: the run's own write, half-way, is no one's problem", e.Level, e.Message, e.ContextMap())
		}
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s, want the list the run left, worked", got)
	}
	if got := roles(h.runner.runs()); !strings.HasPrefix(got, "initializer coding:F-001") {
		t.Errorf("runs = %s, want the initializer once", got)
	}
}
