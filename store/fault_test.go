package store

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
	bolt "go.etcd.io/bbolt"
)

var errInjected = errors.New("injected fault")

// dump is everything the database holds: each key of each bucket, nested
// buckets included, and each bucket's sequence, by path.
func dump(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		out[path+" (sequence)"] = fmt.Sprint(b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+string(k), b.Bucket(k))
			}
			out[fmt.Sprintf("%s/%q", path, k)] = string(v)
			return nil
		})
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// differences names the keys whose values differ between two dumps.
func differences(before, after map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if v, ok := after[k]; !ok {
			out = append(out, k+" removed")
		} else if v != before[k] {
			out = append(out, k+" changed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			out = append(out, k+" added")
		}
	}
	return out
}

// faultFixture is a store with something of everything in it: a session
// with a run in flight, the list, the frozen tests, counters, ended runs,
// transitions, traces in their indexes, commands and guards (the traces
// and commands of pruneFixture, whose pruning folds, drops and rewrites).
func faultFixture(t *testing.T) *Store {
	t.Helper()
	s, _ := pruneFixture(t)
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	run := Run{Seq: 4, ID: RunID(4), Role: "tester-agent", Feature: "F-002", Attempt: 1, SessionID: "sid-4", StartedAt: now}
	err := s.Apply(Batch{
		Session:     &Session{State: "test", Feature: "F-002", Run: &run, Backoffs: 1, UpdatedAt: now},
		FeatureList: []byte(`{"version":1,"features":[{"id":"F-001"},{"id":"F-002"}]}`),
		Frozen:      []byte(`{"tests/F-001.sh":"abc"}`),
		Counters:    map[string]FeatureCounters{"F-002": {Failures: 1, CostUSD: 0.25, Runs: 1}},
		Runs:        []Run{run},
		Transitions: []Transition{{Seq: 1, Event: "implement", From: "next", To: "code", Feature: "F-002"}, {Seq: 2, Event: "validate", From: "code", To: "test", Feature: "F-002"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A second command for Prune to drop: its transaction has two parts.
	if err := s.AppendCommand(control.CommandRecord{Run: RunID(1), Feature: "F-001", Command: "ls -l", Time: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGuards(guards.Rule{ID: "g-1", Status: guards.Warn, Tool: "Bash", Match: guards.Match{Command: "make deploy"}, Message: "m"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// The writes that are all or nothing, each as a change of every part it
// has.
var atomicWrites = []struct {
	name  string
	write func(s *Store) error
}{
	{"Apply", func(s *Store) error {
		now := time.Date(2026, 11, 21, 1, 0, 0, 0, time.UTC)
		ended := Run{Seq: 4, ID: RunID(4), Role: "tester-agent", Feature: "F-002", Attempt: 1, SessionID: "sid-4", StartedAt: now, EndedAt: now, Outcome: "ok", CostUSD: 0.5}
		next := Run{Seq: 5, ID: RunID(5), Role: "coding-agent", Feature: "F-002", Attempt: 2, SessionID: "sid-5", StartedAt: now}
		return s.Apply(Batch{
			Session:     &Session{State: "code", Feature: "F-002", Run: &next, BudgetWarned: true, UpdatedAt: now},
			FeatureList: []byte(`{"version":1,"features":[{"id":"F-001","tested":true},{"id":"F-002"}]}`),
			Frozen:      []byte(`{"tests/F-001.sh":"abd"}`),
			Counters:    map[string]FeatureCounters{"F-001": {Commit: "c1"}, "F-002": {Failures: 2, CostUSD: 0.75, Runs: 2}},
			Runs:        []Run{ended, next},
			Transitions: []Transition{{Seq: 3, Event: "advance", From: "test", To: "next"}, {Seq: 4, Event: "implement", From: "next", To: "code", Feature: "F-002"}},
		})
	}},
	{"AppendTraces", func(s *Store) error {
		_, err := s.AppendTraces(
			control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Path: "src/a/b.go",
				Context: control.TraceContext{Agent: "coding-agent", Feature: "F-002", Run: RunID(5)}, Event: control.TraceEvent{WhatHappened: "Write src/a/b.go is outside the scope"}},
			control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Parent: "tr-1", Context: control.TraceContext{Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "F-002 attempt 2 begins"}},
		)
		return err
	}},
	{"PutGuards", func(s *Store) error {
		return s.PutGuards(
			guards.Rule{ID: "g-1", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: "make deploy"}, Message: "m"},
			guards.Rule{ID: "g-2", Status: guards.Warn, Match: guards.Match{Path: "src/x.go"}, Message: "n"},
		)
	}},
	// Prune is a transaction per feature, then one for the commands:
	// each is held to it on its own.
	{"Prune a feature's traces", func(s *Store) error {
		nodes, ended, err := s.graphNodes()
		if err != nil {
			return err
		}
		return s.db.Update(func(tx *bolt.Tx) error {
			return pruneFeature(tx, "F-001", pruneCutoff, nodes, ended, &control.PruneResult{}, s.part)
		})
	}},
	{"Prune the commands", func(s *Store) error {
		_, ended, err := s.graphNodes()
		if err != nil {
			return err
		}
		return s.db.Update(func(tx *bolt.Tx) error {
			return pruneCommands(tx, pruneCutoff, map[string]bool{"F-001": true}, ended, &control.PruneResult{}, s.part)
		})
	}},
}

// pruneCutoff makes the traces and commands of pruneFixture old.
var pruneCutoff = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

// A write that fails at any point leaves nothing of itself: after a fault
// injected after each of its parts in turn, the database (reopened, as
// after a restart) holds exactly what it held before.
func TestAFailedWriteLeavesNothing(t *testing.T) {
	for _, w := range atomicWrites {
		t.Run(w.name, func(t *testing.T) {
			// The parts, and what the write changes when nothing fails.
			s := faultFixture(t)
			before := dump(t, s)
			var parts []string
			s.fault = func(p string) error { parts = append(parts, p); return nil }
			if err := w.write(s); err != nil {
				t.Fatal(err)
			}
			if len(parts) < 2 {
				t.Fatalf("%s has parts %q: the fixture does not exercise a write of several parts", w.name, parts)
			}
			if len(differences(before, dump(t, s))) == 0 {
				t.Fatalf("%s changed nothing: the fixture does not exercise it", w.name)
			}
			for i, p := range parts {
				s := faultFixture(t)
				dir := filepath.Dir(s.Path())
				before := dump(t, s)
				n := 0
				s.fault = func(string) error {
					n++
					if n == i+1 {
						return errInjected
					}
					return nil
				}
				if err := w.write(s); !errors.Is(err, errInjected) {
					t.Fatalf("failing after part %d (%s): %s returned %v", i+1, p, w.name, err)
				}
				s.Close()
				s, err := Open(dir, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if d := differences(before, dump(t, s)); len(d) > 0 {
					t.Errorf("%s failing after part %d of %d (%s) left half a write:\n\t%s", w.name, i+1, len(parts), p, strings.Join(d, "\n\t"))
				}
				s.Close()
			}
		})
	}
}
