package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	bolt "go.etcd.io/bbolt"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestCommitThenLoadRoundTrips(t *testing.T) {
	s, _ := openTemp(t)
	now := time.Now().UTC().Truncate(time.Second)
	run := Run{Seq: 1, ID: RunID(1), Role: "coding-agent", Feature: "F-001", Attempt: 1, SessionID: "sid", StartedAt: now}
	err := s.Apply(Batch{
		Session:     &Session{State: "code", Feature: "F-001", Run: &run, UpdatedAt: now},
		FeatureList: []byte(`{"version":1,"features":[]}`),
		Counters:    map[string]FeatureCounters{"F-001": {Failures: 1, CoderSession: "sid"}},
		Runs:        []Run{run},
		Transitions: []Transition{{Seq: 1, Event: "implement", From: "next", To: "code", Feature: "F-001"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	run.CostUSD, run.Outcome = 0.25, "ok"
	if err := s.Apply(Batch{Runs: []Run{run}}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasSession || st.Session.State != "code" || st.Session.Run == nil || st.Session.Run.ID != "run-000001" {
		t.Fatalf("session: %+v", st.Session)
	}
	if string(st.FeatureList) != `{"version":1,"features":[]}` {
		t.Fatalf("feature list: %s", st.FeatureList)
	}
	if st.Counters["F-001"].Failures != 1 || st.Counters["F-001"].CoderSession != "sid" {
		t.Fatalf("counters: %+v", st.Counters)
	}
	if st.LastRunSeq != 1 || st.RunCount != 1 || st.TotalCostUSD != 0.25 || st.LastTransSeq != 1 {
		t.Fatalf("sequences/cost: %+v", st)
	}
	runs, _ := s.Runs()
	if len(runs) != 1 || runs[0].Outcome != "ok" {
		t.Fatalf("run was not upserted: %+v", runs)
	}
}

// TestStateSurvivesARestart: what one daemon committed, the next one (a
// restart, a crash) loads as it was; a commit that leaves the feature list
// and the frozen tests' record out keeps them.
func TestStateSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	run := Run{Seq: 1, ID: RunID(1), Role: "tester-agent", Feature: "F-001", Attempt: 1, SessionID: "sid", StartedAt: now, CostUSD: 0.5}
	err = s.Apply(Batch{
		Session:     &Session{State: "test", Feature: "F-001", BlockedInSession: 1, UpdatedAt: now},
		FeatureList: []byte(`{"version":1,"features":[]}`),
		Frozen:      []byte(`{"tests/F-001.sh":"abc"}`),
		Counters:    map[string]FeatureCounters{"F-001": {Failures: 2, Red: "failing"}},
		Runs:        []Run{run},
		Transitions: []Transition{{Seq: 1, Event: "validate", From: "code", To: "test", Feature: "F-001"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatalf("reopening the database: %v", err)
	}
	defer s.Close()
	if err := s.Apply(Batch{Session: &Session{State: "next", UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasSession || st.Session.State != "next" {
		t.Errorf("session: %+v", st.Session)
	}
	if string(st.FeatureList) != `{"version":1,"features":[]}` {
		t.Errorf("feature list: %q", st.FeatureList)
	}
	if string(st.Frozen) != `{"tests/F-001.sh":"abc"}` {
		t.Errorf("frozen tests: %q", st.Frozen)
	}
	if c := st.Counters["F-001"]; c.Failures != 2 || c.Red != "failing" {
		t.Errorf("counters: %+v", st.Counters)
	}
	if st.LastRunSeq != 1 || st.RunCount != 1 || st.TotalCostUSD != 0.5 || st.LastTransSeq != 1 {
		t.Errorf("sequences/cost: %+v", st)
	}
}

// TestFreshDatabaseIsEmpty: before the initializer there is no session, no
// list and no frozen tests' record, and Load says so with nils.
func TestFreshDatabaseIsEmpty(t *testing.T) {
	s, _ := openTemp(t)
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.HasSession || st.FeatureList != nil || st.Frozen != nil || len(st.Counters) != 0 || st.RunCount != 0 || st.LastTransSeq != 0 {
		t.Errorf("a fresh database loads as %+v", st)
	}
}

func TestTransitionsAreNeverRepeatedOrLost(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Apply(Batch{Transitions: []Transition{{Seq: 1}, {Seq: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Batch{Transitions: []Transition{{Seq: 2}}}); err == nil {
		t.Fatal("a repeated transition sequence was accepted")
	}
	ts, _ := s.Transitions()
	if len(ts) != 2 {
		t.Fatalf("%d transitions", len(ts))
	}
}

func TestSecondOpenFailsNamingTheHolder(t *testing.T) {
	_, dir := openTemp(t)
	if err := WritePID(dir); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, 50*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("(ctxgraphd pid %d)", os.Getpid())) || !strings.Contains(err.Error(), "one daemon") {
		t.Fatalf("error does not name the holder: %v", err)
	}
}

// TestSecondOpenWithoutPIDFile: when the holder left no pid file, the error
// says the database is held and names no pid rather than a made-up one.
func TestSecondOpenWithoutPIDFile(t *testing.T) {
	_, dir := openTemp(t)
	_, err := Open(dir, 50*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
	if strings.Contains(err.Error(), "ctxgraphd pid") || !strings.Contains(err.Error(), "is held; only one daemon") {
		t.Fatalf("error names a holder it does not know: %v", err)
	}
}

func TestMigratesUnversionedDatabaseAndRefusesNewer(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketMeta); return err })
	db.Close()

	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Schema(); v != SchemaVersion {
		t.Fatalf("schema %d after migration", v)
	}
	if _, err := s.Load(); err != nil {
		t.Fatalf("migrated database unusable: %v", err)
	}
	s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("99")) })
	s.Close()
	if _, err := Open(dir, time.Second); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("got %v, want ErrNewerSchema", err)
	}
}

func TestRunIDRoundTrip(t *testing.T) {
	if n, ok := ParseRunID(RunID(42)); !ok || n != 42 {
		t.Fatalf("got %d %v", n, ok)
	}
	if _, ok := ParseRunID("42"); ok {
		t.Fatal("accepted an id without prefix")
	}
}

func TestTracesFilterAndLookup(t *testing.T) {
	s, _ := openTemp(t)
	got, err := s.AppendTraces(
		control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Agent: "coding-agent", Feature: "F-001", Run: "run-000001"}, Event: control.TraceEvent{WhatHappened: "set tested"}, Source: control.SourceHook},
		control.Trace{Type: control.TraceDecision, Context: control.TraceContext{Agent: "tester-agent", Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "accepted verdict"}, Source: control.SourceAuto},
		control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Agent: "tester-agent", Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "edited source", Why: "Tester role"}, Source: control.SourceHook, Gate: "role-write-policy"},
	)
	if err != nil || got[0].ID != "tr-1" || got[2].ID != "tr-3" {
		t.Fatalf("%v %+v", err, got)
	}
	for _, tt := range []struct {
		f    TraceFilter
		want string
	}{
		{TraceFilter{}, "tr-1 tr-2 tr-3"},
		{TraceFilter{Type: control.TraceViolation}, "tr-1 tr-3"},
		{TraceFilter{Feature: "F-002"}, "tr-2 tr-3"},
		{TraceFilter{Agent: "coding-agent"}, "tr-1"},
		{TraceFilter{Run: "run-000001"}, "tr-1"},
		{TraceFilter{Type: control.TraceViolation, Feature: "F-002"}, "tr-3"},
		{TraceFilter{Text: "TESTER ROLE"}, "tr-3"},
		{TraceFilter{Gate: "role-write-policy"}, "tr-3"},
		{TraceFilter{Gate: "scope"}, ""},
		{TraceFilter{Limit: 2}, "tr-2 tr-3"},
	} {
		ts, err := s.Traces(tt.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tr := range ts {
			ids = append(ids, tr.ID)
		}
		if strings.Join(ids, " ") != tt.want {
			t.Errorf("%+v: got %v, want %s", tt.f, ids, tt.want)
		}
	}
	tr, ok, err := s.Trace("tr-2")
	if err != nil || !ok || tr.Event.WhatHappened != "accepted verdict" {
		t.Fatalf("Trace(tr-2) = %+v %v %v", tr, ok, err)
	}
	if _, ok, _ := s.Trace("tr-99"); ok {
		t.Fatal("found a trace that does not exist")
	}
}

func TestCommandsByRun(t *testing.T) {
	s, _ := openTemp(t)
	s.AppendCommand(control.CommandRecord{Run: "run-000001", Command: "sh tests/F-001.sh", ExitCode: 1, IsTest: true})
	s.AppendCommand(control.CommandRecord{Run: "run-000002", Command: "sh tests/F-001.sh", IsTest: true})
	cs, err := s.Commands("run-000002")
	if err != nil || len(cs) != 1 || cs[0].ExitCode != 0 {
		t.Fatalf("%v %+v", err, cs)
	}
}

// The morning's reader: it reads what a daemon left, never creates or
// changes anything, and says when there is nothing to read or a daemon
// holds the database.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenReadOnly(dir, 50*time.Millisecond); !errors.Is(err, ErrNoState) {
		t.Fatalf("no database: %v, want ErrNoState", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err == nil {
		t.Fatal("OpenReadOnly created the database")
	}
	st, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(Batch{Runs: []Run{{Seq: 1, ID: RunID(1), Role: "coding-agent", CostUSD: 0.5}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(dir, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("held by a daemon: %v, want ErrLocked", err)
	}
	st.Close()
	ro, err := OpenReadOnly(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs()
	if err != nil || len(runs) != 1 || runs[0].CostUSD != 0.5 {
		t.Errorf("runs %+v (%v)", runs, err)
	}
	if err := ro.Apply(Batch{Runs: []Run{{Seq: 2, ID: RunID(2)}}}); err == nil {
		t.Error("a read-only store took a write")
	}
}
