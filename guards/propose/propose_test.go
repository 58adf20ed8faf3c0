package propose

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

func TestPropose(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	reverted := func(n int, role, path string) []control.Trace {
		var ts []control.Trace
		for i := range n {
			ts = append(ts, control.Trace{ID: fmt.Sprintf("tr-r%d%s", i, path), Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.Scope, Code: "out_of_scope",
				Path: path, Context: control.TraceContext{Agent: role, Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: path + " changed out of scope; put back"}})
		}
		return ts
	}
	refused := func(n int, gate, code string) []control.Trace {
		var ts []control.Trace
		for i := range n {
			ts = append(ts, control.Trace{ID: fmt.Sprintf("tr-f%d%s", i, gate), Type: control.TraceViolation, Source: control.SourceHook, Gate: gate, Code: code,
				Context: control.TraceContext{Agent: gates.Tester}, Event: control.TraceEvent{WhatHappened: "refused"}})
		}
		return ts
	}
	// refusedAbout are refusals by one gate, each about the next of paths.
	refusedAbout := func(paths ...string) []control.Trace {
		var ts []control.Trace
		for i, path := range paths {
			ts = append(ts, control.Trace{ID: fmt.Sprintf("tr-p%d", i), Type: control.TraceViolation, Source: control.SourceHook, Gate: gates.FrozenTests, Code: "frozen_test",
				Path: path, Context: control.TraceContext{Agent: gates.Coder}, Event: control.TraceEvent{WhatHappened: "refused"}})
		}
		return ts
	}
	failing := func(n int, cmd string, test bool) []control.CommandRecord {
		var cs []control.CommandRecord
		for i := range n {
			cs = append(cs, control.CommandRecord{Run: fmt.Sprintf("run-%d", i), Command: cmd, ExitCode: 2, IsTest: test})
		}
		return cs
	}
	tests := []struct {
		name     string
		traces   []control.Trace
		commands []control.CommandRecord
		want     []string // kind of match and what it matches, for each proposal
	}{
		{name: "a file put back three times", traces: reverted(3, gates.Coder, "src/gen/api.go"),
			want: []string{"path src/gen/api.go coding-agent"}},
		{name: "below the threshold", traces: reverted(2, gates.Coder, "src/gen/api.go")},
		{name: "a path with glob characters is matched as written", traces: reverted(3, gates.Coder, "src/[id].ts"),
			want: []string{`path src/\[id\].ts coding-agent`}},
		{name: "refusals about one file", traces: refusedAbout("tests/a.sh", "tests/a.sh", "tests/a.sh"),
			want: []string{"path tests/a.sh coding-agent"}},
		{name: "refusals about different files name none", traces: refusedAbout("tests/a.sh", "tests/b.sh", "tests/a.sh")},
		{name: "a refusal without a path: the gate already holds", traces: refused(5, gates.TesterMustTest, "no_test_run")},
		{name: "a failing command that is not a test", commands: failing(4, "make   deploy", false),
			want: []string{`command ^\s*make\s+deploy\s*$ `}},
		{name: "a failing test is a verdict", commands: failing(4, "go test ./...", true)},
		{name: "a guard's own refusals propose nothing", traces: refused(4, "guard:g-1", guards.CodeDenied)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := Propose(graph.Patterns(tt.traces, tt.commands, 1), 3, now)
			var got []string
			for _, r := range rules {
				if r.Status != guards.Proposed || !r.Created.Equal(now) || !strings.HasPrefix(r.ID, "g-") || r.Source == "" {
					t.Errorf("proposal %+v: want a proposed guard with an id g-…, its source and its time", r)
				}
				if err := r.Validate(); err != nil {
					t.Errorf("proposal does not validate: %v", err)
				}
				if r.Match.Path != "" {
					got = append(got, "path "+r.Match.Path+" "+r.Role)
				} else {
					got = append(got, "command "+r.Match.Command+" "+r.Role)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Propose() = %q, want %q", got, tt.want)
			}
		})
	}
}

// The same pattern proposes the same guard, so that proposing again is
// idempotent; and the command guard matches the command as it was run.
func TestProposalsAreStable(t *testing.T) {
	cs := []control.CommandRecord{{Run: "a", Command: "make deploy", ExitCode: 1}, {Run: "b", Command: "make  deploy", ExitCode: 1}, {Run: "c", Command: "make deploy", ExitCode: 1}}
	a := Propose(graph.Patterns(nil, cs, 1), 3, time.Now())
	b := Propose(graph.Patterns(nil, cs[:3], 1), 3, time.Now().Add(time.Hour))
	if len(a) != 1 || len(b) != 1 || a[0].ID != b[0].ID {
		t.Fatalf("proposals %v and %v, want one with the same id", a, b)
	}
	re := regexp.MustCompile(a[0].Match.Command)
	for _, c := range []string{"make deploy", " make\tdeploy "} {
		if !re.MatchString(c) {
			t.Errorf("%s does not match %q", a[0].Match.Command, c)
		}
	}
	if re.MatchString("make deploy-docs") {
		t.Errorf("%s matches another command", a[0].Match.Command)
	}
	if !strings.Contains(a[0].Message, "failed 3 times") {
		t.Errorf("message %q, want it to say how often the command failed", a[0].Message)
	}
}

// The threshold (graph.guard_threshold) counts from 1; below, the
// default holds. A guard names who kept doing it, "agents" when the
// pattern names no role, and each file gets a guard of its own.
func TestProposeThresholdAndNames(t *testing.T) {
	now := time.Now()
	file := func(path, role string, n int) control.Pattern {
		return control.Pattern{Kind: control.PatternRevertedFile, Path: path, Role: role, Count: n}
	}
	for _, tt := range []struct {
		threshold int
		count     int
		want      int
	}{
		{0, DefaultThreshold - 1, 0}, {0, DefaultThreshold, 1}, {1, 1, 1}, {2, 1, 0},
	} {
		if got := len(Propose([]control.Pattern{file("a", gates.Coder, tt.count)}, tt.threshold, now)); got != tt.want {
			t.Errorf("threshold %d, a pattern seen %d times: %d proposals, want %d", tt.threshold, tt.count, got, tt.want)
		}
	}
	rs := Propose([]control.Pattern{file("src/a.go", "", 3), file("src/b.go", "", 3)}, 3, now)
	if len(rs) != 2 || rs[0].ID == rs[1].ID {
		t.Fatalf("two files put back: %+v, want two guards with ids of their own", rs)
	}
	if !strings.Contains(rs[0].Message, "agents kept changing it") {
		t.Errorf("message %q, want it to say agents kept changing it", rs[0].Message)
	}
}
