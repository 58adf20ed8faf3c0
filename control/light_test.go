package control_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestControlStaysLight keeps the ctl and hook paths from linking the
// daemon: they import control, so control must not import the store, the
// watcher, the loop, the server or a logging library.
func TestControlStaysLight(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/ctxgraphd/ctxgraphd/control").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"go.etcd.io/bbolt",
		"github.com/fsnotify/fsnotify",
		"github.com/looplab/fsm",
		"go.uber.org/zap",
		"github.com/spf13/cobra",
		"github.com/ctxgraphd/ctxgraphd/orchestrator",
		"github.com/ctxgraphd/ctxgraphd/store",
		"github.com/ctxgraphd/ctxgraphd/statemachine",
		"github.com/ctxgraphd/ctxgraphd/agents",
		"github.com/ctxgraphd/ctxgraphd/control/server",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("control depends on %s", dep)
			}
		}
	}
}
