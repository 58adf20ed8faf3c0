package orchestrator

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// errNoSpace is the fault a faultyStore injects: what a full disk says.
var errNoSpace = errors.New("no space left on device (injected)")

// writeKind is a kind of write the loop (or its judge) makes to the store.
type writeKind string

const (
	// writeTransition is a batch with a transition: the session's move,
	// with the run, counters and list that ride with it.
	writeTransition writeKind = "transition"
	// writeSave is a batch without one: a run's pid, a list's change,
	// what step persists at its end.
	writeSave    writeKind = "save"
	writeTraces  writeKind = "traces"
	writeCommand writeKind = "command"
	writeGuards  writeKind = "guards"
)

// faultyStore is a real store that fails the writes a test asks it to,
// as a full disk would: each write of a kind that is due to fail returns
// errNoSpace and writes nothing.
type faultyStore struct {
	*store.Store
	mu sync.Mutex
	// left is how many more writes of each kind fail; forever: every one,
	// until heal.
	left   map[writeKind]int
	failed map[writeKind]int // how many did
}

const forever = -1

func newFaultyStore() *faultyStore {
	return &faultyStore{left: map[writeKind]int{}, failed: map[writeKind]int{}}
}

// fail makes the next n writes of kind k fail (forever: all of them).
func (f *faultyStore) fail(k writeKind, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left[k] = n
}

// heal ends every fault: the disk has room again.
func (f *faultyStore) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.left)
}

// failures is how many writes of kind k failed so far.
func (f *faultyStore) failures(k writeKind) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed[k]
}

func (f *faultyStore) fault(k writeKind) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch n := f.left[k]; {
	case n == 0:
		return nil
	case n > 0:
		f.left[k] = n - 1
	}
	f.failed[k]++
	return fmt.Errorf("store: write %s: %w", k, errNoSpace)
}

func (f *faultyStore) Apply(b store.Batch) error {
	k := writeSave
	if len(b.Transitions) > 0 {
		k = writeTransition
	}
	if err := f.fault(k); err != nil {
		return err
	}
	return f.Store.Apply(b)
}

func (f *faultyStore) AppendTraces(ts ...control.Trace) ([]control.Trace, error) {
	if err := f.fault(writeTraces); err != nil {
		return nil, err
	}
	return f.Store.AppendTraces(ts...)
}

func (f *faultyStore) AppendCommand(c control.CommandRecord) error {
	if err := f.fault(writeCommand); err != nil {
		return err
	}
	return f.Store.AppendCommand(c)
}

func (f *faultyStore) PutGuards(rs ...guards.Rule) error {
	if err := f.fault(writeGuards); err != nil {
		return err
	}
	return f.Store.PutGuards(rs...)
}

func shortRetry(t *testing.T, d time.Duration) {
	old := persistRetry
	persistRetry = d
	t.Cleanup(func() { persistRetry = old })
}

func TestExperiment(t *testing.T) {
	shortRetry(t, 100*time.Millisecond)
	h := newHarness(t)
	h.faults = newFaultyStore()
	h.faults.fail(writeTransition, 1)
	err := h.runToEndWithin(20 * time.Second)
	t.Logf("end: %v", err)
	st := h.session()
	t.Logf("session %+v", st.Session)
	t.Logf("counters %+v runcount %d lastrun %d lasttrans %d", st.Counters, st.RunCount, st.LastRunSeq, st.LastTransSeq)
	runs, _ := h.st.Runs()
	for _, r := range runs {
		t.Logf("run %d %s %s %s", r.Seq, r.Role, r.Feature, r.Outcome)
	}
	t.Logf("runner runs: %s", roles(h.runner.runs()))
}
