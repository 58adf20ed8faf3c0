package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/server"
	"github.com/ctxgraphd/ctxgraphd/hook"
)

// hookRoute is the one route of the control socket a run's hooks use, and
// the only one a Relay serves.
const hookRoute = "/v1/hook"

// RelayTimeout bounds a hook's question to the daemon over NATS. It is
// inside the hook's own bound (hook.DaemonTimeout), so that it is the
// relay that gives up and the hook, told at once, still has the time to
// decide alone.
const RelayTimeout = hook.DaemonTimeout - time.Second

// Relay is the worker's side of its runs' hooks. The hooks of a run on a
// worker are those of a local run (`ctxgraphd hook EVENT`, CTXGRAPH_SOCKET):
// they ask a Unix socket, which here is the relay's, and the relay asks
// the daemon over NATS on the worker's Hook subject, with the run's token
// as it came (HookCall). The daemon's answer, or its error, is given to
// the hook as the daemon's socket would give it. When the daemon cannot be
// reached (no responder, no answer in time, the connection closed), the
// relay closes the hook's connection without an answer: the hook then
// decides alone from the run's offline record and spools, as it does when
// a local daemon is down. An HTTP error would be the daemon's word, which
// the hook obeys.
type Relay struct {
	nc      *nats.Conn
	subject string
	timeout time.Duration

	ln     net.Listener
	http   *http.Server
	served chan struct{} // closed when Serve returned

	// ctx bounds every question in flight: Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup // the handlers running, which Close waits for
}

// ListenRelay serves the hook route on a Unix socket at socket (its
// directory made with mode 0700, the socket 0600, a stale file of a dead
// relay removed, as the daemon's own socket: server.Listen) and relays it
// to the daemon on subject, the worker's Hook subject, over nc. Close stops
// it.
func ListenRelay(socket string, nc *nats.Conn, subject string) (*Relay, error) {
	if nc == nil || subject == "" {
		return nil, errors.New("fleet: a hook relay needs the worker's NATS connection and its hook subject (Subjects.Worker(name).Hook)")
	}
	ln, err := server.Listen(socket)
	if err != nil {
		return nil, fmt.Errorf("fleet: hook relay: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{nc: nc, subject: subject, timeout: RelayTimeout, ln: ln, served: make(chan struct{}), ctx: ctx, cancel: cancel}
	r.http = &http.Server{
		Handler:           http.HandlerFunc(r.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       server.ConnContext, // who connects, for CheckRequest
	}
	go func() {
		defer close(r.served)
		r.http.Serve(ln) // returns when Close closes the server
	}()
	return r, nil
}

// Close stops the relay: it stops listening, removes the socket, ends the
// questions in flight (their hooks decide alone) and waits for them.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	err := r.http.Close() // closes the listener, which removes the socket
	<-r.served
	r.inFlight.Wait()
	return err
}

// serveHTTP answers the hook route and refuses any other with a 404, as
// the daemon's socket refuses a route it does not have.
func (r *Relay) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		hangUp(w)
		return
	}
	r.inFlight.Add(1)
	r.mu.Unlock()
	defer r.inFlight.Done()

	// The socket's modes keep other users out; this holds as the
	// daemon's socket holds, whatever the modes.
	if err := server.CheckRequest(req); err != nil {
		server.WriteError(w, err)
		return
	}
	if req.Method != http.MethodPost || req.URL.Path != hookRoute {
		server.WriteError(w, &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeForStatus(http.StatusNotFound),
			Message: fmt.Sprintf("no such endpoint: %s %s (a worker's hook relay serves only POST %s)", req.Method, req.URL.Path, hookRoute)})
		return
	}
	call := HookCall{Token: req.Header.Get(control.RunTokenHeader)}
	if err := server.ReadJSON(req, &call.Request); err != nil {
		server.WriteError(w, err)
		return
	}
	answer, err := r.ask(req.Context(), call)
	var apiErr *control.APIError
	switch {
	case errors.As(err, &apiErr):
		server.WriteError(w, apiErr)
	case err != nil:
		hangUp(w)
	case answer.Error != nil:
		server.WriteError(w, answer.Error)
	default:
		server.WriteJSON(w, http.StatusOK, answer.Response)
	}
}

// ask puts call to the daemon. An *control.APIError is an answer the
// relay gives itself, as the daemon's socket would; any other error means
// the daemon could not be reached.
func (r *Relay) ask(ctx context.Context, call HookCall) (HookAnswer, error) {
	data, err := json.Marshal(call)
	if err != nil {
		return HookAnswer{}, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: "request body: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	msg, err := r.nc.RequestWithContext(ctx, r.subject, data)
	if errors.Is(err, nats.ErrMaxPayload) {
		// Too large for the NATS server: the daemon's socket refuses a
		// body past its own bound so too, and the hook holds to it.
		return HookAnswer{}, &control.APIError{HTTPStatus: http.StatusRequestEntityTooLarge, Code: control.CodeBadRequest,
			Message: fmt.Sprintf("request body of %d bytes is larger than the NATS server takes (%d bytes, its max_payload)", len(data), r.nc.MaxPayload())}
	}
	if err != nil {
		return HookAnswer{}, err
	}
	var answer HookAnswer
	if err := json.Unmarshal(msg.Data, &answer); err != nil {
		// The daemon answered, with what the relay cannot read: the hook
		// is told so, and fails closed, rather than decide alone on a
		// question the daemon may have judged.
		return HookAnswer{}, &control.APIError{HTTPStatus: http.StatusBadGateway, Code: control.CodeInternal,
			Message: fmt.Sprintf("the daemon's answer on %s does not decode: %v", r.subject, err)}
	}
	return answer, nil
}

// hangUp closes the hook's connection without an answer: its client
// takes that as a daemon out of reach, and decides alone.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (never on a Unix socket's HTTP/1.1): a panic
		// with ErrAbortHandler is how net/http drops a connection.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
