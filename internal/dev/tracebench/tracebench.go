// Package tracebench builds the stores the context graph's benchmarks
// measure (up to a million traces): a project's history as the
// daemon would have written it, with the mix of kinds, agents, features,
// gates and text lengths of a real one. Building a million traces takes
// minutes, so a benchmark process builds each size once and shares it;
// Cleanup removes what it built.
package tracebench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Shape of the history: features and their runs, and how many traces a
// run leaves.
const (
	Features     = 200
	TracesPerRun = 40
)

// Gates and their reasons, as the judge records them.
var gates = []struct{ gate, code, what, instead string }{
	{"scope", "outside_scope", "Write %s is outside %s's scope", "write only the feature's own files"},
	{"tested-needs-evidence", "tested_by_non_tester", "Edit of feature-list.json set tested on %s without evidence for %s", "only the tester sets tested, after running the test"},
	{"tester-must-test", "no_test_run", "the tester ended without running %s for %s", "run the feature's test and keep its output"},
	{"role-write-policy", "tester_wrote_source", "Write %s by the tester of %s: testers do not change the source", "report the failure; the coding agent fixes it"},
	{"log-read-limit", "log_too_large", "Read of the whole log %s while working on %s", "read its tail"},
	{"frozen-tests", "frozen_test_changed", "Edit %s changes a frozen test of %s", "change the code, not the test"},
	{"red-before-green", "test_passed_before", "the test %s passed before any code for %s was written", "write a test that fails first"},
	{"network", "network_denied", "the sandbox refused a connection to %s by the build of %s", "reach only the hosts the project allows"},
	{"bash-policy", "force_push", "Bash `git push --force %s` for %s was blocked", "never rewrite the shared history"},
}

var paths = []string{"src/parser/config.go", "src/webhook/retry.go", "internal/cache/lru.go", "tests/F-%03d.sh", "build/output.log",
	"docs/api.md", "cmd/server/main.go", "src/auth/token.go", "src/db/migrate.go", "web/app.tsx"}

var roles = []string{"coding-agent", "tester-agent", "coding-agent", "tester-agent", "initializer-agent"}

// Trace is the i-th trace of the history. Each run of TracesPerRun traces
// starts with its handoff; the rest hang from it.
func Trace(i int, r *rand.Rand) control.Trace {
	run := i / TracesPerRun
	feature := fmt.Sprintf("F-%03d", run%Features+1)
	role := roles[run%len(roles)]
	t := control.Trace{
		Project:   "bench",
		Timestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 3 * time.Second),
		Source:    control.SourceHook,
		Context:   control.TraceContext{Agent: role, Feature: feature, Run: store.RunID(uint64(run + 1)), Attempt: 1 + run/(Features*len(roles))},
		Parent:    fmt.Sprintf("tr-%d", run*TracesPerRun+1),
	}
	path := paths[r.IntN(len(paths))]
	if strings.Contains(path, "%") {
		path = fmt.Sprintf(path, run%Features+1)
	}
	switch k := i % TracesPerRun; {
	case k == 0:
		t.Type, t.Source, t.Parent = control.TraceHandoff, control.SourceAuto, ""
		t.Event = control.TraceEvent{WhatHappened: fmt.Sprintf("%s started on %s, attempt %d: implement the parser of the configuration file and its tests", role, feature, t.Context.Attempt)}
	case k == TracesPerRun-1:
		t.Type, t.Source = control.TraceDecision, control.SourceAuto
		t.Event = control.TraceEvent{WhatHappened: fmt.Sprintf("run ended: %s", []string{"ok", "failed", "interrupted"}[r.IntN(3)]),
			Why: "the test of " + feature + " was run by the daemon after the run"}
	case k%13 == 5:
		t.Type, t.Source = control.TraceTransition, control.SourceAuto
		t.Event = control.TraceEvent{WhatHappened: "code → test", Why: "run ended"}
	case k == 17 && r.IntN(10) == 0:
		t.Type, t.Source = control.TraceCorrection, control.SourceUser
		t.Event = control.TraceEvent{WhatHappened: feature + " reopened by ctl unblock", WhatWasCorrect: "use the v2 API of the webhook client and mind the time zone"}
	case k == 23 && r.IntN(40) == 0:
		t.Type, t.Source = control.TraceLesson, []string{control.SourceUser, control.SourceAgent}[r.IntN(2)]
		t.Event = control.TraceEvent{WhatHappened: "run go vet before go test; the parser's fixtures live under testdata"}
	case k == 29:
		t.Type, t.Source = control.TraceApproval, control.SourceAuto
		t.Event = control.TraceEvent{WhatHappened: "the verdict on " + feature + " was accepted: its test passed on the daemon's run"}
	case k%2 == 0:
		g := gates[r.IntN(len(gates))]
		t.Type, t.Gate, t.Code = control.TraceViolation, g.gate, g.code
		t.Event = control.TraceEvent{WhatHappened: "PreToolUse " + fmt.Sprintf(g.what, path, feature) + fmt.Sprintf(" (call %d of the run)", k),
			WhatWasCorrect: g.instead, Why: "gate " + g.gate}
		t.Tool = &control.TraceTool{Name: "Write", Input: path}
	default:
		t.Type = control.TraceDecision
		t.Event = control.TraceEvent{WhatHappened: fmt.Sprintf("Bash `go test ./%s` exited %d after %d ms", path, r.IntN(2), r.IntN(9000))}
		t.Tool = &control.TraceTool{Name: "Bash", Input: "go test ./" + path}
	}
	return t
}

// Build opens a store in dir and appends n traces of the history, in
// batches as a busy daemon's group commits would, saying how far it got
// every 100,000 traces.
func Build(dir string, n int, progress func(format string, args ...any)) (*store.Store, error) {
	st, err := store.Open(dir, time.Second)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(n), 42))
	const batch = 5000
	start := time.Now()
	buf := make([]control.Trace, 0, batch)
	for i := range n {
		buf = append(buf, Trace(i, r))
		if len(buf) == batch || i == n-1 {
			if _, err := st.AppendTraces(buf...); err != nil {
				st.Close()
				return nil, err
			}
			buf = buf[:0]
		}
		if (i+1)%100_000 == 0 && progress != nil {
			progress("tracebench: %d of %d traces stored (%s)", i+1, n, time.Since(start).Round(time.Second))
		}
	}
	return st, nil
}

var shared struct {
	sync.Mutex
	stores map[int]*store.Store
	dirs   []string
}

// Shared returns the store of n traces this process built, building it
// the first time.
func Shared(n int, progress func(format string, args ...any)) (*store.Store, error) {
	shared.Lock()
	defer shared.Unlock()
	if st := shared.stores[n]; st != nil {
		return st, nil
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("ctxgraphd-tracebench-%d-", n))
	if err != nil {
		return nil, err
	}
	shared.dirs = append(shared.dirs, dir)
	st, err := Build(dir, n, progress)
	if err != nil {
		return nil, err
	}
	if shared.stores == nil {
		shared.stores = map[int]*store.Store{}
	}
	shared.stores[n] = st
	return st, nil
}

// Cleanup closes and removes the stores Shared built.
func Cleanup() {
	shared.Lock()
	defer shared.Unlock()
	for _, st := range shared.stores {
		st.Close()
	}
	for _, d := range shared.dirs {
		os.RemoveAll(d)
	}
	shared.stores, shared.dirs = nil, nil
}

// Sizes are the stores a benchmark measures: up to a million, and up to
// 100,000 with -short.
func Sizes(short bool) []int {
	if short {
		return []int{1_000, 10_000, 100_000}
	}
	return []int{1_000, 10_000, 100_000, 1_000_000}
}
