package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMCPStaysLean keeps the MCP server, started with every run, free of
// what it does not need: each of these costs start-up time in package
// initialisation, and the server never opens the state of record (it asks
// the daemon, like ctl).
func TestMCPStaysLean(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/ctxgraphd/ctxgraphd/cmd/ctxgraphd-mcp").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"go.etcd.io/bbolt",
		"github.com/fsnotify/fsnotify",
		"go.uber.org/zap",
		"github.com/spf13/cobra",
		"github.com/looplab/fsm",
		"gopkg.in/yaml.v3",
		"github.com/ctxgraphd/ctxgraphd/orchestrator",
		"github.com/ctxgraphd/ctxgraphd/store",
		"github.com/ctxgraphd/ctxgraphd/judge",
		"github.com/ctxgraphd/ctxgraphd/graph",
		"github.com/ctxgraphd/ctxgraphd/agents",
		"github.com/ctxgraphd/ctxgraphd/statemachine",
		"github.com/ctxgraphd/ctxgraphd/control/server",
		"github.com/ctxgraphd/ctxgraphd/config",
		"github.com/ctxgraphd/ctxgraphd/gates",
		"github.com/ctxgraphd/ctxgraphd/internal/gitrepo",
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("ctxgraphd-mcp depends on %s", dep)
			}
		}
	}
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies: the check would pass for nothing")
	}
}
