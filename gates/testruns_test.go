package gates

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

func TestRanTest(t *testing.T) {
	const dir = "/home/dev/shop"
	rec := func(cmd string, exit int) control.CommandRecord {
		return control.CommandRecord{Command: cmd, ExitCode: exit, IsTest: IsTestCommand(cmd, "", dir, exit)}
	}
	tests := []struct {
		name                 string
		cmds                 []control.CommandRecord
		test                 string
		ran, passed, unknown bool
	}{
		{"nothing", nil, "sh tests/a.sh", false, false, false},
		{"another command", []control.CommandRecord{rec("echo ok", 0)}, "sh tests/a.sh", false, false, false},
		{"failed", []control.CommandRecord{rec("sh tests/a.sh", 1)}, "sh tests/a.sh", true, false, false},
		{"failed then passed", []control.CommandRecord{rec("sh tests/a.sh", 1), rec("sh  tests/a.sh", 0)}, "sh tests/a.sh", true, true, false},
		{"inside a compound command", []control.CommandRecord{rec("cd . && sh tests/a.sh", 0)}, "sh tests/a.sh", true, true, false},
		{"with its output kept", []control.CommandRecord{rec("cd /home/dev/shop && sh tests/a.sh > ev/log 2>&1", 0)}, "sh tests/a.sh", true, true, false},
		{"another test passed, not this one", []control.CommandRecord{rec("go test ./...", 0), rec("sh tests/a.sh", 2)}, "sh tests/a.sh", true, false, false},
		{"no test command: any runner", []control.CommandRecord{rec("go test ./...", 0)}, "", true, true, false},
		{"a masked failure is not a pass", []control.CommandRecord{rec("sh tests/a.sh || true", 0)}, "sh tests/a.sh", false, false, false},
		{"text of the test is not a run of it", []control.CommandRecord{rec("printf 'sh tests/a.sh' | cat", 0)}, "sh tests/a.sh", false, false, false},
		{"piped into tail: ran, outcome unknown", []control.CommandRecord{rec("sh tests/a.sh 2>&1 | tail -20", 0)}, "sh tests/a.sh", true, false, true},
		{"piped with pipefail: a pass", []control.CommandRecord{rec("set -o pipefail; sh tests/a.sh 2>&1 | tail -20", 0)}, "sh tests/a.sh", true, true, false},
		{"no test command: an echo is not a test", []control.CommandRecord{rec("echo PASS", 0)}, "", false, false, false},
		// Every command of the run is looked at, not only those before the
		// first one that does not count.
		{"no test command: a runner after other commands", []control.CommandRecord{rec("ls", 0), rec("echo PASS", 0), rec("go test ./...", 0)}, "", true, true, false},
		{"the test after other commands", []control.CommandRecord{rec("ls", 0), rec("sh tests/a.sh", 0)}, "sh tests/a.sh", true, true, false},
	}
	for _, tt := range tests {
		r := RanTest(tt.cmds, tt.test, dir)
		if r.Ran != tt.ran || r.Passed != tt.passed || r.Unknown != tt.unknown {
			t.Errorf("%s: %+v, want ran %v passed %v unknown %v", tt.name, r, tt.ran, tt.passed, tt.unknown)
		}
		if r.Claimable() != (tt.passed || tt.unknown) {
			t.Errorf("%s: claimable %v", tt.name, r.Claimable())
		}
	}
}

// TestRefusalsAnHonestTesterCanFollow: a refused claim says in a line what
// would be accepted, and what it says is accepted: the form models write
// most, the output kept as evidence the natural way, then the claim.
func TestRefusalsAnHonestTesterCanFollow(t *testing.T) {
	e := newEnv(t)
	listPath := e.p(".claude/progress/feature-list.json")
	claim := e.edited(func(f *progress.Feature) {
		f.Tested, f.Status, f.Evidence = true, progress.Completed, []string{".claude/progress/evidence/F-001/test.log"}
	})
	noEvidence := e.edited(func(f *progress.Feature) { f.Tested, f.Status = true, progress.Completed })
	tester := Actor{Role: Tester, Feature: "F-001"}
	judge := func(content string, cmds ...control.CommandRecord) *control.HookDecision {
		s := e.state
		s.Commands = cmds
		in, _ := json.Marshal(map[string]any{"file_path": listPath, "content": content})
		return PreToolUse(Modes{}, tester, s, &Payload{Event: "PreToolUse", ToolName: "Write", ToolInput: in})
	}
	rec := func(cmd string, exit int) control.CommandRecord {
		return control.CommandRecord{Command: cmd, ExitCode: exit}
	}

	// Nothing ran: the message names the test and what is fine around it.
	d := judge(claim)
	if d == nil || d.Code != "no_test_run" || !strings.Contains(d.Suggestion, "`sh tests/F-001.sh`") ||
		!strings.Contains(d.Suggestion, "| tail") || !strings.Contains(d.Suggestion, "then set tested: true") || strings.Contains(d.Suggestion, "\n") {
		t.Fatalf("no run: %+v", d)
	}
	// A near miss is named, with why it is not a run.
	d = judge(claim, rec("sh tests/F-001.sh || true", 0))
	if d == nil || d.Code != "no_test_run" || !strings.Contains(d.Message, "`sh tests/F-001.sh || true` is not one") {
		t.Fatalf("a hidden status: %+v", d)
	}
	// The obvious next tries are accepted.
	for _, next := range []string{
		"sh tests/F-001.sh 2>&1 | tail -20",
		"mkdir -p .claude/progress/evidence/F-001 && sh tests/F-001.sh > .claude/progress/evidence/F-001/test.log 2>&1; cat .claude/progress/evidence/F-001/test.log",
		"cd " + e.dir + " && sh tests/F-001.sh 2>&1",
		"timeout 120 bash ./tests/F-001.sh",
	} {
		if d := judge(claim, rec("sh tests/F-001.sh || true", 0), rec(next, 0)); d != nil {
			t.Errorf("after `%s`: %+v", next, d)
		}
	}
	// A test that only failed: the refusal says so, with its status.
	d = judge(claim, rec("sh tests/F-001.sh 2>&1", 3))
	if d == nil || d.Code != "test_failed" || !strings.Contains(d.Message, "exit status 3") || !strings.Contains(d.Suggestion, "`sh tests/F-001.sh`") {
		t.Fatalf("failed: %+v", d)
	}
	// Evidence: the refusal gives the command that writes it.
	d = judge(noEvidence, rec("sh tests/F-001.sh", 0))
	if d == nil || d.Code != "no_evidence" || !strings.Contains(d.Suggestion, "`sh tests/F-001.sh > .claude/progress/evidence/F-001/test.log 2>&1`") {
		t.Fatalf("no evidence: %+v", d)
	}
	if d := judge(claim, rec("sh tests/F-001.sh > .claude/progress/evidence/F-001/test.log 2>&1", 0)); d != nil {
		t.Fatalf("the suggested command, then the claim: %+v", d)
	}
}
