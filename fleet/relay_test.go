package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/hook"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
)

// respond answers the hook calls on subject over the daemon's connection
// nc with answer, until the end of the test; it stands in for the daemon's
// executor.
func respond(tb testing.TB, nc *nats.Conn, subject string, answer func(HookCall) HookAnswer) *nats.Subscription {
	tb.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var call HookCall
		if err := json.Unmarshal(m.Data, &call); err != nil {
			tb.Errorf("the daemon got a hook call that does not decode: %v", err)
			return
		}
		data, err := json.Marshal(answer(call))
		if err != nil {
			tb.Errorf("encoding the answer: %v", err)
			return
		}
		m.Respond(data)
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sub.Unsubscribe() })
	return sub
}

// socketPath is a socket path in a directory of its own, short enough for
// sun_path wherever the temporary directory is.
func socketPath(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "relay")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "hook.sock")
}

// relayOf starts a fleet with worker a, connects as a and relays its hooks
// on a fresh socket. It returns the relay, the socket, the worker's
// connection and the daemon's.
func relayOf(t *testing.T) (*Relay, string, *nats.Conn, *Server) {
	t.Helper()
	s := start(t, Config{})
	w := addWorker(t, s, "a")
	nc, err := connect(t, s, w.Path)
	if err != nil {
		t.Fatal(err)
	}
	socket := socketPath(t)
	r, err := ListenRelay(socket, nc, s.Subjects().Worker("a").Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, socket, nc, s
}

// preToolUse is a hook request: a Write of path.
func preToolUse(path string) control.HookRequest {
	payload, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": filepath.Dir(path), "hook_event_name": "PreToolUse", "tool_name": "Write",
		"tool_input": map[string]any{"file_path": path, "content": "x"}})
	return control.HookRequest{Event: "pre-tool-use", Payload: payload}
}

// TestRelayAnswersAsTheSocket: the daemon's answer over NATS reaches the
// hook as the daemon's socket gives it: a decision, none, or an error with
// its status and code; the token and the request cross as they came.
func TestRelayAnswersAsTheSocket(t *testing.T) {
	_, socket, _, s := relayOf(t)
	deny := &control.HookDecision{Gate: gates.FrozenTests, Code: "frozen_test", Message: "tests/x_test.go is frozen", Mode: gates.Enforce}
	calls := make(chan HookCall, 8)
	respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(c HookCall) HookAnswer {
		calls <- c
		switch c.Token {
		case "frozen":
			return HookAnswer{Response: control.HookResponse{Decision: deny}}
		case "revoked":
			return HookAnswer{Error: &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeUnknownRun, Message: "not one of this daemon's runs"}}
		case "no-status":
			return HookAnswer{Error: &control.APIError{Code: control.CodeBadPayload, Message: "payload"}}
		}
		return HookAnswer{}
	})
	tests := []struct {
		token string
		want  control.HookResponse
		err   *control.APIError
	}{
		{"allowed", control.HookResponse{}, nil},
		{"frozen", control.HookResponse{Decision: deny}, nil},
		{"revoked", control.HookResponse{}, &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeUnknownRun, Message: "not one of this daemon's runs"}},
		// An error without a status is a 500, as WriteError makes it.
		{"no-status", control.HookResponse{}, &control.APIError{HTTPStatus: http.StatusInternalServerError, Code: control.CodeBadPayload, Message: "payload"}},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			c := control.NewClient(socket)
			c.RunToken = tt.token
			req := preToolUse("/work/src/x.go")
			got, err := c.Hook(context.Background(), req)
			var apiErr *control.APIError
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("Hook = %v, want %+v", err, tt.want)
			case tt.err != nil && (!errors.As(err, &apiErr) || *apiErr != *tt.err):
				t.Fatalf("Hook error = %#v, want %#v", err, tt.err)
			}
			if gj, wj := mustJSON(t, got), mustJSON(t, tt.want); gj != wj {
				t.Errorf("Hook = %s, want %s", gj, wj)
			}
			call := <-calls
			if call.Token != tt.token || call.Request.Event != req.Event || !bytes.Equal(call.Request.Payload, req.Payload) {
				t.Errorf("the daemon got %+v, want token %q and the request as sent", call, tt.token)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRelayServesOnlyTheHookRoute: a relay is no daemon's socket; every
// other route, and the hook route with another method, is a 404 that
// never reaches the daemon.
func TestRelayServesOnlyTheHookRoute(t *testing.T) {
	_, socket, _, s := relayOf(t)
	respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(c HookCall) HookAnswer {
		t.Errorf("the daemon was asked %+v", c)
		return HookAnswer{}
	})
	c := control.NewClient(socket)
	for name, call := range map[string]func() error{
		"GET /v1/status": func() error { _, err := c.Status(context.Background()); return err },
		"POST /v1/pause": func() error { return c.Pause(context.Background()) },
		"GET /v1/traces": func() error { _, err := c.Traces(context.Background(), control.TraceQuery{}); return err },
		"POST /v1/traces": func() error {
			_, err := c.StoreTrace(context.Background(), control.TraceRequest{Type: "decision"})
			return err
		},
		"POST /v1/lessons": func() error { _, err := c.AddLesson(context.Background(), "x"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			var apiErr *control.APIError
			if err := call(); !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusNotFound || apiErr.Code != control.CodeForStatus(http.StatusNotFound) {
				t.Errorf("%s = %v, want a 404", name, err)
			}
		})
	}
}

// hookProject is a worker's clone as a run's hooks see it: a project with
// .claude/progress, whose offline record freezes tests/F-001.sh, and whose
// state directory is the test's own.
func hookProject(t *testing.T) paths.Project {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, paths.ProgressDir), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := paths.ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := gates.SaveOffline(p.StateDir, gates.Offline{Frozen: []string{"tests/F-001.sh"}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// runHook runs the real hook command's Run on a coder's Write of rel in
// p, asking socket; it returns what it printed.
func runHook(t *testing.T, p paths.Project, socket, rel string) string {
	t.Helper()
	env := map[string]string{"CTXGRAPH_AGENT": gates.Coder, "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-000007",
		"CLAUDE_PROJECT_DIR": p.Dir, "CTXGRAPH_SOCKET": socket, control.RunTokenEnv: "the-token"}
	var out, errOut bytes.Buffer
	req := preToolUse(filepath.Join(p.Dir, rel))
	if code := hook.Run(context.Background(), "pre-tool-use", bytes.NewReader(req.Payload), &out, &errOut, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("hook exit %d: %s", code, errOut.String())
	}
	return out.String()
}

// TestRelayLetsTheHookDecideAlone: when the daemon cannot be reached over
// NATS, the relay hangs up and the real hook decides alone from the
// offline record, and spools; when the daemon answers, its answer is the
// hook's and nothing is spooled.
func TestRelayLetsTheHookDecideAlone(t *testing.T) {
	tests := []struct {
		name string
		// daemon sets the daemon's side up for the question.
		daemon func(t *testing.T, r *Relay, worker *nats.Conn, s *Server)
		alone  bool
	}{
		{"the daemon answers", func(t *testing.T, _ *Relay, _ *nats.Conn, s *Server) {
			respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(HookCall) HookAnswer {
				return HookAnswer{Response: control.HookResponse{Decision: &control.HookDecision{Gate: "daemon", Code: "said_so", Message: "the daemon said no", Mode: gates.Enforce}}}
			})
		}, false},
		{"no responder", func(*testing.T, *Relay, *nats.Conn, *Server) {}, true},
		{"no answer in time", func(t *testing.T, r *Relay, _ *nats.Conn, s *Server) {
			r.timeout = 100 * time.Millisecond
			sub, err := s.Conn().SubscribeSync(s.Subjects().Worker("a").Hook) // takes the question, never answers
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sub.Unsubscribe() })
			s.Conn().Flush()
		}, true},
		{"the connection closed", func(t *testing.T, _ *Relay, worker *nats.Conn, s *Server) {
			respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(HookCall) HookAnswer { return HookAnswer{} })
			worker.Close()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, socket, worker, s := relayOf(t)
			tt.daemon(t, r, worker, s)
			p := hookProject(t)
			out := runHook(t, p, socket, "tests/F-001.sh")
			recs, err := spool.Read(p.StateDir)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.alone {
				if !strings.Contains(out, "the daemon said no") || len(recs) != 0 {
					t.Fatalf("the daemon answered, the hook printed %s and spooled %d records", out, len(recs))
				}
				return
			}
			// Decided alone: the offline record's frozen test is refused,
			// and the event is spooled with the decision.
			if !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "frozen_test") {
				t.Errorf("decided alone, the hook printed %s, want the frozen_test denial", out)
			}
			if len(recs) != 1 || recs[0].Run != "run-000007" || !bytes.Contains(recs[0].Decision, []byte("frozen_test")) {
				t.Errorf("spooled %+v, want the run's write with its denial", recs)
			}
		})
	}
}

// TestRelaySocket: the socket's directory is the worker's alone (0700),
// the socket 0600, and Close removes it; a relay cannot be asked after.
func TestRelaySocket(t *testing.T) {
	r, socket, _, _ := relayOf(t)
	fi, err := os.Stat(filepath.Dir(socket))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Lstat(socket); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close the socket is still there: %v", err)
	}
	if _, err := control.NewClient(socket).Hook(context.Background(), preToolUse("/x")); !errors.Is(err, control.ErrNoDaemon) {
		t.Errorf("Hook after Close = %v, want ErrNoDaemon", err)
	}
}

// TestRelayCloseEndsQuestionsInFlight: Close does not wait for the
// daemon's answer: the question in flight ends, its hook decides alone.
func TestRelayCloseEndsQuestionsInFlight(t *testing.T) {
	r, socket, _, s := relayOf(t)
	asked := make(chan struct{})
	sub, err := s.Conn().Subscribe(s.Subjects().Worker("a").Hook, func(*nats.Msg) { close(asked) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	s.Conn().Flush()
	errc := make(chan error, 1)
	go func() {
		_, err := control.NewClient(socket).Hook(context.Background(), preToolUse("/x"))
		errc <- err
	}()
	<-asked
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > RelayTimeout/2 {
		t.Errorf("Close took %s: it waited for the daemon", took)
	}
	var apiErr *control.APIError
	if err := <-errc; err == nil || errors.As(err, &apiErr) {
		t.Errorf("the question in flight at Close got %v, want no answer (a transport error)", err)
	}
}

// TestRelayCarriesLargePayloads: a Write of a file of a few MiB, which the
// daemon's socket takes, crosses to the daemon whole.
//
// What is tested is that the payload arrives whole, not how fast: under
// -race on a loaded machine (CI's, with four nights beside it), its
// marshalling there and back took longer than RelayTimeout, and the relay
// hung up as it should. The bound itself is "no answer in time"'s.
func TestRelayCarriesLargePayloads(t *testing.T) {
	r, socket, _, s := relayOf(t)
	r.timeout = time.Minute
	got := make(chan int, 1)
	respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(c HookCall) HookAnswer {
		got <- len(c.Request.Payload)
		return HookAnswer{}
	})
	payload, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": "/w", "hook_event_name": "PreToolUse", "tool_name": "Write",
		"tool_input": map[string]any{"file_path": "/w/big.txt", "content": strings.Repeat("x", 3<<20)}})
	if _, err := control.NewClient(socket).Hook(context.Background(), control.HookRequest{Event: "pre-tool-use", Payload: payload}); err != nil {
		t.Fatalf("Hook of a %d-byte payload: %v", len(payload), err)
	}
	if n := <-got; n != len(payload) {
		t.Errorf("the daemon got %d bytes of payload, want %d", n, len(payload))
	}
}

// TestRelayRefusesWebPages: as the daemon's socket, the relay refuses a
// request with an Origin or a Referer, before the daemon is asked.
func TestRelayRefusesWebPages(t *testing.T) {
	_, socket, _, s := relayOf(t)
	respond(t, s.Conn(), s.Subjects().Worker("a").Hook, func(c HookCall) HookAnswer {
		t.Errorf("the daemon was asked %+v", c)
		return HookAnswer{}
	})
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer client.CloseIdleConnections()
	for _, header := range []string{"Origin", "Referer"} {
		t.Run(header, func(t *testing.T) {
			body, _ := json.Marshal(preToolUse("/w/src/x.go"))
			req, _ := http.NewRequest(http.MethodPost, "http://ctxgraphd"+hookRoute, bytes.NewReader(body))
			req.Header.Set(header, "https://example.com")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("a request with %s: %s, want 403", header, resp.Status)
			}
		})
	}
}
