package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/deptest"
)

// ctlBanned are the packages a `ctl` command must not import, each with
// why: ctl is a client of the daemon's socket, and everything it shows
// comes over the wire as control's types. A command that imports one of
// these reads the daemon's state behind its back, or drags the daemon's
// start-up cost and locks into a client.
var ctlBanned = map[string]string{
	"go.etcd.io/bbolt/...":                               "ctl never opens the state of record: the daemon holds its lock, and ctl asks the daemon",
	"github.com/ctxgraphd/ctxgraphd/store/...":           "the store's types and constants are control's on the wire; ctl never opens bbolt",
	"github.com/ctxgraphd/ctxgraphd/orchestrator/...":    "the loop is the daemon's; ctl talks to it over the socket",
	"github.com/ctxgraphd/ctxgraphd/judge/...":           "verdicts and refs are the daemon's to make; the report carries what ctl shows of them",
	"github.com/ctxgraphd/ctxgraphd/branch/...":          "the branch and its refs are the daemon's to write; ctl reads what happened to them in the report",
	"github.com/ctxgraphd/ctxgraphd/records/...":         "the records are served from the store by the daemon; ctl asks for them over the socket",
	"github.com/ctxgraphd/ctxgraphd/graph/...":           "patterns and precedent are computed by the daemon; control.Pattern carries them",
	"github.com/ctxgraphd/ctxgraphd/internal/report/...": "the report is built from the store; control.Report carries it",
	"github.com/ctxgraphd/ctxgraphd/progress/...":        "the feature list ctl shows is the daemon's canonical copy (control.Feature), not the file",
	"github.com/ctxgraphd/ctxgraphd/statemachine/...":    "session states arrive as control.Status",
	"github.com/ctxgraphd/ctxgraphd/agents/...":          "ctl starts no agent",
	"github.com/ctxgraphd/ctxgraphd/gates/...":           "the gates decide in the daemon and the hook, never in ctl",
	"github.com/ctxgraphd/ctxgraphd/config/...":          "ctl reads no configuration; the daemon's effective one is `ctxgraphd config`'s",
	"github.com/ctxgraphd/ctxgraphd/control/server/...":  "ctl is the client side of the socket",
	"github.com/fsnotify/fsnotify/...":                   "ctl watches nothing on disk; `ctl watch` follows the daemon's stream",
	"go.uber.org/zap/...":                                "ctl prints for people; it keeps no log",
	"github.com/ctxgraphd/ctxgraphd/fleet/...":           "workers' credentials are issued, listed and revoked by the daemon; ctl asks it over the socket",
	"github.com/nats-io/...":                             "ctl speaks to the daemon's socket, never to its NATS server",
}

// TestCtlImportsOnlyTheWire holds the `ctl` commands (cmd/ctxgraphd/ctl*.go)
// to control, the standard library, the CLI framework, the project's
// paths and the text cutter: tailscale's deptest, per file for what the
// files import themselves, since the ctxgraphd binary links the daemon
// too, and with deptest for what comes in behind those imports.
func TestCtlImportsOnlyTheWire(t *testing.T) {
	files, err := filepath.Glob("ctl*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for banned, why := range ctlBanned {
				if deptest.Match(banned, path) {
					t.Errorf("%s imports %s: %s", f, path, why)
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d ctl files: the glob found too few to hold anything", checked)
	}
	// What ctl does import must not bring a banned package in behind it;
	// every banned package must still exist, so that a rename does not
	// leave a rule that bans nothing.
	deptest.DepChecker{
		Packages: []string{"github.com/ctxgraphd/ctxgraphd/control", "github.com/ctxgraphd/ctxgraphd/internal/paths", "github.com/ctxgraphd/ctxgraphd/internal/textcut"},
		BadDeps:  ctlBanned,
	}.Check(t)
}

// TestShippedBinariesLinkNoDevTools keeps internal/dev, the tools for
// developing ctxgraphd, out of the binaries that ship.
func TestShippedBinariesLinkNoDevTools(t *testing.T) {
	deptest.DepChecker{
		Packages: []string{"github.com/ctxgraphd/ctxgraphd/cmd/ctxgraphd", "github.com/ctxgraphd/ctxgraphd/cmd/ctxgraphd-hook"},
		BadDeps: map[string]string{
			"github.com/ctxgraphd/ctxgraphd/internal/dev/...": "test helpers, mutation testing and benchmark data are for developing ctxgraphd: they never ship",
		},
	}.Check(t)
}
