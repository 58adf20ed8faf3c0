package gates

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
)

var exitCodeRe = lazyregexp.New(`^Exit code (\d+)`)

// RecordCommand turns a PostToolUse or PostToolUseFailure payload of a Bash
// call into the record the gates judge test runs by; dir is the project's
// absolute path. ok is false for other tools and events.
func RecordCommand(a Actor, featureTest, dir string, p *Payload) (rec control.CommandRecord, ok bool) {
	if p.ToolName != "Bash" || (p.Event != "PostToolUse" && p.Event != "PostToolUseFailure") {
		return control.CommandRecord{}, false
	}
	cmd := p.Input().Command
	rec = control.CommandRecord{Run: a.Run, Feature: a.Feature, Command: cmd, Time: time.Now().UTC()}
	h := sha256.New()
	if p.Event == "PostToolUseFailure" {
		// Claude Code reports a non-zero exit as "Exit code N\n<output>";
		// an interrupted or otherwise failed call counts as exit 1.
		rec.ExitCode = 1
		if m := exitCodeRe.FindStringSubmatch(p.Error); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil {
				rec.ExitCode = n
			}
		}
		h.Write([]byte(p.Error))
	} else {
		var r BashResponse
		json.Unmarshal(p.ToolResponse, &r)
		if r.Interrupted {
			rec.ExitCode = 130
		}
		h.Write([]byte(r.Stdout))
		h.Write([]byte{0})
		h.Write([]byte(r.Stderr))
	}
	rec.IsTest = IsTestCommand(cmd, featureTest, dir, rec.ExitCode)
	rec.OutputDigest = "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
	return rec, true
}

// Render turns a decision into what Claude Code honours: JSON on stdout and
// exit 0. A PreToolUse denial carries the structured reason as its
// permissionDecisionReason; a Stop or SubagentStop block as its reason. A
// warning lets the action through and tells the model. No decision, no
// output.
func Render(event string, d *control.HookDecision) []byte {
	if d == nil {
		return nil
	}
	reason, _ := json.Marshal(denialOf(d))
	var out any
	switch {
	case d.Mode == Warn:
		note := "ctxgraphd warning (gate " + d.Gate + " in warn mode, not enforced): " + string(reason)
		if event == "PreToolUse" || event == "PostToolUse" || event == "PostToolUseFailure" {
			out = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": event, "additionalContext": note}, "systemMessage": note}
		} else {
			out = map[string]any{"systemMessage": note}
		}
	case event == "PreToolUse":
		out = map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": string(reason)}}
	case event == "Stop" || event == "SubagentStop":
		out = map[string]any{"decision": "block", "reason": string(reason)}
	default:
		out = map[string]any{"systemMessage": string(reason)}
	}
	data, _ := json.Marshal(out)
	return data
}
