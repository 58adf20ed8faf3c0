package store

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
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
	in := func(run, feature string) control.TraceContext {
		return control.TraceContext{Agent: "coding-agent", Feature: feature, Run: run}
	}
	v := func(run, feature, gate, code string) control.Trace {
		return control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: gate, Code: code, Context: in(run, feature),
			Event: control.TraceEvent{WhatHappened: "Write src/shared.txt is outside the scope", WhatWasCorrect: "stay in scope"}}
	}
	r1 := RunID(1)
	trs := []control.Trace{
		{Type: control.TraceHandoff, Source: control.SourceAuto, Context: in(r1, "F-001"), Event: control.TraceEvent{WhatHappened: "coding-agent started"}}, // tr-1: the run's node
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-2: folded into tr-4
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-3: folded into tr-4
		v(r1, "F-001", "scope", "outside_scope"),                        // tr-4: kept, counts 3
		v(r1, "F-001", "tested-needs-evidence", "tested_by_non_tester"), // tr-5: the only one of its kind
		{Type: control.TraceDecision, Source: control.SourceHook, Context: in(r1, "F-001"), Event: control.TraceEvent{WhatHappened: "the turn ended on an API error"}}, // tr-6: dropped
		{Type: control.TraceApproval, Source: control.SourceAuto, Context: in(r1, "F-001"), Event: control.TraceEvent{WhatHappened: "verdict accepted"}},               // tr-7
		v(r1, "F-001", "frozen-tests", "frozen_test_changed"), // tr-8: answered by tr-10, kept
		{Type: control.TraceDecision, Source: control.SourceAuto, Context: in(r1, "F-001"), Event: control.TraceEvent{WhatHappened: "F-001 blocked"}},                                                                       // tr-9: the block
		{Type: control.TraceCorrection, Source: control.SourceUser, Context: control.TraceContext{Feature: "F-001"}, Parent: "tr-8", Event: control.TraceEvent{WhatHappened: "reopened", WhatWasCorrect: "use the v2 API"}}, // tr-10
		v(r1, "F-001", "frozen-tests", "frozen_test_changed"),                                                                // tr-11: newer than tr-8, but tr-8 has a child: both kept
		v(RunID(2), "F-001", "scope", "outside_scope"),                                                                       // tr-12: run in flight
		v(RunID(2), "F-001", "scope", "outside_scope"),                                                                       // tr-13: run in flight
		v(RunID(3), "F-002", "scope", "outside_scope"),                                                                       // tr-14: feature not finished
		v(RunID(3), "F-002", "scope", "outside_scope"),                                                                       // tr-15: feature not finished
		{Type: control.TraceLesson, Source: control.SourceUser, Event: control.TraceEvent{WhatHappened: "run go vet first"}}, // tr-16: no feature
		v(r1, "F-001", "scope", "outside_scope"),                                                                             // tr-17: after the cutoff
	}
	for i := range trs {
		trs[i].Timestamp = base.Add(time.Duration(i) * time.Minute)
	}
	trs[len(trs)-1].Timestamp = base.Add(48 * time.Hour)
	if _, err := s.AppendTraces(trs...); err != nil {
		t.Fatal(err)
	}
	s.AppendCommand(control.CommandRecord{Run: r1, Feature: "F-001", Command: "ls", Time: base})
	s.AppendCommand(control.CommandRecord{Run: r1, Feature: "F-001", Command: "go build", ExitCode: 1, Time: base})
	s.AppendCommand(control.CommandRecord{Run: r1, Feature: "F-001", Command: "sh tests/F-001.sh", IsTest: true, Time: base})
	s.AppendCommand(control.CommandRecord{Run: RunID(2), Feature: "F-001", Command: "ls", Time: base})
	s.AppendCommand(control.CommandRecord{Run: RunID(3), Feature: "F-002", Command: "ls", Time: base})
	return s, base.Add(24 * time.Hour)
}

func TestPrune(t *testing.T) {
	s, cutoff := pruneFixture(t)
	res, err := s.Prune(PruneOptions{Before: cutoff, Finished: []string{"F-001"}})
	if err != nil {
		t.Fatal(err)
	}
	want := control.PruneResult{Examined: 13, Folded: 2, Dropped: 1, Kept: 10, CommandsDropped: 1, CommandsKept: 2}
	if !reflect.DeepEqual(res, want) {
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
	story := func(ts []control.Trace) []string {
		var out []string
		for _, tr := range ts {
			if tr.Source == control.SourceHook && tr.Type == control.TraceDecision {
				continue // a hook's tool-level record: not the story
			}
			line := tr.Context.Run + " " + tr.Type + " " + tr.Gate + " " + tr.Code
			if tr.Type != control.TraceViolation {
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
		if trs[i].Type == control.TraceDecision {
			trs[i].Source = control.SourceHook
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
	left, _ := s.Traces(TraceFilter{Type: control.TraceViolation})
	if docs != len(left) {
		t.Errorf("%d violations indexed by their words, %d stored", docs, len(left))
	}
}

// TestPruneKeepsTheGraphsNodes: a trace a run or a feature names as its
// node (a run's handoff; a feature's taking up, attempt and block) is kept
// whatever its kind, even one compaction would otherwise fold (an older
// refusal of a kind repeated in its run) or drop (a hook's decision), so
// that `ctl why` and `ctl trace` still find it. The nodes are read from
// every run and every feature, not the first alone.
func TestPruneKeepsTheGraphsNodes(t *testing.T) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	run := RunID(2)
	in := control.TraceContext{Agent: "coding-agent", Feature: "F-002", Run: run}
	refusal := control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Context: in,
		Event: control.TraceEvent{WhatHappened: "Write x is outside the scope"}}
	hook := control.Trace{Type: control.TraceDecision, Source: control.SourceHook, Context: in, Event: control.TraceEvent{WhatHappened: "the turn ended on an API error"}}
	// tr-1 and tr-2: refusals of one kind (tr-1 folds into tr-2, unnamed);
	// tr-3 and tr-4: hook decisions (dropped, unnamed).
	named := map[string]string{"an older refusal of a repeated kind": "tr-1", "a hook's decision": "tr-3"}
	for trace, id := range named {
		for by, name := range map[string]func(b *Batch){
			"the run's trace": func(b *Batch) { b.Runs[1].Trace = id },
			"the feature's trace": func(b *Batch) {
				b.Counters["F-002"] = FeatureCounters{Trace: id}
			},
			"the feature's attempt trace": func(b *Batch) { b.Counters["F-002"] = FeatureCounters{AttemptTrace: id} },
			"the feature's block trace":   func(b *Batch) { b.Counters["F-002"] = FeatureCounters{BlockTrace: id} },
		} {
			t.Run(trace+" named by "+by, func(t *testing.T) {
				s, _ := openTemp(t)
				b := Batch{
					Runs: []Run{
						{Seq: 1, ID: RunID(1), Feature: "F-001", EndedAt: base, Outcome: "ok"},
						{Seq: 2, ID: run, Feature: "F-002", EndedAt: base, Outcome: "ok"},
					},
					// Features before and after it, naming nothing of it.
					Counters: map[string]FeatureCounters{"F-001": {Trace: "tr-99"}, "F-002": {}, "F-003": {BlockTrace: "tr-98"}},
				}
				name(&b)
				if err := s.Apply(b); err != nil {
					t.Fatal(err)
				}
				trs := []control.Trace{refusal, refusal, hook, hook}
				for i := range trs {
					trs[i].Timestamp = base.Add(time.Duration(i) * time.Minute)
				}
				if _, err := s.AppendTraces(trs...); err != nil {
					t.Fatal(err)
				}
				res, err := s.Prune(PruneOptions{Before: base.Add(time.Hour), Finished: []string{"F-002"}})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok, err := s.Trace(id); !ok || err != nil {
					t.Errorf("%s (%s), named by %s, was compacted away (%+v, %v)", id, trace, by, res, err)
				}
				if res.Folded+res.Dropped != 2 {
					t.Errorf("%+v: want the unnamed refusal folded and the unnamed hook decision dropped, nothing else", res)
				}
			})
		}
	}
}

// TestPruneTouchesOnlyWhatIsOlderThanTheCutoff: compaction takes only the
// traces and commands strictly older than Before; one stamped at the
// cutoff itself, or after it, is as it was.
func TestPruneTouchesOnlyWhatIsOlderThanTheCutoff(t *testing.T) {
	cutoff := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		at      time.Time
		touched bool
	}{
		{"an hour before", cutoff.Add(-time.Hour), true},
		{"a nanosecond before", cutoff.Add(-time.Nanosecond), true},
		{"at the cutoff", cutoff, false},
		{"a nanosecond after", cutoff.Add(time.Nanosecond), false},
		{"a day after", cutoff.Add(24 * time.Hour), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTemp(t)
			run := RunID(1)
			if err := s.Apply(Batch{Runs: []Run{{Seq: 1, ID: run, Feature: "F-001", EndedAt: cutoff, Outcome: "ok"}}}); err != nil {
				t.Fatal(err)
			}
			in := control.TraceContext{Agent: "coding-agent", Feature: "F-001", Run: run}
			refusal := control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Context: in,
				Event: control.TraceEvent{WhatHappened: "Write x is outside the scope"}}
			hook := control.Trace{Type: control.TraceDecision, Source: control.SourceHook, Context: in, Event: control.TraceEvent{WhatHappened: "the turn ended on an API error"}}
			// An old refusal and hook decision (tr-1, tr-2), the same at
			// tt.at (tr-3, tr-4), and a refusal of the kind after them all.
			trs := []control.Trace{refusal, hook, refusal, hook, refusal}
			stamps := []time.Time{cutoff.Add(-2 * time.Hour), cutoff.Add(-2 * time.Hour), tt.at, tt.at, cutoff.Add(48 * time.Hour)}
			for i := range trs {
				trs[i].Timestamp = stamps[i]
			}
			if _, err := s.AppendTraces(trs...); err != nil {
				t.Fatal(err)
			}
			s.AppendCommand(control.CommandRecord{Run: run, Feature: "F-001", Command: "ls", Time: cutoff.Add(-time.Hour)})
			s.AppendCommand(control.CommandRecord{Run: run, Feature: "F-001", Command: "cat go.mod", Time: tt.at})
			res, err := s.Prune(PruneOptions{Before: cutoff, Finished: []string{"F-001"}})
			if err != nil {
				t.Fatal(err)
			}
			// Touched, the old refusal folds into the one at tt.at and both
			// hook decisions go; untouched, only the old hook decision goes.
			want := control.PruneResult{Examined: 2, Folded: 0, Dropped: 1, Kept: 1, CommandsDropped: 1}
			if tt.touched {
				want = control.PruneResult{Examined: 4, Folded: 1, Dropped: 2, Kept: 1, CommandsDropped: 2}
			}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("stamped %s, cutoff %s: %+v, want %+v", tt.at, cutoff, res, want)
			}
			for _, id := range []string{"tr-1", "tr-4"} {
				if _, ok, _ := s.Trace(id); ok == tt.touched {
					t.Errorf("stamped %s, cutoff %s: %s is there: %v", tt.at, cutoff, id, ok)
				}
			}
			cmds, _ := s.Commands("")
			if left := len(cmds) == 1 && cmds[0].Command == "cat go.mod"; left == tt.touched {
				t.Errorf("stamped %s, cutoff %s: commands left %+v", tt.at, cutoff, cmds)
			}
		})
	}
}
