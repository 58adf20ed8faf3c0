package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/control/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// socketIn returns a socket path in a directory Listen has to create.
func socketIn(t *testing.T) string {
	return filepath.Join(shortDir(t), "run", "d.sock")
}

// serve is controltest.Serve with a chance to configure the server before
// it serves.
func serve(t *testing.T, sock string, b control.Backend, configure func(*server.Server)) *server.Server {
	t.Helper()
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(b, zaptest.NewLogger(t))
	if configure != nil {
		configure(srv)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// rawAnswer is an answer to a request sent without the Client.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a rawAnswer) error(t *testing.T) control.Error {
	t.Helper()
	var e control.Error
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body %q is not an Error: %v", a.body, err)
	}
	return e
}

// raw sends what the Client never sends: unknown routes, wrong methods,
// bad bodies, browser headers.
func raw(t *testing.T, sock, method, path string, header http.Header, body string) rawAnswer {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://ctxgraphd"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

func sampleBackend() *controltest.Backend {
	started := time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)
	waiting := started.Add(time.Hour)
	return &controltest.Backend{
		StatusValue: control.Status{
			State:     "code",
			Features:  control.FeatureCounts{Total: 6, Pending: 2, InProgress: 1, Tested: 2, Blocked: 1},
			Project:   "/src/app",
			ProjectID: "app-0123456789ab",
			PID:       4242,
			StartedAt: started,
			Current: &control.RunInfo{ID: "r-7", Role: "coding-agent", Feature: "F-003", Attempt: 2,
				SessionID: "6c1f", PID: 4343, StartedAt: started.Add(time.Minute)},
			BlockedInSession: 1,
			WaitingUntil:     &waiting,
			Message:          "F-004 blocked: tests fail",
			CostUSD:          1.25,
			Runs:             7,
		},
		FeatureList: []control.Feature{
			{ID: "F-001", Title: "Sign in", Status: "completed", Tested: true, Attempts: 1, CostUSD: 0.5},
			{ID: "F-002", Title: "Sign out", Status: "blocked", DependsOn: []string{"F-001"}, Attempts: 3, Retries: 2,
				CostUSD: 0.75, LastFailure: "go test ./auth: exit 1", Note: "use the v2 API"},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	sock := socketIn(t)
	b := sampleBackend()
	controltest.Serve(t, sock, b)
	c := control.NewClient(sock)
	ctx := t.Context()

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, b.StatusValue) {
		t.Errorf("Status:\n got %+v\nwant %+v", st, b.StatusValue)
	}
	fs, err := c.Features(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fs, b.FeatureList) {
		t.Errorf("Features:\n got %+v\nwant %+v", fs, b.FeatureList)
	}

	actions := []struct {
		name string
		do   func() error
		want controltest.Call
	}{
		{"pause", func() error { return c.Pause(ctx) }, controltest.Call{Method: "Pause"}},
		{"resume", func() error { return c.Resume(ctx) }, controltest.Call{Method: "Resume"}},
		{"stop", func() error { return c.Stop(ctx) }, controltest.Call{Method: "Stop"}},
		{"retry", func() error { return c.Retry(ctx, "F-001") }, controltest.Call{Method: "Retry", ID: "F-001"}},
		{"unblock with note", func() error { return c.Unblock(ctx, "F-002", "use the v2 API") },
			controltest.Call{Method: "Unblock", ID: "F-002", Note: "use the v2 API"}},
		{"unblock without note", func() error { return c.Unblock(ctx, "F-002", "") }, controltest.Call{Method: "Unblock", ID: "F-002"}},
		{"skip", func() error { return c.Skip(ctx, "F-003") }, controltest.Call{Method: "Skip", ID: "F-003"}},
		{"id that needs escaping", func() error { return c.Skip(ctx, "F 9/b") }, controltest.Call{Method: "Skip", ID: "F 9/b"}},
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			before := len(b.Calls())
			if err := a.do(); err != nil {
				t.Fatal(err)
			}
			got := b.Calls()[before:]
			if len(got) != 1 || got[0] != a.want {
				t.Errorf("backend calls = %+v, want [%+v]", got, a.want)
			}
		})
	}
}

func TestActionsAnswerOK(t *testing.T) {
	sock := socketIn(t)
	controltest.Serve(t, sock, &controltest.Backend{})
	a := raw(t, sock, "POST", "/v1/pause", nil, "")
	if a.status != http.StatusOK || strings.TrimSpace(string(a.body)) != `{"ok":true}` {
		t.Errorf("POST /v1/pause = %d %s, want 200 {\"ok\":true}", a.status, a.body)
	}
}

func TestFeaturesIsAnArrayBeforeTheList(t *testing.T) {
	sock := socketIn(t)
	controltest.Serve(t, sock, &controltest.Backend{}) // no feature list yet: nil
	a := raw(t, sock, "GET", "/v1/features", nil, "")
	if got := strings.TrimSpace(string(a.body)); got != "[]" {
		t.Errorf("GET /v1/features = %s, want []", got)
	}
}

func TestBackendErrorsReachTheClient(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string // substring
	}{
		{"unknown feature", &control.APIError{HTTPStatus: 404, Code: "unknown_feature", Message: `no feature "F-9" in the feature list`},
			404, "unknown_feature", `no feature "F-9" in the feature list`},
		{"conflict", &control.APIError{HTTPStatus: 409, Code: "not_blocked", Message: "F-9 is pending, not blocked"},
			409, "not_blocked", "F-9 is pending, not blocked"},
		{"bad request", &control.APIError{HTTPStatus: 400, Code: "bad_state", Message: "the session is stopped"},
			400, "bad_state", "the session is stopped"},
		{"wrapped", fmt.Errorf("reopen: %w", &control.APIError{HTTPStatus: 409, Code: "running", Message: "F-9 has a run in flight"}),
			409, "running", "F-9 has a run in flight"},
		{"no status", &control.APIError{Code: "odd", Message: "odd"}, 500, "odd", "odd"},
		{"no code", &control.APIError{HTTPStatus: 404, Message: "gone"}, 404, control.CodeNotFound, "gone"},
		{"plain error", errors.New("store: disk full"), 500, control.CodeInternal, "store: disk full"},
		{"abandoned", context.Canceled, 503, control.CodeUnavailable, "abandoned"},
	}
	sock := socketIn(t)
	b := &controltest.Backend{}
	controltest.Serve(t, sock, b)
	c := control.NewClient(sock)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.Fail("Retry", tt.err)
			err := c.Retry(t.Context(), "F-9")
			var ae *control.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("Retry error = %v (%T), want an *APIError", err, err)
			}
			if ae.HTTPStatus != tt.wantStatus || ae.Code != tt.wantCode || !strings.Contains(ae.Message, tt.wantMsg) {
				t.Errorf("got %d %q %q, want %d %q containing %q", ae.HTTPStatus, ae.Code, ae.Message, tt.wantStatus, tt.wantCode, tt.wantMsg)
			}
		})
	}

	t.Run("read route", func(t *testing.T) {
		b.Fail("Status", &control.APIError{HTTPStatus: 409, Code: "bad_state", Message: "starting"})
		_, err := c.Status(t.Context())
		var ae *control.APIError
		if !errors.As(err, &ae) || ae.Code != "bad_state" {
			t.Errorf("Status error = %v, want bad_state", err)
		}
	})
}

func TestRequestsTheServerRefuses(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		header     http.Header
		body       string
		wantStatus int
		wantCode   string
	}{
		{"origin", "GET", "/v1/status", http.Header{"Origin": {"http://evil.example"}}, "", 403, control.CodeForbidden},
		{"referer", "POST", "/v1/stop", http.Header{"Referer": {"http://evil.example/page"}}, "", 403, control.CodeForbidden},
		{"unknown route", "GET", "/v1/nope", nil, "", 404, control.CodeNotFound},
		{"wrong method", "GET", "/v1/pause", nil, "", 405, control.CodeMethodNotAllowed},
		{"bad body", "POST", "/v1/features/F-1/unblock", nil, `{"note":`, 400, control.CodeBadRequest},
		{"wrong body type", "POST", "/v1/features/F-1/unblock", nil, `{"note": 3}`, 400, control.CodeBadRequest},
	}
	sock := socketIn(t)
	b := &controltest.Backend{}
	controltest.Serve(t, sock, b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := raw(t, sock, tt.method, tt.path, tt.header, tt.body)
			if a.status != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, a.status, a.body, tt.wantStatus)
			}
			if e := a.error(t); e.Code != tt.wantCode || e.Error == "" {
				t.Errorf("error body = %+v, want code %q and a message", e, tt.wantCode)
			}
		})
	}
	if a := raw(t, sock, "GET", "/v1/pause", nil, ""); !strings.Contains(a.header.Get("Allow"), "POST") {
		t.Errorf("405 Allow = %q, want POST", a.header.Get("Allow"))
	}
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("refused requests reached the backend: %+v", calls)
	}
}

func TestOtherUsersAreRefused(t *testing.T) {
	sock := socketIn(t)
	b := &controltest.Backend{}
	var seen atomic.Int64
	seen.Store(-1)
	serve(t, sock, b, func(s *server.Server) {
		server.SetAllowPeer(s, func(uid int) bool { seen.Store(int64(uid)); return false })
	})
	_, err := control.NewClient(sock).Status(t.Context())
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.HTTPStatus != 403 || ae.Code != control.CodeForbidden || !strings.Contains(ae.Message, "uid") {
		t.Fatalf("Status error = %v, want a 403 naming the uid", err)
	}
	if got := seen.Load(); got != int64(os.Geteuid()) {
		t.Errorf("peer uid = %d, want ours (%d)", got, os.Geteuid())
	}
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("refused request reached the backend: %+v", calls)
	}
}

func TestPeerRule(t *testing.T) {
	tests := []struct {
		self, peer int
		want       bool
	}{
		{1000, 1000, true},
		{1000, 0, true},
		{1000, 1001, false},
		{0, 0, true},
		{0, 1000, false},
	}
	for _, tt := range tests {
		if got := server.SameUserOrRoot(tt.self)(tt.peer); got != tt.want {
			t.Errorf("daemon uid %d, peer uid %d: allowed = %v, want %v", tt.self, tt.peer, got, tt.want)
		}
	}
}

func TestExtraRoutes(t *testing.T) {
	sock := socketIn(t)
	serve(t, sock, &controltest.Backend{}, func(s *server.Server) {
		s.Handle("GET /v1/things/{id}", server.Endpoint(func(r *http.Request) (map[string]string, error) {
			return map[string]string{"id": r.PathValue("id")}, nil
		}))
	})
	a := raw(t, sock, "GET", "/v1/things/t-1", nil, "")
	if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"id":"t-1"}` {
		t.Errorf("extra route = %d %s", a.status, a.body)
	}
	// Extra routes get the same checks as the built-in ones.
	if a := raw(t, sock, "GET", "/v1/things/t-1", http.Header{"Origin": {"null"}}, ""); a.status != 403 {
		t.Errorf("extra route with Origin = %d, want 403", a.status)
	}
}

func TestServeAndShutdown(t *testing.T) {
	sock := socketIn(t)
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(&controltest.Backend{}, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := control.NewClient(sock).Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Shutdown: %v, want it removed", err)
	}
	if _, err := control.NewClient(sock).Status(t.Context()); !errors.Is(err, control.ErrNoDaemon) {
		t.Errorf("Status after Shutdown = %v, want ErrNoDaemon", err)
	}
}

// blockingPause holds Pause until the request's context ends, like an
// action queued behind a busy loop.
type blockingPause struct {
	*controltest.Backend
	entered chan struct{}
}

func (b blockingPause) Pause(ctx context.Context) error {
	close(b.entered)
	<-ctx.Done()
	return ctx.Err()
}

func TestShutdownEndsRequestsInFlight(t *testing.T) {
	sock := socketIn(t)
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	b := blockingPause{Backend: &controltest.Backend{}, entered: make(chan struct{})}
	srv := server.New(b, zaptest.NewLogger(t))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	paused := make(chan error, 1)
	go func() { paused <- control.NewClient(sock).Pause(context.Background()) }()
	<-b.entered
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown with a request in flight: %v", err)
	}
	var ae *control.APIError
	if err := <-paused; !errors.As(err, &ae) || ae.Code != control.CodeUnavailable {
		t.Errorf("Pause during Shutdown = %v, want %s", err, control.CodeUnavailable)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

func TestClientTimeout(t *testing.T) {
	sock := socketIn(t)
	b := blockingPause{Backend: &controltest.Backend{}, entered: make(chan struct{})}
	controltest.Serve(t, sock, b)
	c := control.NewClient(sock)
	c.Timeout = time.Millisecond
	err := c.Pause(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("Pause past the timeout = %v, want a deadline error that says so", err)
	}
}

func TestClientWithoutDaemon(t *testing.T) {
	stale := filepath.Join(shortDir(t), "stale.sock")
	leaveStaleSocket(t, stale)
	tests := []struct {
		name  string
		sock  string
		errno syscall.Errno
	}{
		{"no socket file", filepath.Join(shortDir(t), "d.sock"), syscall.ENOENT},
		{"no directory", filepath.Join(shortDir(t), "gone", "d.sock"), syscall.ENOENT},
		{"stale socket", stale, syscall.ECONNREFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := control.NewClient(tt.sock).Status(t.Context())
			if !errors.Is(err, control.ErrNoDaemon) || !errors.Is(err, tt.errno) {
				t.Fatalf("Status = %v, want ErrNoDaemon and %v", err, tt.errno)
			}
			if !strings.Contains(err.Error(), tt.sock) {
				t.Errorf("error %q does not name the socket", err)
			}
		})
	}
}

func TestClientRejectsEmptyFeatureID(t *testing.T) {
	// Nothing listens: the id is checked before any dial.
	err := control.NewClient(filepath.Join(shortDir(t), "d.sock")).Retry(t.Context(), "")
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.Code != control.CodeBadRequest {
		t.Errorf("Retry(\"\") = %v, want a bad_request", err)
	}
}

// leaveStaleSocket leaves at path what a daemon that died leaves: a socket
// file nobody listens on.
func leaveStaleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no stale socket at %s: %v", path, err)
	}
}

func TestListenModes(t *testing.T) {
	sock := socketIn(t)
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode = %v, want 0700", di.Mode().Perm())
	}
}

func TestListenTightensItsDirectory(t *testing.T) {
	dir := filepath.Join(shortDir(t), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	ln, err := server.Listen(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode = %v, want 0700", di.Mode().Perm())
	}
}

func TestListenLeavesSharedDirectoriesAlone(t *testing.T) {
	// The /tmp fallback: a sticky, world-writable directory that is not
	// ours to change even when we are root.
	dir := filepath.Join(shortDir(t), "tmp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	ln, err := server.Listen(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o777 || di.Mode()&os.ModeSticky == 0 {
		t.Errorf("shared directory mode = %v, want it unchanged (1777)", di.Mode())
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "d.sock")); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestListenClearsStaleFiles(t *testing.T) {
	tests := []struct {
		name  string
		leave func(t *testing.T, path string)
	}{
		{"stale socket", leaveStaleSocket},
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("junk"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(shortDir(t), "d.sock")
			tt.leave(t, sock)
			ln, err := server.Listen(sock)
			if err != nil {
				t.Fatalf("Listen over a %s: %v", tt.name, err)
			}
			defer ln.Close()
			if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("after Listen: %v, %v; want a fresh socket", fi, err)
			}
		})
	}
}

func TestListenRefusesALiveDaemon(t *testing.T) {
	sock := socketIn(t)
	controltest.Serve(t, sock, &controltest.Backend{})
	ln, err := server.Listen(sock)
	if err == nil {
		ln.Close()
		t.Fatal("a second Listen on a live socket succeeded")
	}
	if !errors.Is(err, control.ErrDaemonRunning) || !strings.Contains(err.Error(), sock) {
		t.Errorf("second Listen = %v, want ErrDaemonRunning naming %s", err, sock)
	}
	// The first daemon is untouched.
	if _, err := control.NewClient(sock).Status(t.Context()); err != nil {
		t.Errorf("first daemon after a refused Listen: %v", err)
	}
}

func TestListenRefusesADirectory(t *testing.T) {
	sock := filepath.Join(shortDir(t), "d.sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	if ln, err := server.Listen(sock); err == nil {
		ln.Close()
		t.Fatal("Listen on a directory succeeded")
	}
}

func TestCloseLeavesAnotherDaemonsSocket(t *testing.T) {
	sock := socketIn(t)
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	// Someone removed our socket and bound the path anew.
	os.Remove(sock)
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("closing our listener removed the other socket: %v", err)
	}
}
