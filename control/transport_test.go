package control

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawDaemon answers each connection on a fresh socket with answer, byte
// for byte, after reading the request's head, and returns the socket's
// path and the heads it read. It stands for any HTTP/1 server, not only
// net/http's.
func rawDaemon(t *testing.T, answer string) (string, <-chan string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	heads := make(chan string, 10)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			io.WriteString(conn, answer)
			conn.Close()
		}
	}()
	return sock, heads
}

// The answer's body is framed however an HTTP/1.1 server may frame it, and
// a malformed answer is an error that says what is wrong, never a body
// taken for what it is not.
func TestClientReadsEveryFraming(t *testing.T) {
	tests := []struct {
		name, answer string
		want         string // the Status's state; "" when an error is wanted
		wantErr      string
	}{
		{name: "content length", want: "code",
			answer: "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{\"state\":\"code\"}trailing garbage"},
		{name: "to the end of the connection", want: "code",
			answer: "HTTP/1.1 200 OK\r\n\r\n{\"state\":\"code\"}"},
		{name: "chunks, with an extension and a trailer", want: "code",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n{\"sta\r\nB\r\nte\":\"code\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"},
		{name: "an interim answer first", want: "code",
			answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{\"state\":\"code\"}"},
		{name: "a chunk cut short", wantErr: "unexpected EOF",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"state\":"},
		{name: "a chunk longer than its size", wantErr: "longer than its size",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"state\":\"code\"}\r\n0\r\n\r\n"},
		{name: "a chunk size that is no number", wantErr: "not a size",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"},
		{name: "a length that is no number", wantErr: "not a length",
			answer: "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n{}"},
		{name: "not HTTP", wantErr: "is not HTTP/1",
			answer: "SSH-2.0-OpenSSH_9.6\r\n\r\n"},
		{name: "no answer at all", wantErr: "closed before an answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := rawDaemon(t, tt.answer)
			st, err := NewClient(sock).Status(t.Context())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Status = %v", err)
			case tt.wantErr == "" && st.State != tt.want:
				t.Errorf("state %q, want %q", st.State, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Status = %+v, %v; want an error saying %q", st, err, tt.wantErr)
			}
		})
	}
}

// The request is the HTTP/1.1 net/http's client sent: the method, the
// path, the host, one request per connection, the token when there is one,
// a JSON body with its length, and a length of 0 for an action without a
// body.
func TestClientWritesHTTP11Requests(t *testing.T) {
	sock, heads := rawDaemon(t, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
	c := NewClient(sock)
	c.RunToken = "tok-1"
	if err := c.Unblock(t.Context(), "F-1", "n"); err != nil {
		t.Fatal(err)
	}
	head := <-heads
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		t.Fatalf("the request is not HTTP: %v\n%s", err, head)
	}
	if req.Method != "POST" || req.RequestURI != "/v1/features/F-1/unblock" || req.Host != "ctxgraphd" || !req.Close ||
		req.Header.Get(RunTokenHeader) != "tok-1" || req.Header.Get("Content-Type") != "application/json" || req.ContentLength != int64(len(`{"note":"n"}`)) {
		t.Errorf("request head:\n%s", head)
	}

	c.RunToken = ""
	if err := c.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	head = <-heads
	if req, err = http.ReadRequest(bufio.NewReader(strings.NewReader(head))); err != nil {
		t.Fatal(err)
	}
	if req.ContentLength != 0 || req.Header.Get("Content-Length") != "0" || req.Header.Get("Content-Type") != "" || req.Header[RunTokenHeader] != nil {
		t.Errorf("an action without a body, without a token:\n%s", head)
	}
}

// A token that would end its header line is refused before anything is
// sent, as net/http refused it.
func TestClientRefusesATokenThatBreaksTheHeader(t *testing.T) {
	sock, heads := rawDaemon(t, "HTTP/1.1 200 OK\r\n\r\n{}")
	c := NewClient(sock)
	c.RunToken = "tok\r\nOrigin: http://evil"
	if err := c.Pause(t.Context()); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("Pause with a token holding CRLF = %v, want it refused", err)
	}
	select {
	case h := <-heads:
		t.Errorf("the daemon received:\n%s", h)
	default:
	}
}
