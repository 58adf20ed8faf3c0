// Package records serves what happened in a project, read from the store:
// the traces and where each stands in the context graph, the patterns, the
// report, and the traces people and agents add (the control socket's
// control.Records). It holds no state of the loop and never waits for it:
// the store's transactions keep it apart from the loop's writes and the
// hooks' appends.
package records

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Judge is what the records need of the judge: it stamps and links each
// trace it stores (judge.Judge.Trace), and knows whose run a token is.
type Judge interface {
	Trace(control.Trace) control.Trace
	ActorOf(token string) (gates.Actor, bool)
}

// Features says what the canonical feature list holds now (the loop's
// published snapshot): compaction touches finished features only.
type Features interface {
	Features(ctx context.Context) ([]control.Feature, error)
}

// Options configure a Service. Every field but Log and Now is required.
type Options struct {
	Store    *store.Store
	Project  paths.Project
	Judge    Judge
	Features Features
	// Retention is graph.retention: the age PruneTraces compacts from
	// when the request names none; 0 keeps traces forever.
	Retention time.Duration
	Now       func() time.Time
	Log       *zap.Logger
}

// Service is the daemon's records.
type Service struct {
	opts Options
	log  *zap.Logger
}

var _ control.Records = (*Service)(nil)

// New returns the records of o.Store.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Service{opts: o, log: log}
}

// Traces implements control.Records.
func (s *Service) Traces(_ context.Context, q control.TraceQuery) ([]control.Trace, error) {
	if err := control.CheckTraceType(q.Type); err != nil {
		return nil, badRequest(err.Error())
	}
	if err := control.CheckLevel(q.Level); err != nil {
		return nil, badRequest(err.Error())
	}
	ts, err := s.opts.Store.Traces(store.TraceFilter{Type: q.Type, Agent: q.Agent, Feature: q.Feature, Run: q.Run, Gate: q.Gate, Text: q.Text, Since: q.Since, Until: q.Until, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]control.Trace, 0, len(ts))
	for _, t := range ts {
		out = append(out, AtLevel(t, q.Level))
	}
	return out, nil
}

// Trace implements control.Records.
func (s *Service) Trace(_ context.Context, id string) (control.Trace, error) {
	t, ok, err := s.opts.Store.Trace(id)
	if err != nil {
		return control.Trace{}, err
	}
	if !ok {
		return control.Trace{}, unknownTrace(id)
	}
	return AtLevel(t, control.LevelFull), nil
}

// TraceLinks implements control.Records: the trace in full, the path that
// led to it and what followed, each in a line (summary).
func (s *Service) TraceLinks(_ context.Context, id string) (control.TraceLinks, error) {
	l, ok, err := graph.LinksOf(s.opts.Store, id)
	if err != nil {
		return control.TraceLinks{}, err
	}
	if !ok {
		return control.TraceLinks{}, unknownTrace(id)
	}
	summary := func(ts []control.Trace) []control.Trace {
		out := make([]control.Trace, 0, len(ts))
		for _, t := range ts {
			out = append(out, AtLevel(t, control.LevelSummary))
		}
		return out
	}
	return control.TraceLinks{Trace: AtLevel(l.Trace, control.LevelFull), Path: summary(l.Path), Followed: summary(l.Followed), Next: summary(l.Next)}, nil
}

// AtLevel cuts a trace (the store keeps the wire's type, whole) to a level
// of detail: metadata (who, what kind, when), summary (plus a one-line
// what happened), full (everything).
func AtLevel(t control.Trace, level string) control.Trace {
	if t.Tool != nil {
		tool := *t.Tool // the store's copy is not the answer's
		t.Tool = &tool
	}
	switch level {
	case control.LevelMetadata:
		t.Event = control.TraceEvent{}
		if t.Tool != nil {
			t.Tool.Input = ""
		}
	case control.LevelSummary:
		t.Event = control.TraceEvent{WhatHappened: textcut.Runes(t.Event.WhatHappened, 160)}
	}
	return t
}

// maxLesson bounds a lesson: every later agent reads it in its precedent.
const maxLesson = 500

// AddLesson implements control.Records: a person's lesson for the
// project, which the precedent of every later run carries.
func (s *Service) AddLesson(_ context.Context, text string) (control.Trace, error) {
	text = strings.Join(strings.Fields(text), " ")
	switch {
	case text == "":
		return control.Trace{}, badRequest("a lesson needs its text: ctxgraphd ctl lessons add \"run go vet before go test\"")
	case len(text) > maxLesson:
		return control.Trace{}, badRequest(fmt.Sprintf("a lesson of %d bytes is too long for every agent to read; keep it under %d", len(text), maxLesson))
	}
	t := s.opts.Judge.Trace(control.Trace{Type: control.TraceLesson, Source: control.SourceUser, Event: control.TraceEvent{WhatHappened: text, Why: "a person's lesson"}})
	return AtLevel(t, control.LevelFull), nil
}

// agentTraceTypes are what an agent may store: what it decided, learned or
// hands over. Refusals, approvals and transitions are the daemon's word.
var agentTraceTypes = []string{control.TraceDecision, control.TraceLesson, control.TraceHandoff}

// StoreTrace implements control.Records: what an agent says, attributed
// to its run and marked source agent, so that it never shapes the gates,
// the precedent of other agents, or CLAUDE.md on its own (a person
// promotes an agent's lesson).
func (s *Service) StoreTrace(_ context.Context, token string, req control.TraceRequest) (control.Trace, error) {
	var actor control.TraceContext
	if token != "" {
		a, ok := s.opts.Judge.ActorOf(token)
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
	t := s.opts.Judge.Trace(control.Trace{Type: req.Type, Source: control.SourceAgent, Context: actor,
		Event: control.TraceEvent{WhatHappened: what, WhatWasCorrect: req.WhatWasCorrect, Why: req.Why}})
	return AtLevel(t, control.LevelFull), nil
}

// Patterns implements control.Records: what happened at least atLeast
// times among the newest traces and every recorded command.
func (s *Service) Patterns(_ context.Context, atLeast int) ([]control.Pattern, error) {
	trs, err := s.opts.Store.Traces(store.TraceFilter{Type: control.TraceViolation, Limit: graph.Window})
	if err != nil {
		return nil, err
	}
	cmds, err := s.opts.Store.Commands("")
	if err != nil {
		return nil, err
	}
	return graph.Patterns(trs, cmds, atLeast), nil
}

// Report implements control.Records: what happened, from the store, as
// `ctxgraphd report` reads it when no daemon runs.
func (s *Service) Report(context.Context) (control.Report, error) {
	r, err := report.Build(s.opts.Store, s.opts.Project.ID, s.opts.Project.Dir, s.opts.Now())
	if err != nil {
		return r, err
	}
	// verify runs beside the daemon, and records itself apart from the
	// store the daemon holds.
	r.Verify = report.ReadVerify(s.opts.Project.StateDir)
	return r, nil
}

func badRequest(msg string) error {
	return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: msg}
}

func unknownTrace(id string) error {
	return &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownTrace, Message: fmt.Sprintf("no trace %q", id)}
}
