package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

var errFault = errors.New("disk full")

// holdCommit makes the store's next commit of traces stop inside its
// transaction until the returned release is called; held is closed once
// it stopped there.
func holdCommit(s *Store) (held <-chan struct{}, release func()) {
	stopped, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.fault = func(string) error {
		once.Do(func() {
			close(stopped)
			<-resume
		})
		return nil
	}
	return stopped, sync.OnceFunc(func() { close(resume) })
}

// waitedFor reports whether a transaction waits for the queue (settle).
func (q *appendQueue) waitedFor() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.moved != nil
}

func violation(what string) control.Trace {
	return control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope",
		Context: control.TraceContext{Agent: "coding-agent", Feature: "F-001", Run: "run-000001"},
		Event:   control.TraceEvent{WhatHappened: what}}
}

// whatHappened lists the traces' events in order.
func whatHappened(ts []control.Trace) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Event.WhatHappened)
	}
	return strings.Join(out, " ")
}

// What comes after QueueTraces returned finds the traces, in the order they
// were queued, whatever the writer is doing: a read waits for the traces
// queued before it, and a waiting append queues behind them. The hook's
// answer relies on it: its violation is queued before the answer, so that
// the run's next call, its judging (the guards proposed from its
// refusals) and `ctl why` see it.
func TestQueuedTracesAreFoundInOrderByWhatComesAfter(t *testing.T) {
	s, _ := openTemp(t)
	held, release := holdCommit(s)
	defer release()
	stored := make(chan error, 3)
	s.QueueTraces(func(err error) { stored <- err }, violation("first"))
	<-held // the writer is inside the first commit
	s.QueueTraces(func(err error) { stored <- err }, violation("second"))
	s.QueueTraces(func(err error) { stored <- err }, violation("third"), violation("fourth"))

	type read struct {
		ts  []control.Trace
		err error
	}
	reads := make(chan read, 1)
	go func() {
		ts, err := s.Traces(TraceFilter{Run: "run-000001"})
		reads <- read{ts, err}
	}()
	appended := make(chan []control.Trace, 1)
	go func() {
		out, err := s.AppendTraces(violation("appended after"))
		if err != nil {
			t.Error(err)
		}
		appended <- out
	}()
	// The read waits for the queue while the first commit is held: it
	// would miss what was queued.
	eventually.True(t, 10*time.Second, s.appends.waitedFor, "a read while traces were queued did not wait for them")
	select {
	case r := <-reads:
		t.Fatalf("a read ended while traces queued before it were not stored: %q %v", whatHappened(r.ts), r.err)
	default:
	}
	release()

	r := <-reads
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got, want := whatHappened(r.ts), "first second third fourth"; !strings.HasPrefix(whatHappened(r.ts), want) {
		t.Errorf("a read after the queueing found %q, want %q first", got, want)
	}
	if out := <-appended; len(out) != 1 || out[0].ID != "tr-5" {
		t.Errorf("the append after four queued traces got %+v, want id tr-5", out)
	}
	for range 3 {
		if err := <-stored; err != nil {
			t.Errorf("a queued append was told %v", err)
		}
	}
	all, err := s.Traces(TraceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whatHappened(all), "first second third fourth appended after"; got != want {
		t.Errorf("stored %q, want %q", got, want)
	}
	for i, tr := range all {
		if want := fmt.Sprintf("tr-%d", i+1); tr.ID != want {
			t.Errorf("trace %q has id %s, want %s: ids follow the queue", tr.Event.WhatHappened, tr.ID, want)
		}
	}
}

// A clean shutdown loses nothing queued: Close stores every trace queued
// before it, even while a commit is under way and more wait behind it.
func TestCloseStoresWhatIsQueued(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, release := holdCommit(s)
	defer release()
	const n = 50
	s.QueueTraces(nil, violation("call 0"))
	<-held
	for i := 1; i < n; i++ {
		s.QueueTraces(nil, violation(fmt.Sprint("call ", i)))
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	eventually.True(t, 10*time.Second, s.appends.waitedFor, "Close did not wait for the traces queued before it")
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts, err := s.Traces(TraceFilter{Type: control.TraceViolation})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != n {
		t.Fatalf("%d traces queued before Close, %d stored: %q", n, len(ts), whatHappened(ts))
	}
	for i, tr := range ts {
		if want := fmt.Sprint("call ", i); tr.Event.WhatHappened != want {
			t.Errorf("trace %d is %q, want %q", i, tr.Event.WhatHappened, want)
		}
	}
}

// A commit that fails tells every append in it, queued or waiting, and the
// queue goes on: the next commit stores what came after.
func TestAFailedCommitIsToldToItsAppends(t *testing.T) {
	s, _ := openTemp(t)
	fail := true
	s.fault = func(string) error {
		if fail {
			return errFault
		}
		return nil
	}
	told := make(chan error, 1)
	s.QueueTraces(func(err error) { told <- err }, violation("lost"))
	if err := <-told; err == nil {
		t.Error("a queued append whose commit failed was told nil")
	}
	if _, err := s.AppendTraces(violation("lost too")); err == nil {
		t.Error("a waiting append whose commit failed returned nil")
	}
	fail = false
	s.QueueTraces(func(err error) { told <- err }, violation("kept"))
	if err := <-told; err != nil {
		t.Fatal(err)
	}
	ts, err := s.Traces(TraceFilter{})
	if err != nil || whatHappened(ts) != "kept" {
		t.Errorf("stored %q (%v), want only what came after the failure", whatHappened(ts), err)
	}
}
