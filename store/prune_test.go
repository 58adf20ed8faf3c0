package store

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// pruneFixture is a store of two features' runs: F-001 finished (its run
// 1 ended, its run 2 still in flight, as after a person reopened it),
// F-002 not finished.
func pruneFixture(t *testing.T) (*Store, time.Time) {
	t.Helper()
	s, _ := openTemp(t)
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	err := s.Apply(Batch{Runs: []Run{
		{Seq: 1, ID: RunID(1), Feature: "F-001", EndedAt: base.Add(time.Hour), Outcome: "ok", Trace: "tr-1"},
		{Seq: 2, ID: RunID(2), Feature: "F-001"},
		{Seq: 3, ID: RunID(3), Feature: "F-002", EndedAt: base.Add(time.Hour), Outcome: "failed"},
	}, Counters: map[string]FeatureCounters{"F-001": {BlockTrace: "tr-9"}}})
	if err != nil {
		t.Fatal(err)
	}
	in := func(run, feature string) TraceContext {
		return TraceContext{Agent: "coding-agent", Feature: feature, Run: run}
	}
	v := func(run, feature, gate, code string) Trace {
		return Trace{Type: TraceViolation, Source: SourceHook, Gate: gate, Code: code, Context: in(run, feature),
			Event: TraceEvent{WhatHappened: "Write src/shared.txt is outside the scope", WhatWasCorrect: "stay in scope"}}
	}
	r1 := RunID(1)
	trs := []Trace{
		{Type: TraceHandoff, Source: SourceAuto, Context: in(r1, "F-001"), Event: TraceEvent{WhatHappened: "coding-agent started"}}, // tr-1: the run's node
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-2: folded into tr-4
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-3: folded into tr-4
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-4: kept, counts 3
		v(r1, "F-001", "tested-needs-evidence", "tested_by_non_tester"), // tr-5: the only one of its kind
		{Type: TraceDecision, Source: SourceHook, Context: in(r1, "F-001"), Event: TraceEvent{WhatHappened: "the turn ended on an API error"}},                                              // tr-6: dropped
		{Type: TraceApproval, Source: SourceAuto, Context: in(r1, "F-001"), Event: TraceEvent{WhatHappened: "verdict accepted"}},                                                            // tr-7
		v(r1, "F-001", "frozen-tests", "frozen_test_changed"),                                                                                                                               // tr-8: answered by tr-10, kept
		{Type: TraceDecision, Source: SourceAuto, Context: in(r1, "F-001"), Event: TraceEvent{WhatHappened: "F-001 blocked"}},                                                               // tr-9: the block
		{Type: TraceCorrection, Source: SourceUser, Context: TraceContext{Feature: "F-001"}, Parent: "tr-8", Event: TraceEvent{WhatHappened: "reopened", WhatWasCorrect: "use the v2 API"}}, // tr-10
		v(r1, "F-001", "frozen-tests", "frozen_test_changed"),                                                                                                                               // tr-11: newer than tr-8, but tr-8 has a child: both kept
		v(RunID(2), "F-001", "scope", "outside_scope"),                                                                                                                                      // tr-12: run in flight
		v(RunID(2), "F-001", "scope", "outside_scope"),                                                                                                                                      // tr-13: run in flight
		v(RunID(3), "F-002", "scope", "outside_scope"),                                                                                                                                      // tr-14: feature not finished
		v(RunID(3), "F-002", "scope", "outside_scope"),                                                                                                                                      // tr-15: feature not finished
		{Type: TraceLesson, Source: SourceUser, Event: TraceEvent{WhatHappened: "run go vet first"}},                                                                                        // tr-16: no feature
		v(r1, "F-001", "scope", "outside_scope"),                                                                                                                                            // tr-17: after the cutoff
	}
	for i := range trs {
		trs[i].Timestamp = base.Add(time.Duration(i) * time.Minute)
	}
	trs[len(trs)-1].Timestamp = base.Add(48 * time.Hour)
	if _, err := s.AppendTraces(trs...); err != nil {
		t.Fatal(err)
	}
	s.AppendCommand(Command{Run: r1, Feature: "F-001", Command: "ls", Time: base})
	s.AppendCommand(Command{Run: r1, Feature: "F-001", Command: "go build", ExitCode: 1, Time: base})
	s.AppendCommand(Command{Run: r1, Feature: "F-001", Command: "sh tests/F-001.sh", IsTest: true, Time: base})
	s.AppendCommand(Command{Run: RunID(2), Feature: "F-001", Command: "ls", Time: base})
	s.AppendCommand(Command{Run: RunID(3), Feature: "F-002", Command: "ls", Time: base})
	return s, base.Add(24 * time.Hour)
}

func TestPrune(t *testing.T) {
	s, cutoff := pruneFixture(t)
	res, err := s.Prune(PruneOptions{Before: cutoff, Finished: []string{"F-001"}})
	if err != nil {
		t.Fatal(err)
	}
	want := PruneResult{Examined: 13, Folded: 2, Dropped: 1, Kept: 10, CommandsDropped: 1, CommandsKept: 2}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	all, err := s.Traces(TraceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(idsOf(all), " "); got != "tr-1 tr-4 tr-5 tr-7 tr-8 tr-9 tr-10 tr-11 tr-12 tr-13 tr-14 tr-15 tr-16 tr-17" {
		t.Errorf("left %s", got)
	}
	counts := map[string]int{}
	for _, tr := range all {
		counts[tr.ID] = tr.Count
	}
	if counts["tr-4"] != 3 || counts["tr-5"] != 0 || counts["tr-17"] != 0 {
		t.Errorf("counts %v: tr-4 stands for 3 refusals, the others for one", counts)
	}
	cmds, _ := s.Commands("")
	var left []string
	for _, c := range cmds {
		left = append(left, c.Run+" "+c.Command)
	}
	if want := []string{"run-000001 go build", "run-000001 sh tests/F-001.sh", "run-000002 ls", "run-000003 ls"}; !slices.Equal(left, want) {
		t.Errorf("commands left %q, want %q", left, want)
	}
	// The role's mistakes still count every refusal, and name a trace
	// that is there.
	ms, err := s.Mistakes("coding-agent", "F-002")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, ok, _ := s.Trace(m.Newest); !ok {
			t.Errorf("mistake %+v names a trace compaction removed", m)
		}
		if m.Gate == "scope" && m.Count != 6 {
			t.Errorf("scope refusals on F-001 counted %d, want 6 (3 folded into one, 2 in flight, 1 after the cutoff)", m.Count)
		}
	}
	// Compacting again changes nothing.
	again, err := s.Prune(PruneOptions{Before: cutoff, Finished: []string{"F-001"}})
	if err != nil || again.Folded+again.Dropped+again.CommandsDropped != 0 {
		t.Errorf("second prune %+v %v, want nothing more", again, err)
	}
}

// What `ctl why` tells of a finished feature survives compaction: every
// verdict, decision, correction and transition, and every kind of refusal
// of every run.
func TestPruneKeepsWhatWhyTells(t *testing.T) {
	s, cutoff := pruneFixture(t)
	before, _ := s.Traces(TraceFilter{Feature: "F-001"})
	if _, err := s.Prune(PruneOptions{Before: cutoff, Finished: []string{"F-001"}}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Traces(TraceFilter{Feature: "F-001"})
	story := func(ts []Trace) []string {
		var out []string
		for _, tr := range ts {
			if tr.Source == SourceHook && tr.Type == TraceDecision {
				continue // a hook's tool-level record: not the story
			}
			line := tr.Context.Run + " " + tr.Type + " " + tr.Gate + " " + tr.Code
			if tr.Type != TraceViolation {
				line += " " + tr.ID + " " + tr.Event.WhatHappened
			}
			if !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
		slices.Sort(out)
		return out
	}
	if b, a := story(before), story(after); !slices.Equal(b, a) {
		t.Errorf("the story changed:\nbefore %q\n after %q", b, a)
	}
}

// Compaction keeps every index as a scan would find the traces: the
// indexed queries after it answer as the scan does.
func TestPruneMaintainsIndexes(t *testing.T) {
	s, _ := openTemp(t)
	r := rand.New(rand.NewPCG(7, 8))
	trs := randomTraces(r, 1500)
	runs := []Run{}
	for i, id := range []string{"run-000001", "run-000002", "run-000003"} {
		runs = append(runs, Run{Seq: uint64(i + 1), ID: id, EndedAt: time.Now(), Outcome: "ok"})
	}
	if err := s.Apply(Batch{Runs: runs}); err != nil {
		t.Fatal(err)
	}
	for i := range trs {
		if trs[i].Type == TraceDecision {
			trs[i].Source = SourceHook
		}
		trs[i].Parent = "" // so that many are not parents
	}
	if _, err := s.AppendTraces(trs...); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(PruneOptions{Before: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Finished: []string{"F-001", "F-002", "F-003"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded == 0 || res.Dropped == 0 {
		t.Fatalf("nothing compacted (%+v): the test proves nothing", res)
	}
	checkQueries(t, s, r, 300)
	_, _, docs := indexEntries(t, s)
	left, _ := s.Traces(TraceFilter{Type: TraceViolation})
	if docs != len(left) {
		t.Errorf("%d violations indexed by their words, %d stored", docs, len(left))
	}
}
