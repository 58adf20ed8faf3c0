package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestHookStaysLean keeps the hook binary, started on every tool call of
// every agent, free of what it does not need: the store, the watcher, the
// logging library, the CLI framework and the daemon's packages. Each of them
// costs start-up time in package initialisation, and the hook must never
// open the state of record.
func TestHookStaysLean(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/ctxgraphd/ctxgraphd/cmd/ctxgraphd-hook").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"go.etcd.io/bbolt",
		"github.com/fsnotify/fsnotify",
		"go.uber.org/zap",
		"github.com/spf13/cobra",
		"github.com/looplab/fsm",
		"github.com/ctxgraphd/ctxgraphd/orchestrator",
		"github.com/ctxgraphd/ctxgraphd/store",
		"github.com/ctxgraphd/ctxgraphd/judge",
		"github.com/ctxgraphd/ctxgraphd/statemachine",
		"github.com/ctxgraphd/ctxgraphd/control/server",
		"github.com/ctxgraphd/ctxgraphd/config",
		// guards.yaml is read by the daemon, which leaves the guards as
		// JSON for the hook.
		"gopkg.in/yaml.v3",
		"github.com/ctxgraphd/ctxgraphd/guards/rulefile",
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("ctxgraphd-hook depends on %s", dep)
			}
		}
		// The agents package supervises processes and logs; the hook needs
		// only the role names.
		if dep == "github.com/ctxgraphd/ctxgraphd/agents" {
			t.Errorf("ctxgraphd-hook depends on %s (use agents/role)", dep)
		}
	}
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies: the check would pass for nothing")
	}
}

// TestHookDeps holds what the hook binary links beyond the standard library
// to testdata/deps.golden, where every package has its reason: an addition
// shows in a diff, and is justified there or taken out.
func TestHookDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/ctxgraphd/ctxgraphd/cmd/ctxgraphd-hook").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	linked := strings.Fields(string(out))
	data, err := os.ReadFile("testdata/deps.golden")
	if err != nil {
		t.Fatal(err)
	}
	var golden []string
	for n, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pkg, why, _ := strings.Cut(line, "#")
		if pkg = strings.TrimSpace(pkg); strings.TrimSpace(why) == "" {
			t.Errorf("testdata/deps.golden:%d: %s has no reason (`pkg  # why it is linked`)", n+1, pkg)
		}
		golden = append(golden, pkg)
	}
	for _, p := range linked {
		if !slices.Contains(golden, p) {
			t.Errorf("the hook links %s, which testdata/deps.golden does not list: add it there with why the hook needs it, or take it out", p)
		}
	}
	for _, p := range golden {
		if !slices.Contains(linked, p) {
			t.Errorf("testdata/deps.golden lists %s, which the hook no longer links: take it out of the list", p)
		}
	}
	if len(linked) == 0 {
		t.Fatal("go list printed no dependencies: the check would pass for nothing")
	}
}
