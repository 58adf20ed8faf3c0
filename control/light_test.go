package control_test

import (
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/deptest"
)

// TestControlStaysLight keeps the ctl and hook paths from linking the
// daemon: they import control, so control must not import the store, the
// watcher, the loop, the server or a logging library.
func TestControlStaysLight(t *testing.T) {
	const mod = "github.com/ctxgraphd/ctxgraphd/"
	deptest.DepChecker{
		Packages: []string{mod + "control"},
		BadDeps: map[string]string{
			"go.etcd.io/bbolt/...":             "the state of record is the daemon's: clients ask over the socket",
			"github.com/fsnotify/fsnotify/...": "a client watches nothing on disk",
			"github.com/looplab/fsm/...":       "the session's state machine is the daemon's; its states arrive as Status",
			"go.uber.org/zap/...":              "clients keep no log",
			"github.com/spf13/cobra/...":       "the CLI framework is cmd/ctxgraphd's, not the wire's",
			mod + "orchestrator/...":           "the loop is behind the socket, not linked by its clients",
			mod + "store/...":                  "the store's records travel as control's types",
			mod + "statemachine/...":           "the session's state machine is the daemon's; its states arrive as Status",
			mod + "agents/...":                 "clients start no agent",
			mod + "control/server/...":         "the server is the daemon's side of the socket",
			"github.com/nats-io/...":           "clients of the socket speak no NATS: the fleet is the daemon's (package fleet), and the hook links control",
			"net/http":                         "the hook links control: the client speaks HTTP/1.1 itself (transport.go), since net/http's client was a third of the hook's start-up",
		},
	}.Check(t)
}
