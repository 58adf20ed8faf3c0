package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// DefaultTimeout bounds one request of a Client when its context has no
	// deadline. Status answers from a snapshot at once; an action waits
	// for the daemon's loop to take it, which can take a moment while the
	// loop is busy.
	DefaultTimeout = 30 * time.Second

	// dialTimeout bounds connecting: a live daemon accepts at once.
	dialTimeout = 2 * time.Second

	// maxErrorBody bounds how much of an error answer is read.
	maxErrorBody = 64 << 10
)

// Client talks to a daemon over its control socket: a method per route of
// the server's Loop, Gates and Records; errors the daemon answers with are *APIError, and ErrNoDaemon
// (wrapped) means nothing listens on the socket. Each request has a
// connection of its own (transport.go): a connection to a local socket
// costs next to nothing, and a client that keeps none open leaves nothing
// behind for its users (the CLI, hooks, tests under goleak) to clean up.
type Client struct {
	socket string

	// Timeout bounds each request whose context has no deadline of its
	// own; zero means no bound. NewClient sets DefaultTimeout.
	Timeout time.Duration

	// RunToken is presented with every request (RunTokenHeader). NewClient
	// takes it from RunTokenEnv: a client started inside an agent's run
	// says so, whoever started it, so that the daemon can refuse it what is
	// for people.
	RunToken string
}

// NewClient returns a client for the daemon listening on socketPath. It
// does not connect until a method is called.
func NewClient(socketPath string) *Client {
	return &Client{
		socket:   socketPath,
		Timeout:  DefaultTimeout,
		RunToken: os.Getenv(RunTokenEnv),
	}
}

// Socket returns the path of the socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.get(ctx, "/v1/status", &st)
	return st, err
}

// Features returns the feature list as the daemon sees it.
func (c *Client) Features(ctx context.Context) ([]Feature, error) {
	var fs []Feature
	err := c.get(ctx, "/v1/features", &fs)
	return fs, err
}

// Report returns what happened in the project, as the daemon's store holds
// it (GET /v1/report).
func (c *Client) Report(ctx context.Context) (Report, error) {
	var r Report
	err := c.get(ctx, "/v1/report", &r)
	return r, err
}

// Patterns returns what happened at least atLeast times (GET
// /v1/patterns).
func (c *Client) Patterns(ctx context.Context, atLeast int) ([]Pattern, error) {
	ps := []Pattern{}
	err := c.get(ctx, "/v1/patterns?min="+strconv.Itoa(atLeast), &ps)
	return ps, err
}

// Watch follows the daemon's status: fn gets it at once, then at each
// change, until ctx ends (nil), fn fails (its error), or the daemon goes
// away (ErrDaemonGone).
func (c *Client) Watch(ctx context.Context, fn func(Status) error) error {
	resp, err := c.roundTrip(ctx, "GET", "/v1/watch", nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.transportError(ctx, err)
	}
	defer resp.body.Close()
	if resp.status != statusOK {
		return decodeError(resp)
	}
	dec := json.NewDecoder(resp.body)
	for {
		var st Status
		if err := dec.Decode(&st); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: %v", ErrDaemonGone, err)
		}
		if err := fn(st); err != nil {
			return err
		}
	}
}

// ErrDaemonGone is returned by Watch when the daemon's stream ended: it
// stopped, or was stopped.
var ErrDaemonGone = errors.New("the daemon went away")

// Pause asks the daemon to start no new run.
func (c *Client) Pause(ctx context.Context) error { return c.post(ctx, "/v1/pause", nil, nil) }

// Resume asks a paused, waiting or stopped daemon to go on.
func (c *Client) Resume(ctx context.Context) error { return c.post(ctx, "/v1/resume", nil, nil) }

// Approve approves the plan a daemon with limits.approve_plan waits on,
// and lets it go on.
func (c *Client) Approve(ctx context.Context) error { return c.post(ctx, "/v1/approve", nil, nil) }

// Stop asks the daemon to stop the session and wait for a person.
func (c *Client) Stop(ctx context.Context) error { return c.post(ctx, "/v1/stop", nil, nil) }

// Retry asks the daemon to start the feature's attempts over.
func (c *Client) Retry(ctx context.Context, id string) error {
	return c.featurePost(ctx, id, "retry", nil)
}

// Unblock asks the daemon to reopen a blocked feature, with an optional
// note for its next coding agent.
func (c *Client) Unblock(ctx context.Context, id, note string) error {
	return c.featurePost(ctx, id, "unblock", UnblockRequest{Note: note})
}

// Skip asks the daemon to set the feature aside.
func (c *Client) Skip(ctx context.Context, id string) error {
	return c.featurePost(ctx, id, "skip", nil)
}

func (c *Client) featurePost(ctx context.Context, id, verb string, in any) error {
	if id == "" {
		return &APIError{HTTPStatus: statusBadRequest, Code: CodeBadRequest, Message: "a feature id is needed, for example F-001"}
	}
	return c.post(ctx, "/v1/features/"+url.PathEscape(id)+"/"+verb, in, nil)
}

// get decodes the answer to GET path into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, "GET", path, nil, out)
}

// post sends in (unless nil) as JSON to path and decodes the answer into
// out (unless nil).
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, "POST", path, in, out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if _, ok := ctx.Deadline(); !ok && c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		body = b
	}
	resp, err := c.roundTrip(ctx, method, path, body)
	if err != nil {
		return c.transportError(ctx, err)
	}
	defer resp.body.Close()
	if resp.status < 200 || resp.status > 299 {
		return decodeError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.body).Decode(out); err != nil {
		return fmt.Errorf("control socket %s: %s %s: decoding the answer: %w", c.socket, method, path, err)
	}
	return nil
}

// transportError explains a request that got no answer.
func (c *Client) transportError(ctx context.Context, err error) error {
	// ENOENT: no socket file (or no directory). ECONNREFUSED: a file nobody
	// listens on, left by a daemon that died.
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ENOENT || errno == syscall.ECONNREFUSED) {
		return fmt.Errorf("%w at %s: %w", ErrNoDaemon, c.socket, errno)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("control socket %s: the daemon did not answer in time; it may be busy or stuck (see its log), and an action may still take effect: %w", c.socket, context.DeadlineExceeded)
	}
	return fmt.Errorf("control socket %s: %w", c.socket, err)
}

// decodeError turns an error answer into an *APIError. An answer without
// an Error body (not from our server, or from a proxy) keeps its text.
func decodeError(resp *answer) error {
	b, _ := io.ReadAll(io.LimitReader(resp.body, maxErrorBody))
	var e Error
	if json.Unmarshal(b, &e) == nil && (e.Error != "" || e.Code != "") {
		return &APIError{HTTPStatus: resp.status, Code: e.Code, Message: e.Error}
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = resp.reason
	}
	return &APIError{
		HTTPStatus: resp.status,
		Code:       CodeForStatus(resp.status),
		Message:    fmt.Sprintf("the daemon answered %d: %s", resp.status, msg),
	}
}
