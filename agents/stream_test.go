package agents

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeAll reads a whole stream through a runner's absorb, as Run does.
func decodeAll(t testing.TB, data []byte) (Result, []Event, int) {
	r := NewRunner(Options{}, nil)
	var res Result
	var last string
	var events []Event
	bad := 0
	dec := NewDecoder(bytes.NewReader(data))
	for {
		m, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var le *LineError
		if errors.As(err, &le) {
			bad++
			continue
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		r.absorb(&res, &last, m, newStuckWatch(0), func(e Event) { events = append(events, e) })
	}
	if res.Text == "" {
		res.Text = last
	}
	return res, events, bad
}

// The transcripts in testdata were captured from the real CLI (2.1.330).
// stream-401-retry.jsonl is modelled on them: a run the API refuses
// retries without end, so it has no result line (see authretry_test.go).
func TestDecodeFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	if len(files) < 5 {
		t.Fatalf("fixtures missing: %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, _, bad := decodeAll(t, data)
		if bad != 0 {
			t.Errorf("%s: %d unreadable lines", f, bad)
		}
		if (!res.SawResult && filepath.Base(f) != "stream-401-retry.jsonl") || res.SessionID == "" {
			t.Errorf("%s: no result or session: %+v", f, res)
		}
	}
}

func TestDecodeResultFields(t *testing.T) {
	data, _ := os.ReadFile("testdata/stream-429.jsonl")
	res, _, _ := decodeAll(t, data)
	if !res.IsError || res.APIErrorStatus != 429 || res.Subtype != "success" || res.TerminalReason != "api_error" || !strings.Contains(res.Text, "429") {
		t.Errorf("429 run = %+v", res)
	}

	data, _ = os.ReadFile("testdata/stream-basic-bash-run.jsonl")
	res, events, _ := decodeAll(t, data)
	if res.IsError || res.ToolCalls != 1 || res.CostUSD <= 0 || res.NumTurns == 0 || res.Text != "done" {
		t.Errorf("basic run = %+v", res)
	}
	// The call and its answer carry the call's id: the hooks-live watch
	// pairs them.
	var bashID string
	answered := false
	for _, e := range events {
		if e.Kind == "tool_use" && e.Tool == "Bash" && e.Detail == "echo hello-from-bash" {
			bashID = e.ToolUseID
		}
		if e.Kind == "tool_result" && bashID != "" && e.ToolUseID == bashID {
			answered = true
		}
	}
	if bashID == "" || !answered {
		t.Errorf("no Bash tool event with an id and its answer (id %q, answered %v): %+v", bashID, answered, events)
	}

	// A background subagent adds a second result; its tool calls are not
	// the run's own.
	data, _ = os.ReadFile("testdata/stream-subagent-run.jsonl")
	res, _, _ = decodeAll(t, data)
	if !res.SawResult || res.ToolCalls != 2 {
		t.Errorf("subagent run: tool calls %d (want 2 of the main agent), %+v", res.ToolCalls, res)
	}
}

func TestDecoderBadLines(t *testing.T) {
	in := "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"a\"}\n" +
		"not json\n" +
		"\n" +
		"{\"type\":\"result\",\"is_error\":false,\"num_turns\":2\n" + // cut short
		"{\"type\":\"result\",\"is_error\":false,\"num_turns\":3,\"session_id\":\"a\"}"
	dec := NewDecoder(strings.NewReader(in))
	var kinds []string
	for {
		m, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var le *LineError
		if errors.As(err, &le) {
			kinds = append(kinds, "bad@"+string(rune('0'+le.Line)))
			continue
		}
		kinds = append(kinds, m.Type)
	}
	if got, want := strings.Join(kinds, " "), "system bad@2 bad@4 result"; got != want {
		t.Errorf("decoded %q, want %q", got, want)
	}
}

// A message's content is read in both of the CLI's shapes: a list of
// blocks, or a bare string taken as one text block. A system line's string
// "message" is no API message and leaves it empty.
func TestContentShapes(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Content
	}{
		{`{"type":"user","message":{"role":"user","content":"go on"}}`, Content{{Type: "text", Text: "go on"}}},
		{`{"type":"user","message":{"role":"user","content":""}}`, Content{{Type: "text"}}},
		{`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t1","is_error":true}]}}`,
			Content{{Type: "text", Text: "a"}, {Type: "tool_result", ToolUseID: "t1", IsError: true}}},
		{`{"type":"system","subtype":"permission_denied","message":"denied"}`, nil},
	} {
		m, err := NewDecoder(strings.NewReader(tc.line + "\n")).Next()
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if m.Message == nil {
			t.Errorf("%s: no message", tc.line)
			continue
		}
		if !reflect.DeepEqual(m.Message.Content, tc.want) {
			t.Errorf("%s: content %+v, want %+v", tc.line, m.Message.Content, tc.want)
		}
	}
}

// The exported readers of a message and of its content refuse an empty
// input with an error, as encoding/json does, rather than panicking.
func TestUnmarshalNothing(t *testing.T) {
	var m APIMessage
	if err := m.UnmarshalJSON(nil); err == nil {
		t.Error("APIMessage.UnmarshalJSON(nil) = nil, want an error")
	}
	var c Content
	if err := c.UnmarshalJSON(nil); err == nil {
		t.Error("Content.UnmarshalJSON(nil) = nil, want an error")
	}
}

func TestDecoderOversizedLine(t *testing.T) {
	big := "{\"type\":\"user\",\"x\":\"" + strings.Repeat("a", MaxLineBytes) + "\"}\n"
	in := big + "{\"type\":\"result\",\"num_turns\":1}\n"
	dec := NewDecoder(strings.NewReader(in))
	_, err := dec.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 1 {
		t.Fatalf("oversized line: %v", err)
	}
	m, err := dec.Next()
	if err != nil || m.Type != "result" || m.NumTurns != 1 {
		t.Errorf("after an oversized line: %+v, %v", m, err)
	}
}

// A line of MaxLineBytes, its newline included, is read whole: the bound is
// a size a line may have.
func TestDecoderLineAtTheBound(t *testing.T) {
	head, tail := `{"type":"user","x":"`, "\"}\n"
	line := head + strings.Repeat("a", MaxLineBytes-len(head)-len(tail)) + tail
	if len(line) != MaxLineBytes {
		t.Fatalf("test line is %d bytes", len(line))
	}
	m, err := NewDecoder(strings.NewReader(line)).Next()
	if err != nil || m.Type != "user" {
		t.Errorf("a line of MaxLineBytes: %+v, %v; want it read", m.Type, err)
	}
}

// An oversized last line without a newline is reported like any other,
// then the stream ends.
func TestDecoderOversizedLastLine(t *testing.T) {
	in := "{\"type\":\"system\"}\n{\"type\":\"user\",\"x\":\"" + strings.Repeat("a", MaxLineBytes) + "\"}"
	dec := NewDecoder(strings.NewReader(in))
	if m, err := dec.Next(); err != nil || m.Type != "system" {
		t.Fatalf("first line: %+v, %v", m, err)
	}
	_, err := dec.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("oversized last line: %v; want a LineError for line 2", err)
	}
	if _, err := dec.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the oversized last line: %v; want io.EOF", err)
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		res  Result
		want string
	}{
		{Result{Ended: EndExited, SawResult: true, Text: "all\n good"}, "all good"},
		{Result{Ended: EndWallTimeout, Text: "half"}, "killed after the wall timeout: half"},
		{Result{Ended: EndExited, ExitCode: 1, StderrTail: "boom\n"}, "exited 1 without a result: boom"},
		{Result{Ended: EndExited, SawResult: true, IsError: true, Subtype: "error_max_turns"}, "error_max_turns"},
		// A tester quoting its test's output, with the noise a user's
		// shell profile adds to every command in the sandbox.
		{Result{Ended: EndExited, SawResult: true, Text: "F-001 failed: `sh tests/F-001.sh` exited non-zero: Exit code 1\npyenv: cannot rehash: /root/.pyenv/shims isn't writable\nwant hello, got hullo"},
			"F-001 failed: `sh tests/F-001.sh` exited non-zero: Exit code 1 want hello, got hullo"},
		{Result{Ended: EndExited, ExitCode: 1, StderrTail: "direnv: loading ~/p/.envrc\nboom\n"}, "exited 1 without a result: boom"},
	} {
		if got := summarize(tc.res); got != tc.want {
			t.Errorf("summarize(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
	long := summarize(Result{Ended: EndExited, SawResult: true, Text: strings.Repeat("x", 1000)})
	if len(long) > 310 {
		t.Errorf("summary not clipped: %d bytes", len(long))
	}
}

func FuzzStreamDecoder(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
	}
	f.Add([]byte("{\"type\":\"assistant\",\"message\":{\"content\":\"text\"}}\n"))
	f.Add([]byte("{\"type\":\"result\"}\n\x00\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewRunner(Options{}, nil)
		var res Result
		var last string
		dec := NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			m, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if i > len(data)+1 {
				t.Fatalf("decoder does not advance")
			}
			var le *LineError
			if err != nil && !errors.As(err, &le) {
				t.Fatalf("Next: %v", err)
			}
			if err == nil {
				r.absorb(&res, &last, m, newStuckWatch(0), func(Event) {})
			}
		}
		_ = summarize(res)
	})
}

// A usage limit comes as a rate_limit_event (seconds since the epoch)
// before the failing result; an "allowed" one is only information.
func TestRateLimitEvent(t *testing.T) {
	in := `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1784283600,"rateLimitType":"five_hour"}}
{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1778565600,"rateLimitType":"five_hour"}}
{"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"You've hit your limit","session_id":"s"}
`
	res, _, bad := decodeAll(t, []byte(in))
	if bad != 0 || !res.IsError || !res.RateLimitResetsAt.Equal(time.Unix(1778565600, 0)) {
		t.Errorf("result = %+v (bad lines %d), want resets at %v", res, bad, time.Unix(1778565600, 0))
	}
	res, _, _ = decodeAll(t, []byte(strings.SplitN(in, "\n", 2)[0]))
	if !res.RateLimitResetsAt.IsZero() {
		t.Errorf("an allowed event set a reset time: %v", res.RateLimitResetsAt)
	}
}
