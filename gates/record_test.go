package gates

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
)

func TestRecordCommandFromCapturedPayloads(t *testing.T) {
	a := Actor{Role: Tester, Feature: "F-001", Run: "run-000001"}
	fail := fixture(t, "PostToolUseFailure.json", "", nil) // "echo out; echo err >&2; exit 3"
	rec, ok := RecordCommand(a, "", "", fail)
	if !ok || rec.ExitCode != 3 || rec.Passed() || rec.Run != "run-000001" || rec.Command != "echo out; echo err >&2; exit 3" {
		t.Fatalf("failure record: %+v %v", rec, ok)
	}
	pass := fixture(t, "PostToolUse.json", "Bash", map[string]any{"command": "sh tests/F-001.sh"})
	pass.ToolResponse = json.RawMessage(`{"stdout":"ok\n","stderr":"","interrupted":false}`)
	rec, ok = RecordCommand(a, "sh tests/F-001.sh", "", pass)
	if !ok || !rec.Passed() || !rec.IsTest || !strings.HasPrefix(rec.OutputDigest, "sha256:") {
		t.Fatalf("pass record: %+v %v", rec, ok)
	}
	write := fixture(t, "PostToolUse.json", "", nil) // a Write
	if _, ok := RecordCommand(a, "", "", write); ok {
		t.Fatal("a Write was recorded as a command")
	}
}

func TestRenderSpeaksClaudeCodesHookProtocol(t *testing.T) {
	d := &control.HookDecision{Gate: TestedNeedsEvidence, Code: "no_test_run", Message: "m", Suggestion: "s", Mode: Enforce}
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

// TestRenderByEventAndMode: what each event's hook prints. A warning
// blocks nothing: on a tool event it reaches the model as additional
// context (and the user as a system message), elsewhere as a system
// message only. An enforced decision denies a tool call, blocks a stop,
// and is a system message anywhere else.
func TestRenderByEventAndMode(t *testing.T) {
	d := control.HookDecision{Gate: Scope, Code: "out_of_scope", Message: "m", Suggestion: "s"}
	reason := `{"status":"blocked","gate":"scope","code":"out_of_scope","message":"m","suggestion":"s"}`
	note := "ctxgraphd warning (gate scope in warn mode, not enforced): " + reason
	tests := []struct {
		event string
		mode  Mode
		want  map[string]any
	}{
		{"PreToolUse", Warn, map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PreToolUse", "additionalContext": note}, "systemMessage": note}},
		{"PostToolUse", Warn, map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PostToolUse", "additionalContext": note}, "systemMessage": note}},
		{"PostToolUseFailure", Warn, map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PostToolUseFailure", "additionalContext": note}, "systemMessage": note}},
		{"Stop", Warn, map[string]any{"systemMessage": note}},
		{"SubagentStop", Warn, map[string]any{"systemMessage": note}},
		{"SessionStart", Warn, map[string]any{"systemMessage": note}},
		{"PreToolUse", Enforce, map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}}},
		{"Stop", Enforce, map[string]any{"decision": "block", "reason": reason}},
		{"SubagentStop", Enforce, map[string]any{"decision": "block", "reason": reason}},
		{"PostToolUse", Enforce, map[string]any{"systemMessage": reason}},
	}
	for _, tt := range tests {
		d.Mode = string(tt.mode)
		var got map[string]any
		if err := json.Unmarshal(Render(tt.event, &d), &got); err != nil {
			t.Fatalf("%s %s: %v", tt.event, tt.mode, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %s:\n got  %v\n want %v", tt.event, tt.mode, got, tt.want)
		}
	}
}
