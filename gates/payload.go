// Package gates holds the quality gates of ctxgraphd (docs/gates.md): pure
// functions that judge what an agent is about to do, or has done, from the
// hook payload Claude Code sends, who the agent is, and what the daemon
// knows. The hook command and the daemon share them, so that a gate decides
// the same way whether the daemon answers or the hook has to decide alone.
package gates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Events, in the kebab case of `ctxgraphd hook EVENT` (contract), with the
// name Claude Code gives each in hook_event_name.
var Events = map[string]string{
	"pre-tool-use":          "PreToolUse",
	"post-tool-use":         "PostToolUse",
	"post-tool-use-failure": "PostToolUseFailure",
	"stop":                  "Stop",
	"subagent-stop":         "SubagentStop",
	"session-start":         "SessionStart",
	"stop-failure":          "StopFailure",
	"session-end":           "SessionEnd",
	"user-prompt-submit":    "UserPromptSubmit",
}

// Payload is what Claude Code writes on a hook's stdin. Every field is
// optional: they come and go between versions.
type Payload struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Event          string          `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode"`
	AgentID        string          `json:"agent_id"`
	AgentType      string          `json:"agent_type"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolResponse   json.RawMessage `json:"tool_response"`
	ToolUseID      string          `json:"tool_use_id"`
	Error          string          `json:"error"`
	IsInterrupt    bool            `json:"is_interrupt"`
	StopHookActive bool            `json:"stop_hook_active"`
	LastMessage    string          `json:"last_assistant_message"`
	Source         string          `json:"source"`
}

// ToolInput is the union of the tool inputs the gates read.
type ToolInput struct {
	Command    string `json:"command"`
	FilePath   string `json:"file_path"`
	Path       string `json:"path"`
	Content    string `json:"content"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
	Edits      []struct {
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	} `json:"edits"`
	NotebookPath string `json:"notebook_path"`
	URL          string `json:"url"` // WebFetch's
	Offset       *int   `json:"offset"`
	Limit        *int   `json:"limit"`
	// RunInBackground is Bash's and the Agent tool's: nil when the call
	// does not say (for the Agent tool, Claude Code then runs it in the
	// background).
	RunInBackground *bool `json:"run_in_background"`
	// Isolation is the Agent tool's: "worktree" or "remote".
	Isolation string `json:"isolation"`
	// TeamName is the Agent tool's: the agent team a teammate joins.
	TeamName string `json:"team_name"`
}

// BashResponse is PostToolUse's tool_response for Bash.
type BashResponse struct {
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Interrupted bool   `json:"interrupted"`
}

// ErrPayload wraps every payload problem.
var ErrPayload = errors.New("hook payload")

// ParsePayload decodes a hook's stdin for event (kebab case). It checks what
// the gates rely on and says what is wrong, naming the input.
func ParsePayload(event string, data []byte) (*Payload, error) {
	want, ok := Events[event]
	if !ok {
		return nil, fmt.Errorf("%w: unknown event %q; known: %s", ErrPayload, event, strings.Join(eventNames(), ", "))
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: stdin is empty; Claude Code sends a JSON object for %s", ErrPayload, want)
	}
	var p Payload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w: stdin of %s is not a JSON object: %v", ErrPayload, want, err)
	}
	if p.Event != "" && p.Event != want {
		return nil, fmt.Errorf("%w: hook_event_name is %q but the hook was installed for %s (`ctxgraphd hook %s`); fix the hook settings", ErrPayload, p.Event, want, event)
	}
	p.Event = want
	if want == "PreToolUse" || want == "PostToolUse" || want == "PostToolUseFailure" {
		if p.ToolName == "" {
			return nil, fmt.Errorf("%w: %s payload has no tool_name", ErrPayload, want)
		}
		if len(p.ToolInput) > 0 && !bytes.HasPrefix(bytes.TrimSpace(p.ToolInput), []byte("{")) {
			return nil, fmt.Errorf("%w: %s tool_input is not an object", ErrPayload, want)
		}
	}
	return &p, nil
}

// Input decodes the tool input. A missing or odd input reads as empty.
func (p *Payload) Input() ToolInput {
	var in ToolInput
	if len(p.ToolInput) > 0 {
		json.Unmarshal(p.ToolInput, &in)
	}
	return in
}

func eventNames() []string {
	names := make([]string, 0, len(Events))
	for _, k := range []string{"pre-tool-use", "post-tool-use", "post-tool-use-failure", "stop", "subagent-stop", "session-start", "stop-failure", "session-end", "user-prompt-submit"} {
		names = append(names, k)
	}
	return names
}
