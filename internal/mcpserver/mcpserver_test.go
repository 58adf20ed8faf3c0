package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

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

func connect(t *testing.T, d *daemon) *mcp.ClientSession {
	t.Helper()
	dir, err := os.MkdirTemp("", "cgm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := dir + "/d.sock"
	controltest.Serve(t, sock, d)
	c := control.NewClient(sock)
	c.RunToken = "secret-of-run-7"
	st, ct := mcp.NewInMemoryTransports()
	ctx := t.Context()
	go New(c, "test").Run(ctx, st)
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
