package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// request is the part of a Messages API request that the model reads.
type request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	System   content   `json:"system"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type message struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

// content is the content of a message, a system prompt or a tool result:
// the API allows a bare string or an array of blocks, and the CLI sends both
// (the same system turn is an array in one request and a string in the next).
type content []block

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*c = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// text joins the text blocks, which is what a reader of the content sees.
func (c content) text() string {
	var parts []string
	for _, b := range c {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   content         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// command is the part of the command object (agents.Command) the roles act on.
type command struct {
	Agent   string `json:"agent"`
	Task    string `json:"task"`
	Context struct {
		FeatureID string  `json:"feature_id"`
		Attempt   flexInt `json:"attempt"`
		// Read as they are, whatever their type: the model only tells
		// of them (Told), and a value of a type it did not expect must
		// not make the whole command unreadable.
		TesterReport json.RawMessage `json:"tester_report"`
		Diagnosis    json.RawMessage `json:"diagnosis"`
	} `json:"context"`
	SuccessCriteria struct {
		Test string `json:"test"`
	} `json:"success_criteria"`
	Precedent []string `json:"precedent"`
}

// toldOf reports whether one line of the command's precedent names all of
// words: what a model that heeds its precedent notices.
func (c command) toldOf(words ...string) bool {
	for _, line := range c.Precedent {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// attempt numbers attempts from 1, as the daemon does; a command without one
// is a first attempt.
func (c command) attempt() int {
	if c.Context.Attempt < 1 {
		return 1
	}
	return int(c.Context.Attempt)
}

// flexInt accepts 2 and "2": a command object is written by a prompt
// template, and a quoted number must not make the whole command unreadable.
type flexInt int

func (n *flexInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = 0
		return nil
	}
	var v json.Number
	if err := json.Unmarshal(bytes.Trim(b, `"`), &v); err != nil {
		return err
	}
	i, err := v.Int64()
	if err != nil {
		return err
	}
	*n = flexInt(i)
	return nil
}

// commandStart finds where a command object may begin, whether it was
// written compactly or indented.
var commandStart = regexp.MustCompile(`\{\s*"command"\s*:`)

// findCommand returns the first command object in text. The object is
// decoded as one JSON value from where it starts, so the prose, fences and
// reminders around it do not matter.
func findCommand(text string) (command, bool) {
	for _, loc := range commandStart.FindAllStringIndex(text, -1) {
		var env struct {
			Command *command `json:"command"`
		}
		if err := json.NewDecoder(strings.NewReader(text[loc[0]:])).Decode(&env); err != nil {
			continue
		}
		if env.Command != nil && env.Command.Agent != "" {
			return *env.Command, true
		}
	}
	return command{}, false
}

// toolCall is a tool_use block, ours or one in the history.
type toolCall struct {
	ID    string
	Name  string
	Input map[string]any
}

func (c toolCall) str(key string) string {
	s, _ := c.Input[key].(string)
	return s
}

// exchange is one tool call of the model and the result the CLI sent back.
type exchange struct {
	call     toolCall
	result   string
	isError  bool
	answered bool
}

// turn is everything the model derives from one request. Nothing is kept
// between requests: the conversation is the state.
type turn struct {
	cmd command
	// found is false when no user message holds a command object.
	found bool
	// started is true when the model has not answered the command yet: this
	// request starts a run.
	started bool
	cwd     string
	// exchanges are the tool calls made since the command, oldest first.
	exchanges []exchange
	// all are the tool calls of the whole conversation, including those of
	// an earlier command in a resumed session.
	all []exchange
	// stopFeedback are the texts of the Stop hook feedback the CLI sent
	// since the command, oldest first: each is a refused end of turn.
	stopFeedback []string
	// session is the CLI's session id, when the request says it.
	session string
	// tools are the names of the tools the request offers.
	tools []string
}

// readTurn derives the turn from a request. A resumed session holds the
// command of every earlier attempt, so the model acts on the last user
// message that has one, and counts only what came after it.
func readTurn(req *request) turn {
	var t turn
	at := -1
	for i := len(req.Messages) - 1; i >= 0 && at < 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		// Only text blocks: a tool result may quote a command object (a
		// Read of a prompt file), and that is not an instruction.
		if c, ok := findCommand(m.Content.text()); ok {
			t.cmd, t.found, at = c, true, i
		}
	}
	t.cwd = workingDir(req)
	for _, tl := range req.Tools {
		t.tools = append(t.tools, tl.Name)
	}
	t.all = exchanges(req.Messages)
	if !t.found {
		return t
	}
	t.started = true
	for _, m := range req.Messages[at+1:] {
		if m.Role == "assistant" {
			t.started = false
		}
	}
	t.exchanges = exchanges(req.Messages[at+1:])
	for _, m := range req.Messages[at+1:] {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Content {
			if b.Type == "text" && strings.Contains(b.Text, stopFeedbackPrefix) {
				t.stopFeedback = append(t.stopFeedback, b.Text)
			}
		}
	}
	return t
}

// exchanges pairs tool calls with their results, in the order of the calls.
func exchanges(msgs []message) []exchange {
	var out []exchange
	index := map[string]int{}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch {
			case m.Role == "assistant" && b.Type == "tool_use":
				c := toolCall{ID: b.ID, Name: b.Name}
				// An input that is not an object is kept as no input: the
				// step that expected this call then sees it does not match.
				_ = json.Unmarshal(b.Input, &c.Input)
				index[b.ID] = len(out)
				out = append(out, exchange{call: c})
			case m.Role == "user" && b.Type == "tool_result":
				if i, ok := index[b.ToolUseID]; ok {
					out[i].result, out[i].isError, out[i].answered = b.Content.text(), b.IsError, true
				}
			}
		}
	}
	return out
}

var (
	// cwdLine is how the CLI states its working directory. 2.1.330 sends it
	// in a system turn inside messages (" - Primary working directory: /p");
	// older versions put "Working directory: /p" in the system prompt.
	cwdLine = regexp.MustCompile(`(?m)^[ \t]*(?:-[ \t]*)?(?:Primary )?[Ww]orking directory:[ \t]*(\S[^\r\n]*?)[ \t]*$`)
	// cwdNote is the CLI's note in some tool errors ("File does not exist.
	// Note: your current working directory is /p."), a fallback only.
	cwdNote = regexp.MustCompile(`current working directory is (/\S*)`)
)

// workingDir returns the project directory the CLI runs in, or "" when the
// request does not say; the roles then use relative paths.
func workingDir(req *request) string {
	// What the CLI itself says comes first (the system prompt and system
	// turns), then any other text, so that a prompt quoting some other
	// "Working directory:" cannot win over the CLI's own line.
	cli := []string{req.System.text()}
	var other []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			cli = append(cli, m.Content.text())
		} else {
			other = append(other, m.Content.text())
		}
	}
	for _, s := range append(cli, other...) {
		if m := cwdLine.FindStringSubmatch(s); m != nil {
			return m[1]
		}
	}
	for _, x := range exchanges(req.Messages) {
		if m := cwdNote.FindStringSubmatch(x.result); m != nil {
			return strings.TrimSuffix(m[1], ".")
		}
	}
	return ""
}

// abs turns a project-relative path into the absolute path the CLI's file
// tools want.
func (t *turn) abs(rel string) string {
	if t.cwd == "" {
		return rel
	}
	return filepath.Join(t.cwd, filepath.FromSlash(rel))
}

// knownContent returns the latest content of a file that the conversation
// shows: what a successful Write put there or what a Read returned. The
// whole conversation counts, because the CLI answers a Read of a file it
// considers unchanged with a stub instead of the content, and in a resumed
// session the content may only be in an earlier attempt.
func (t *turn) knownContent(path string) (string, bool) {
	var got string
	var ok bool
	for _, x := range t.all {
		if !x.answered || x.isError || x.call.str("file_path") != path {
			continue
		}
		switch x.call.Name {
		case "Write":
			got, ok = x.call.str("content"), true
		case "Edit":
			// The CLI applied the edit to what it last knew of the file;
			// so does the model.
			if ok {
				old, repl := x.call.str("old_string"), x.call.str("new_string")
				if all, _ := x.call.Input["replace_all"].(bool); all {
					got = strings.ReplaceAll(got, old, repl)
				} else {
					got = strings.Replace(got, old, repl, 1)
				}
			}
		case "Read":
			if _, ranged := x.call.Input["offset"]; ranged {
				continue // a part of the file is not its content
			}
			if _, ranged := x.call.Input["limit"]; ranged {
				continue
			}
			if s, numbered := stripLineNumbers(x.result); numbered {
				got, ok = s, true
			}
		}
	}
	return got, ok
}

// lineNumber matches the prefix the Read tool puts on every line: "1\t" in
// 2.1.330, "     1→" or "     1\t" in earlier versions.
var lineNumber = regexp.MustCompile(`^ *\d+(?:\t|→)`)

// stripLineNumbers turns a Read result back into the file's content. It
// stops at the first line without a number, which is where the CLI appends
// its own notes (system reminders). numbered is false when no line had a
// number: the result was not a file's content.
func stripLineNumbers(s string) (out string, numbered bool) {
	lines := strings.Split(s, "\n")
	kept := make([]string, 0, len(lines))
	for _, l := range lines {
		loc := lineNumber.FindStringIndex(l)
		if loc == nil {
			break
		}
		kept = append(kept, l[loc[1]:])
	}
	return strings.Join(kept, "\n"), len(kept) > 0
}

// target is the file, URL or command of the call.
func (x exchange) target() string {
	if p := x.call.str("file_path"); p != "" {
		return p
	}
	if u := x.call.str("url"); u != "" {
		return u
	}
	return x.call.str("command")
}

func (x exchange) String() string {
	return fmt.Sprintf("%s %s", x.call.Name, x.target())
}
