package guard

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRecordCommandFromCapturedPayloads(t *testing.T) {
	a := Actor{Role: Tester, Feature: "F-001", Run: "run-000001"}
	fail := fixture(t, "PostToolUseFailure.json", "", nil) // "echo out; echo err >&2; exit 3"
	rec, ok := RecordCommand(a, "", fail)
	if !ok || rec.ExitCode != 3 || rec.Passed() || rec.Run != "run-000001" || rec.Command != "echo out; echo err >&2; exit 3" {
		t.Fatalf("failure record: %+v %v", rec, ok)
	}
	pass := fixture(t, "PostToolUse.json", "Bash", map[string]any{"command": "sh tests/F-001.sh"})
	pass.ToolResponse = json.RawMessage(`{"stdout":"ok\n","stderr":"","interrupted":false}`)
	rec, ok = RecordCommand(a, "sh tests/F-001.sh", pass)
	if !ok || !rec.Passed() || !rec.IsTest || !strings.HasPrefix(rec.OutputDigest, "sha256:") {
		t.Fatalf("pass record: %+v %v", rec, ok)
	}
	write := fixture(t, "PostToolUse.json", "", nil) // a Write
	if _, ok := RecordCommand(a, "", write); ok {
		t.Fatal("a Write was recorded as a command")
	}
}

func TestRenderSpeaksClaudeCodesHookProtocol(t *testing.T) {
	d := &Decision{Gate: TestedNeedsEvidence, Code: "no_test_run", Message: "m", Suggestion: "s", Mode: Enforce}
	var pre struct {
		HookSpecificOutput struct {
			HookEventName, PermissionDecision, PermissionDecisionReason string
		}
	}
	if err := json.Unmarshal(Render("PreToolUse", d), &pre); err != nil {
		t.Fatal(err)
	}
	if pre.HookSpecificOutput.PermissionDecision != "deny" || pre.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("%+v", pre)
	}
	var reason map[string]string
	if err := json.Unmarshal([]byte(pre.HookSpecificOutput.PermissionDecisionReason), &reason); err != nil {
		t.Fatalf("the reason is not the structured JSON: %v", err)
	}
	for k, v := range map[string]string{"status": "blocked", "gate": TestedNeedsEvidence, "code": "no_test_run", "message": "m", "suggestion": "s"} {
		if reason[k] != v {
			t.Errorf("reason[%s] = %q, want %q", k, reason[k], v)
		}
	}
	var stop struct{ Decision, Reason string }
	json.Unmarshal(Render("Stop", d), &stop)
	if stop.Decision != "block" || !strings.Contains(stop.Reason, `"code":"no_test_run"`) {
		t.Fatalf("stop: %+v", stop)
	}
	d.Mode = Warn
	if out := string(Render("PreToolUse", d)); strings.Contains(out, "deny") || !strings.Contains(out, "warn mode") {
		t.Fatalf("warn mode must not deny: %s", out)
	}
	if Render("PreToolUse", nil) != nil {
		t.Fatal("no decision must print nothing")
	}
}
