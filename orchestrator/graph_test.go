package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/claudemd"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// A person's lesson reaches the next agent's precedent; promoted, it is
// written into CLAUDE.md once, beside what the person wrote there; a
// correction's note can be promoted as well, anything else cannot.
func TestLessons(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxRetries = 0
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Tester] = testerClaims(false) // never a run of the test: blocked
	h.write("CLAUDE.md", "# Project\n\nUse tabs.\n")
	o := h.orchestrator(false)
	ctx := running(t, o)
	eventually.True(t, 10*time.Second, func() bool {
		st, err := o.Status(ctx)
		return err == nil && st.Features.Blocked == 1 && st.Current == nil && st.Working == ""
	}, "F-001 blocked and nothing in flight")

	if _, err := h.records().AddLesson(ctx, "  \n"); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("an empty lesson: %v, want a 400", err)
	}
	lesson, err := h.records().AddLesson(ctx, "run go vet\nbefore go test")
	if err != nil || lesson.Type != control.TraceLesson || lesson.Source != control.SourceUser || lesson.Event.WhatHappened != "run go vet before go test" {
		t.Fatalf("AddLesson = %+v, %v", lesson, err)
	}
	// The next run is told.
	if err := o.Unblock(ctx, "F-001", "use the v2 API"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool {
		st, err := o.Status(ctx)
		return err == nil && st.Features.Blocked == 1 && st.Current == nil && st.Working == ""
	}, "F-001 blocked and nothing in flight")
	var told bool
	for _, s := range h.runner.runs() {
		if cmd, err := agents.ParseCommand(s.Prompt); err == nil && s.Role == role.Coder && s.Attempt == 1 && slices.Contains(cmd.Precedent, lesson.ID+` lesson; a person wrote: "run go vet before go test"`) {
			told = true
		}
	}
	if !told {
		t.Error("no coding run after the lesson was told it")
	}

	for range 2 { // promoting twice writes it once
		if _, err := o.PromoteLesson(ctx, lesson.ID); err != nil {
			t.Fatal(err)
		}
	}
	corrections, _ := h.st.Traces(store.TraceFilter{Type: control.TraceCorrection})
	if len(corrections) != 1 {
		t.Fatalf("corrections = %+v", corrections)
	}
	fromNote, err := o.PromoteLesson(ctx, corrections[0].ID)
	if err != nil || fromNote.Type != control.TraceLesson || fromNote.Event.WhatHappened != "use the v2 API" {
		t.Fatalf("promote correction = %+v, %v", fromNote, err)
	}
	data, _ := os.ReadFile(filepath.Join(h.proj.Dir, "CLAUDE.md"))
	want := "# Project\n\nUse tabs.\n\n" + claudemd.Begin + "\n## Lessons learned in this project (kept by ctxgraphd)\n\n" +
		"- run go vet before go test (" + lesson.ID + ")\n- use the v2 API (" + fromNote.ID + ")\n" + claudemd.End + "\n"
	if string(data) != want {
		t.Errorf("CLAUDE.md:\n%s\nwant:\n%s", data, want)
	}
	trs, _ := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if _, err := o.PromoteLesson(ctx, trs[0].ID); !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "only a lesson or a correction") {
		t.Errorf("promote a violation: %v", err)
	}
	if _, err := o.PromoteLesson(ctx, "tr-999"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("promote an unknown trace: %v", err)
	}
	if l := h.list(); l.Feature("F-001").Status != progress.Blocked {
		t.Errorf("F-001 = %s", l.Feature("F-001").Status)
	}
}

func isStatus(err error, status int) bool {
	var api *control.APIError
	return errors.As(err, &api) && api.HTTPStatus == status
}

// The same refusal on two features is a pattern, with both features and
// the traces as examples.
func TestPatternsFromRefusals(t *testing.T) {
	h := newHarness(t)
	h.cfg.Graph.PrecedentTokens = 0 // every coder makes the mistake
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, "src/shared.txt"), "content": "x"}})
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	ps, err := h.records().Patterns(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p control.Pattern) bool { return p.Kind == control.PatternRefusal && p.Gate == "scope" })
	if i < 0 || ps[i].Count != 2 || !slices.Equal(ps[i].Features, []string{"F-001", "F-002"}) || len(ps[i].Examples) != 2 || ps[i].Role != string(role.Coder) {
		t.Errorf("patterns = %+v", ps)
	}
}
