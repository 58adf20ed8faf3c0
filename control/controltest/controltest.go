// Package controltest helps test code that talks to the daemon: a fake
// Backend that records its calls, and a real control server on a real
// socket to serve it.
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

// Backend is a fake control.Backend. Set StatusValue and FeatureList before
// serving it; Fail may be called at any time.
type Backend struct {
	StatusValue control.Status
	FeatureList []control.Feature
	PatternList []control.Pattern
	GuardList   control.GuardList
	// Pruned answers PruneTraces.
	Pruned control.PruneResult

	mu    sync.Mutex
	errs  map[string]error
	calls []Call
}

var _ control.Backend = (*Backend)(nil)

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

// Status implements control.Backend.
func (b *Backend) Status(context.Context) (control.Status, error) {
	if err := b.record(Call{Method: "Status"}); err != nil {
		return control.Status{}, err
	}
	return b.StatusValue, nil
}

// Features implements control.Backend.
func (b *Backend) Features(context.Context) ([]control.Feature, error) {
	if err := b.record(Call{Method: "Features"}); err != nil {
		return nil, err
	}
	return b.FeatureList, nil
}

// Pause implements control.Backend.
func (b *Backend) Pause(context.Context) error { return b.record(Call{Method: "Pause"}) }

// Resume implements control.Backend.
func (b *Backend) Resume(context.Context) error { return b.record(Call{Method: "Resume"}) }

// Stop implements control.Backend.
func (b *Backend) Stop(context.Context) error { return b.record(Call{Method: "Stop"}) }

// Retry implements control.Backend.
func (b *Backend) Retry(_ context.Context, id string) error {
	return b.record(Call{Method: "Retry", ID: id})
}

// Unblock implements control.Backend.
func (b *Backend) Unblock(_ context.Context, id, note string) error {
	return b.record(Call{Method: "Unblock", ID: id, Note: note})
}

// Skip implements control.Backend.
func (b *Backend) Skip(_ context.Context, id string) error {
	return b.record(Call{Method: "Skip", ID: id})
}

// Patterns implements control.PatternBackend: PatternList, whatever is
// asked, after recording the threshold.
func (b *Backend) Patterns(_ context.Context, atLeast int) ([]control.Pattern, error) {
	return b.PatternList, b.record(Call{Method: "Patterns", Note: strconv.Itoa(atLeast)})
}

// AddLesson implements control.LessonBackend.
func (b *Backend) AddLesson(_ context.Context, text string) (control.Trace, error) {
	return control.Trace{ID: "tr-1", Type: "lesson", Event: control.TraceEvent{WhatHappened: text}}, b.record(Call{Method: "AddLesson", Note: text})
}

// PromoteLesson implements control.LessonBackend.
func (b *Backend) PromoteLesson(_ context.Context, id string) (control.Trace, error) {
	return control.Trace{ID: id, Type: "lesson"}, b.record(Call{Method: "PromoteLesson", ID: id})
}

// Serve serves b with a real control server on socketPath (through
// server.Listen) until the test ends, then shuts it down and checks that
// Serve returned nil. The server logs to the test log.
func Serve(t testing.TB, socketPath string, b control.Backend) *server.Server {
	t.Helper()
	ln, err := server.Listen(socketPath)
	if err != nil {
		t.Fatalf("server.Listen: %v", err)
	}
	srv := server.New(b, zaptest.NewLogger(t))
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

// PruneTraces implements control.PruneBackend: Pruned.
func (b *Backend) PruneTraces(_ context.Context, req control.PruneRequest) (control.PruneResult, error) {
	return b.Pruned, b.record(Call{Method: "PruneTraces", Note: req.OlderThan})
}

// Guards implements control.GuardBackend: GuardList.
func (b *Backend) Guards(context.Context) (control.GuardList, error) {
	return b.GuardList, b.record(Call{Method: "Guards"})
}

// PromoteGuard implements control.GuardBackend: the guard, in warn.
func (b *Backend) PromoteGuard(_ context.Context, id string) (control.Guard, error) {
	return control.Guard{ID: id, Status: "warn"}, b.record(Call{Method: "PromoteGuard", ID: id})
}

// RetireGuard implements control.GuardBackend: the guard, retired.
func (b *Backend) RetireGuard(_ context.Context, id string) (control.Guard, error) {
	return control.Guard{ID: id, Status: "retired"}, b.record(Call{Method: "RetireGuard", ID: id})
}
