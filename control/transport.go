package control

// The Client speaks HTTP/1.1 on the socket itself rather than through
// net/http. The hook binary links this package and starts on every tool
// call of every agent; net/http's client brings TLS, HTTP/2, proxies and
// compression with it, whose initialisation and size were about a third of
// the hook's start-up (BenchmarkHook), for one request on a local socket.
// What is done here is what net/http's client did for these requests: one
// request per connection, the context bounding the whole exchange, no
// redirect followed, an answer's body framed by its Content-Length, in
// chunks, or by the end of the connection.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// answer is the daemon's answer to one request. Closing its body closes
// the connection.
type answer struct {
	status int
	reason string // the status line's text: "Not Found"
	body   io.ReadCloser
}

// roundTrip sends one request on a connection of its own and reads the
// answer's head. body is sent as JSON when it is not nil. ctx bounds the
// whole exchange, the answer's body included: when it ends, what is
// waiting fails with ctx's error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) (*answer, error) {
	if !validRequestPath(path) {
		return nil, fmt.Errorf("%s %q: not a request path", method, path)
	}
	if !validHeaderValue(c.RunToken) {
		return nil, fmt.Errorf("%s %s: the run token (%s) holds a control character", method, path, RunTokenEnv)
	}
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, contextError(ctx, err)
	}
	// A deadline in the past fails every read and write waiting on the
	// connection, which is how net/http gives up on a context too.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*answer, error) {
		stop()
		conn.Close()
		return nil, contextError(ctx, err)
	}

	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: ctxgraphd\r\nConnection: close\r\n", method, path)
	if c.RunToken != "" {
		fmt.Fprintf(&req, "%s: %s\r\n", RunTokenHeader, c.RunToken)
	}
	switch {
	case body != nil:
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	case method != "GET":
		req.WriteString("Content-Length: 0\r\n")
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		return fail(err)
	}

	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	var a answer
	var head textproto.MIMEHeader
	for {
		line, err := tp.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the connection closed before an answer")
			}
			return fail(err)
		}
		if a.status, a.reason, err = parseStatusLine(line); err != nil {
			return fail(err)
		}
		if head, err = tp.ReadMIMEHeader(); err != nil {
			return fail(fmt.Errorf("reading the answer's header: %w", err))
		}
		// 1xx answers are interim; the answer follows them.
		if a.status >= 200 || a.status == 101 {
			break
		}
	}
	var r io.Reader
	switch {
	case a.status == 204 || a.status == 304:
		r = strings.NewReader("")
	case strings.EqualFold(lastToken(head.Get("Transfer-Encoding")), "chunked"):
		r = &chunkedReader{r: br}
	case head.Get("Content-Length") != "":
		n, err := strconv.ParseInt(strings.TrimSpace(head.Get("Content-Length")), 10, 64)
		if err != nil || n < 0 {
			return fail(fmt.Errorf("the answer's Content-Length %q is not a length", head.Get("Content-Length")))
		}
		r = io.LimitReader(br, n)
	default:
		r = br // to the end of the connection
	}
	a.body = &answerBody{r: r, ctx: ctx, close: func() { stop(); conn.Close() }}
	return &a, nil
}

// contextError is ctx's own error once it has ended: whatever failed
// failed because of it (a dial says "operation was canceled", a read "i/o
// timeout").
func contextError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// answerBody is an answer's body on its connection.
type answerBody struct {
	r     io.Reader
	ctx   context.Context
	close func()
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = contextError(b.ctx, err)
	}
	return n, err
}

func (b *answerBody) Close() error {
	b.close()
	return nil
}

// parseStatusLine reads "HTTP/1.1 404 Not Found".
func parseStatusLine(line string) (status int, reason string, err error) {
	proto, rest, _ := strings.Cut(line, " ")
	code, reason, _ := strings.Cut(rest, " ")
	status, err = strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || err != nil || status < 100 {
		return 0, "", fmt.Errorf("the answer's status line %q is not HTTP/1", line)
	}
	return status, reason, nil
}

// lastToken is the last of a header's comma-separated values: the coding a
// body was last given.
func lastToken(v string) string {
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// validRequestPath reports whether path can go on a request line as it
// is: the client's paths are built from escaped parts.
func validRequestPath(path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	for i := 0; i < len(path); i++ {
		if path[i] <= ' ' || path[i] == 0x7f {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v can be a header's value: no control
// characters but tab (RFC 9110 5.5), so that no value ends its header line.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// chunkedReader reads a body sent in chunks (RFC 9112 7.1): a size in hex
// on a line of its own (perhaps with extensions after ";"), that many
// bytes and a line end; a size of 0 ends the body, after trailer lines up
// to an empty one.
type chunkedReader struct {
	r    *bufio.Reader
	left int64 // of the chunk being read
	err  error
}

// maxChunkLine bounds a chunk's size line.
const maxChunkLine = 4096

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 {
		c.err = c.nextChunk()
	}
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	switch {
	case err == io.EOF:
		c.err = io.ErrUnexpectedEOF
	case err != nil:
		c.err = err
	case c.left == 0:
		c.err = c.lineEnd()
	}
	if n > 0 {
		return n, nil
	}
	return 0, c.err
}

// nextChunk reads a chunk's size line; at the last chunk it reads the
// trailer and returns io.EOF.
func (c *chunkedReader) nextChunk() error {
	line, err := c.line()
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("the answer's chunk size %q is not a size", line)
	}
	if n > 0 {
		c.left = n
		return nil
	}
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		if line == "" {
			return io.EOF
		}
	}
}

// lineEnd reads the line end after a chunk's data.
func (c *chunkedReader) lineEnd() error {
	line, err := c.line()
	if err == nil && line != "" {
		err = errors.New("the answer's chunk is longer than its size")
	}
	return err
}

// line reads one line, without its end.
func (c *chunkedReader) line() (string, error) {
	line, err := c.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxChunkLine:
		return "", errors.New("the answer's chunk line is too long")
	case err == io.EOF:
		return "", io.ErrUnexpectedEOF
	case err != nil:
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}
