// Package server is the daemon's side of the control socket: the HTTP/JSON
// server that serves the loop (control.Loop), the gates (control.Gates),
// the records (control.Records) and the workers (control.Fleet), and
// Listen, which owns the socket file.
//
// It is apart from package control, which holds the wire types and the
// client, so that the ctl, hook and mcp paths link no server code and no
// logging library: the hook starts on every tool call of every agent.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// maxRequestBody bounds what a handler reads from a request: bodies here are
// a note or a hook payload, never bulk data.
const maxRequestBody = 4 << 20

var errNotUnix = errors.New("not a Unix socket connection")

// Server serves the daemon on the control socket.
type Server struct {
	loop    control.Loop
	gates   control.Gates
	records control.Records
	fleet   control.Fleet
	log     *zap.Logger
	mux     *http.ServeMux
	http    *http.Server

	// ctx is the base context of every request. Shutdown cancels it, so
	// that requests that would outlive the daemon (an action queued behind
	// a busy loop, a stream) end at once instead of holding Shutdown up.
	ctx    context.Context
	cancel context.CancelFunc

	// allowPeer says whether a connecting uid may use the API.
	allowPeer func(uid int) bool

	// patterns are the routes registered, in order, for Routes.
	patterns []string
}

// New returns a server for the loop's commands, the gates' answers to
// hooks, the project's records and its workers: every route is served,
// whoever serves them. A nil log discards the log.
func New(loop control.Loop, gates control.Gates, records control.Records, fleet control.Fleet, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		loop:      loop,
		gates:     gates,
		records:   records,
		fleet:     fleet,
		log:       log,
		mux:       http.NewServeMux(),
		ctx:       ctx,
		cancel:    cancel,
		allowPeer: sameUserOrRoot(os.Geteuid()),
	}
	errLog, _ := zap.NewStdLogAt(log, zap.WarnLevel)
	s.http = &http.Server{
		Handler: http.HandlerFunc(s.serveHTTP),
		// No WriteTimeout: streams (watch) stay open as long as the client
		// wants. A client that never finishes its headers is dropped.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       ConnContext,
		ErrorLog:          errLog,
	}
	s.loopRoutes()
	s.gateRoutes()
	s.Handle("GET /v1/watch", s.watch())
	s.Handle("POST /v1/traces", Endpoint(func(r *http.Request) (control.Trace, error) {
		var req control.TraceRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.Trace{}, err
		}
		return s.records.StoreTrace(r.Context(), r.Header.Get(control.RunTokenHeader), req)
	}))
	// Lessons shape what every later agent reads: a person's to give.
	s.Handle("POST /v1/lessons", s.peopleOnly(Endpoint(func(r *http.Request) (control.Trace, error) {
		var req control.LessonRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.Trace{}, err
		}
		return s.records.AddLesson(r.Context(), req.Text)
	})))
	s.Handle("POST /v1/lessons/{id}/promote", s.peopleOnly(Endpoint(func(r *http.Request) (control.Trace, error) {
		return s.loop.PromoteLesson(r.Context(), r.PathValue("id"))
	})))
	s.Handle("GET /v1/patterns", Endpoint(func(r *http.Request) ([]control.Pattern, error) {
		atLeast := 2
		if v := r.URL.Query().Get("min"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: "min: want a whole number >= 1"}
			}
			atLeast = n
		}
		ps, err := s.records.Patterns(r.Context(), atLeast)
		if ps == nil && err == nil {
			ps = []control.Pattern{}
		}
		return ps, err
	}))
	s.guardRoutes()
	s.pruneRoutes()
	s.fleetRoutes()
	s.Handle("GET /v1/report", Endpoint(func(r *http.Request) (control.Report, error) { return s.records.Report(r.Context()) }))
	return s
}

// loopRoutes registers the session's routes.
func (s *Server) loopRoutes() {
	s.Handle("GET /v1/status", Endpoint(func(r *http.Request) (control.Status, error) {
		return s.loop.Status(r.Context())
	}))
	s.Handle("GET /v1/features", Endpoint(func(r *http.Request) ([]control.Feature, error) {
		fs, err := s.loop.Features(r.Context())
		if fs == nil && err == nil {
			fs = []control.Feature{} // an array for scripts, even before the initializer ran
		}
		return fs, err
	}))
	// What changes the session is for people: an agent that reached the
	// socket (it cannot, in the sandbox) must not pause the daemon to
	// edit its own verdict, or skip another feature.
	s.Handle("POST /v1/pause", s.peopleOnly(action(s.loop.Pause)))
	s.Handle("POST /v1/resume", s.peopleOnly(action(s.loop.Resume)))
	s.Handle("POST /v1/approve", s.peopleOnly(action(s.loop.Approve)))
	s.Handle("POST /v1/stop", s.peopleOnly(action(s.loop.Stop)))
	s.Handle("POST /v1/features/{id}/retry", s.peopleOnly(featureAction(s.loop.Retry)))
	s.Handle("POST /v1/features/{id}/skip", s.peopleOnly(featureAction(s.loop.Skip)))
	s.Handle("POST /v1/features/{id}/unblock", s.peopleOnly(Endpoint(func(r *http.Request) (control.OK, error) {
		var req control.UnblockRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.OK{}, err
		}
		return done(s.loop.Unblock(r.Context(), r.PathValue("id"), req.Note))
	})))
}

// peopleOnly refuses a request that carries a run's token, or that comes
// from a process of a run: defense in depth behind the sandbox, which keeps
// agents off the socket in the first place.
func (s *Server) peopleOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(control.RunTokenHeader) != "" {
			WriteError(w, &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden,
				Message: "this request carries an agent run's credentials; what changes the session, the guards, the lessons or the workers is for people"})
			return
		}
		if p, _ := r.Context().Value(peerKey{}).(peer); p.pid > 0 && s.gates.IsRunProcess(p.pid) {
			WriteError(w, &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden,
				Message: fmt.Sprintf("process %d belongs to an agent's run; what changes the session, the guards, the lessons or the workers is for people", p.pid)})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Handle registers h for pattern (a Go 1.22 ServeMux pattern such as
// "GET /v1/traces/{id}") beside the built-in routes. Requests reach h only
// after the server's checks (Origin/Referer, peer credentials). Register
// before Serve; like ServeMux.Handle it panics on a conflicting pattern.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.patterns = append(s.patterns, pattern)
}

// Routes returns the patterns the server answers ("GET /v1/status", …), in
// the order they were registered: its own, and what Handle added. The documentation of the control API is held to it.
func (s *Server) Routes() []string {
	return slices.Clone(s.patterns)
}

// Serve answers requests on l until Shutdown, then returns nil. l is
// normally the listener of Listen, whose socket file is removed when the
// server closes it.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server: it closes the listener (which removes the
// socket file Listen created), cancels the requests in flight and waits for
// their handlers to return, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancel()
	return s.http.Shutdown(ctx)
}

// serveHTTP refuses what must not reach a handler, then dispatches.
func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &logWriter{ResponseWriter: rw, status: http.StatusOK}
	defer func() {
		fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Int("status", w.status), zap.Duration("took", time.Since(start))}
		if w.err != nil {
			fields = append(fields, zap.Error(w.err))
		}
		if w.status >= 500 {
			s.log.Warn("control request failed", fields...)
		} else {
			s.log.Debug("control request", fields...)
		}
	}()

	if err := checkRequest(r, s.allowPeer); err != nil {
		WriteError(w, err)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers a request no pattern matches with an Error body, keeping
// the mux's status (404, or 405 with its Allow header).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, r)
	e := &control.APIError{HTTPStatus: rec.status, Code: control.CodeForStatus(rec.status)}
	switch rec.status {
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		e.Message = fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, allow)
	case http.StatusNotFound:
		e.Message = fmt.Sprintf("no such endpoint: %s %s (is the daemon older than this client?)", r.Method, r.URL.Path)
	default:
		e.Message = fmt.Sprintf("%s %s: %s", r.Method, r.URL.Path, http.StatusText(rec.status))
	}
	WriteError(w, e)
}

// CheckRequest refuses what no socket of the daemon's serves, before any
// route: a request of a web page, and one of another user (of the
// process's own user and root alone; see checkPeer). The connection's
// server must read its peers with ConnContext. A worker's hook relay
// holds its socket to this, as the daemon holds its own.
func CheckRequest(r *http.Request) error {
	return checkRequest(r, sameUserOrRoot(os.Geteuid()))
}

// checkRequest is CheckRequest with allowPeer as the rule of who may ask.
func checkRequest(r *http.Request, allowPeer func(uid int) bool) error {
	// A web page can make a browser send requests to local HTTP servers; it
	// cannot reach a Unix socket today, but a proxy or a future browser
	// might. Nothing legitimate here sends these headers.
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		return &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden,
			Message: "requests with an Origin or Referer header are refused: the control socket is not for web pages"}
	}
	return checkPeer(r.Context(), allowPeer)
}

type peerKey struct{}

// peer is what ConnContext learned about the connecting process.
type peer struct {
	uid   int
	pid   int // 0 where the platform does not say
	known bool
	err   error
}

// ConnContext reads the peer credentials once per connection, when the
// kernel can still vouch for them, for checkPeer to use on each request:
// an http.Server's ConnContext on a Unix socket.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uid, pid, known, err := peerCred(c)
	return context.WithValue(ctx, peerKey{}, peer{uid: uid, pid: pid, known: known, err: err})
}

// checkPeer refuses other users. The socket's modes already keep them out;
// this holds even when the socket sits in a shared directory or its mode
// was loosened by hand.
func checkPeer(ctx context.Context, allowPeer func(uid int) bool) error {
	p, ok := ctx.Value(peerKey{}).(peer)
	switch {
	case !ok:
		return &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden, Message: "connection without peer credentials"}
	case p.err != nil:
		return &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden, Message: "cannot read the credentials of the connecting process: " + p.err.Error()}
	case p.known && !allowPeer(p.uid):
		return &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeForbidden,
			Message: fmt.Sprintf("uid %d may not control this daemon, which runs as uid %d", p.uid, os.Geteuid())}
	}
	return nil
}

// sameUserOrRoot allows the daemon's own user, and root, who could read the
// daemon's memory anyway.
func sameUserOrRoot(self int) func(uid int) bool {
	return func(uid int) bool { return uid == self || uid == 0 }
}

// Endpoint adapts fn into a handler that answers with fn's result as JSON
// (200), or with its error as an Error body (see WriteError). It makes a
// read route a one-liner:
//
//	s.Handle("GET /v1/traces", server.Endpoint(func(r *http.Request) ([]control.Trace, error) { … }))
func Endpoint[T any](fn func(r *http.Request) (T, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, v)
	})
}

// action adapts a call of the loop without arguments.
func action(fn func(context.Context) error) http.Handler {
	return Endpoint(func(r *http.Request) (control.OK, error) { return done(fn(r.Context())) })
}

// featureAction adapts a call of the loop on the feature named in the path.
func featureAction(fn func(context.Context, string) error) http.Handler {
	return Endpoint(func(r *http.Request) (control.OK, error) { return done(fn(r.Context(), r.PathValue("id"))) })
}

func done(err error) (control.OK, error) {
	if err != nil {
		return control.OK{}, err
	}
	return control.OK{OK: true}, nil
}

// ReadJSON decodes the request body into v. An empty body leaves v as it
// is, so that optional bodies stay optional. A body that does not decode is
// a 400 *APIError.
func ReadJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if len(body) > maxRequestBody {
		return &control.APIError{HTTPStatus: http.StatusRequestEntityTooLarge, Code: control.CodeBadRequest, Message: fmt.Sprintf("request body larger than %d bytes", maxRequestBody)}
	}
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: "request body: " + err.Error()}
	}
	return nil
}

// WriteJSON answers with v as JSON and the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, fmt.Errorf("encoding the answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// WriteError answers with err as an Error body. An *control.APIError keeps its
// status and code; a context error (the client went away, or the daemon is
// shutting down) is a 503; anything else is a 500 with the error's text.
func WriteError(w http.ResponseWriter, err error) {
	var ae *control.APIError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		ae = &control.APIError{HTTPStatus: http.StatusServiceUnavailable, Code: control.CodeUnavailable,
			Message: "the request was abandoned before the daemon acted on it (" + err.Error() + "); the daemon may be shutting down"}
	default:
		ae = &control.APIError{HTTPStatus: http.StatusInternalServerError, Code: control.CodeInternal, Message: err.Error()}
	}
	status := ae.HTTPStatus
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	code := ae.Code
	if code == "" {
		code = control.CodeForStatus(status)
	}
	if lw, ok := w.(*logWriter); ok {
		lw.err = err
	}
	b, _ := json.Marshal(control.Error{Error: ae.Error(), Code: code})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// logWriter records what the request log needs. It passes Flush and Unwrap
// through, so that streaming handlers and http.ResponseController work.
type logWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	err         error
}

func (w *logWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *logWriter) Flush() {
	w.wroteHeader = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusRecorder captures the status and headers of the mux's own 404 and
// 405 answers; their plain-text bodies are dropped.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(status int)      { r.status = status }

// watchInterval bounds how often a watcher is written to: a busy run's
// tool calls come faster than a person reads, and a status a second is
// enough for the elapsed time to tick.
const watchInterval = 250 * time.Millisecond

// watch streams the status as JSON lines (application/x-ndjson): one at
// once, then one after each change or each tick of a one-second ticker,
// every one of them followed by a pause of watchInterval. So two lines are
// never closer than watchInterval, and without changes a line comes at
// most a second and watchInterval (1.25 s) after the one before. It ends
// when the client goes or the server shuts down.
func (s *Server) watch() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			changed := s.loop.Changes() // before Status: a change in between is not missed
			st, err := s.loop.Status(r.Context())
			if err != nil {
				return
			}
			if enc.Encode(st) != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-changed:
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
			select {
			case <-time.After(watchInterval):
			case <-r.Context().Done():
				return
			}
		}
	})
}
