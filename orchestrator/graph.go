package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
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
	var t control.Trace
	err := o.do(ctx, func() error {
		t = o.trace(control.Trace{Type: control.TraceLesson, Source: control.SourceUser, Event: control.TraceEvent{WhatHappened: text, Why: "a person's lesson"}})
		return nil
	})
	return toWire(t, control.LevelFull), err
}

// PromoteLesson implements control.LessonBackend: a lesson, or a correction
// made a lesson, written into ctxgraphd's section of the project's
// CLAUDE.md, which Claude Code reads in every session, ctxgraphd's or not.
// It waits for no run: while one is in flight, or being judged, the daemon
// does not write the project's files, whose changes would be taken for the
// agent's.
func (o *Orchestrator) PromoteLesson(ctx context.Context, id string) (control.Trace, error) {
	var lesson control.Trace
	err := o.do(ctx, func() error {
		t, ok, err := o.st.Trace(id)
		switch {
		case err != nil:
			return err
		case !ok:
			return &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownTrace, Message: fmt.Sprintf("no trace %q", id)}
		case o.cur.active != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning,
				Message: fmt.Sprintf("%s is in flight, and what the daemon writes to the project now would be taken for its agent's; `ctxgraphd ctl pause`, then promote once it has ended", o.cur.active.run.ID)}
		case o.job != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning,
				Message: fmt.Sprintf("the daemon is %s; promote once it is done (`ctxgraphd ctl pause` holds the next run)", o.job.what)}
		}
		switch t.Type {
		case control.TraceLesson:
			lesson = t
		case control.TraceCorrection:
			text := t.Event.WhatWasCorrect
			if text == "" {
				return badRequest(fmt.Sprintf("correction %s has no note to make a lesson of; `ctxgraphd ctl lessons add TEXT` says it in your words", id))
			}
			lesson = o.trace(control.Trace{Type: control.TraceLesson, Source: control.SourceUser, Context: control.TraceContext{Feature: t.Context.Feature}, Parent: t.ID,
				Event: control.TraceEvent{WhatHappened: text, Why: "promoted from correction " + id}})
		default:
			return badRequest(fmt.Sprintf("%s is a %s; only a lesson or a correction can be promoted into CLAUDE.md", id, t.Type))
		}
		path := filepath.Join(o.opts.Project.Dir, claudemd.FileName)
		changed, err := claudemd.AddToFile(o.opts.Project.Dir, []claudemd.Lesson{{ID: lesson.ID, Text: lesson.Event.WhatHappened}})
		if err != nil {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeClaudeMD, Message: err.Error() + " (" + path + ")"}
		}
		if changed {
			o.log.Info("lesson written into CLAUDE.md", zap.String("lesson", lesson.ID))
			o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceUser, Parent: lesson.ID,
				Event: control.TraceEvent{WhatHappened: fmt.Sprintf("lesson %s written into CLAUDE.md", lesson.ID), Why: "a person promoted it"}})
		}
		return nil
	})
	return toWire(lesson, control.LevelFull), err
}

func badRequest(msg string) error {
	return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: msg}
}

// Patterns implements control.PatternBackend: what happened at least
// atLeast times among the newest traces and every recorded command.
func (o *Orchestrator) Patterns(_ context.Context, atLeast int) ([]control.Pattern, error) {
	trs, err := o.st.Traces(store.TraceFilter{Type: control.TraceViolation, Limit: graph.Window})
	if err != nil {
		return nil, err
	}
	cmds, err := o.st.Commands("")
	if err != nil {
		return nil, err
	}
	return graph.Patterns(trs, cmds, atLeast), nil
}

// agentTraceTypes are what an agent may store: what it decided, learned or
// hands over. Refusals, approvals and transitions are the daemon's word.
var agentTraceTypes = []string{control.TraceDecision, control.TraceLesson, control.TraceHandoff}

// StoreTrace implements control.AgentTraceBackend: what an agent says,
// attributed to its run and marked source agent, so that it never shapes
// the gates, the precedent of other agents, or CLAUDE.md on its own (a
// person promotes an agent's lesson).
func (o *Orchestrator) StoreTrace(ctx context.Context, token string, req control.TraceRequest) (control.Trace, error) {
	var actor control.TraceContext
	if token != "" {
		a, ok := o.judge.ActorOf(token)
		if !ok {
			return control.Trace{}, &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden,
				Message: "this run is not one of this daemon's runs (it ended, or the daemon restarted); nothing was stored"}
		}
		actor = control.TraceContext{Agent: a.Role, Feature: a.Feature, Run: a.Run}
	}
	what := strings.Join(strings.Fields(req.WhatHappened), " ")
	switch {
	case !slices.Contains(agentTraceTypes, req.Type):
		return control.Trace{}, badRequest(fmt.Sprintf("type %q: an agent stores a %s", req.Type, strings.Join(agentTraceTypes, ", ")))
	case what == "":
		return control.Trace{}, badRequest("what_happened is empty: say what happened")
	case len(what)+len(req.WhatWasCorrect)+len(req.Why) > 4*maxLesson:
		return control.Trace{}, badRequest(fmt.Sprintf("a trace of more than %d bytes; say it shorter", 4*maxLesson))
	}
	var t control.Trace
	err := o.do(ctx, func() error {
		t = o.trace(control.Trace{Type: req.Type, Source: control.SourceAgent, Context: actor,
			Event: control.TraceEvent{WhatHappened: what, WhatWasCorrect: req.WhatWasCorrect, Why: req.Why}})
		return nil
	})
	return toWire(t, control.LevelFull), err
}

// MCPServer is the name the ctxgraphd MCP server has in a run: its tools
// are mcp__ctxgraphd__query_traces and the like.
const MCPServer = "ctxgraphd"

// mcpConfig is the --mcp-config of a run: the daemon's MCP server over HTTP
// on loopback, with the run's token as its bearer token, so that what the
// agent stores through it is the run's and nothing else gets in. The
// token is named, not written: Claude Code expands ${CTXGRAPH_TOKEN} from
// the run's environment, which only the daemon's user can read, where the
// arguments are every local user's to read (ps). "" when the daemon serves
// none.
func (o *Orchestrator) mcpConfig(token string) string {
	if o.opts.MCPURL == "" {
		return ""
	}
	cfg := map[string]any{"mcpServers": map[string]any{MCPServer: map[string]any{
		"type": "http", "url": o.opts.MCPURL, "headers": map[string]string{"Authorization": control.RunTokenBearer},
	}}}
	data, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return string(data)
}
