package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// MaxLineBytes bounds one stream-json line. Tool results can be large (an
// agent reading a big file), but a line beyond this is not something the
// daemon needs whole: it is reported and skipped, never buffered forever.
const MaxLineBytes = 16 << 20

// Message is one line of Claude Code's stream-json output, reduced to the
// fields the daemon acts on. Unknown types and fields are kept out rather
// than rejected: new CLI versions add both.
type Message struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// assistant and user lines
	Message         *APIMessage `json:"message"`
	ParentToolUseID string      `json:"parent_tool_use_id"`
	APIErrorStatus  int         `json:"api_error_status"`
	// Error is the CLI's name for an API error (assistant lines that wrap
	// one, api_retry lines): authentication_failed, rate_limit, … Kept raw
	// so that a line where it is not a string is still read.
	Error          json.RawMessage `json:"error"`
	APIErrorParams *struct {
		RateLimitInfo *RateLimitInfo `json:"rate_limit_info"`
	} `json:"api_error_params"`

	// system hook lines
	HookEvent string `json:"hook_event"`

	// system api_retry lines
	ErrorStatus  int `json:"error_status"`
	RetryDelayMS int `json:"retry_delay_ms"`

	// rate_limit_event lines
	RateLimitInfo *RateLimitInfo `json:"rate_limit_info"`

	// the result line
	IsError        bool     `json:"is_error"`
	NumTurns       int      `json:"num_turns"`
	TotalCostUSD   float64  `json:"total_cost_usd"`
	Result         string   `json:"result"`
	TerminalReason string   `json:"terminal_reason"`
	Errors         []string `json:"errors"`
	// StartupFailureReason: the CLI could not start the session at all
	// (sandbox_required_unavailable when the sandbox cannot run).
	StartupFailureReason string `json:"startup_failure_reason"`
}

// APIMessage is the message of an assistant or user line.
type APIMessage struct {
	ID      string  `json:"id"`
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// UnmarshalJSON reads an API message. System lines use the same key for a
// plain string (permission_denied's "message"), which is left empty here.
func (m *APIMessage) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '{' {
		return nil
	}
	type plain APIMessage
	return json.Unmarshal(b, (*plain)(m))
}

// Content is a message's content: a list of blocks, or (in some user
// lines) a bare string, which is read as one text block.
type Content []Block

// UnmarshalJSON accepts both shapes of content.
func (c *Content) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Block is one content block.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

// ErrorName is the line's error field when it is a name, else "".
func (m *Message) ErrorName() string {
	var s string
	if len(m.Error) > 0 && m.Error[0] == '"' && json.Unmarshal(m.Error, &s) == nil {
		return s
	}
	return ""
}

// RateLimitInfo is what a rate_limit_event (or a usage limit's API error)
// says about the account's limit.
type RateLimitInfo struct {
	Status   string `json:"status"`
	ResetsAt int64  `json:"resetsAt"` // Unix seconds
}

// LineError is a stream line that could not be read. The decoder goes on
// after it: one bad line must not blind the daemon to the rest of a run.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("stream-json line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Decoder reads stream-json from a reader, one Message per line.
type Decoder struct {
	r    *bufio.Reader
	line int
}

// NewDecoder returns a decoder reading r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next message. It returns a *LineError for a line that is
// not a JSON object (the caller may go on calling Next) and io.EOF at the
// end. Blank lines are skipped.
func (d *Decoder) Next() (Message, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return Message{}, err
		}
		d.line++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			return Message{}, &LineError{Line: d.line, Err: fmt.Errorf("not a JSON object: %q", textcut.Cut(string(line), 80))}
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return Message{}, &LineError{Line: d.line, Err: err}
		}
		return m, nil
	}
}

// readLine returns one line without its newline. A line longer than
// MaxLineBytes is consumed and reported, not kept.
func (d *Decoder) readLine() ([]byte, error) {
	var buf []byte
	oversized := false
	for {
		chunk, err := d.r.ReadSlice('\n')
		if !oversized {
			if len(buf)+len(chunk) > MaxLineBytes {
				oversized, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if oversized && (err == nil || errors.Is(err, io.EOF)) {
			d.line++
			return nil, &LineError{Line: d.line, Err: fmt.Errorf("line longer than %d bytes, skipped", MaxLineBytes)}
		}
		if err == nil || (errors.Is(err, io.EOF) && len(buf) > 0) {
			return buf, nil
		}
		return nil, err
	}
}
