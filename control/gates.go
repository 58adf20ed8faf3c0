package control

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// HookRequest is what a hook sends the daemon: the event and Claude Code's
// payload, untouched. Who is acting is not in it: the daemon knows that from
// the run token the client presents (RunTokenHeader), and from nothing a
// request could claim about itself.
type HookRequest struct {
	Event   string          `json:"event"` // kebab case, as in `ctxgraphd hook EVENT`
	Payload json.RawMessage `json:"payload"`
}

// HookDecision is a gate's verdict on an action it does not let through as
// is. It is one type from the gate that makes it (package gates, in the
// daemon's judge or in a hook deciding alone) over the socket to what the
// hook prints for Claude Code (gates.Render), and in the spool of a hook
// that decided alone.
type HookDecision struct {
	Gate       string `json:"gate"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
	Mode       string `json:"mode"` // enforce | warn (gates.Enforce, gates.Warn)
}

// Blocks reports whether the action is refused: the gate enforces. In warn
// mode the action is let through, and recorded.
func (d *HookDecision) Blocks() bool { return d != nil && d.Mode == "enforce" }

// HookResponse answers a HookRequest; no decision means go ahead.
type HookResponse struct {
	Decision *HookDecision `json:"decision,omitempty"`
}

// Trace is one record of the context graph (field names: contract), as
// the store keeps it and the API answers it (cut to the level asked).
type Trace struct {
	ID        string       `json:"id"`
	Project   string       `json:"project"`
	Timestamp time.Time    `json:"timestamp"`
	Type      string       `json:"type"`
	Context   TraceContext `json:"context"`
	Event     TraceEvent   `json:"event"`
	Source    string       `json:"source"`
	Gate      string       `json:"gate,omitempty"`
	Code      string       `json:"code,omitempty"`
	// Path is the project file a violation was about, when it was about
	// one (a change found in the tree after a run, and put back).
	Path string `json:"path,omitempty"`
	// Parent is the trace this one follows from: a run's start for what
	// happened in the run, an attempt's start for its runs, a feature's
	// for its attempts, the refusal or block a correction answers. The
	// links make the traces a graph (feature → attempt → run → tool call
	// → violation → correction → decision), walked by `ctl trace ID`.
	Parent string `json:"parent,omitempty"`
	// Tool is the tool call a hook's trace is about, when it is about one.
	Tool *TraceTool `json:"tool,omitempty"`
	// Count is how many times it happened, when compaction folded repeats
	// of it (the same refusal in the same run) into it; 0 means once.
	Count int `json:"count,omitempty"`
}

// TraceTool is the tool call a trace is about: the tool and, in a line,
// what it was asked to do (the command, the path).
type TraceTool struct {
	Name  string `json:"name"`
	Input string `json:"input,omitempty"`
}

// TraceContext says who and what a trace is about.
type TraceContext struct {
	Agent   string `json:"agent,omitempty"`
	Feature string `json:"feature,omitempty"`
	Run     string `json:"run,omitempty"`
	Task    string `json:"task,omitempty"`
	// Attempt is the feature's attempt the trace belongs to, when it
	// belongs to one.
	Attempt int `json:"attempt,omitempty"`
}

// TraceEvent says what happened, what would have been right, and why.
type TraceEvent struct {
	WhatHappened   string `json:"what_happened"`
	WhatWasCorrect string `json:"what_was_correct,omitempty"`
	Why            string `json:"why,omitempty"`
}

// CommandRecord is one Bash command an agent ran, as its hooks recorded
// it: the hooks send it, the store keeps it, the gates read it.
type CommandRecord struct {
	Run          string    `json:"run"`
	Feature      string    `json:"feature,omitempty"`
	Command      string    `json:"command"`
	ExitCode     int       `json:"exit_code"`
	OutputDigest string    `json:"output_digest"`
	Time         time.Time `json:"time"`
	IsTest       bool      `json:"is_test"`
}

// Passed reports whether the command exited 0.
func (r CommandRecord) Passed() bool { return r.ExitCode == 0 }

// TraceQuery filters traces. Level is metadata, summary or full: how much
// of each trace to return.
type TraceQuery struct {
	Type    string
	Agent   string
	Feature string
	Run     string
	Gate    string
	Text    string
	Since   time.Time
	Until   time.Time // before
	Level   string
	Limit   int
}

// Values encodes q as the query of GET /v1/traces; ParseTraceQuery is its
// inverse, so that the two cannot drift apart.
func (q TraceQuery) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"type": q.Type, "agent": q.Agent, "feature": q.Feature, "run": q.Run, "gate": q.Gate, "q": q.Text, "level": q.Level} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseTraceQuery decodes the query of GET /v1/traces. A malformed value is
// a 400 *APIError that says what is wanted.
func ParseTraceQuery(v url.Values) (TraceQuery, error) {
	q := TraceQuery{Type: v.Get("type"), Agent: v.Get("agent"), Feature: v.Get("feature"), Run: v.Get("run"), Gate: v.Get("gate"), Text: v.Get("q"), Level: v.Get("level")}
	for _, p := range []struct {
		key string
		to  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(p.key); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, &APIError{HTTPStatus: statusBadRequest, Code: CodeBadRequest, Message: p.key + ": want an RFC 3339 time such as 2026-01-02T15:04:05Z"}
			}
			*p.to = t
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, &APIError{HTTPStatus: statusBadRequest, Code: CodeBadRequest, Message: "limit: want a whole number >= 0"}
		}
		q.Limit = n
	}
	return q, nil
}

// Hook asks the daemon's gates about a hook event.
func (c *Client) Hook(ctx context.Context, req HookRequest) (HookResponse, error) {
	var resp HookResponse
	err := c.post(ctx, "/v1/hook", req, &resp)
	return resp, err
}

// Traces lists traces matching q.
func (c *Client) Traces(ctx context.Context, q TraceQuery) ([]Trace, error) {
	var ts []Trace
	path := "/v1/traces"
	if v := q.Values().Encode(); v != "" {
		path += "?" + v
	}
	err := c.get(ctx, path, &ts)
	return ts, err
}

// Trace returns one trace.
func (c *Client) Trace(ctx context.Context, id string) (Trace, error) {
	var t Trace
	err := c.get(ctx, "/v1/traces/"+url.PathEscape(id), &t)
	return t, err
}

// TraceLinks is where a trace stands in the context graph: the path that
// led to it, root first, and what followed it (see graph.Links).
type TraceLinks struct {
	Trace    Trace   `json:"trace"`
	Path     []Trace `json:"path"`
	Followed []Trace `json:"followed"`
	// Next, for a trace nothing followed from, is what happened after it
	// under the same parent.
	Next []Trace `json:"next"`
}

// TraceLinks returns a trace with the path that led to it and what
// followed.
func (c *Client) TraceLinks(ctx context.Context, id string) (TraceLinks, error) {
	var l TraceLinks
	err := c.get(ctx, "/v1/traces/"+url.PathEscape(id)+"/links", &l)
	return l, err
}

// LessonRequest is the body of POST /v1/lessons.
type LessonRequest struct {
	Text string `json:"text"`
}

// AddLesson records a lesson of the project; later agents are told it.
func (c *Client) AddLesson(ctx context.Context, text string) (Trace, error) {
	var t Trace
	err := c.post(ctx, "/v1/lessons", LessonRequest{Text: text}, &t)
	return t, err
}

// PromoteLesson writes a lesson, or a correction made a lesson, into the
// project's CLAUDE.md.
func (c *Client) PromoteLesson(ctx context.Context, id string) (Trace, error) {
	var t Trace
	err := c.post(ctx, "/v1/lessons/"+url.PathEscape(id)+"/promote", nil, &t)
	return t, err
}

// TraceRequest is the body of POST /v1/traces: a trace an agent stores
// (through ctxgraphd mcp). The daemon attributes it to the run whose token
// comes with it and marks it source "agent".
type TraceRequest struct {
	Type           string `json:"type"` // decision, lesson or handoff
	WhatHappened   string `json:"what_happened"`
	WhatWasCorrect string `json:"what_was_correct,omitempty"`
	Why            string `json:"why,omitempty"`
}

// StoreTrace stores a trace as the client's run (its RunToken).
func (c *Client) StoreTrace(ctx context.Context, req TraceRequest) (Trace, error) {
	var t Trace
	err := c.post(ctx, "/v1/traces", req, &t)
	return t, err
}
