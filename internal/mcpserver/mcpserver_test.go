package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// The daemon serves the tools to every run for a night: a request must
// leave nothing running behind it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// daemon is a fake daemon that answers the graph's routes and remembers
// what it was asked, with the run token that came with it.
type daemon struct {
	controltest.Backend
	mu     sync.Mutex
	query  control.TraceQuery
	stored []control.TraceRequest
	tokens []string
}

func (d *daemon) Hook(context.Context, string, control.HookRequest) (control.HookResponse, error) {
	return control.HookResponse{}, nil
}

func (d *daemon) Traces(_ context.Context, q control.TraceQuery) ([]control.Trace, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.query = q
	return []control.Trace{{ID: "tr-3", Type: "decision", Context: control.TraceContext{Feature: q.Feature},
		Event: control.TraceEvent{WhatHappened: "F-001 attempt 1 failed its test"}}}, nil
}

func (d *daemon) Trace(_ context.Context, id string) (control.Trace, error) {
	return control.Trace{ID: id, Type: "violation"}, nil
}

func (d *daemon) TraceLinks(_ context.Context, id string) (control.TraceLinks, error) {
	return control.TraceLinks{Trace: control.Trace{ID: id, Type: "violation"},
		Path: []control.Trace{{ID: "tr-2", Type: "handoff", Event: control.TraceEvent{WhatHappened: "run-000002 started"}}}}, nil
}

func (d *daemon) StoreTrace(_ context.Context, token string, req control.TraceRequest) (control.Trace, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stored = append(d.stored, req)
	d.tokens = append(d.tokens, token)
	return control.Trace{ID: "tr-9", Type: req.Type, Source: "agent"}, nil
}

// serveDaemon serves d on a socket of its own and returns the socket's
// path: short, as socket paths have a length limit.
func serveDaemon(t *testing.T, d *daemon) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cgm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := dir + "/d.sock"
	controltest.Serve(t, sock, d)
	return sock
}

func connect(t *testing.T, d *daemon) *mcp.ClientSession {
	t.Helper()
	c := control.NewClient(serveDaemon(t, d))
	c.RunToken = "secret-of-run-7"
	st, ct := mcp.NewInMemoryTransports()
	ctx := t.Context()
	go New("test", func(*mcp.RequestExtra) *control.Client { return c }).Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

func TestTools(t *testing.T) {
	d := &daemon{Backend: controltest.Backend{PatternList: []control.Pattern{{Kind: control.PatternRefusal, What: "coding-agent refused by scope", Count: 3}}}}
	cs := connect(t, d)

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, " "); got != "extract_patterns get_trace query_traces record_lesson store_trace" {
		t.Errorf("tools = %s", got)
	}

	out, isErr := call(t, cs, QueryTraces, map[string]any{"feature": "F-001", "since": "2h"})
	if isErr || !strings.Contains(out, "F-001 attempt 1 failed its test") {
		t.Errorf("query_traces = %v %s", isErr, out)
	}
	if d.query.Feature != "F-001" || d.query.Level != "summary" || d.query.Limit != defaultLimit || d.query.Since.IsZero() {
		t.Errorf("the daemon was asked %+v; want the feature, level summary, the default limit and a since", d.query)
	}
	if out, isErr := call(t, cs, QueryTraces, map[string]any{"since": "yesterday"}); !isErr || !strings.Contains(out, `since "yesterday"`) {
		t.Errorf("a bad since = %v %s, want a tool error that names it", isErr, out)
	}
	if out, _ := call(t, cs, GetTrace, map[string]any{"id": "tr-5"}); !strings.Contains(out, `"id":"tr-5"`) || !strings.Contains(out, "run-000002 started") {
		t.Errorf("get_trace = %s", out)
	}
	if out, _ := call(t, cs, ExtractPatterns, map[string]any{}); !strings.Contains(out, "coding-agent refused by scope") {
		t.Errorf("extract_patterns = %s", out)
	}
	if calls := d.Calls(); len(calls) != 1 || calls[0].Note != "2" {
		t.Errorf("extract_patterns asked %+v, want the default of 2", calls)
	}
	call(t, cs, StoreTrace, map[string]any{"type": "decision", "what_happened": "chose the v2 API"})
	call(t, cs, RecordLesson, map[string]any{"text": "run go vet first"})
	want := []control.TraceRequest{{Type: "decision", WhatHappened: "chose the v2 API"}, {Type: "lesson", WhatHappened: "run go vet first"}}
	got, _ := json.Marshal(d.stored)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) || len(d.tokens) != 2 || d.tokens[0] != "secret-of-run-7" || d.tokens[1] != "secret-of-run-7" {
		t.Errorf("stored %s with tokens %q; want %s, each with the run's token", got, d.tokens, wantJSON)
	}
}

// bearer adds a run's token to every request, as Claude Code does with the
// headers of the daemon's --mcp-config.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// serveHTTP serves Handler on loopback, in front of the fake daemon d, for
// the runs whose tokens are live.
func serveHTTP(t *testing.T, d *daemon, live ...string) string {
	t.Helper()
	srv := httptest.NewServer(Handler(serveDaemon(t, d), "test", func(token string) bool { return slices.Contains(live, token) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A run reaches the tools over HTTP with its token, and what it stores is
// its run's: the token reaches the daemon with each of its calls, and
// another run's calls on the same server carry that run's.
func TestHandlerServesALiveRun(t *testing.T) {
	d := &daemon{}
	url := serveHTTP(t, d, "secret-of-run-7", "secret-of-run-8")
	connect := func(token string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs, other := connect("secret-of-run-7"), connect("secret-of-run-8")
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 5 {
		t.Fatalf("tools over HTTP: %v %v", tools, err)
	}
	if out, isErr := call(t, cs, QueryTraces, map[string]any{"feature": "F-001"}); isErr || !strings.Contains(out, "F-001 attempt 1 failed its test") {
		t.Errorf("query_traces over HTTP = %v %s", isErr, out)
	}
	call(t, cs, StoreTrace, map[string]any{"type": "decision", "what_happened": "chose the v2 API"})
	call(t, other, RecordLesson, map[string]any{"text": "run go vet first"})
	call(t, cs, StoreTrace, map[string]any{"type": "handoff", "what_happened": "done"})
	if want := []string{"secret-of-run-7", "secret-of-run-8", "secret-of-run-7"}; len(d.stored) != 3 || !slices.Equal(d.tokens, want) {
		t.Errorf("stored %+v with tokens %q; want each with its run's token, %q", d.stored, d.tokens, want)
	}
}

// Nothing but a live run's token gets past the door: not a request without
// one, not another scheme, not a token of no run in flight (a run that
// ended, or a guess), whatever the request.
func TestHandlerRefusesAllButALiveRunsToken(t *testing.T) {
	d := &daemon{}
	url := serveHTTP(t, d, "secret-of-run-7")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	store := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_trace","arguments":{"type":"decision","what_happened":"forged"}}}`
	for _, tt := range []struct {
		name, auth, body string
		want             int
	}{
		{"no token", "", initialize, http.StatusUnauthorized},
		{"another scheme", "Basic c2VjcmV0LW9mLXJ1bi03", initialize, http.StatusUnauthorized},
		{"a token of no run in flight", "Bearer secret-of-run-6", initialize, http.StatusUnauthorized},
		{"a tool call without a token", "", store, http.StatusUnauthorized},
		{"a live run's token", "Bearer secret-of-run-7", initialize, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s: %d %s, want %d", tt.name, resp.StatusCode, body, tt.want)
			}
		})
	}
	if len(d.stored) != 0 {
		t.Errorf("a refused request stored %+v", d.stored)
	}
}
