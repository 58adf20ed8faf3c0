package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Denial is a refusal by ctxgraphd's gates as the model read it: the
// structured reason of SPEC section 5 found in a tool error or in Stop hook
// feedback, with the run it reached. Tests use it to check that a denial
// reached the model whole, not only that the daemon recorded it.
type Denial struct {
	Agent   string `json:"agent"`
	Feature string `json:"feature,omitempty"`
	Attempt int    `json:"attempt"`
	// Tool is the tool of the refused call, or "Stop" when the end of the
	// turn was refused.
	Tool string `json:"tool"`
	// Target is the refused call's file or command; empty for a Stop.
	Target string `json:"target,omitempty"`

	Status     string `json:"status"`
	Gate       string `json:"gate"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

func (d Denial) String() string {
	return fmt.Sprintf("%s %s attempt %d: %s %s denied by %s/%s", d.Agent, d.Feature, d.Attempt, d.Tool, d.Target, d.Gate, d.Code)
}

// stopFeedbackPrefix starts the user message in which Claude Code passes a
// Stop hook's block reason to the model (NOTES.md).
const stopFeedbackPrefix = "Stop hook feedback:"

// blockedStatus finds the key that marks a structured reason, wherever the
// CLI wrapped it ("PreToolUse:Write hook error: …", "Stop hook feedback:\n…")
// and in whatever order its keys come.
var blockedStatus = regexp.MustCompile(`"status"\s*:\s*"blocked"`)

// maxReasonDepth bounds how many enclosing '{' are tried before a status
// key: a reason is flat, so the nearest one or two are the object's start,
// and the bound keeps a huge tool result from costing a decode per brace.
const maxReasonDepth = 8

// parseReason returns the first structured reason in text. Only a reason
// with a gate and a code counts: a model cannot act on less, and a test
// that finds less has found a broken denial.
func parseReason(text string) (Denial, bool) {
	for _, loc := range blockedStatus.FindAllStringIndex(text, -1) {
		at := loc[0]
		for range maxReasonDepth {
			start := strings.LastIndexByte(text[:at], '{')
			if start < 0 {
				break
			}
			at = start
			var r struct {
				Status     string `json:"status"`
				Gate       string `json:"gate"`
				Code       string `json:"code"`
				Message    string `json:"message"`
				Suggestion string `json:"suggestion"`
			}
			if err := json.NewDecoder(strings.NewReader(text[start:])).Decode(&r); err != nil {
				continue
			}
			if r.Status != "blocked" || r.Gate == "" || r.Code == "" {
				continue
			}
			return Denial{Status: r.Status, Gate: r.Gate, Code: r.Code, Message: r.Message, Suggestion: r.Suggestion}, true
		}
	}
	return Denial{}, false
}

// denials lists the refusals the conversation shows since the command, each
// with a key that stays the same in every later request of the run, so
// that the server records each once.
func (t *turn) denials() (keys []string, out []Denial) {
	base := Denial{Agent: t.cmd.Agent, Feature: t.cmd.Context.FeatureID, Attempt: t.cmd.attempt()}
	for _, x := range t.exchanges {
		if !x.answered || !x.isError {
			continue
		}
		d, ok := parseReason(x.result)
		if !ok {
			continue
		}
		d.Agent, d.Feature, d.Attempt = base.Agent, base.Feature, base.Attempt
		d.Tool, d.Target = x.call.Name, x.target()
		// Tool ids are unique across servers (idPrefix), so the id alone
		// names the call.
		keys = append(keys, "tool "+x.call.ID)
		out = append(out, d)
	}
	for i, text := range t.stopFeedback {
		d, ok := parseReason(text)
		if !ok {
			continue
		}
		d.Agent, d.Feature, d.Attempt = base.Agent, base.Feature, base.Attempt
		d.Tool = "Stop"
		// A Stop has no id; its rank among the command's Stop feedback is
		// as stable within the session, and a redone run (after a daemon
		// restart) is another session.
		keys = append(keys, fmt.Sprintf("stop %s %s %s %d #%d", t.session, d.Agent, d.Feature, d.Attempt, i))
		out = append(out, d)
	}
	return keys, out
}
