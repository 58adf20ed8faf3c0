package fleet

import (
	"context"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/control/server"
)

// allowAll is gates that let everything through, so that a round trip
// measures the transport alone.
type allowAll struct{}

func (allowAll) Hook(context.Context, string, control.HookRequest) (control.HookResponse, error) {
	return control.HookResponse{}, nil
}
func (allowAll) IsRunProcess(int) bool { return false }

// BenchmarkHookRoundTrip is what a hook's question costs a run on a worker
// against a run on the daemon's machine: the same question, from the
// hook's own client, answered by gates that decide nothing. socket: the
// daemon's control server on its Unix socket. nats: a worker's relay, over
// the fleet's embedded server with the worker's credentials, to a
// responder on the daemon's connection, and back.
func BenchmarkHookRoundTrip(b *testing.B) {
	req := preToolUse("/work/clone/src/greet/hello.go")
	ask := func(b *testing.B, socket string) {
		c := control.NewClient(socket)
		c.RunToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.Hook(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("socket", func(b *testing.B) {
		socket := socketPath(b)
		ln, err := server.Listen(socket)
		if err != nil {
			b.Fatal(err)
		}
		srv := server.New(&controltest.Backend{}, allowAll{}, &controltest.Backend{}, Local, nil)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		b.Cleanup(func() {
			srv.Shutdown(context.Background())
			<-served
		})
		ask(b, socket)
	})
	b.Run("nats", func(b *testing.B) {
		s := start(b, Config{})
		w := addWorker(b, s, "a")
		nc, err := connect(b, s, w.Path)
		if err != nil {
			b.Fatal(err)
		}
		hooks := s.Subjects().Worker("a").Hook
		// The daemon decodes the call and answers as allowAll does.
		respond(b, s.Conn(), hooks, func(HookCall) HookAnswer { return HookAnswer{} })
		socket := socketPath(b)
		r, err := ListenRelay(socket, nc, hooks)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		ask(b, socket)
	})
}
