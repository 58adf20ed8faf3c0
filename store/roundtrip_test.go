package store

import (
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/everyfield"
)

// reopened closes s and opens its database again, as a restart does.
func reopened(t *testing.T, s *Store) *Store {
	t.Helper()
	dir := s.path[:len(s.path)-len(FileName)-1]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sameFields(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := everyfield.Diff(want, got); len(d) > 0 {
		t.Errorf("%s did not come back from the store as it went in:\n\t%s", what, strings.Join(d, "\n\t"))
	}
}

// Everything the daemon persists comes back after a restart, every field
// of it: the session (its state, the run in flight, the limits' counts,
// the budget warned, the wait and the backoffs), each feature's counters
// (spend, budget warned, dossier, diagnosis, graph nodes), the runs (their
// costs, which are the session's spend), the transitions, the list and the
// frozen tests, the traces, commands and guards. Every field is filled by
// reflection: a field added without its round trip fails here by name.
func TestEveryPersistedFieldSurvivesARestart(t *testing.T) {
	s, _ := openTemp(t)
	var sess Session
	everyfield.Fill(&sess)
	var ctr FeatureCounters
	everyfield.Fill(&ctr)
	var a, b Run
	everyfield.Fill(&a)
	everyfield.Fill(&b)
	a.Seq, b.Seq, b.CostUSD = 7, 9, 1.5
	var tr Transition
	everyfield.Fill(&tr)
	list, frozen := []byte(`{"version":1,"features":[]}`), []byte(`{"tests/F-001.sh":"abc"}`)
	err := s.Apply(Batch{Session: &sess, FeatureList: list, Frozen: frozen, Counters: map[string]FeatureCounters{"F-001": ctr},
		Runs: []Run{a, b}, Transitions: []Transition{tr}})
	if err != nil {
		t.Fatal(err)
	}
	var trace control.Trace
	everyfield.Fill(&trace)
	stored, err := s.AppendTraces(trace)
	if err != nil {
		t.Fatal(err)
	}
	trace.ID = stored[0].ID // given by the store
	var cmd control.CommandRecord
	everyfield.Fill(&cmd)
	if err := s.AppendCommand(cmd); err != nil {
		t.Fatal(err)
	}
	var rule guards.Rule
	everyfield.Fill(&rule)
	if err := s.PutGuards(rule); err != nil {
		t.Fatal(err)
	}

	s = reopened(t, s)
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasSession {
		t.Fatal("the session was not loaded")
	}
	sameFields(t, "the session", sess, st.Session)
	sameFields(t, "a feature's counters", map[string]FeatureCounters{"F-001": ctr}, st.Counters)
	if string(st.FeatureList) != string(list) || string(st.Frozen) != string(frozen) {
		t.Errorf("list %s, frozen tests %s", st.FeatureList, st.Frozen)
	}
	// What the loop reads back of the runs: the session's spend and count,
	// and where run ids and transitions go on.
	if st.TotalCostUSD != a.CostUSD+b.CostUSD || st.RunCount != 2 || st.LastRunSeq != 9 || st.LastTransSeq != tr.Seq {
		t.Errorf("spent %v in %d runs, last run %d, last transition %d; want %v in 2, 9, %d", st.TotalCostUSD, st.RunCount, st.LastRunSeq, st.LastTransSeq, a.CostUSD+b.CostUSD, tr.Seq)
	}
	runs, err := s.Runs()
	if err != nil {
		t.Fatal(err)
	}
	sameFields(t, "the runs", []Run{a, b}, runs)
	ts, err := s.Transitions()
	if err != nil {
		t.Fatal(err)
	}
	sameFields(t, "the transitions", []Transition{tr}, ts)
	got, ok, err := s.Trace(trace.ID)
	if err != nil || !ok {
		t.Fatalf("trace %s: %v, %v", trace.ID, ok, err)
	}
	sameFields(t, "a trace", trace, got)
	cmds, err := s.Commands(cmd.Run)
	if err != nil {
		t.Fatal(err)
	}
	sameFields(t, "the commands", []control.CommandRecord{cmd}, cmds)
	rules, err := s.Guards()
	if err != nil {
		t.Fatal(err)
	}
	sameFields(t, "the guards", []guards.Rule{rule}, rules)
}
