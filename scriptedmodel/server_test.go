package scriptedmodel

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

type sseEvent struct {
	name string
	data map[string]any
}

// parseSSE reads a stream strictly as the CLI needs it: every SSE message
// is exactly one event: line and one data: line, and the event name is the
// type of its data.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []sseEvent
	for _, msg := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		lines := strings.Split(msg, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("SSE message is not one event: and one data: line: %q", msg)
		}
		e := sseEvent{name: strings.TrimPrefix(lines[0], "event: ")}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &e.data); err != nil {
			t.Fatalf("data is not JSON: %v: %q", err, lines[1])
		}
		if e.data["type"] != e.name {
			t.Fatalf("event %q carries data of type %v", e.name, e.data["type"])
		}
		out = append(out, e)
	}
	return out
}

func names(evs []sseEvent) string {
	var n []string
	for _, e := range evs {
		n = append(n, e.name)
	}
	return strings.Join(n, " ")
}

const oneBlock = "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"

func TestStreamingToolCall(t *testing.T) {
	s := New(DefaultScenario(), nil)
	rec := post(t, s, "/v1/messages?beta=true", newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).body(true))
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	evs := parseSSE(t, rec.Body.String())
	if got := names(evs); got != oneBlock {
		t.Fatalf("events %s\nwant   %s", got, oneBlock)
	}
	msg := evs[0].data["message"].(map[string]any)
	if id, _ := msg["id"].(string); !strings.HasPrefix(id, "msg_") || msg["role"] != "assistant" || msg["model"] != "claude-test" {
		t.Fatalf("message_start %v", msg)
	}
	block := evs[1].data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Write" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Fatalf("content_block_start %v", block)
	}
	delta := evs[2].data["delta"].(map[string]any)
	var in map[string]any
	if delta["type"] != "input_json_delta" || json.Unmarshal([]byte(delta["partial_json"].(string)), &in) != nil {
		t.Fatalf("delta %v", delta)
	}
	if in["file_path"] != abs("src/F-001.txt") || in["content"] != "F-001 works\n" {
		t.Fatalf("streamed input %v", in)
	}
	if d := evs[4].data["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Fatalf("message_delta %v", d)
	}
}

func TestStreamingFinalText(t *testing.T) {
	s := New(DefaultScenario(), nil)
	c := newConvo(testCmd("F-001", 1)).bash("sh tests/F-001.sh", "Exit code 1", true)
	evs := parseSSE(t, post(t, s, "/v1/messages", c.body(true)).Body.String())
	if got := names(evs); got != oneBlock {
		t.Fatalf("events %s", got)
	}
	if b := evs[1].data["content_block"].(map[string]any); b["type"] != "text" {
		t.Fatalf("content_block_start %v", b)
	}
	if d := evs[2].data["delta"].(map[string]any); d["type"] != "text_delta" || d["text"] != "F-001 failed: `sh tests/F-001.sh` exited non-zero: Exit code 1" {
		t.Fatalf("delta %v", d)
	}
	if d := evs[4].data["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Fatalf("message_delta %v", d)
	}
}

func TestNonStreaming(t *testing.T) {
	s := New(DefaultScenario(), nil)
	rec := post(t, s, "/v1/messages", newConvo(initCmd()).body(false))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != "message" || m["role"] != "assistant" || m["stop_reason"] != "tool_use" || m["usage"] == nil {
		t.Fatalf("response %v", m)
	}
}

// TestIDsAreUnique: the CLI merges responses that share an id, so no two
// responses, of one server or of two, may share a message or tool id.
func TestIDsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		s := New(DefaultScenario(), nil)
		for i := range 20 {
			a := ask(t, s, newConvo(codeCmd("F-001", i+1)))
			for _, id := range []string{a.ID, a.Content[0].ID} {
				if seen[id] {
					t.Fatalf("id %s used twice", id)
				}
				seen[id] = true
			}
		}
	}
}

func TestRequestsWithoutCommand(t *testing.T) {
	s := New(DefaultScenario(), nil)
	c := &convo{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "Generate a title for this conversation."})
	check(t, ask(t, s, c), want{text: "OK."})
	if st := s.Stats(); st.Unscripted != 1 || st.Messages != 1 || len(st.Runs) != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOtherEndpoints(t *testing.T) {
	s := New(DefaultScenario(), nil)
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(m, "/api/hello", nil))
		if rec.Code != http.StatusOK || (m == http.MethodGet && strings.TrimSpace(rec.Body.String()) != "{}") {
			t.Errorf("%s /api/hello: %d %q", m, rec.Code, rec.Body)
		}
	}

	rec := post(t, s, "/v1/messages/count_tokens", newConvo(initCmd()).body(false))
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &count) != nil || count.InputTokens <= 0 {
		t.Errorf("count_tokens: %d %s", rec.Code, rec.Body)
	}

	rec = post(t, s, "/v1/complete", nil)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"not_found_error"`) {
		t.Errorf("POST /v1/complete: %d %s", rec.Code, rec.Body)
	}

	rec = post(t, s, "/v1/messages", []byte("{not json"))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"invalid_request_error"`) {
		t.Errorf("bad JSON: %d %s", rec.Code, rec.Body)
	}
	if st := s.Stats(); st.Requests != 5 || st.BadRequests != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestGzipBody(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(newConvo(initCmd()).body(false))
	zw.Close()
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", &b)
	req.Header.Set("Content-Encoding", "gzip")
	rec := httptest.NewRecorder()
	New(DefaultScenario(), nil).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"Bash"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestStartAndClose(t *testing.T) {
	s := New(DefaultScenario(), nil)
	if err := s.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	url, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("base URL %q is not on loopback", url)
	}
	if _, err := s.Start(); err == nil {
		t.Fatal("a second Start succeeded")
	}
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Post(url+"/v1/messages?beta=true", "application/json", bytes.NewReader(newConvo(initCmd()).body(true)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if got := names(parseSSE(t, string(body))); got != oneBlock {
		t.Fatalf("events %s", got)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Get(url + "/api/hello"); err == nil {
		t.Fatal("the server still answers after Close")
	}
	if st := s.Stats(); st.Requests != 1 || st.Runs["initializer-agent"] != 1 || st.ToolCalls != 1 {
		t.Fatalf("stats %+v", st)
	}
	// goleak (TestMain) checks that Close left no goroutine behind.
}

// Outages answer a run's requests with their HTTP errors, in order and as
// many as they say, as the real API does (error body, retry-after); the
// CLI's side requests go through; then the roles play on.
func TestOutages(t *testing.T) {
	sc := DefaultScenario()
	sc.Outages = []Outage{{Status: 429, Count: 2, RetryAfter: 7}, {Status: 529, Count: 1}, {Status: 401, Count: 1}}
	s := New(sc, nil)
	side := post(t, s, "/v1/messages", []byte(`{"model":"claude-test","messages":[{"role":"user","content":"a title"}]}`))
	if side.Code != http.StatusOK {
		t.Errorf("a side request during an outage: %d, want 200", side.Code)
	}
	body := newConvo(codeCmd("F-001", 1)).body(false)
	for i, want := range []struct {
		status     int
		kind       string
		retryAfter string
	}{{429, "rate_limit_error", "7"}, {429, "rate_limit_error", "7"}, {529, "overloaded_error", ""}, {401, "authentication_error", ""}, {200, "", ""}} {
		rec := post(t, s, "/v1/messages", body)
		if rec.Code != want.status || rec.Header().Get("retry-after") != want.retryAfter {
			t.Errorf("request %d: %d retry-after %q, want %d %q", i+1, rec.Code, rec.Header().Get("retry-after"), want.status, want.retryAfter)
		}
		if want.kind != "" {
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Type != "error" || e.Error.Type != want.kind || e.Error.Message == "" {
				t.Errorf("request %d: body %s (%v), want an error of type %s", i+1, rec.Body, err, want.kind)
			}
		}
	}
	if st := s.Stats(); st.Outages != 4 {
		t.Errorf("stats count %d outage answers, want 4", st.Outages)
	}
}

// TestTurnLatency: with a turn latency, every answer to /v1/messages,
// streamed or not, scripted or a side request, comes no sooner than the
// latency after its request, and is the answer it would be without one.
func TestTurnLatency(t *testing.T) {
	const latency = 150 * time.Millisecond
	sc := DefaultScenario()
	sc.TurnLatencyMS = int(latency / time.Millisecond)
	slow, fast := New(sc, nil), New(DefaultScenario(), nil)
	title := []byte(`{"model":"claude-test","messages":[{"role":"user","content":"a title"}]}`)
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"streamed tool call", newConvo(codeCmd("F-001", 1)).body(true)},
		{"a later turn", newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).write("src/F-001.txt", workingLine("F-001")+"\n", "ok", false).body(false)},
		{"side request", title},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			got := post(t, slow, "/v1/messages", c.body)
			if took := time.Since(start); took < latency {
				t.Errorf("answered after %s, want at least the turn latency, %s", took, latency)
			}
			want := post(t, fast, "/v1/messages", c.body)
			// The ids differ between servers; the rest must not.
			if got.Code != http.StatusOK || got.Code != want.Code || stripIDs(got.Body.String()) != stripIDs(want.Body.String()) {
				t.Errorf("with a latency: %d %s\nwithout: %d %s", got.Code, got.Body, want.Code, want.Body)
			}
		})
	}
}

// stripIDs blanks the message, tool and request ids of an answer.
func stripIDs(body string) string {
	return regexp.MustCompile(`(msg|toolu)_[0-9a-f]+`).ReplaceAllString(body, "${1}_")
}

// TestTurnLatencyEndsWithTheRequest: a client that hangs up while the
// model thinks gets nothing, and the handler returns then rather than at
// the end of the latency.
func TestTurnLatencyEndsWithTheRequest(t *testing.T) {
	sc := DefaultScenario()
	sc.TurnLatencyMS = int(time.Hour / time.Millisecond)
	s := New(sc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/messages", bytes.NewReader(newConvo(codeCmd("F-001", 1)).body(false)))
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(rec, req)
	}()
	// The request is being thought about once the server has counted it.
	for s.Stats().Messages == 0 {
		runtime.Gosched()
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute): // a bound on a hang, far below the hour
		t.Fatal("the handler still waits the turn latency after its request ended")
	}
	if rec.Body.Len() != 0 || s.Stats().ToolCalls != 1 {
		t.Errorf("a request that ended got %q (stats %+v)", rec.Body, s.Stats())
	}
}
