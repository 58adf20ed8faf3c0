package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// gateBackend is a fake daemon whose gates and traces a test looks at.
type gateBackend struct {
	controltest.Backend
	hooks  []control.HookRequest
	tokens []string
	query  control.TraceQuery
	runPID int // IsRunProcess says yes for this pid
}

func (g *gateBackend) Hook(_ context.Context, token string, req control.HookRequest) (control.HookResponse, error) {
	g.hooks = append(g.hooks, req)
	g.tokens = append(g.tokens, token)
	if req.Event == "pre-tool-use" {
		return control.HookResponse{Decision: &control.HookDecision{Gate: "scope", Code: "out_of_scope", Message: "m", Suggestion: "s", Mode: "enforce"}}, nil
	}
	return control.HookResponse{}, nil
}

func (g *gateBackend) Traces(_ context.Context, q control.TraceQuery) ([]control.Trace, error) {
	g.query = q
	return []control.Trace{{ID: "tr-1", Type: "violation", Source: "enforcement_hook", Context: control.TraceContext{Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: "x"}}}, nil
}

func (g *gateBackend) Trace(_ context.Context, id string) (control.Trace, error) {
	if id != "tr-1" {
		return control.Trace{}, &control.APIError{HTTPStatus: http.StatusNotFound, Code: "unknown_trace", Message: "no trace " + id}
	}
	return control.Trace{ID: id}, nil
}

func TestGateRoutes(t *testing.T) {
	sock := socketIn(t)
	g := &gateBackend{}
	controltest.Serve(t, sock, g)
	c := control.NewClient(sock)
	c.RunToken = "secret-of-run-1"
	ctx := t.Context()

	payload := json.RawMessage(`{"hook_event_name":"PreToolUse","tool_name":"Write"}`)
	resp, err := c.Hook(ctx, control.HookRequest{Event: "pre-tool-use", Payload: payload})
	if err != nil || resp.Decision == nil || resp.Decision.Code != "out_of_scope" {
		t.Fatalf("Hook = %+v, %v", resp, err)
	}
	if len(g.hooks) != 1 || string(g.hooks[0].Payload) != string(payload) || g.tokens[0] != "secret-of-run-1" {
		t.Fatalf("the payload and the run token did not reach the backend untouched: %+v %q", g.hooks, g.tokens)
	}
	c.RunToken = "" // an interactive session's hook has no token
	if resp, err := c.Hook(ctx, control.HookRequest{Event: "post-tool-use", Payload: payload}); err != nil || resp.Decision != nil || g.tokens[1] != "" {
		t.Fatalf("allowed hook: %+v %v (token %q)", resp, err, g.tokens[1])
	}

	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := control.TraceQuery{Type: "violation", Agent: "coding-agent", Feature: "F-001", Text: "tested", Level: "summary", Since: since, Limit: 5}
	ts, err := c.Traces(ctx, q)
	if err != nil || len(ts) != 1 || ts[0].ID != "tr-1" {
		t.Fatalf("Traces = %+v, %v", ts, err)
	}
	if !reflect.DeepEqual(g.query, q) {
		t.Fatalf("query did not round-trip:\n got %+v\nwant %+v", g.query, q)
	}
	if _, err := c.Trace(ctx, "tr-9"); !errors.As(err, new(*control.APIError)) {
		t.Fatalf("unknown trace: %v", err)
	}
	bad := raw(t, sock, "GET", "/v1/traces?limit=-3", nil, "")
	if bad.status != http.StatusBadRequest {
		t.Fatalf("bad limit: %d %s", bad.status, bad.body)
	}
}

func (g *gateBackend) IsRunProcess(pid int) bool { return pid == g.runPID }

// TestPeopleRoutesRefuseRuns: what changes the session is for people. A
// client that presents a run's token, or a process of a run, is refused
// there, and still reads the status and asks the hook route.
func TestPeopleRoutesRefuseRuns(t *testing.T) {
	people := []struct {
		name string
		call func(context.Context, *control.Client) error
	}{
		{"pause", func(ctx context.Context, c *control.Client) error { return c.Pause(ctx) }},
		{"resume", func(ctx context.Context, c *control.Client) error { return c.Resume(ctx) }},
		// An initializer that approved its own plan would skip the person.
		{"approve", func(ctx context.Context, c *control.Client) error { return c.Approve(ctx) }},
		{"stop", func(ctx context.Context, c *control.Client) error { return c.Stop(ctx) }},
		{"retry", func(ctx context.Context, c *control.Client) error { return c.Retry(ctx, "F-001") }},
		{"skip", func(ctx context.Context, c *control.Client) error { return c.Skip(ctx, "F-002") }},
		{"unblock", func(ctx context.Context, c *control.Client) error { return c.Unblock(ctx, "F-001", "n") }},
		{"lessons add", func(ctx context.Context, c *control.Client) error {
			_, err := c.AddLesson(ctx, "run go vet first")
			return err
		}},
		{"lessons promote", func(ctx context.Context, c *control.Client) error { _, err := c.PromoteLesson(ctx, "tr-3"); return err }},
	}
	for _, by := range []string{"token", "process"} {
		t.Run(by, func(t *testing.T) {
			sock := socketIn(t)
			g := &gateBackend{}
			controltest.Serve(t, sock, g)
			c := control.NewClient(sock)
			if by == "token" {
				c.RunToken = "secret-of-run-1"
			} else {
				g.runPID = os.Getpid() // this test process plays the agent
			}
			for _, p := range people {
				err := p.call(t.Context(), c)
				var ae *control.APIError
				if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusForbidden {
					t.Errorf("%s by a run's %s = %v, want 403", p.name, by, err)
				}
			}
			if got := g.Calls(); len(got) != 0 {
				t.Errorf("refused requests reached the backend: %+v", got)
			}
			if _, err := c.Status(t.Context()); err != nil {
				t.Errorf("status by a run's %s: %v", by, err)
			}
			if _, err := c.Hook(t.Context(), control.HookRequest{Event: "post-tool-use", Payload: json.RawMessage(`{}`)}); err != nil {
				t.Errorf("hook by a run's %s: %v", by, err)
			}
			// The same requests from a person go through.
			c.RunToken, g.runPID = "", 0
			for _, p := range people {
				if err := p.call(t.Context(), c); err != nil {
					t.Errorf("%s by a person: %v", p.name, err)
				}
			}
		})
	}
}

// noTraces is a gate backend whose store has no trace yet, or fails.
type noTraces struct {
	gateBackend
	err error
}

func (n *noTraces) Traces(context.Context, control.TraceQuery) ([]control.Trace, error) {
	return nil, n.err
}

// GET /v1/traces answers an array even when the store has none yet, and
// the store's failure as an error, not as an empty list.
func TestTracesIsAnArrayWhenThereAreNone(t *testing.T) {
	sock := socketIn(t)
	b := &noTraces{}
	controltest.Serve(t, sock, b)
	if a := raw(t, sock, "GET", "/v1/traces", nil, ""); a.status != 200 || strings.TrimSpace(string(a.body)) != "[]" {
		t.Errorf("GET /v1/traces = %d %s, want 200 []", a.status, a.body)
	}
	b.err = errors.New("store: closed")
	if a := raw(t, sock, "GET", "/v1/traces", nil, ""); a.status != 500 || a.error(t).Error != "store: closed" {
		t.Errorf("GET /v1/traces with the store failing = %d %s, want 500", a.status, a.body)
	}
}

// A hook request whose body is not a HookRequest never reaches the gates.
func TestHookRefusesABodyThatDoesNotDecode(t *testing.T) {
	sock := socketIn(t)
	g := &gateBackend{}
	controltest.Serve(t, sock, g)
	a := raw(t, sock, "POST", "/v1/hook", nil, `{"event": 3}`)
	if a.status != 400 || a.error(t).Code != control.CodeBadRequest {
		t.Errorf("POST /v1/hook with a bad body = %d %s, want 400", a.status, a.body)
	}
	if len(g.hooks) != 0 {
		t.Errorf("the gates were asked: %+v", g.hooks)
	}
}
