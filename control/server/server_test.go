package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

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
func serve(t *testing.T, sock string, b controltest.Daemon, configure func(*server.Server)) *server.Server {
	t.Helper()
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(b, b, b, b, zaptest.NewLogger(t))
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

// newServer is a server of a fake daemon whose answers the test does not
// look at.
func newServer(log *zap.Logger) *server.Server {
	b := &controltest.Backend{}
	return server.New(b, b, b, b, log)
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
		{"approve", func() error { return c.Approve(ctx) }, controltest.Call{Method: "Approve"}},
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

// Routes lists the routes the server answers: its backend's and those
// added with Handle, each answered by a handler rather than by the mux's
// "no such endpoint". The documentation of the API is checked against it.
func TestRoutesListWhatTheServerAnswers(t *testing.T) {
	s := newServer(nil)
	s.Handle("GET /v1/things/{id}", server.Endpoint(func(r *http.Request) (control.OK, error) { return control.OK{OK: true}, nil }))
	routes := s.Routes()
	for _, want := range []string{"GET /v1/status", "POST /v1/features/{id}/unblock", "GET /v1/guards", "GET /v1/things/{id}"} {
		if !slices.Contains(routes, want) {
			t.Errorf("Routes() = %q, missing %q", routes, want)
		}
	}
	// A client that went already: a stream (watch) answers its first line
	// and ends.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(gone, method, strings.ReplaceAll(path, "{id}", "x"), nil)
		server.ServeAs(s, rec, req, os.Geteuid(), 0, true, nil)
		var e control.Error
		json.Unmarshal(rec.Body.Bytes(), &e)
		if e.Code == control.CodeNotFound || e.Code == control.CodeMethodNotAllowed {
			t.Errorf("%s is listed but not answered: %d %s", route, rec.Code, rec.Body)
		}
	}
	routes[0] = "GET /v1/changed"
	if s.Routes()[0] == routes[0] {
		t.Error("Routes() hands out the server's own list")
	}
}

func TestServeAndShutdown(t *testing.T) {
	sock := socketIn(t)
	ln, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(nil)
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
	srv := server.New(b, b, b, b, zaptest.NewLogger(t))
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

// recorded is one answer of a server called in process.
type recorded struct {
	status int
	header http.Header
	body   string
}

// call serves one request in process as a connection with the given peer.
func call(s *server.Server, method, path, body string, uid, pid int, known bool, peerErr error) recorded {
	w := httptest.NewRecorder()
	server.ServeAs(s, w, httptest.NewRequest(method, path, strings.NewReader(body)), uid, pid, known, peerErr)
	return recorded{w.Code, w.Header(), strings.TrimSpace(w.Body.String())}
}

// The peer rule: a connection the server did not see connect, or whose
// credentials could not be read, is refused; one from a platform that
// cannot tell is let through (the socket's modes guard it); a known uid
// is held to the peer rule.
func TestPeerCredentialsAreChecked(t *testing.T) {
	b := &controltest.Backend{}
	s := server.New(b, b, b, b, zaptest.NewLogger(t))
	server.SetAllowPeer(s, func(uid int) bool { return uid == 1000 })
	refused := func(msg string) string {
		e, _ := json.Marshal(control.Error{Error: msg, Code: control.CodeForbidden})
		return string(e)
	}
	tests := []struct {
		name   string
		serve  func(w http.ResponseWriter, r *http.Request)
		status int
		body   string
	}{
		{name: "a connection without credentials",
			serve:  func(w http.ResponseWriter, r *http.Request) { server.ServeWithoutPeer(s, w, r) },
			status: 403, body: refused("connection without peer credentials")},
		{name: "credentials that could not be read",
			serve: func(w http.ResponseWriter, r *http.Request) {
				server.ServeAs(s, w, r, 1000, 7, true, errors.New("EBADF"))
			},
			status: 403, body: refused("cannot read the credentials of the connecting process: EBADF")},
		{name: "another user",
			serve:  func(w http.ResponseWriter, r *http.Request) { server.ServeAs(s, w, r, 1234, 7, true, nil) },
			status: 403, body: refused(fmt.Sprintf("uid 1234 may not control this daemon, which runs as uid %d", os.Geteuid()))},
		{name: "a user the rule allows",
			serve:  func(w http.ResponseWriter, r *http.Request) { server.ServeAs(s, w, r, 1000, 7, true, nil) },
			status: 200, body: `{"ok":true}`},
		{name: "a platform that cannot tell",
			serve:  func(w http.ResponseWriter, r *http.Request) { server.ServeAs(s, w, r, 0, 0, false, nil) },
			status: 200, body: `{"ok":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(b.Calls())
			w := httptest.NewRecorder()
			tt.serve(w, httptest.NewRequest("POST", "/v1/pause", nil))
			if w.Code != tt.status || strings.TrimSpace(w.Body.String()) != tt.body {
				t.Errorf("POST /v1/pause = %d %s, want %d %s", w.Code, w.Body, tt.status, tt.body)
			}
			if got := len(b.Calls()) - before; got != map[bool]int{true: 1, false: 0}[tt.status == 200] {
				t.Errorf("%d calls reached the backend", got)
			}
		})
	}
}

// everyPIDIsARun says every process is a run's: only a pid the platform
// gave may be held against a request.
type everyPIDIsARun struct {
	controltest.Backend
	asked []int
}

func (b *everyPIDIsARun) IsRunProcess(pid int) bool { b.asked = append(b.asked, pid); return true }

// A pid of 0 is a platform that does not say (BSD, or a peer in another
// pid namespace): the backend is not asked about it, and the request is a
// person's unless it carries a token.
func TestPeopleOnlyAsksAboutRealPIDs(t *testing.T) {
	b := &everyPIDIsARun{}
	s := server.New(b, b, b, b, zaptest.NewLogger(t))
	self := os.Geteuid()
	if a := call(s, "POST", "/v1/stop", "", self, 0, true, nil); a.status != 200 {
		t.Errorf("stop from pid 0 = %d %s, want 200", a.status, a.body)
	}
	if a := call(s, "POST", "/v1/stop", "", self, 4242, true, nil); a.status != 403 || !strings.Contains(a.body, "process 4242 belongs to an agent's run") {
		t.Errorf("stop from a run's pid = %d %s, want 403 naming the process", a.status, a.body)
	}
	if !slices.Equal(b.asked, []int{4242}) {
		t.Errorf("the backend was asked about %v, want [4242]", b.asked)
	}
	if got := b.Calls(); len(got) != 1 || got[0].Method != "Stop" {
		t.Errorf("backend calls %+v, want the one Stop", got)
	}
}

// The request log: every request at debug level, a failure of the daemon
// (5xx) at warn level with its error; the status is the one the client
// got, the first written.
func TestRequestLog(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	b := &controltest.Backend{}
	s := server.New(b, b, b, b, zap.New(core))
	s.Handle("GET /v1/late-status", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "body first\n")
		w.WriteHeader(http.StatusInternalServerError) // too late: the client got 200
	}))
	s.Handle("GET /v1/twice", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusInternalServerError) // superfluous
	}))
	s.Handle("GET /v1/flushed", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		w.WriteHeader(http.StatusInternalServerError) // too late: flushed as 200
	}))
	self := os.Geteuid()
	tests := []struct {
		name, method, path string
		fail               error // the backend's Retry error
		status             int
		level              zapcore.Level
		err                string // the logged error, "" for none
	}{
		{name: "an action", method: "POST", path: "/v1/features/F-1/retry", status: 200, level: zap.DebugLevel},
		{name: "the backend refuses", method: "POST", path: "/v1/features/F-1/retry", fail: &control.APIError{HTTPStatus: 409, Code: "c", Message: "m"},
			status: 409, level: zap.DebugLevel, err: "m"},
		{name: "the backend fails", method: "POST", path: "/v1/features/F-1/retry", fail: errors.New("disk full"),
			status: 500, level: zap.WarnLevel, err: "disk full"},
		{name: "an API error of status 500", method: "POST", path: "/v1/features/F-1/retry", fail: &control.APIError{HTTPStatus: 500, Code: "c", Message: "m"},
			status: 500, level: zap.WarnLevel, err: "m"},
		{name: "no such route", method: "GET", path: "/v1/nope", status: 404, level: zap.DebugLevel, err: "no such endpoint: GET /v1/nope (is the daemon older than this client?)"},
		{name: "a status written after the body", method: "GET", path: "/v1/late-status", status: 200, level: zap.DebugLevel},
		{name: "a status written twice", method: "GET", path: "/v1/twice", status: 202, level: zap.DebugLevel},
		{name: "a status written after a flush", method: "GET", path: "/v1/flushed", status: 200, level: zap.DebugLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.Fail("Retry", tt.fail)
			logs.TakeAll()
			a := call(s, tt.method, tt.path, "", self, 1, true, nil)
			if a.status != tt.status {
				t.Errorf("status %d, want %d", a.status, tt.status)
			}
			entries := logs.TakeAll()
			if len(entries) != 1 {
				t.Fatalf("log %+v, want one entry", entries)
			}
			e := entries[0]
			fields := e.ContextMap()
			wantMsg := map[zapcore.Level]string{zap.DebugLevel: "control request", zap.WarnLevel: "control request failed"}[tt.level]
			if e.Level != tt.level || e.Message != wantMsg || fields["status"] != int64(tt.status) || fields["method"] != tt.method || fields["path"] != tt.path {
				t.Errorf("log entry %s %q %v, want %s %q with status %d", e.Level, e.Message, fields, tt.level, wantMsg, tt.status)
			}
			if got, _ := fields["error"].(string); got != tt.err {
				t.Errorf("logged error %q, want %q", got, tt.err)
			}
		})
	}
}

// A handler that flushes reaches the client before it returns: the
// request log's writer passes Flush through, for streams.
func TestFlushReachesTheClient(t *testing.T) {
	sock := socketIn(t)
	release := make(chan struct{})
	serve(t, sock, &controltest.Backend{}, func(s *server.Server) {
		s.Handle("GET /v1/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			io.WriteString(w, "second\n")
		}))
	})
	defer close(release)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://ctxgraphd/v1/stream", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "first\n" {
			t.Errorf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the flushed line did not reach the client while the handler ran")
	}
}

// ReadJSON: an empty body leaves the value as it is, a body up to the
// bound is read, one past it is 413, and what does not decode or cannot
// be read is 400.
func TestReadJSON(t *testing.T) {
	note := `{"note":"` + strings.Repeat("n", 4<<20-len(`{"note":""}`)) + `"}` // exactly the bound
	tests := []struct {
		name   string
		body   io.Reader
		want   string // the note after reading
		status int    // 0: no error
		msg    string // the start of the error's message
	}{
		{name: "empty", body: strings.NewReader(""), want: "as before"},
		{name: "a note", body: strings.NewReader(`{"note":"n"}`), want: "n"},
		{name: "exactly the bound", body: strings.NewReader(note), want: note[9 : len(note)-2]},
		{name: "past the bound", body: strings.NewReader(note + " "), status: 413, msg: "request body larger than 4194304 bytes"},
		{name: "not JSON", body: strings.NewReader(`{"note":`), status: 400, msg: "request body: "},
		{name: "a body that cannot be read", body: iotest.ErrReader(errors.New("connection reset")), status: 400, msg: "reading the request body: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := control.UnblockRequest{Note: "as before"}
			err := server.ReadJSON(httptest.NewRequest("POST", "/", tt.body), &req)
			if tt.status == 0 {
				if err != nil || req.Note != tt.want {
					t.Errorf("ReadJSON = %v, note %.20q; want %.20q", err, req.Note, tt.want)
				}
				return
			}
			var ae *control.APIError
			if !errors.As(err, &ae) || ae.HTTPStatus != tt.status || ae.Code != control.CodeBadRequest || !strings.HasPrefix(ae.Message, tt.msg) {
				t.Errorf("ReadJSON = %v, want a %d bad_request saying %q", err, tt.status, tt.msg)
			}
		})
	}
}

// WriteError keeps an APIError's status when it is an error status (4xx,
// 5xx) and its code, naming the code by the status when it has none; a
// request abandoned by a cancellation or a deadline is a 503; anything
// else is a 500 with the error's text. Every error answer is JSON that a
// browser may not sniff into something else.
func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"a 400", &control.APIError{HTTPStatus: 400, Code: "c", Message: "m"}, 400, "c", "m"},
		{"a 599", &control.APIError{HTTPStatus: 599, Code: "c", Message: "m"}, 599, "c", "m"},
		{"a 399 is no error status", &control.APIError{HTTPStatus: 399, Code: "c", Message: "m"}, 500, "c", "m"},
		{"a 600 is no status", &control.APIError{HTTPStatus: 600, Code: "c", Message: "m"}, 500, "c", "m"},
		{"no code", &control.APIError{HTTPStatus: 409, Message: "m"}, 409, control.CodeConflict, "m"},
		{"no code, no status", &control.APIError{Message: "m"}, 500, control.CodeInternal, "m"},
		{"cancelled", fmt.Errorf("waiting for the loop: %w", context.Canceled), 503, control.CodeUnavailable,
			"the request was abandoned before the daemon acted on it (waiting for the loop: context canceled); the daemon may be shutting down"},
		{"past its deadline", context.DeadlineExceeded, 503, control.CodeUnavailable,
			"the request was abandoned before the daemon acted on it (context deadline exceeded); the daemon may be shutting down"},
		{"anything else", errors.New("store: disk full"), 500, control.CodeInternal, "store: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			server.WriteError(w, tt.err)
			want, _ := json.Marshal(control.Error{Error: tt.msg, Code: tt.code})
			if w.Code != tt.status || w.Body.String() != string(want)+"\n" {
				t.Errorf("answer %d %q, want %d %s", w.Code, w.Body, tt.status, want)
			}
			if ct, nosniff := w.Header().Get("Content-Type"), w.Header().Get("X-Content-Type-Options"); ct != "application/json" || nosniff != "nosniff" {
				t.Errorf("headers %v", w.Header())
			}
		})
	}
}

// An answer that cannot be encoded is a 500 that says so, not a broken
// 200.
func TestWriteJSONOfWhatCannotBeEncoded(t *testing.T) {
	w := httptest.NewRecorder()
	server.WriteJSON(w, http.StatusOK, control.Status{CostUSD: math.Inf(1)})
	var e control.Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != 500 || e.Code != control.CodeInternal || !strings.HasPrefix(e.Error, "encoding the answer: ") {
		t.Errorf("answer %d %s, want a 500 saying the answer could not be encoded", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	server.WriteJSON(w, http.StatusCreated, map[string]int{"n": 1})
	if w.Code != 201 || w.Body.String() != "{\"n\":1}\n" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("answer %d %q %v", w.Code, w.Body, w.Header())
	}
}

// A connection the kernel cannot vouch for (not a Unix socket) is refused
// whatever it asks.
func TestServeRefusesConnectionsThatAreNotUnix(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no TCP loopback: %v", err)
	}
	b := &controltest.Backend{}
	srv := server.New(b, b, b, b, zaptest.NewLogger(t))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Shutdown(context.Background())
		<-served
	}()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + ln.Addr().String() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), "cannot read the credentials of the connecting process: not a Unix socket connection") {
		t.Errorf("GET /v1/status over TCP = %d %s, want 403", resp.StatusCode, body)
	}
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("a refused request reached the backend: %+v", calls)
	}
}

// Serve reports a listener that fails; only Shutdown ends it with nil.
func TestServeReportsAFailedListener(t *testing.T) {
	ln, err := server.Listen(socketIn(t))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := newServer(nil).Serve(ln); err == nil {
		t.Error("Serve on a closed listener = nil, want its error")
	}
}

// A socket directory that belongs to another user is refused: its owner
// could swap the socket for their own.
func TestListenRefusesAnotherUsersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a directory another user's takes root")
	}
	dir := filepath.Join(shortDir(t), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	ln, err := server.Listen(filepath.Join(dir, "d.sock"))
	if err == nil {
		ln.Close()
		t.Fatal("Listen in another user's directory succeeded")
	}
	if !strings.Contains(err.Error(), "belongs to uid 4242") {
		t.Errorf("Listen = %v, want it to name the owner", err)
	}
}

// A socket that neither answers nor refuses (its daemon alive but stuck)
// is left alone: Listen fails and says so.
func TestListenLeavesASocketItCannotCheck(t *testing.T) {
	sock := filepath.Join(shortDir(t), "d.sock")
	// A listener with a backlog of one that never accepts: once one
	// connection waits, the next is neither accepted nor refused.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	var waiting []net.Conn
	defer func() {
		for _, c := range waiting {
			c.Close()
		}
	}()
	for range 8 {
		c, err := net.DialTimeout("unix", sock, 100*time.Millisecond)
		if err != nil {
			break
		}
		waiting = append(waiting, c)
	}
	if _, err := net.DialTimeout("unix", sock, 100*time.Millisecond); err == nil {
		t.Skip("the kernel accepts any number of waiting connections here")
	}
	ln, err := server.Listen(sock)
	if err == nil {
		ln.Close()
		t.Fatal("Listen over a socket it cannot check succeeded")
	}
	if !strings.Contains(err.Error(), "exists but cannot be checked") || errors.Is(err, control.ErrDaemonRunning) {
		t.Errorf("Listen = %v, want it to say the socket cannot be checked", err)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the socket after Listen: %v, want it left in place", err)
	}
}

// What keeps Listen from making its socket is an error: a socket
// directory that cannot be made, a path the kernel cannot bind.
func TestListenFailures(t *testing.T) {
	base := shortDir(t)
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, sock := range map[string]string{
		"a file where the directory goes": filepath.Join(base, "file", "d.sock"),
		"a path too long for sun_path":    filepath.Join(base, strings.Repeat("s", 200)+".sock"),
	} {
		if ln, err := server.Listen(sock); err == nil {
			ln.Close()
			t.Errorf("%s: Listen succeeded", name)
		} else if !strings.Contains(err.Error(), filepath.Dir(sock)) {
			t.Errorf("%s: %v, want the path named", name, err)
		}
	}
}
