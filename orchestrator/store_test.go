package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// errNoSpace is the fault a faultyStore injects: what a full disk says.
var errNoSpace = errors.New("no space left on device (injected)")

// writeKind is a kind of write the loop, or its judge, makes to the store.
type writeKind string

const (
	// writeTransition is a batch with a move of the session: the
	// transition, with the run, counters and list that ride with it.
	writeTransition writeKind = "transition"
	// writeSave is a batch without one: a run's pid, what step persists
	// at its end, a change of the list.
	writeSave    writeKind = "save"
	writeTraces  writeKind = "traces"
	writeCommand writeKind = "command"
	// writeGuards is a guard proposed from a pattern of failures, after
	// a run's verdict; writePrune the compaction of old traces
	// (graph.retention), beside the loop.
	writeGuards writeKind = "guards"
	writePrune  writeKind = "prune"
)

// forever is a fault that lasts until the test heals the store.
const forever = -1

// faultyStore is a real store that fails the writes a test asks it to, as
// a full disk would: a write due to fail returns errNoSpace and writes
// nothing.
type faultyStore struct {
	*store.Store
	mu sync.Mutex
	// kind and event are the writes that fail: of kind, and for
	// transitions, those that make the move event ("": any).
	kind  writeKind
	event statemachine.Event
	left  int // how many more fail; forever: all until heal
	// tried are the times the failing kind was written, and failed the
	// times it failed.
	tried, failed []time.Time
}

// fail makes the next n writes of kind k (making the move e, for a
// transition) fail.
func (f *faultyStore) fail(k writeKind, e statemachine.Event, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kind, f.event, f.left = k, e, n
}

// heal ends the fault: the disk has room again.
func (f *faultyStore) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left = 0
}

// failures is how many writes failed so far.
func (f *faultyStore) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failed)
}

// retried is how long after the first failure the same write was tried
// again; false if it was not.
func (f *faultyStore) retried() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failed) == 0 {
		return 0, false
	}
	for _, at := range f.tried {
		if at.After(f.failed[0]) {
			return at.Sub(f.failed[0]), true
		}
	}
	return 0, false
}

func (f *faultyStore) fault(k writeKind, moves []store.Transition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k != f.kind || (f.event != "" && !slices.ContainsFunc(moves, func(t store.Transition) bool { return t.Event == string(f.event) })) {
		return nil
	}
	now := time.Now()
	f.tried = append(f.tried, now)
	if f.left == 0 {
		return nil
	}
	if f.left > 0 {
		f.left--
	}
	f.failed = append(f.failed, now)
	return fmt.Errorf("store: write %s: %w", k, errNoSpace)
}

func (f *faultyStore) Apply(b store.Batch) error {
	k := writeSave
	if len(b.Transitions) > 0 {
		k = writeTransition
	}
	if err := f.fault(k, b.Transitions); err != nil {
		return err
	}
	return f.Store.Apply(b)
}

func (f *faultyStore) AppendTraces(ts ...control.Trace) ([]control.Trace, error) {
	if err := f.fault(writeTraces, nil); err != nil {
		return nil, err
	}
	return f.Store.AppendTraces(ts...)
}

func (f *faultyStore) QueueTraces(done func(error), ts ...control.Trace) {
	if err := f.fault(writeTraces, nil); err != nil {
		if done != nil {
			done(err)
		}
		return
	}
	f.Store.QueueTraces(done, ts...)
}

func (f *faultyStore) AppendCommand(c control.CommandRecord) error {
	if err := f.fault(writeCommand, nil); err != nil {
		return err
	}
	return f.Store.AppendCommand(c)
}

func (f *faultyStore) PutGuards(rs ...guards.Rule) error {
	if err := f.fault(writeGuards, nil); err != nil {
		return err
	}
	return f.Store.PutGuards(rs...)
}

func (f *faultyStore) Prune(o store.PruneOptions) (control.PruneResult, error) {
	if err := f.fault(writePrune, nil); err != nil {
		return control.PruneResult{}, err
	}
	return f.Store.Prune(o)
}

// seedFailingCommand gives the store a command that failed three times
// (graph.guard_threshold), so that the first verdict proposes a guard.
func seedFailingCommand(t *testing.T, h *harness) {
	for i := range 3 {
		if err := h.st.AppendCommand(control.CommandRecord{Run: store.RunID(uint64(90 + i)), Command: "make deploy", ExitCode: 2}); err != nil {
			t.Fatal(err)
		}
	}
}

// proposedOnce fails the test unless the store holds one proposed guard.
func proposedOnce(t *testing.T, h *harness) {
	rs, err := h.st.Guards()
	if err != nil || len(rs) != 1 || rs[0].Status != guards.Proposed {
		t.Errorf("guards %+v (%v), want the one proposal, proposed again at a later verdict", rs, err)
	}
}

// record is what the state of record says happened, in the terms a
// failed write must not change: every move, every run and what it
// counted, each once and in order.
func record(t *testing.T, st *store.Store) []string {
	t.Helper()
	var out []string
	moves, err := st.Transitions()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range moves {
		if m.Seq != uint64(i+1) {
			t.Errorf("transition %d has sequence %d", i+1, m.Seq)
		}
		out = append(out, fmt.Sprintf("move %s %s→%s %s", m.Event, m.From, m.To, m.Feature))
	}
	runs, err := st.Runs()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if r.Seq != uint64(i+1) || r.ID != store.RunID(r.Seq) {
			t.Errorf("run %d is %d (%s)", i+1, r.Seq, r.ID)
		}
		out = append(out, fmt.Sprintf("run %s %s %s attempt %d: %s, ended %t", r.ID, r.Role, r.Feature, r.Attempt, r.Outcome, !r.EndedAt.IsZero()))
	}
	s, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range s.Counters {
			if !yield(id) {
				return
			}
		}
	}) {
		c := s.Counters[id]
		out = append(out, fmt.Sprintf("counters %s: %d runs, %d failures, $%.2f, tested in %s", id, c.Runs, c.Failures, c.CostUSD, c.Branch))
	}
	return append(out, fmt.Sprintf("session %s: %d runs, $%.2f: %s", s.Session.State, s.RunCount, s.TotalCostUSD, s.Session.Message))
}

// holding is what the status says while the loop holds (holdingMessage).
const holding = "the daemon cannot save its state, so it is holding"

// While the loop holds because the store refused a move, its status says
// so whatever else is published meanwhile (a save the store takes, a
// problem with the list, a run's end), until the move is saved. Once the
// status said so only until the next publish: a save that rode on another
// event wiped it, and a person saw a session that seemed to be moving.
func TestTheStatusSaysItHoldsUntilTheMoveIsSaved(t *testing.T) {
	h := newHarness(t)
	h.faults = &faultyStore{}
	h.faults.fail(writeTransition, "", forever)
	o := h.orchestrator(true)
	says := func(when string, want bool) {
		t.Helper()
		s, _ := o.Status(t.Context())
		if got := strings.Contains(s.Message, holding) && strings.Contains(s.Message, errNoSpace.Error()); got != want {
			t.Errorf("%s: the status says %q; holding: %t, want %t", when, s.Message, got, want)
		}
	}
	if o.transition(o.lanes.home, statemachine.Initialize, "", "spawn initializer: no feature list yet") {
		t.Fatal("the loop moved although the store refused the move")
	}
	says("the move refused", true)
	o.publish()
	says("published again", true)
	o.persist()
	says("a save the store took", true)
	o.setProblem("not JSON")
	says("a problem with the list", true)
	o.setProblem("")
	says("the list fixed", true)

	h.faults.heal()
	if !o.transition(o.lanes.home, statemachine.Initialize, "", "spawn initializer: no feature list yet") {
		t.Fatal("the loop did not move once the store took writes")
	}
	says("the move saved", false)
}

// The loop's reaction to a store that refuses a write, for each kind of
// write it makes, once or until the disk is freed: a move that is not
// saved is not made, the session holds and says why in the status, and
// the loop tries the move again by itself after persistRetry; a save
// without a move rides with the next one; a trace or a command that
// cannot be stored is logged and dropped, and the session goes on; a
// guard's proposal is made again at the next verdict, a compaction at the
// next tick of graph.retention. Once
// the store takes writes again, the state of record holds every move and
// every run of a session that had no fault, each once.
func TestAFailedStoreWriteHoldsAndRetries(t *testing.T) {
	retry := 200 * time.Millisecond
	old := persistRetry
	persistRetry = retry
	defer func() { persistRetry = old }()

	clean := newHarness(t)
	if err := clean.runToEndWithin(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	want := record(t, clean.st)

	for _, tc := range []struct {
		name  string
		kind  writeKind
		event statemachine.Event
		n     int
		// holds: the loop stays put and tries again after persistRetry;
		// logged is what the log says of each failure.
		holds  bool
		logged string
		// ranWhileHeld are the runs started before the store was healed,
		// for a fault that lasts.
		ranWhileHeld string
		// setup prepares the harness; check is what else must hold at
		// the end.
		setup, check func(*testing.T, *harness)
	}{
		{"the initializer's start, once", writeTransition, statemachine.Initialize, 1, true, "could not persist transition; staying put", "", nil, nil},
		{"a coder's start, once", writeTransition, statemachine.Implement, 1, true, "could not persist transition; staying put", "", nil, nil},
		{"a tester's start, once", writeTransition, statemachine.Validate, 1, true, "could not persist transition; staying put", "", nil, nil},
		{"the move after a run ended, once", writeTransition, statemachine.Advance, 1, true, "could not persist transition; staying put", "", nil, nil},
		{"the session's end, once", writeTransition, statemachine.Finish, 1, true, "could not persist transition; staying put", "", nil, nil},
		{"a coder's start, until the disk is freed", writeTransition, statemachine.Implement, forever, true, "could not persist transition; staying put", "initializer", nil, nil},
		{"every move, until the disk is freed", writeTransition, "", forever, true, "could not persist transition; staying put", "", nil, nil},
		{"a save without a move, once", writeSave, "", 1, false, "could not persist state", "", nil, nil},
		{"saves without a move, the whole session", writeSave, "", forever, false, "could not persist state", "", nil, nil},
		{"traces, once", writeTraces, "", 1, false, "could not store a trace", "", nil, nil},
		{"traces, the whole session", writeTraces, "", forever, false, "could not store a trace", "", nil, nil},
		{"commands, the whole session", writeCommand, "", forever, false, "could not record a command", "", nil, nil},
		{"a guard's proposal, once", writeGuards, "", 1, false, "could not propose guards", "", seedFailingCommand, proposedOnce},
		{"the compaction of old traces, the whole session", writePrune, "", forever, false, "could not compact old traces (graph.retention)", "",
			func(_ *testing.T, h *harness) { h.cfg.Graph.Retention = 720 * time.Hour }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			core, logs := observer.New(zap.DebugLevel)
			h.logOpts = []zap.Option{zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })}
			if tc.setup != nil {
				tc.setup(t, h)
			}
			h.faults = &faultyStore{}
			h.faults.fail(tc.kind, tc.event, tc.n)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			o := h.orchestrator(true)
			done := make(chan error, 1)
			go func() { done <- o.Run(ctx) }()

			if tc.n == forever && tc.holds {
				eventually.True(t, 10*time.Second, func() bool {
					s, _ := o.Status(ctx)
					return strings.Contains(s.Message, holding) && strings.Contains(s.Message, errNoSpace.Error()) && h.faults.failures() >= 3
				}, "the status saying the daemon holds, and the move tried again")
				if got := roles(h.runner.runs()); got != tc.ranWhileHeld {
					t.Errorf("runs while the store refused the move: %q, want %q", got, tc.ranWhileHeld)
				}
				h.faults.heal()
			}
			if tc.n == forever && !tc.holds {
				eventually.True(t, 10*time.Second, func() bool { return h.faults.failures() > 0 }, "a write of kind %s", tc.kind)
			}
			if err := <-done; err != nil || ctx.Err() != nil {
				t.Fatalf("loop ended with %v (%v), want the session done once the store takes writes", err, ctx.Err())
			}
			h.faults.heal()
			if h.faults.failures() == 0 {
				t.Fatalf("no write of kind %s (%s) failed: the test tests nothing", tc.kind, tc.event)
			}
			if got := logs.FilterMessage(tc.logged).Len(); got < h.faults.failures() {
				t.Errorf("%d log lines %q for %d failed writes", got, tc.logged, h.faults.failures())
			}
			if tc.holds {
				after, ok := h.faults.retried()
				if !ok || after < retry {
					t.Errorf("the move tried again %s after it failed (%t), want by itself after persistRetry (%s)", after, ok, retry)
				}
			}
			if s, _ := o.Status(ctx); strings.Contains(s.Message, holding) {
				t.Errorf("status still says %q once the store took writes again", s.Message)
			}
			if tc.kind != writeTraces {
				// The traces that happened are kept: each run's handoff,
				// which what happens in the run hangs from.
				runs, _ := h.st.Runs()
				for _, r := range runs {
					if tr, ok, err := h.st.Trace(r.Trace); !ok || err != nil || tr.Context.Run != r.ID {
						t.Errorf("%s: its handoff trace %q is not stored (%v)", r.ID, r.Trace, err)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, h)
			}
			if got := record(t, h.st); !slices.Equal(got, want) {
				t.Errorf("state of record:\n%s\nwant, as without a fault:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
