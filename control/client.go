package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
// (wrapped) means nothing listens on the socket.
type Client struct {
	socket string
	hc     *http.Client

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
	d := &net.Dialer{Timeout: dialTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socketPath)
		},
		// A connection to a local socket costs next to nothing, and a
		// client that keeps none open leaves no goroutine behind for its
		// users (the CLI, hooks, tests under goleak) to clean up.
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return &Client{
		socket: socketPath,
		hc: &http.Client{
			Transport: tr,
			// The server never redirects; a redirect would come from its
			// mux cleaning a malformed path, and following it would turn a
			// POST into a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://ctxgraphd/v1/watch", nil)
	if err != nil {
		return err
	}
	if c.RunToken != "" {
		req.Header.Set(RunTokenHeader, c.RunToken)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp)
	}
	dec := json.NewDecoder(resp.Body)
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
		return &APIError{HTTPStatus: http.StatusBadRequest, Code: CodeBadRequest, Message: "a feature id is needed, for example F-001"}
	}
	return c.post(ctx, "/v1/features/"+url.PathEscape(id)+"/"+verb, in, nil)
}

// get decodes the answer to GET path into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// post sends in (unless nil) as JSON to path and decodes the answer into
// out (unless nil).
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPost, path, in, out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if _, ok := ctx.Deadline(); !ok && c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	// The host is never resolved (the transport dials the socket); it only
	// names the daemon in the Host header.
	req, err := http.NewRequestWithContext(ctx, method, "http://ctxgraphd"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.RunToken != "" {
		req.Header.Set(RunTokenHeader, c.RunToken)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
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
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e Error
	if json.Unmarshal(b, &e) == nil && (e.Error != "" || e.Code != "") {
		return &APIError{HTTPStatus: resp.StatusCode, Code: e.Code, Message: e.Error}
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{
		HTTPStatus: resp.StatusCode,
		Code:       CodeForStatus(resp.StatusCode),
		Message:    fmt.Sprintf("the daemon answered %d: %s", resp.StatusCode, msg),
	}
}
