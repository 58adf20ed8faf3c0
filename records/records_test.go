package records_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
	"github.com/ctxgraphd/ctxgraphd/records"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// judge stores traces as they come and knows one run's token.
type judge struct {
	st *store.Store
}

func (j judge) Trace(t control.Trace) control.Trace {
	out, err := j.st.AppendTraces(t)
	if err != nil || len(out) == 0 {
		return t
	}
	return out[0]
}

func (judge) ActorOf(token string) (gates.Actor, bool) {
	if token == "run-1-token" {
		return gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}, true
	}
	return gates.Actor{}, false
}

// features is a canonical list with nothing finished.
type features struct{}

func (features) Features(context.Context) ([]control.Feature, error) { return nil, nil }

// newRecords is the records of a fresh project's store.
func newRecords(t *testing.T) (*records.Service, *store.Store, paths.Project) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	p, err := paths.ForProject(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(p.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return records.New(records.Options{Store: st, Project: p, Judge: judge{st}, Features: features{}}), st, p
}

func isStatus(err error, status int) bool {
	var api *control.APIError
	return errors.As(err, &api) && api.HTTPStatus == status
}

// An unknown trace type is a bad request that lists the types, whoever
// asks (ctl checks it too; an MCP client or curl may not).
func TestTracesRefuseAnUnknownType(t *testing.T) {
	r, _, _ := newRecords(t)
	_, err := r.Traces(context.Background(), control.TraceQuery{Type: "violations"})
	var api *control.APIError
	if !errors.As(err, &api) || api.HTTPStatus != http.StatusBadRequest || !strings.Contains(api.Message, "the types are decision, violation") {
		t.Errorf("Traces(type violations) = %v, want a 400 that lists the types", err)
	}
	// So is an unknown level, which used to be taken as full.
	_, err = r.Traces(context.Background(), control.TraceQuery{Level: "everything"})
	if !errors.As(err, &api) || api.HTTPStatus != http.StatusBadRequest || !strings.Contains(api.Message, "the levels are metadata, summary, full") {
		t.Errorf("Traces(level everything) = %v, want a 400 that lists the levels", err)
	}
}

// What an agent stores is marked as its own and kept to what it may say;
// a token of no run of this daemon stores nothing.
func TestStoreTrace(t *testing.T) {
	r, st, _ := newRecords(t)
	ctx := context.Background()

	tr, err := r.StoreTrace(ctx, "", control.TraceRequest{Type: control.TraceHandoff, WhatHappened: "  the parser\nis done  "})
	if err != nil || tr.Source != control.SourceAgent || tr.Type != control.TraceHandoff || tr.Event.WhatHappened != "the parser is done" {
		t.Errorf("StoreTrace = %+v, %v", tr, err)
	}
	const maxTrace = 4 * 500 // four lessons
	for _, tt := range []struct {
		token  string
		req    control.TraceRequest
		status int
	}{
		{"", control.TraceRequest{Type: control.TraceViolation, WhatHappened: "the tester cheated"}, http.StatusBadRequest},
		{"", control.TraceRequest{Type: control.TraceApproval, WhatHappened: "F-001 is tested"}, http.StatusBadRequest},
		{"", control.TraceRequest{Type: control.TraceDecision, WhatHappened: " "}, http.StatusBadRequest},
		{"", control.TraceRequest{Type: control.TraceDecision, WhatHappened: strings.Repeat("x", maxTrace+1)}, http.StatusBadRequest},
		{"a-token-of-no-run", control.TraceRequest{Type: control.TraceDecision, WhatHappened: "x"}, http.StatusForbidden},
	} {
		if _, err := r.StoreTrace(ctx, tt.token, tt.req); !isStatus(err, tt.status) {
			t.Errorf("StoreTrace(%q, %s) = %v, want %d", tt.token, tt.req.Type, err, tt.status)
		}
	}
	if trs, _ := st.Traces(store.TraceFilter{Text: "cheated"}); len(trs) != 0 {
		t.Errorf("a refused trace was stored: %+v", trs)
	}
	// A run's trace is its run's.
	tr, err = r.StoreTrace(ctx, "run-1-token", control.TraceRequest{Type: control.TraceDecision, WhatHappened: "kept the old parser"})
	if err != nil || tr.Context.Run != "run-1" || tr.Context.Agent != gates.Coder || tr.Context.Feature != "F-001" {
		t.Errorf("StoreTrace with a run's token = %+v, %v", tr, err)
	}
}

// GET /v1/report says what verify last found, as `ctxgraphd report` does:
// verify runs beside the daemon and records itself in the state directory,
// apart from the store the daemon holds.
func TestReportSaysWhatVerifyLastFound(t *testing.T) {
	r, _, p := newRecords(t)
	rep, err := r.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verify.Confined != nil || rep.Verify.Unconfined != nil {
		t.Fatalf("before any verify, the report has %+v", rep.Verify)
	}
	run := control.VerifyRun{Time: time.Now().UTC(), Unconfined: true, Rev: "HEAD", Commit: "0123456789abcdef",
		Features: []control.VerifyFeature{{ID: "F-001", Summary: "`sh tests/F-001.sh` failed (exit 1)"}}}
	if err := report.RecordVerify(p.StateDir, run); err != nil {
		t.Fatal(err)
	}
	if rep, err = r.Report(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := rep.Verify.Unconfined; u == nil || u.Commit != run.Commit || len(u.Features) != 1 || u.Features[0].Passed || rep.Verify.Confined != nil {
		t.Errorf("after verify --unconfined, the report has %+v", rep.Verify)
	}
}
