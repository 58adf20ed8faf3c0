package orchestrator

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/internal/claudemd"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// maxLesson bounds a lesson: every later agent reads it in its precedent.
const maxLesson = 500

// AddLesson implements control.LessonBackend: a person's lesson for the
// project, which the precedent of every later run carries.
func (o *Orchestrator) AddLesson(ctx context.Context, text string) (control.Trace, error) {
	text = strings.Join(strings.Fields(text), " ")
	switch {
	case text == "":
		return control.Trace{}, badRequest("a lesson needs its text: ctxgraphd ctl lessons add \"run go vet before go test\"")
	case len(text) > maxLesson:
		return control.Trace{}, badRequest(fmt.Sprintf("a lesson of %d bytes is too long for every agent to read; keep it under %d", len(text), maxLesson))
	}
	var t store.Trace
	err := o.do(ctx, func() error {
		t = o.trace(store.Trace{Type: store.TraceLesson, Source: store.SourceUser, Event: store.TraceEvent{WhatHappened: text, Why: "a person's lesson"}})
		return nil
	})
	return toWire(t, "full"), err
}

// PromoteLesson implements control.LessonBackend: a lesson, or a correction
// made a lesson, written into ctxgraphd's section of the project's
// CLAUDE.md, which Claude Code reads in every session, ctxgraphd's or not.
// It waits for no run: while one is in flight, or being judged, the daemon
// does not write the project's files, whose changes would be taken for the
// agent's.
func (o *Orchestrator) PromoteLesson(ctx context.Context, id string) (control.Trace, error) {
	var lesson store.Trace
	err := o.do(ctx, func() error {
		t, ok, err := o.st.Trace(id)
		switch {
		case err != nil:
			return err
		case !ok:
			return &control.APIError{HTTPStatus: http.StatusNotFound, Code: "unknown_trace", Message: fmt.Sprintf("no trace %q", id)}
		case o.active != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: "running",
				Message: fmt.Sprintf("%s is in flight, and what the daemon writes to the project now would be taken for its agent's; `ctxgraphd ctl pause`, then promote once it has ended", o.active.run.ID)}
		case o.job != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: "running",
				Message: fmt.Sprintf("the daemon is %s; promote once it is done (`ctxgraphd ctl pause` holds the next run)", o.job.what)}
		}
		switch t.Type {
		case store.TraceLesson:
			lesson = t
		case store.TraceCorrection:
			text := t.Event.WhatWasCorrect
			if text == "" {
				return badRequest(fmt.Sprintf("correction %s has no note to make a lesson of; `ctxgraphd ctl lessons add TEXT` says it in your words", id))
			}
			lesson = o.trace(store.Trace{Type: store.TraceLesson, Source: store.SourceUser, Context: store.TraceContext{Feature: t.Context.Feature},
				Event: store.TraceEvent{WhatHappened: text, Why: "promoted from correction " + id}})
		default:
			return badRequest(fmt.Sprintf("%s is a %s; only a lesson or a correction can be promoted into CLAUDE.md", id, t.Type))
		}
		path := filepath.Join(o.opts.Project.Dir, "CLAUDE.md")
		changed, err := claudemd.AddToFile(path, []claudemd.Lesson{{ID: lesson.ID, Text: lesson.Event.WhatHappened}})
		if err != nil {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: "claude_md", Message: err.Error() + " (" + path + ")"}
		}
		if changed {
			o.log.Info("lesson written into CLAUDE.md", zap.String("lesson", lesson.ID))
			o.trace(store.Trace{Type: store.TraceDecision, Source: store.SourceUser,
				Event: store.TraceEvent{WhatHappened: fmt.Sprintf("lesson %s written into CLAUDE.md", lesson.ID), Why: "a person promoted it"}})
		}
		return nil
	})
	return toWire(lesson, "full"), err
}

func badRequest(msg string) error {
	return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: msg}
}

// Patterns implements server.PatternBackend: what happened at least
// atLeast times among the newest traces and every recorded command.
func (o *Orchestrator) Patterns(_ context.Context, atLeast int) ([]graph.Pattern, error) {
	trs, err := o.st.Traces(store.TraceFilter{Type: store.TraceViolation, Limit: graph.Window})
	if err != nil {
		return nil, err
	}
	cmds, err := o.st.Commands("")
	if err != nil {
		return nil, err
	}
	return graph.Patterns(trs, cmds, atLeast), nil
}
