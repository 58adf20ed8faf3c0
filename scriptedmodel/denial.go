package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Denial is a refusal by ctxgraphd's gates as the model read it: the
// structured reason (gates.Denial) found in a tool error or in Stop hook
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

// Refusal is a tool error the model read that is no gate's structured
// reason but a program's own report that the sandbox refused it something:
// a write to a read-only or denied path, a socket, a rename over a denied
// file. The model reads it as "that did not work", nothing more, so tests
// use it to check that a refusal reached the model at all, and that
// honest agents meet none.
type Refusal struct {
	Agent   string `json:"agent"`
	Feature string `json:"feature,omitempty"`
	Attempt int    `json:"attempt"`
	Tool    string `json:"tool"`
	Target  string `json:"target,omitempty"`
	// Error is the tool's error result, shortened.
	Error string `json:"error"`
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s %s attempt %d: %s %s refused: %s", r.Agent, r.Feature, r.Attempt, r.Tool, r.Target, r.Error)
}

// refusedWords are how programs report what a sandbox refused them, as
// seen in Claude Code's sandbox (bubblewrap and its seccomp filter):
// shells and coreutils, Python, Node, Go.
var refusedWords = regexp.MustCompile(`(?i)read-only file system|permission denied|operation not permitted|device or resource busy|\bEROFS\b|\bEACCES\b|\bEPERM\b|<sandbox_violations>`)

// refusals lists the sandbox's refusals the conversation shows since the
// command, with keys as stable as those of denials.
func (t *turn) refusals() (keys []string, out []Refusal) {
	for _, x := range t.exchanges {
		if !x.answered || !x.isError || !refusedWords.MatchString(x.result) {
			continue
		}
		if _, denied := parseReason(x.result); denied {
			continue
		}
		keys = append(keys, "tool "+x.call.ID)
		out = append(out, Refusal{Agent: t.cmd.Agent, Feature: t.cmd.Context.FeatureID, Attempt: t.cmd.attempt(),
			Tool: x.call.Name, Target: x.target(), Error: excerpt(x.result, 300)})
	}
	return keys, out
}
