package server_test

import (
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control/server"
)

// A client that never finishes its headers is dropped: the server bounds
// the wait for them (net/http waits forever when the bound is zero), in
// seconds, enough for a live client on a local socket and short enough that
// stuck connections do not pile up.
func TestServerBoundsTheWaitForHeaders(t *testing.T) {
	srv := newServer(nil)
	if d := server.HeaderTimeout(srv); d < time.Second || d > time.Minute {
		t.Errorf("the server waits %v for a request's headers, want a bound between a second and a minute", d)
	}
}
