package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// shortDir returns a fresh directory with a short path: sun_path holds
// about 104 bytes, and t.TempDir's names grow with the test's.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fakeDaemon serves h on a fresh Unix socket until the test ends and
// returns the socket's path. It stands for whatever answers on the socket:
// the client must make sense of any answer, not only of our server's.
func fakeDaemon(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

// received is what the fake daemon saw of one request.
type received struct {
	Method, URI, ContentType, Body string
	Tokens                         []string // the values of RunTokenHeader
}

// recorder answers every request with answer (status 200) and keeps what
// it received.
type recorder struct {
	mu     sync.Mutex
	got    []received
	answer string
}

func (rc *recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, received{Method: r.Method, URI: r.RequestURI, ContentType: r.Header.Get("Content-Type"),
		Body: string(body), Tokens: r.Header.Values(control.RunTokenHeader)})
	answer := rc.answer
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, answer)
}

func (rc *recorder) take() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := rc.got
	rc.got = nil
	return got
}

// Every method of the client sends the request its route wants: the
// method, the path (ids escaped, no empty query), a JSON body only when
// there is something to send, and decodes the answer into its result.
func TestClientSendsWhatEachRouteWants(t *testing.T) {
	rc := &recorder{}
	c := control.NewClient(fakeDaemon(t, rc.serve))
	c.RunToken = ""
	ctx := t.Context()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	payload := json.RawMessage(`{"tool_name":"Write"}`)

	tests := []struct {
		name   string
		answer string
		call   func() (any, error)
		want   received
		result any // what the call returns besides its error
	}{
		{name: "status", answer: `{"state":"code","pid":42,"features":{"total":3,"tested":1}}`,
			call:   func() (any, error) { return c.Status(ctx) },
			want:   received{Method: "GET", URI: "/v1/status"},
			result: control.Status{State: "code", PID: 42, Features: control.FeatureCounts{Total: 3, Tested: 1}}},
		{name: "features", answer: `[{"id":"F-001","title":"Sign in","status":"pending","attempts":2}]`,
			call:   func() (any, error) { return c.Features(ctx) },
			want:   received{Method: "GET", URI: "/v1/features"},
			result: []control.Feature{{ID: "F-001", Title: "Sign in", Status: "pending", Attempts: 2}}},
		{name: "pause", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Pause(ctx) },
			want: received{Method: "POST", URI: "/v1/pause"}},
		{name: "resume", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Resume(ctx) },
			want: received{Method: "POST", URI: "/v1/resume"}},
		{name: "stop", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Stop(ctx) },
			want: received{Method: "POST", URI: "/v1/stop"}},
		{name: "retry", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Retry(ctx, "F-001") },
			want: received{Method: "POST", URI: "/v1/features/F-001/retry"}},
		{name: "skip, an id that needs escaping", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Skip(ctx, "F 9/b") },
			want: received{Method: "POST", URI: "/v1/features/F%209%2Fb/skip"}},
		{name: "unblock with a note", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Unblock(ctx, "F-002", "use the v2 API") },
			want: received{Method: "POST", URI: "/v1/features/F-002/unblock", ContentType: "application/json", Body: `{"note":"use the v2 API"}`}},
		{name: "unblock without a note", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.Unblock(ctx, "F-002", "") },
			want: received{Method: "POST", URI: "/v1/features/F-002/unblock", ContentType: "application/json", Body: `{}`}},
		{name: "hook", answer: `{"decision":{"gate":"scope","code":"out_of_scope","message":"m","mode":"enforce"}}`,
			call: func() (any, error) { return c.Hook(ctx, control.HookRequest{Event: "pre-tool-use", Payload: payload}) },
			want: received{Method: "POST", URI: "/v1/hook", ContentType: "application/json",
				Body: `{"event":"pre-tool-use","payload":{"tool_name":"Write"}}`},
			result: control.HookResponse{Decision: &control.HookDecision{Gate: "scope", Code: "out_of_scope", Message: "m", Mode: "enforce"}}},
		{name: "hook allowed", answer: `{}`,
			call: func() (any, error) { return c.Hook(ctx, control.HookRequest{Event: "stop", Payload: payload}) },
			want: received{Method: "POST", URI: "/v1/hook", ContentType: "application/json",
				Body: `{"event":"stop","payload":{"tool_name":"Write"}}`},
			result: control.HookResponse{}},
		{name: "traces without a query", answer: `[]`,
			call:   func() (any, error) { return c.Traces(ctx, control.TraceQuery{}) },
			want:   received{Method: "GET", URI: "/v1/traces"},
			result: []control.Trace{}},
		{name: "traces with a query", answer: `[{"id":"tr-1","type":"violation","gate":"scope"}]`,
			call: func() (any, error) {
				return c.Traces(ctx, control.TraceQuery{Type: "violation", Feature: "F-001", Since: since, Limit: 5})
			},
			want:   received{Method: "GET", URI: "/v1/traces?feature=F-001&limit=5&since=2026-01-02T03%3A04%3A05Z&type=violation"},
			result: []control.Trace{{ID: "tr-1", Type: "violation", Gate: "scope"}}},
		{name: "one trace, an id that needs escaping", answer: `{"id":"tr 1/x","source":"enforcement_hook"}`,
			call:   func() (any, error) { return c.Trace(ctx, "tr 1/x") },
			want:   received{Method: "GET", URI: "/v1/traces/tr%201%2Fx"},
			result: control.Trace{ID: "tr 1/x", Source: "enforcement_hook"}},
		{name: "a trace's links, an id that needs escaping", answer: `{"trace":{"id":"tr 1/x"},"path":[{"id":"tr-0"}],"followed":[],"next":[]}`,
			call:   func() (any, error) { return c.TraceLinks(ctx, "tr 1/x") },
			want:   received{Method: "GET", URI: "/v1/traces/tr%201%2Fx/links"},
			result: control.TraceLinks{Trace: control.Trace{ID: "tr 1/x"}, Path: []control.Trace{{ID: "tr-0"}}, Followed: []control.Trace{}, Next: []control.Trace{}}},
		{name: "an agent's trace", answer: `{"id":"tr-9","type":"lesson","source":"agent"}`,
			call: func() (any, error) {
				return c.StoreTrace(ctx, control.TraceRequest{Type: "lesson", WhatHappened: "go vet first"})
			},
			want:   received{Method: "POST", URI: "/v1/traces", ContentType: "application/json", Body: `{"type":"lesson","what_happened":"go vet first"}`},
			result: control.Trace{ID: "tr-9", Type: "lesson", Source: "agent"}},
		{name: "a lesson", answer: `{"id":"tr-10","type":"lesson"}`,
			call:   func() (any, error) { return c.AddLesson(ctx, "run go vet first") },
			want:   received{Method: "POST", URI: "/v1/lessons", ContentType: "application/json", Body: `{"text":"run go vet first"}`},
			result: control.Trace{ID: "tr-10", Type: "lesson"}},
		{name: "a lesson promoted, an id that needs escaping", answer: `{"id":"tr 10/x","type":"lesson"}`,
			call:   func() (any, error) { return c.PromoteLesson(ctx, "tr 10/x") },
			want:   received{Method: "POST", URI: "/v1/lessons/tr%2010%2Fx/promote"},
			result: control.Trace{ID: "tr 10/x", Type: "lesson"}},
		{name: "guards", answer: `{"guards":[{"id":"g-1","status":"warn","match":{"command":"make deploy"}}],"file":"guards.yaml"}`,
			call:   func() (any, error) { return c.Guards(ctx) },
			want:   received{Method: "GET", URI: "/v1/guards"},
			result: control.GuardList{Guards: []control.Guard{{ID: "g-1", Status: "warn", Match: control.GuardMatch{Command: "make deploy"}}}, File: "guards.yaml"}},
		{name: "a guard promoted, an id that needs escaping", answer: `{"id":"g 1/x","status":"enforce"}`,
			call:   func() (any, error) { return c.PromoteGuard(ctx, "g 1/x") },
			want:   received{Method: "POST", URI: "/v1/guards/g%201%2Fx/promote"},
			result: control.Guard{ID: "g 1/x", Status: "enforce"}},
		{name: "a guard retired, an id that needs escaping", answer: `{"id":"g 1/x","status":"retired"}`,
			call:   func() (any, error) { return c.RetireGuard(ctx, "g 1/x") },
			want:   received{Method: "POST", URI: "/v1/guards/g%201%2Fx/retire"},
			result: control.Guard{ID: "g 1/x", Status: "retired"}},
		{name: "prune", answer: `{"before":"2026-01-02T03:04:05Z","features":["F-001"],"examined":3,"folded":1}`,
			call:   func() (any, error) { return c.PruneTraces(ctx, control.PruneRequest{OlderThan: "720h"}) },
			want:   received{Method: "POST", URI: "/v1/traces/prune", ContentType: "application/json", Body: `{"older_than":"720h"}`},
			result: control.PruneResult{Before: "2026-01-02T03:04:05Z", Features: []string{"F-001"}, Examined: 3, Folded: 1}},
		{name: "report", answer: `{"project":"p","state":"done","totals":{"features":2,"tested":2}}`,
			call:   func() (any, error) { return c.Report(ctx) },
			want:   received{Method: "GET", URI: "/v1/report"},
			result: control.Report{Project: "p", State: "done", Totals: control.ReportTotals{Features: 2, Tested: 2}}},
		{name: "patterns", answer: `[{"kind":"refusal","what":"w","count":3,"features":["F-001"],"examples":["tr-1"]}]`,
			call:   func() (any, error) { return c.Patterns(ctx, 3) },
			want:   received{Method: "GET", URI: "/v1/patterns?min=3"},
			result: []control.Pattern{{Kind: "refusal", What: "w", Count: 3, Features: []string{"F-001"}, Examples: []string{"tr-1"}}}},
		{name: "workers", answer: `{"url":"nats://127.0.0.1:4222","workers":[{"name":"build-1","public_key":"UA","credentials":"/s/fleet/workers/build-1.creds"}]}`,
			call: func() (any, error) { return c.Workers(ctx) },
			want: received{Method: "GET", URI: "/v1/workers"},
			result: control.WorkerList{URL: "nats://127.0.0.1:4222",
				Workers: []control.Worker{{Name: "build-1", PublicKey: "UA", Credentials: "/s/fleet/workers/build-1.creds"}}}},
		{name: "a worker added", answer: `{"name":"build-1","public_key":"UA","credentials":"/s/build-1.creds","url":"nats://127.0.0.1:4222"}`,
			call: func() (any, error) { return c.AddWorker(ctx, "build-1") },
			want: received{Method: "POST", URI: "/v1/workers", ContentType: "application/json", Body: `{"name":"build-1"}`},
			result: control.NewWorker{Worker: control.Worker{Name: "build-1", PublicKey: "UA", Credentials: "/s/build-1.creds"},
				URL: "nats://127.0.0.1:4222"}},
		{name: "a worker revoked, a name that needs escaping", answer: `{"ok":true}`,
			call: func() (any, error) { return nil, c.RevokeWorker(ctx, "b 1/x") },
			want: received{Method: "DELETE", URI: "/v1/workers/b%201%2Fx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc.answer = tt.answer
			result, err := tt.call()
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if got := rc.take(); len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("the daemon received %+v, want [%+v]", got, tt.want)
			}
			if tt.result != nil && !reflect.DeepEqual(result, tt.result) {
				t.Errorf("result %+v, want %+v", result, tt.result)
			}
		})
	}
}

// A client started inside a run presents the run's token (from its
// environment) with every request; a client outside any run presents no
// token header at all, not an empty one.
func TestClientPresentsTheRunToken(t *testing.T) {
	rc := &recorder{answer: `{"ok":true}`}
	sock := fakeDaemon(t, rc.serve)

	t.Setenv(control.RunTokenEnv, "secret-of-run-1")
	inRun := control.NewClient(sock)
	if inRun.RunToken != "secret-of-run-1" {
		t.Fatalf("RunToken = %q, want the one of the environment", inRun.RunToken)
	}
	if err := inRun.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rc.take(); len(got) != 1 || !reflect.DeepEqual(got[0].Tokens, []string{"secret-of-run-1"}) {
		t.Errorf("tokens presented %+v, want the run's", got)
	}

	t.Setenv(control.RunTokenEnv, "")
	person := control.NewClient(sock)
	if err := person.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rc.take(); len(got) != 1 || got[0].Tokens != nil {
		t.Errorf("a person's request presented tokens %q, want no header", got[0].Tokens)
	}
}

// Any 2xx answer is a success; anything else is an *APIError, and a
// redirect is never followed (it would turn a POST into a GET).
func TestClientStatusBoundaries(t *testing.T) {
	var mu sync.Mutex
	status := 0
	var methods []string
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		methods = append(methods, r.Method+" "+r.URL.Path)
		if status == http.StatusFound {
			w.Header().Set("Location", "/v1/status")
		}
		w.WriteHeader(status)
		io.WriteString(w, `{"ok":true}`)
	})
	c := control.NewClient(sock)
	for _, tt := range []struct {
		status int
		ok     bool
	}{
		{http.StatusOK, true},
		{http.StatusAccepted, true},
		{299, true},
		{300, false},
		{http.StatusFound, false},
		{http.StatusBadRequest, false},
	} {
		mu.Lock()
		status, methods = tt.status, nil
		mu.Unlock()
		err := c.Pause(t.Context())
		var ae *control.APIError
		switch {
		case tt.ok && err != nil:
			t.Errorf("status %d: %v, want success", tt.status, err)
		case !tt.ok && (!errors.As(err, &ae) || ae.HTTPStatus != tt.status):
			t.Errorf("status %d: %v, want an *APIError with that status", tt.status, err)
		}
		mu.Lock()
		if len(methods) != 1 || methods[0] != "POST /v1/pause" {
			t.Errorf("status %d: requests %q, want the one POST", tt.status, methods)
		}
		mu.Unlock()
	}
}

// Error answers become *APIError: our server's Error body keeps its code
// and message; anything else (a proxy, another program on the socket)
// keeps its status and its text, cut to a bounded size.
func TestClientErrorAnswers(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	tests := []struct {
		name        string
		status      int
		body        string
		wantCode    string
		wantMessage string
		wantError   string // what Error() says
	}{
		{name: "an Error body", status: 409, body: `{"error":"F-9 is pending, not blocked","code":"not_blocked"}`,
			wantCode: "not_blocked", wantMessage: "F-9 is pending, not blocked", wantError: "F-9 is pending, not blocked"},
		{name: "a code alone", status: 404, body: `{"code":"unknown_feature"}`,
			wantCode: "unknown_feature", wantError: "unknown_feature"},
		{name: "a message alone", status: 400, body: `{"error":"since: want an RFC 3339 time"}`,
			wantMessage: "since: want an RFC 3339 time", wantError: "since: want an RFC 3339 time"},
		{name: "JSON that is no Error", status: 502, body: `{"upstream":"down"}`,
			wantCode: control.CodeInternal, wantMessage: `the daemon answered 502: {"upstream":"down"}`, wantError: `the daemon answered 502: {"upstream":"down"}`},
		{name: "plain text", status: 503, body: "  busy, come back later\n",
			wantCode: control.CodeUnavailable, wantMessage: "the daemon answered 503: busy, come back later", wantError: "the daemon answered 503: busy, come back later"},
		{name: "no body", status: 404,
			wantCode: control.CodeNotFound, wantMessage: "the daemon answered 404: Not Found", wantError: "the daemon answered 404: Not Found"},
		{name: "a body too long to read whole", status: 500, body: long,
			wantCode: control.CodeInternal, wantMessage: "the daemon answered 500: " + long[:64<<10], wantError: "the daemon answered 500: " + long[:64<<10]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := control.NewClient(sock).Status(t.Context())
			var ae *control.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want an *APIError", err, err)
			}
			if ae.HTTPStatus != tt.status || ae.Code != tt.wantCode || ae.Message != tt.wantMessage {
				t.Errorf("got %d %q %.80q, want %d %q %.80q", ae.HTTPStatus, ae.Code, ae.Message, tt.status, tt.wantCode, tt.wantMessage)
			}
			if err.Error() != tt.wantError {
				t.Errorf("Error() = %.80q, want %.80q", err.Error(), tt.wantError)
			}
		})
	}
}

// A success whose body is not what the route answers is an error that
// says so, not a zero value taken for the answer.
func TestClientRefusesAnAnswerItCannotDecode(t *testing.T) {
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>not json</html>") })
	c := control.NewClient(sock)
	_, err := c.Status(t.Context())
	if err == nil || !strings.Contains(err.Error(), "decoding the answer") || !strings.Contains(err.Error(), sock) {
		t.Errorf("Status = %v, want a decoding error naming the socket", err)
	}
	if errors.As(err, new(*control.APIError)) {
		t.Errorf("a 200 answer became an *APIError: %v", err)
	}
	// An action reads no answer: its body is drained, whatever it holds.
	if err := c.Pause(t.Context()); err != nil {
		t.Errorf("Pause = %v, want success", err)
	}
}

// A request whose body cannot be encoded fails before anything is sent.
func TestClientEncodingErrorSendsNothing(t *testing.T) {
	rc := &recorder{answer: `{}`}
	c := control.NewClient(fakeDaemon(t, rc.serve))
	_, err := c.Hook(t.Context(), control.HookRequest{Event: "stop", Payload: json.RawMessage(`{"not json`)})
	if err == nil || !strings.Contains(err.Error(), "POST /v1/hook: encoding the request") {
		t.Errorf("Hook with a broken payload = %v, want an encoding error", err)
	}
	if got := rc.take(); len(got) != 0 {
		t.Errorf("the daemon received %+v", got)
	}
}

// Timeout bounds a request whose context has no deadline of its own; a
// context's own deadline wins over it; zero means no bound.
func TestClientTimeout(t *testing.T) {
	if control.NewClient("x").Timeout != control.DefaultTimeout {
		t.Fatalf("NewClient's Timeout = %v, want DefaultTimeout", control.NewClient("x").Timeout)
	}
	// The daemon answers after a pause, or not before the client gives up.
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		wait := 100 * time.Millisecond
		if r.URL.Path == "/v1/stop" {
			wait = time.Hour
		}
		select {
		case <-time.After(wait):
			io.WriteString(w, `{"ok":true}`)
		case <-r.Context().Done():
		}
	})

	t.Run("bounds a request without a deadline", func(t *testing.T) {
		c := control.NewClient(sock)
		c.Timeout = 20 * time.Millisecond
		err := c.Stop(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer in time") || errors.Is(err, control.ErrNoDaemon) {
			t.Errorf("Stop past the timeout = %v, want a deadline error that says the daemon did not answer", err)
		}
	})
	t.Run("the context's own deadline wins", func(t *testing.T) {
		c := control.NewClient(sock)
		c.Timeout = time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := c.Pause(ctx); err != nil {
			t.Errorf("Pause with a deadline of a minute = %v, want success", err)
		}
	})
	t.Run("zero is no bound", func(t *testing.T) {
		c := control.NewClient(sock)
		c.Timeout = 0
		if err := c.Pause(context.Background()); err != nil {
			t.Errorf("Pause without a timeout = %v, want success", err)
		}
	})
	t.Run("a caller that gives up is not a daemon that did not answer", func(t *testing.T) {
		c := control.NewClient(sock)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := c.Pause(ctx)
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), sock) {
			t.Errorf("Pause with a cancelled context = %v, want the cancellation, naming the socket", err)
		}
	})
}

// ErrNoDaemon means nothing listens: no socket file, or one a dead daemon
// left. Other failures to connect are not that, and say what they are.
func TestClientWithoutDaemon(t *testing.T) {
	stale := filepath.Join(shortDir(t), "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	tooLong := filepath.Join(shortDir(t), strings.Repeat("s", 200)+".sock")
	hangUp := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})

	tests := []struct {
		name     string
		sock     string
		noDaemon bool
		errno    syscall.Errno // 0: none to check
	}{
		{"no socket file", filepath.Join(shortDir(t), "d.sock"), true, syscall.ENOENT},
		{"no directory", filepath.Join(shortDir(t), "gone", "d.sock"), true, syscall.ENOENT},
		{"a stale socket", stale, true, syscall.ECONNREFUSED},
		{"a path the kernel cannot take", tooLong, false, syscall.EINVAL},
		{"a daemon that hangs up", hangUp, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := control.NewClient(tt.sock)
			if c.Socket() != tt.sock {
				t.Errorf("Socket() = %q, want %q", c.Socket(), tt.sock)
			}
			_, err := c.Status(t.Context())
			if err == nil {
				t.Fatal("Status succeeded")
			}
			if errors.Is(err, control.ErrNoDaemon) != tt.noDaemon {
				t.Errorf("Status = %v; ErrNoDaemon %v, want %v", err, !tt.noDaemon, tt.noDaemon)
			}
			if tt.errno != 0 && !errors.Is(err, tt.errno) {
				t.Errorf("Status = %v, want it to wrap %v", err, tt.errno)
			}
			if !strings.Contains(err.Error(), tt.sock) {
				t.Errorf("error %q does not name the socket", err)
			}
		})
	}
}

// A feature action without a feature id, or a revocation without a
// worker's name, is refused before anything is sent.
func TestClientRefusesAnEmptyFeatureID(t *testing.T) {
	rc := &recorder{answer: `{"ok":true}`}
	c := control.NewClient(fakeDaemon(t, rc.serve))
	for name, call := range map[string]func() error{
		"retry":   func() error { return c.Retry(t.Context(), "") },
		"unblock": func() error { return c.Unblock(t.Context(), "", "note") },
		"skip":    func() error { return c.Skip(t.Context(), "") },
	} {
		err := call()
		var ae *control.APIError
		if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusBadRequest || ae.Code != control.CodeBadRequest || !strings.Contains(ae.Message, "feature id") {
			t.Errorf("%s without an id = %v, want a 400 bad_request asking for the id", name, err)
		}
	}
	// DELETE /v1/workers/ would be no route: the name is asked for.
	var ae *control.APIError
	if err := c.RevokeWorker(t.Context(), ""); !errors.As(err, &ae) || ae.HTTPStatus != http.StatusBadRequest || !strings.Contains(ae.Message, "worker's name") {
		t.Errorf("revoke without a name = %v, want a 400 bad_request asking for the name", err)
	}
	if got := rc.take(); len(got) != 0 {
		t.Errorf("the daemon received %+v", got)
	}
}

// Watch gives fn each status the daemon streams, in order, and ends as
// its caller needs to tell apart: nil when the caller's context ends, fn's
// own error when fn fails, ErrDaemonGone when the stream ends (the daemon
// stopped), an *APIError when the daemon refuses, ErrNoDaemon when none
// listens. It presents the run's token as every request does.
func TestClientWatch(t *testing.T) {
	states := []string{"idle", "code", "test"}
	errStop := errors.New("seen enough")
	for _, tt := range []struct {
		name    string
		status  int  // the daemon's answer
		hold    bool // the daemon keeps the stream open after the states
		stopAt  int  // fn fails at this status (1-based), 0: never
		cancel  int  // fn cancels the context at this status, 0: never
		want    int  // statuses fn gets (at least, when it cancels)
		wantErr func(error) bool
	}{
		{name: "the daemon stops", status: 200, want: 3, wantErr: func(err error) bool { return errors.Is(err, control.ErrDaemonGone) }},
		{name: "the caller is done", status: 200, hold: true, cancel: 2, want: 2, wantErr: func(err error) bool { return err == nil }},
		{name: "the caller is done after the last status", status: 200, hold: true, cancel: 3, want: 3, wantErr: func(err error) bool { return err == nil }},
		{name: "fn fails", status: 200, hold: true, stopAt: 1, want: 1, wantErr: func(err error) bool { return errors.Is(err, errStop) }},
		{name: "the daemon refuses", status: http.StatusForbidden, want: 0, wantErr: func(err error) bool {
			var ae *control.APIError
			return errors.As(err, &ae) && ae.HTTPStatus == http.StatusForbidden && ae.Code == control.CodeForbidden
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []received
			sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, received{Method: r.Method, URI: r.RequestURI, Tokens: r.Header.Values(control.RunTokenHeader)})
				mu.Unlock()
				if tt.status != http.StatusOK {
					w.WriteHeader(tt.status)
					io.WriteString(w, `{"error":"for people only","code":"forbidden"}`)
					return
				}
				for _, s := range states {
					json.NewEncoder(w).Encode(control.Status{State: s})
					w.(http.Flusher).Flush()
				}
				if tt.hold {
					<-r.Context().Done()
				}
			})
			c := control.NewClient(sock)
			c.RunToken = "secret-of-run-1"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var seen []string
			err := c.Watch(ctx, func(st control.Status) error {
				seen = append(seen, st.State)
				if len(seen) == tt.cancel {
					cancel()
				}
				if len(seen) == tt.stopAt {
					return errStop
				}
				return nil
			})
			if !tt.wantErr(err) {
				t.Errorf("Watch = %v", err)
			}
			// Once the caller is done, statuses already read may still come:
			// the ones before it, in order, it gets in any case.
			n := len(seen)
			if tt.cancel == 0 && n != tt.want || n < tt.want || n > len(states) || strings.Join(seen, " ") != strings.Join(states[:n], " ") {
				t.Errorf("fn got %q, want %q", seen, states[:tt.want])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0].Method != "GET" || got[0].URI != "/v1/watch" || !reflect.DeepEqual(got[0].Tokens, []string{"secret-of-run-1"}) {
				t.Errorf("the daemon received %+v, want one GET /v1/watch with the run's token", got)
			}
		})
	}
	t.Run("no daemon", func(t *testing.T) {
		c := control.NewClient(filepath.Join(shortDir(t), "none.sock"))
		err := c.Watch(t.Context(), func(control.Status) error { t.Error("fn called without a daemon"); return nil })
		if !errors.Is(err, control.ErrNoDaemon) {
			t.Errorf("Watch without a daemon = %v, want ErrNoDaemon", err)
		}
	})
}
