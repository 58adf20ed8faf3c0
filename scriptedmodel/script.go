package scriptedmodel

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// maxToolCalls bounds the tool calls the model makes for one command object.
// Every script needs far fewer; the bound only matters when the conversation
// stops following a script (a hook keeps refusing, a file keeps changing),
// and then the model gives up rather than loop.
const maxToolCalls = 12

// reply is one answer of the model: a tool call, or, when call is nil, a
// final text that ends its turn.
type reply struct {
	text string
	call *toolCall
}

func say(format string, args ...any) reply {
	return reply{text: fmt.Sprintf(format, args...)}
}

// step is one tool call of a script.
type step struct {
	// tool is the name of the tool the call uses; the history must show the
	// same tool at this position, or the model stops.
	tool string
	// call builds the call when it is due, from what the conversation shows
	// by then (a file's content read by an earlier step). An error ends the
	// turn with the error as its text.
	call func() (toolCall, error)
	// onError decides what an error result means: go on with the next step,
	// or end the turn with a text. Without it an error ends the turn and
	// quotes the error.
	onError func(result string) (text string, goOn bool)
}

// tolerant is the step whose error result is expected, such as reading a
// file that does not exist yet.
func (s step) tolerant() step {
	s.onError = func(string) (string, bool) { return "", true }
	return s
}

// refusable is a misbehaving step that a gate is expected to deny. A denial
// (a tool error that holds the structured reason) lets the script go on to
// the steps that react to it, as a model that read the reason would; any
// other error ends the turn and quotes it. A step that is not denied goes
// on too: the misbehavior went through, which is for the test that watches
// the gate to notice.
func (s step) refusable() step {
	s.onError = func(result string) (string, bool) {
		if _, ok := parseReason(result); ok {
			return "", true
		}
		return fmt.Sprintf("Stopping: %s was refused without a reason I can act on: %q", s.tool, excerpt(result, 500)), false
	}
	return s
}

// confined is a misbehaving step that the sandbox is expected to refuse,
// or a gate before it. The sandbox's refusal is no structured reason: the
// program reports it in its own words ("Read-only file system",
// "Operation not permitted", "Device or resource busy", a connection that
// could not be made, a shell killed under it), and a model reads that as
// "this did not work" and goes on without it. So any error lets the script
// go on, a structured denial included; and a step that is not refused goes
// on too: the misbehavior went through, which is for the test that watches
// the outcome to notice.
func (s step) confined() step {
	s.onError = func(string) (string, bool) { return "", true }
	return s
}

// script is what a role does for one command object: its steps in order,
// then a final text.
type script struct {
	steps []step
	final func() string
	// bound is the most tool calls it makes, for a script longer than
	// maxToolCalls allows; 0 is maxToolCalls.
	bound int
}

func finalOnly(text string) script {
	return script{final: func() string { return text }}
}

// play replays the conversation against the script and returns the next
// move. Each tool call since the command consumes one step, except the Read
// that a refused Write asks for, after which the same Write is made again.
// Because the replay starts from the request every time, the model keeps no
// state between requests.
func (t *turn) play(sc script) reply {
	if len(t.exchanges) >= max(maxToolCalls, sc.bound) {
		return say("Stopping: %d tool calls for this command without finishing; the conversation no longer follows my script.", len(t.exchanges))
	}
	next := 0
	reread := ""        // the file a Write was refused for until it is read again
	var again *toolCall // a Bash call whose sandbox could not be set up
	tries := 0          // how many times in a row it could not
	for _, x := range t.exchanges {
		if !x.answered {
			return say("Stopping: my %s call got no result.", x)
		}
		again = nil
		if x.isError && x.call.Name == "Bash" && sandboxSetupFailed(x.result) && tries < maxSetupRetries {
			c := x.call
			again, tries = &c, tries+1
			continue
		}
		tries = 0
		if reread != "" {
			if x.call.Name != "Read" || x.isError {
				return failed(x)
			}
			reread = ""
			continue
		}
		if next >= len(sc.steps) {
			return say("Stopping: the conversation has a %s call that my script does not make.", x)
		}
		st := sc.steps[next]
		if x.call.Name != st.tool {
			return say("Stopping: my script makes a %s call here, but the conversation has %s.", st.tool, x)
		}
		if x.isError {
			if (x.call.Name == "Write" || x.call.Name == "Edit") && mustReadFirst(x.result) {
				reread = x.call.str("file_path")
				continue
			}
			if st.onError == nil {
				return failed(x)
			}
			text, goOn := st.onError(x.result)
			if !goOn {
				return reply{text: text}
			}
		}
		next++
	}
	if again != nil {
		return reply{call: again}
	}
	if reread != "" {
		c := readCall(reread)
		return reply{call: &c}
	}
	if next < len(sc.steps) {
		c, err := sc.steps[next].call()
		if err != nil {
			return say("Stopping: %v", err)
		}
		return reply{call: &c}
	}
	return reply{text: sc.final()}
}

// mustReadFirst recognizes the CLI's refusal to write or edit a file that
// the conversation has not read, or that changed since it was read: a real
// model reads it and tries again.
func mustReadFirst(result string) bool {
	return strings.Contains(result, "has not been read yet") ||
		strings.Contains(result, "modified since read")
}

// sandboxSetupFailed recognizes a Bash call that never ran: Claude Code's
// sandbox could not be set up for it (bubblewrap could not bind a path of
// the project's that went away between the CLI's listing and the mount).
// A real model runs the same command again, up to maxSetupRetries times
// in a row.
func sandboxSetupFailed(result string) bool {
	return bwrapFailureRe.MatchString(result)
}

var bwrapFailureRe = regexp.MustCompile(`(?m)^bwrap: `)

const maxSetupRetries = 2

// failed is the final text for a tool error the script did not expect: it
// quotes the error so that whoever reads the run sees the cause.
func failed(x exchange) reply {
	return say("Stopping: %s failed: %q", x, excerpt(x.result, 500))
}

// excerpt shortens tool output for a final text.
func excerpt(s string, max int) string {
	return textcut.Runes(strings.TrimSpace(s), max)
}

func readCall(path string) toolCall {
	return toolCall{Name: "Read", Input: map[string]any{"file_path": path}}
}

func writeCall(path, content string) toolCall {
	return toolCall{Name: "Write", Input: map[string]any{"file_path": path, "content": content}}
}

func editCall(path, oldString, newString string) toolCall {
	return toolCall{Name: "Edit", Input: map[string]any{"file_path": path, "old_string": oldString, "new_string": newString}}
}

func bashCall(command, description string) toolCall {
	return toolCall{Name: "Bash", Input: map[string]any{"command": command, "description": description}}
}

// read is the step that reads a project file.
func (t *turn) read(rel string) step {
	c := readCall(t.abs(rel))
	return step{tool: "Read", call: func() (toolCall, error) { return c, nil }}
}

// readRange is the step that reads limit lines of a project file from line
// offset (from 1).
func (t *turn) readRange(rel string, offset, limit int) step {
	c := readCall(t.abs(rel))
	c.Input["offset"], c.Input["limit"] = offset, limit
	return step{tool: "Read", call: func() (toolCall, error) { return c, nil }}
}

// edit is the step that replaces one string of a project file; change
// computes both from what the conversation shows when the step is due.
func (t *turn) edit(rel string, change func() (oldString, newString string, err error)) step {
	path := t.abs(rel)
	return step{tool: "Edit", call: func() (toolCall, error) {
		o, n, err := change()
		if err != nil {
			return toolCall{}, err
		}
		return editCall(path, o, n), nil
	}}
}

// write is the step that writes a project file with the content body
// builds when the step is due.
func (t *turn) write(rel string, body func() (string, error)) step {
	path := t.abs(rel)
	return step{tool: "Write", call: func() (toolCall, error) {
		b, err := body()
		if err != nil {
			return toolCall{}, err
		}
		return writeCall(path, b), nil
	}}
}

// writeAt is the step that writes a file at the path where builds when
// the step is due (a path outside the project that an earlier call
// printed).
func writeAt(where func() (string, error), content string) step {
	return step{tool: "Write", call: func() (toolCall, error) {
		p, err := where()
		if err != nil {
			return toolCall{}, err
		}
		return writeCall(p, content), nil
	}}
}

// bash is the step that runs a shell command.
func bash(command, description string) step {
	c := bashCall(command, description)
	return step{tool: "Bash", call: func() (toolCall, error) { return c, nil }}
}

func constant(s string) func() (string, error) {
	return func() (string, error) { return s, nil }
}
