package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/claudemd"
	"github.com/ctxgraphd/ctxgraphd/records"
)

// PromoteLesson implements control.Loop: a lesson, or a correction
// made a lesson, written into ctxgraphd's section of the project's
// CLAUDE.md, which Claude Code reads in every session, ctxgraphd's or not.
// It waits for no run: while one is in flight, or being judged, the daemon
// does not write the project's files, whose changes would be taken for the
// agent's.
func (o *Orchestrator) PromoteLesson(ctx context.Context, id string) (control.Trace, error) {
	var lesson control.Trace
	err := o.do(ctx, func() error {
		t, ok, err := o.opts.Store.Trace(id)
		switch {
		case err != nil:
			return err
		case !ok:
			return &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownTrace, Message: fmt.Sprintf("no trace %q", id)}
		case o.lanes.home.active != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning,
				Message: fmt.Sprintf("%s is in flight, and what the daemon writes to the project now would be taken for its agent's; `ctxgraphd ctl pause`, then promote once it has ended", o.lanes.home.active.run.ID)}
		case o.lanes.job != nil:
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeRunning,
				Message: fmt.Sprintf("the daemon is %s; promote once it is done (`ctxgraphd ctl pause` holds the next run)", o.lanes.job.what)}
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
			o.opts.Log.Info("lesson written into CLAUDE.md", zap.String("lesson", lesson.ID))
			o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceUser, Parent: lesson.ID,
				Event: control.TraceEvent{WhatHappened: fmt.Sprintf("lesson %s written into CLAUDE.md", lesson.ID), Why: "a person promoted it"}})
		}
		return nil
	})
	return records.AtLevel(lesson, control.LevelFull), err
}

func badRequest(msg string) error {
	return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: msg}
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
