package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// gateBackend adds the gate routes to the fake backend.
type gateBackend struct {
	controltest.Backend
	hooks []control.HookRequest
	query control.TraceQuery
}

func (g *gateBackend) Hook(_ context.Context, req control.HookRequest) (control.HookResponse, error) {
	g.hooks = append(g.hooks, req)
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
	ctx := t.Context()

	payload := json.RawMessage(`{"hook_event_name":"PreToolUse","tool_name":"Write"}`)
	resp, err := c.Hook(ctx, control.HookRequest{Event: "pre-tool-use", Role: "coding-agent", Feature: "F-001", Run: "run-000001", Payload: payload})
	if err != nil || resp.Decision == nil || resp.Decision.Code != "out_of_scope" {
		t.Fatalf("Hook = %+v, %v", resp, err)
	}
	if len(g.hooks) != 1 || string(g.hooks[0].Payload) != string(payload) || g.hooks[0].Run != "run-000001" {
		t.Fatalf("the payload did not reach the backend untouched: %+v", g.hooks)
	}
	if resp, err := c.Hook(ctx, control.HookRequest{Event: "post-tool-use", Payload: payload}); err != nil || resp.Decision != nil {
		t.Fatalf("allowed hook: %+v %v", resp, err)
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

func TestBackendWithoutGatesHasNoHookRoute(t *testing.T) {
	sock := socketIn(t)
	controltest.Serve(t, sock, &controltest.Backend{})
	if r := raw(t, sock, "POST", "/v1/hook", nil, "{}"); r.status != http.StatusNotFound {
		t.Fatalf("POST /v1/hook on a gateless backend = %d", r.status)
	}
}
