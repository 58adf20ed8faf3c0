// Package controltest helps test code that talks to the daemon: a fake
// Backend that plays the loop, the gates, the records and the fleet at once and
// records its calls, and a real control server on a real socket to serve
// it.
package controltest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/server"
)

// Call is one call the fake received. ID and Note are empty for the methods
// without them.
type Call struct {
	Method string
	ID     string
	Note   string
}

// Backend is a fake daemon: a control.Loop, control.Gates,
// control.Records and control.Fleet in one. Set its fields before serving it; Fail may be
// called at any time. A test that needs one part to answer otherwise
// embeds it and overrides that part's methods.
type Backend struct {
	StatusValue control.Status
	FeatureList []control.Feature
	PatternList []control.Pattern
	GuardList   control.GuardList
	// TraceList answers Traces, whatever is asked.
	TraceList []control.Trace
	// Pruned answers PruneTraces; ReportValue, Report.
	Pruned      control.PruneResult
	ReportValue control.Report
	// WorkerList answers Workers; AddWorker answers with a worker of
	// that name and WorkerList.URL.
	WorkerList control.WorkerList

	mu    sync.Mutex
	errs  map[string]error
	calls []Call
}

// Daemon is what Serve serves: the four parts of the daemon the control
// server takes, in one value (a Backend, or a test's type embedding one).
type Daemon interface {
	control.Loop
	control.Gates
	control.Records
	control.Fleet
}

var _ Daemon = (*Backend)(nil)

// Fail makes method (a Backend method name: "Status", "Retry", …) return
// err from now on; a nil err makes it succeed again.
func (b *Backend) Fail(method string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.errs == nil {
		b.errs = map[string]error{}
	}
	b.errs[method] = err
}

// Calls returns the calls received so far, oldest first.
func (b *Backend) Calls() []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Call(nil), b.calls...)
}

func (b *Backend) record(c Call) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, c)
	return b.errs[c.Method]
}

// Status implements control.Loop.
func (b *Backend) Status(context.Context) (control.Status, error) {
	if err := b.record(Call{Method: "Status"}); err != nil {
		return control.Status{}, err
	}
	return b.StatusValue, nil
}

// Features implements control.Loop.
func (b *Backend) Features(context.Context) ([]control.Feature, error) {
	if err := b.record(Call{Method: "Features"}); err != nil {
		return nil, err
	}
	return b.FeatureList, nil
}

// Pause implements control.Loop.
func (b *Backend) Pause(context.Context) error { return b.record(Call{Method: "Pause"}) }

// Resume implements control.Loop.
func (b *Backend) Resume(context.Context) error { return b.record(Call{Method: "Resume"}) }

// Approve implements control.Loop.
func (b *Backend) Approve(context.Context) error { return b.record(Call{Method: "Approve"}) }

// Stop implements control.Loop.
func (b *Backend) Stop(context.Context) error { return b.record(Call{Method: "Stop"}) }

// Retry implements control.Loop.
func (b *Backend) Retry(_ context.Context, id string) error {
	return b.record(Call{Method: "Retry", ID: id})
}

// Unblock implements control.Loop.
func (b *Backend) Unblock(_ context.Context, id, note string) error {
	return b.record(Call{Method: "Unblock", ID: id, Note: note})
}

// Skip implements control.Loop.
func (b *Backend) Skip(_ context.Context, id string) error {
	return b.record(Call{Method: "Skip", ID: id})
}

// Patterns implements control.Records: PatternList, whatever is
// asked, after recording the threshold.
func (b *Backend) Patterns(_ context.Context, atLeast int) ([]control.Pattern, error) {
	return b.PatternList, b.record(Call{Method: "Patterns", Note: strconv.Itoa(atLeast)})
}

// AddLesson implements control.Records.
func (b *Backend) AddLesson(_ context.Context, text string) (control.Trace, error) {
	return control.Trace{ID: "tr-1", Type: "lesson", Event: control.TraceEvent{WhatHappened: text}}, b.record(Call{Method: "AddLesson", Note: text})
}

// PromoteLesson implements control.Loop.
func (b *Backend) PromoteLesson(_ context.Context, id string) (control.Trace, error) {
	return control.Trace{ID: id, Type: "lesson"}, b.record(Call{Method: "PromoteLesson", ID: id})
}

// Serve serves d with a real control server on socketPath (through
// server.Listen) until the test ends, then shuts it down and checks that
// Serve returned nil. The server logs to the test log.
func Serve(t testing.TB, socketPath string, d Daemon) *server.Server {
	t.Helper()
	ln, err := server.Listen(socketPath)
	if err != nil {
		t.Fatalf("server.Listen: %v", err)
	}
	srv := server.New(d, d, d, d, zaptest.NewLogger(t))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("control server Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("control server Serve: %v", err)
		}
	})
	return srv
}

// PruneTraces implements control.Records: Pruned.
func (b *Backend) PruneTraces(_ context.Context, req control.PruneRequest) (control.PruneResult, error) {
	return b.Pruned, b.record(Call{Method: "PruneTraces", Note: req.OlderThan})
}

// Guards implements control.Loop: GuardList.
func (b *Backend) Guards(context.Context) (control.GuardList, error) {
	return b.GuardList, b.record(Call{Method: "Guards"})
}

// PromoteGuard implements control.Loop: the guard, in warn.
func (b *Backend) PromoteGuard(_ context.Context, id string) (control.Guard, error) {
	return control.Guard{ID: id, Status: "warn"}, b.record(Call{Method: "PromoteGuard", ID: id})
}

// RetireGuard implements control.Loop: the guard, retired.
func (b *Backend) RetireGuard(_ context.Context, id string) (control.Guard, error) {
	return control.Guard{ID: id, Status: "retired"}, b.record(Call{Method: "RetireGuard", ID: id})
}

// Changes implements control.Loop: a channel that is never closed (the
// fake's status changes only when a test says so).
func (b *Backend) Changes() <-chan struct{} { return nil }

// Hook implements control.Gates: every action goes ahead.
func (b *Backend) Hook(_ context.Context, _ string, req control.HookRequest) (control.HookResponse, error) {
	return control.HookResponse{}, b.record(Call{Method: "Hook", Note: req.Event})
}

// IsRunProcess implements control.Gates: no process is a run's.
func (b *Backend) IsRunProcess(int) bool { return false }

// Traces implements control.Records: TraceList, whatever is asked.
func (b *Backend) Traces(context.Context, control.TraceQuery) ([]control.Trace, error) {
	return b.TraceList, b.record(Call{Method: "Traces"})
}

// Trace implements control.Records: a trace with that id.
func (b *Backend) Trace(_ context.Context, id string) (control.Trace, error) {
	return control.Trace{ID: id}, b.record(Call{Method: "Trace", ID: id})
}

// TraceLinks implements control.Records: the trace with that id, linked
// to nothing.
func (b *Backend) TraceLinks(_ context.Context, id string) (control.TraceLinks, error) {
	return control.TraceLinks{Trace: control.Trace{ID: id}}, b.record(Call{Method: "TraceLinks", ID: id})
}

// StoreTrace implements control.Records: the trace, as an agent's.
func (b *Backend) StoreTrace(_ context.Context, _ string, req control.TraceRequest) (control.Trace, error) {
	return control.Trace{ID: "tr-1", Type: req.Type, Source: control.SourceAgent, Event: control.TraceEvent{WhatHappened: req.WhatHappened}},
		b.record(Call{Method: "StoreTrace", Note: req.WhatHappened})
}

// Report implements control.Records: ReportValue.
func (b *Backend) Report(context.Context) (control.Report, error) {
	return b.ReportValue, b.record(Call{Method: "Report"})
}

// Workers implements control.Fleet: WorkerList.
func (b *Backend) Workers(context.Context) (control.WorkerList, error) {
	return b.WorkerList, b.record(Call{Method: "Workers"})
}

// AddWorker implements control.Fleet: a worker of that name, with
// credentials under /fleet/workers.
func (b *Backend) AddWorker(_ context.Context, name string) (control.NewWorker, error) {
	w := control.Worker{Name: name, PublicKey: "UFAKE" + name, Credentials: "/fleet/workers/" + name + ".creds"}
	return control.NewWorker{Worker: w, URL: b.WorkerList.URL}, b.record(Call{Method: "AddWorker", ID: name})
}

// RevokeWorker implements control.Fleet.
func (b *Backend) RevokeWorker(_ context.Context, name string) error {
	return b.record(Call{Method: "RevokeWorker", ID: name})
}
