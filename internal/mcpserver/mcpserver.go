// Package mcpserver is the context graph as MCP tools for agents, on the
// official Go SDK: served by the daemon to its runs over HTTP on loopback
// (Handler), and by `ctxgraphd mcp` over stdio to a person's own sessions.
// Either way it is a client of the daemon's socket and never opens the
// store: the daemon stays the one writer, and what an agent stores is
// attributed to its run by the run's token.
package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// The tools' names, a contract: agents and their users call them by name.
// Claude Code shows them to the model as
// mcp__ctxgraphd__<name>.
const (
	QueryTraces     = "query_traces"
	GetTrace        = "get_trace"
	StoreTrace      = "store_trace"
	ExtractPatterns = "extract_patterns"
	RecordLesson    = "record_lesson"
)

// QueryInput filters traces; every field is optional.
type QueryInput struct {
	Type    string `json:"type,omitempty" jsonschema:"decision, violation, correction, approval, handoff, transition or lesson"`
	Agent   string `json:"agent,omitempty" jsonschema:"only traces of this role, such as coding-agent"`
	Feature string `json:"feature,omitempty" jsonschema:"only traces of this feature, such as F-001"`
	Gate    string `json:"gate,omitempty" jsonschema:"only traces of this gate, such as scope"`
	Text    string `json:"text,omitempty" jsonschema:"text in what happened, what was correct, or why"`
	Since   string `json:"since,omitempty" jsonschema:"only traces of this last duration, such as 2h"`
	Level   string `json:"level,omitempty" jsonschema:"metadata (cheapest), summary (the default) or full"`
	Limit   int    `json:"limit,omitempty" jsonschema:"only the newest N (default 20)"`
}

// Traces is a tool's list of traces.
type Traces struct {
	Traces []control.Trace `json:"traces"`
}

// GetInput names a trace.
type GetInput struct {
	ID string `json:"id" jsonschema:"the trace's id, such as tr-12"`
}

// StoreInput is what an agent records.
type StoreInput struct {
	Type           string `json:"type" jsonschema:"decision, lesson or handoff"`
	WhatHappened   string `json:"what_happened"`
	WhatWasCorrect string `json:"what_was_correct,omitempty"`
	Why            string `json:"why,omitempty"`
}

// PatternsInput sets how often something must have happened.
type PatternsInput struct {
	Min int `json:"min,omitempty" jsonschema:"at least this many times (default 2)"`
}

// Patterns is the answer of extract_patterns.
type Patterns struct {
	Patterns []control.Pattern `json:"patterns"`
}

// LessonInput is a lesson an agent proposes.
type LessonInput struct {
	Text string `json:"text" jsonschema:"the lesson, in a sentence"`
}

// defaultLimit keeps an unfiltered query cheap for the model that reads it.
const defaultLimit = 20

// New is the MCP server. Its tools ask the daemon through the client that
// clientFor gives for each call: `ctxgraphd mcp`'s own, or one that
// carries the calling run's token, so that what it stores is the run's.
// One server serves every call: making one costs milliseconds (each
// tool's schema is worked out and checked), too much for every request.
func New(version string, clientFor func(*mcp.RequestExtra) *control.Client) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ctxgraphd", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: QueryTraces, Description: "Query the project's context graph: what happened before (refusals, verdicts, corrections, lessons). Start with level metadata or summary, then get_trace for one in full."},
		func(ctx context.Context, req *mcp.CallToolRequest, in QueryInput) (*mcp.CallToolResult, Traces, error) {
			c := clientFor(req.Extra)
			q := control.TraceQuery{Type: in.Type, Agent: in.Agent, Feature: in.Feature, Gate: in.Gate, Text: in.Text, Level: in.Level, Limit: in.Limit}
			if q.Level == "" {
				q.Level = control.LevelSummary
			}
			if q.Limit <= 0 {
				q.Limit = defaultLimit
			}
			if in.Since != "" {
				d, err := time.ParseDuration(in.Since)
				if err != nil || d <= 0 {
					return nil, Traces{}, fmtError("since %q: want a duration such as 2h or 30m", in.Since)
				}
				q.Since = time.Now().Add(-d)
			}
			ts, err := c.Traces(ctx, q)
			if ts == nil {
				ts = []control.Trace{}
			}
			return nil, Traces{Traces: ts}, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: GetTrace, Description: "One trace of the context graph, in full, with the path that led to it (its feature, attempt, run) and what followed from it, each in a line."},
		func(ctx context.Context, req *mcp.CallToolRequest, in GetInput) (*mcp.CallToolResult, control.TraceLinks, error) {
			c := clientFor(req.Extra)
			l, err := c.TraceLinks(ctx, in.ID)
			return nil, l, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: StoreTrace, Description: "Record a decision, a lesson or a handoff for the agents after you. It is attributed to your run and marked as yours (source agent)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in StoreInput) (*mcp.CallToolResult, control.Trace, error) {
			c := clientFor(req.Extra)
			t, err := c.StoreTrace(ctx, control.TraceRequest(in))
			return nil, t, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: ExtractPatterns, Description: "What happened again and again in this project: the same refusal, failing command or file put back."},
		func(ctx context.Context, req *mcp.CallToolRequest, in PatternsInput) (*mcp.CallToolResult, Patterns, error) {
			c := clientFor(req.Extra)
			atLeast := in.Min
			if atLeast < 1 {
				atLeast = 2
			}
			ps, err := c.Patterns(ctx, atLeast)
			return nil, Patterns{Patterns: ps}, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: RecordLesson, Description: "Propose a lesson of this project. A person decides whether later agents are told it."},
		func(ctx context.Context, req *mcp.CallToolRequest, in LessonInput) (*mcp.CallToolResult, control.Trace, error) {
			c := clientFor(req.Extra)
			t, err := c.StoreTrace(ctx, control.TraceRequest{Type: "lesson", WhatHappened: in.Text})
			return nil, t, err
		})
	return s
}

// Handler is the server over MCP's streamable HTTP transport, as the daemon
// gives it to its runs: Claude Code connects to it rather than starting a
// process for it, which spares every run a process's start and the 50 ms
// the CLI waits, at the run's end, for a stdio server to be gone.
//
// Each request must bear a run's token (Authorization: Bearer), which live
// says is a run in flight; any other is refused with 401 before a tool
// runs, so that the loopback port is worth nothing to another process of
// the machine. The server is stateless (no session outlives its request)
// and answers in JSON: a run asks for the tools once and calls them; it
// is never sent anything it did not ask for. Its tools ask the daemon at
// socket as that run, through the same routes as `ctxgraphd mcp`.
func Handler(socket, version string, live func(token string) bool) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if !live(token) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Extra: map[string]any{tokenKey: token}}, nil
	}
	daemon := control.NewClient(socket)
	srv := New(version, func(extra *mcp.RequestExtra) *control.Client {
		c := *daemon // the same connections, another token
		c.RunToken = ""
		if extra != nil && extra.TokenInfo != nil {
			c.RunToken, _ = extra.TokenInfo.Extra[tokenKey].(string)
		}
		return &c
	})
	serve := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	// The runs' tokens carry no expiry: a token dies with its run.
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(serve)
}

// tokenKey is where Handler's verifier leaves the run's token for the
// server it makes for the request.
const tokenKey = "run-token"

// ServeStdio is `ctxgraphd mcp`: the server on
// stdin and stdout until the client leaves or ctx ends, asking the daemon
// at CTXGRAPH_SOCKET (with the run's token, control.RunTokenEnv), or the
// daemon of the project around the working directory.
func ServeStdio(ctx context.Context, version string) error {
	socket := os.Getenv("CTXGRAPH_SOCKET")
	if socket == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		proj, err := paths.FindProject(wd)
		if err != nil {
			return fmt.Errorf("no daemon to ask: set CTXGRAPH_SOCKET, or start ctxgraphd mcp inside a ctxgraphd project: %w", err)
		}
		socket = proj.Socket
	}
	c := control.NewClient(socket)
	return New(version, func(*mcp.RequestExtra) *control.Client { return c }).Run(ctx, &mcp.StdioTransport{})
}

type toolError string

func (e toolError) Error() string { return string(e) }

func fmtError(format string, args ...any) error { return toolError(fmt.Sprintf(format, args...)) }
