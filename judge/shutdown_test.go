package judge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/control/server"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Every refusal is recorded, and a clean shutdown loses none: a hook is
// answered before its violation is stored (Records.QueueTraces), so the
// daemon's shutdown, its control server's and then its store's, as
// `ctxgraphd run` does it, must store what is queued. Denials over the
// socket, then a shutdown at once, then the store reopened: one violation
// a denial.
func TestEveryDenialOutlivesACleanShutdown(t *testing.T) {
	const backlog = 1000
	f := newFixture(t, nil)
	st, err := store.Open(f.proj.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // on a failure before the shutdown
	f.j.opts.Records = st
	f.j.SetList(twoFeatures())
	coder := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-000001"})

	dir, err := os.MkdirTemp("", "cg") // sun_path holds about 104 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	others := &controltest.Backend{}
	srv := server.New(others, f.j, others, others, zaptest.NewLogger(t))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	payload, err := json.Marshal(writePayload("src/b/x.go")) // F-002's: out of the coder's scope
	if err != nil {
		t.Fatal(err)
	}
	// The store is busy with a long commit when the denials come: theirs
	// wait in its queue behind it, and are still there, or being
	// committed, when the shutdown begins (store's
	// TestCloseStoresWhatIsQueued holds a commit to make sure of it).
	busy := make([]control.Trace, backlog)
	for i := range busy {
		busy[i] = control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Event: control.TraceEvent{WhatHappened: "a decision of the loop's"}}
	}
	st.QueueTraces(nil, busy...)
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c := control.NewClient(sock)
			c.RunToken = coder
			resp, err := c.Hook(t.Context(), control.HookRequest{Event: "pre-tool-use", Payload: payload})
			if err != nil || resp.Decision == nil || resp.Decision.Gate != gates.Scope {
				t.Errorf("hook answered %+v, %v; want a scope denial", resp.Decision, err)
			}
		})
	}
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := store.OpenReadOnly(f.proj.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ts, err := ro.Traces(store.TraceFilter{Type: control.TraceViolation, Run: "run-000001"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != n {
		t.Fatalf("%d denials answered, %d violations stored", n, len(ts))
	}
	if all, err := ro.Traces(store.TraceFilter{}); err != nil || len(all) != backlog+n {
		t.Errorf("%d traces stored (%v), want the %d the loop queued and the %d denials", len(all), err, backlog, n)
	}
	for _, tr := range ts {
		if tr.Gate != gates.Scope || tr.Source != control.SourceHook || tr.Project != f.proj.ID {
			t.Errorf("stored %+v, want the hook's scope violation of the project", tr)
		}
	}
}
