package main

import (
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/deptest"
)

// TestHookDeps holds what the hook binary links. It starts on every tool
// call of every agent: every package it links costs start-up time in
// initialisation and pages touched, so each one it links beyond the
// standard library is listed with its reason (an addition fails here until
// it is justified, where a reviewer sees it), and what would make it slow
// or let it open the state of record is banned by name.
func TestHookDeps(t *testing.T) {
	const mod = "github.com/ctxgraphd/ctxgraphd/"
	deptest.DepChecker{
		Packages: []string{mod + "cmd/ctxgraphd-hook"},
		BadDeps: map[string]string{
			"go.etcd.io/bbolt/...":             "the hook never opens the state of record: the daemon holds it, and the hook asks the daemon or spools",
			"github.com/fsnotify/fsnotify/...": "the hook watches nothing",
			"go.uber.org/zap/...":              "the hook keeps no log; it answers on stdout and says what failed on stderr",
			"github.com/spf13/cobra/...":       "the hook has one command; a CLI framework is start-up cost",
			"github.com/looplab/fsm/...":       "the session's state machine is the daemon's",
			mod + "orchestrator/...":           "the loop is the daemon's; the hook asks it over the socket",
			mod + "store/...":                  "the store is the daemon's: the hook never opens bbolt",
			mod + "judge/...":                  "the judge answers in the daemon; the hook deciding alone uses the gates",
			mod + "statemachine/...":           "the session's state machine is the daemon's",
			mod + "control/server/...":         "the hook is the client side of the socket",
			mod + "config/...":                 "the hook reads no configuration: the daemon leaves the gates' record for it",
			"gopkg.in/yaml.v3/...":             "guards.yaml is read by the daemon, which leaves the guards as JSON for the hook",
			mod + "guards/rulefile/...":        "guards.yaml is read by the daemon, which leaves the guards as JSON for the hook",
			mod + "agents":                     "the agents package supervises processes and logs; the hook needs only the role names (agents/role)",
			"net/http":                         "one request on a local socket: control speaks HTTP/1.1 itself, and net/http's client (TLS, HTTP/2, proxies) was a third of the hook's start-up",
			mod + "internal/dev/...":           "the tools for developing ctxgraphd never ship",
			"github.com/nats-io/...":           "NATS's client, server and keys are start-up cost on every tool call: a hook on a worker asks its worker, which speaks NATS to the daemon (issue 27)",
			mod + "fleet/...":                  "the fleet's server and credentials are the daemon's; a hook on a worker asks its worker",
		},
		WantDeps: map[string]string{
			mod + "cmd/ctxgraphd-hook":         "the binary itself",
			mod + "hook":                       "payload in, decision out, asking the daemon or deciding alone",
			mod + "gates":                      "the gates' rules, the same the daemon applies",
			mod + "guards":                     "a project's guards, held by a hook deciding alone too",
			mod + "control":                    "the socket's client and wire types (light: no server, no log, no net/http)",
			mod + "progress":                   "reading the feature list when the daemon is down",
			mod + "agents/role":                "the role names, a leaf",
			mod + "internal/paths":             "finding the project, its state and socket",
			mod + "internal/spool":             "records kept while the daemon is down",
			mod + "internal/atomicfile":        "the spool's writes",
			mod + "internal/treefile":          "the feature list read without following a link",
			mod + "internal/shellcmd":          "reading a Bash command as the shell does (ran the test?)",
			mod + "internal/textcut":           "the one text cutter (a command quoted in a denial)",
			mod + "internal/lazyregexp":        "the gates' expressions, compiled when a call reaches them rather than at every start",
			"mvdan.cc/sh/v3/syntax":            "the shell parser shellcmd reads commands with",
			"mvdan.cc/sh/v3/fileutil":          "linked by mvdan.cc/sh/v3/syntax",
			"github.com/bmatcuk/doublestar/v4": "the globs of scope and gates.protected",
		},
	}.Check(t)
}
