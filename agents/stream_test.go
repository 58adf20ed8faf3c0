package agents

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
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
		if !res.SawResult || res.SessionID == "" {
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
	var sawBash bool
	for _, e := range events {
		if e.Kind == "tool_use" && e.Tool == "Bash" && e.Detail == "echo hello-from-bash" {
			sawBash = true
		}
	}
	if !sawBash {
		t.Errorf("no Bash tool event: %+v", events)
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

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		res  Result
		want string
	}{
		{Result{Ended: EndExited, SawResult: true, Text: "all\n good"}, "all good"},
		{Result{Ended: EndWallTimeout, Text: "half"}, "killed after the wall timeout: half"},
		{Result{Ended: EndExited, ExitCode: 1, StderrTail: "boom\n"}, "exited 1 without a result: boom"},
		{Result{Ended: EndExited, SawResult: true, IsError: true, Subtype: "error_max_turns"}, "error_max_turns"},
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
