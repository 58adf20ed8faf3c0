package graph

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

func TestPatterns(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 25, 1, m, 0, 0, time.UTC) }
	v := func(id, role, feature, gate, code string, m int) control.Trace {
		tr := refused(role, feature, gate, code, "what", "")
		tr.ID, tr.Timestamp = id, at(m)
		return tr
	}
	reverted := v("tr-7", coder, "F-002", "scope", "changed_outside_scope", 7)
	reverted.Path, reverted.Event.WhatHappened = "go.mod", "coding-agent (F-002, run-4) modified go.mod, found in the project's tree after the run: x; put back as it was before the run"
	reverted2 := reverted
	reverted2.ID, reverted2.Context.Feature, reverted2.Timestamp = "tr-8", "F-003", at(8)
	agentSaid := v("tr-9", coder, "F-004", "scope", "out_of_scope", 9)
	agentSaid.Source = control.SourceAgent
	warned := reverted
	warned.ID, warned.Path, warned.Event.WhatHappened = "tr-10", "README.md", "… (warn mode: left as it is)"
	traces := []control.Trace{
		v("tr-1", coder, "F-001", "scope", "out_of_scope", 1),
		v("tr-2", coder, "F-001", "scope", "out_of_scope", 2),
		v("tr-3", coder, "F-002", "scope", "out_of_scope", 3),
		v("tr-4", tester, "F-002", "scope", "out_of_scope", 4), // another role: another pattern
		v("tr-5", coder, "F-003", "role-write-policy", "coder_sets_tested", 5),
		{ID: "tr-6", Type: control.TraceDecision, Timestamp: at(6)},
		reverted, reverted2, agentSaid, warned,
	}
	commands := []control.CommandRecord{
		{Run: "run-1", Feature: "F-001", Command: "go  test ./...", ExitCode: 1, Time: at(1)},
		{Run: "run-1", Feature: "F-001", Command: "go test ./...", ExitCode: 1, Time: at(2)},
		{Run: "run-3", Feature: "F-002", Command: "go test ./...", ExitCode: 1, Time: at(3)},
		{Run: "run-3", Feature: "F-002", Command: "go test ./...", ExitCode: 0, Time: at(4)},
		{Run: "run-3", Feature: "F-002", Command: "make lint", ExitCode: 2, Time: at(5)},
	}
	got := Patterns(traces, commands, 2)
	type brief struct {
		kind, what string
		count      int
		features   []string
		examples   []string
	}
	var briefs []brief
	for _, p := range got {
		briefs = append(briefs, brief{p.Kind, p.What, p.Count, p.Features, p.Examples})
	}
	want := []brief{
		// As frequent, the most recent first.
		{control.PatternRefusal, "coding-agent refused by scope (changed_outside_scope)", 3, []string{"F-002", "F-003"}, []string{"tr-10", "tr-8", "tr-7"}},
		{control.PatternRefusal, "coding-agent refused by scope (out_of_scope)", 3, []string{"F-001", "F-002"}, []string{"tr-3", "tr-2", "tr-1"}},
		{control.PatternFailingCommand, "go test ./...", 3, []string{"F-001", "F-002"}, []string{"run-3", "run-1"}},
		{control.PatternRevertedFile, "go.mod put back after a run", 2, []string{"F-002", "F-003"}, []string{"tr-8", "tr-7"}},
	}
	if len(briefs) != len(want) {
		t.Fatalf("patterns:\n%+v\nwant:\n%+v", briefs, want)
	}
	for i := range want {
		g, w := briefs[i], want[i]
		if g.kind != w.kind || g.what != w.what || g.count != w.count || !slices.Equal(g.features, w.features) || !slices.Equal(g.examples, w.examples) {
			t.Errorf("pattern %d = %+v, want %+v", i, g, w)
		}
	}
	if all := Patterns(traces, commands, 1); len(all) != 7 {
		t.Errorf("at least once: %d patterns, want 7 (each kind of thing that happened)", len(all))
	}
}

// A pattern names the file and the role of its traces when they all share
// them (what a guard proposed from it can match), and neither when they
// differ.
func TestPatternsPathAndRole(t *testing.T) {
	onPath := func(role, path, what string) control.Trace {
		tr := onFile(role, "F-001", path, what)
		tr.Gate, tr.Code = "scope", "out_of_scope"
		return tr
	}
	putBack := func(role string) control.Trace {
		return onPath(role, "go.mod", role+" (F-001, run-1) modified go.mod, found in the project's tree after the run: put back as it was before the run")
	}
	for _, tt := range []struct {
		name       string
		traces     []control.Trace
		kind       string
		path, role string
	}{
		{"refusals about one file", []control.Trace{onPath(coder, "go.mod", "Write go.mod"), onPath(coder, "go.mod", "Edit go.mod")},
			control.PatternRefusal, "go.mod", coder},
		{"refusals about two files", []control.Trace{onPath(coder, "go.mod", "Write go.mod"), onPath(coder, "go.sum", "Write go.sum")},
			control.PatternRefusal, "", coder},
		{"a file put back after runs of one role", []control.Trace{putBack(coder), putBack(coder)},
			control.PatternRevertedFile, "go.mod", coder},
		{"a file put back after runs of two roles", []control.Trace{putBack(coder), putBack(tester)},
			control.PatternRevertedFile, "go.mod", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.traces {
				tt.traces[i].ID = fmt.Sprintf("tr-%d", i+1)
			}
			ps := Patterns(tt.traces, nil, 2)
			i := slices.IndexFunc(ps, func(p control.Pattern) bool { return p.Kind == tt.kind })
			if i < 0 {
				t.Fatalf("no %s pattern in %+v", tt.kind, ps)
			}
			p := ps[i]
			if p.Path != tt.path || p.Role != tt.role {
				t.Errorf("%s pattern of path %q and role %q, want %q and %q", tt.kind, p.Path, p.Role, tt.path, tt.role)
			}
		})
	}
}

// A failing command's pattern carries the command whole (What clips it)
// and says whether it was a test run: a failing test is a verdict, not a
// mistake to guard against.
func TestPatternsOfFailingCommands(t *testing.T) {
	long := "go test -run " + strings.Repeat("TestSomething|", 40) + " ./..."
	commands := []control.CommandRecord{
		{Run: "run-1", Feature: "F-001", Command: "go  vet ./...", ExitCode: 1},
		{Run: "run-2", Feature: "F-002", Command: "go vet ./...", ExitCode: 1},
		{Run: "run-1", Feature: "F-001", Command: long, ExitCode: 1, IsTest: true},
		{Run: "run-2", Feature: "F-002", Command: long, ExitCode: 1, IsTest: true},
	}
	got := map[string]control.Pattern{}
	for _, p := range Patterns(nil, commands, 2) {
		got[p.Command] = p
	}
	if p, ok := got["go vet ./..."]; !ok || p.Test || p.What != "go vet ./..." {
		t.Errorf("go vet's pattern = %+v, want one that is not a test run", p)
	}
	if p, ok := got[long]; !ok || !p.Test || len(p.What) > maxLine || !strings.HasSuffix(p.What, "…") {
		t.Errorf("the test run's pattern = %+v, want a test run, clipped in What", p)
	}
}
