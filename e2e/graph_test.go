package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// What one agent was refused reaches the next agent of its role, on
// another feature: the repeated-mistake rate (a refused action tried again
// by a later coding agent) with precedent on and off. The scripted coding
// agents all make the same mistake (a write outside their scope) unless
// their command's precedent tells of it, as a model that reads its
// precedent would.
func TestRepeatedMistakeRate(t *testing.T) {
	night(t, extended)
	const features = 3
	var mu sync.Mutex // the modes run side by side
	rate := map[string]float64{}
	type mode struct {
		name string
		args []string
	}
	sideBySide(t, []mode{{"on", nil}, {"off", []string{"--set", "graph.precedent_tokens=0"}}}, func(m mode) string { return m.name }, func(t *testing.T, mode mode) {
		p := newProject(t, scenario("precedent-"+mode.name,
			feature("F-001", scriptedmodel.HeedsPrecedent),
			feature("F-002", scriptedmodel.HeedsPrecedent, "F-001"),
			feature("F-003", scriptedmodel.HeedsPrecedent, "F-002"),
		))
		cmd, log := p.start(append([]string{"--exit-when-done"}, mode.args...)...)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("daemon: %v\n%s", err, log)
			}
		case <-time.After(agentsWait):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the daemon did not end within %s; its log:\n%s", agentsWait, log)
		}
		for _, f := range p.featureList().Features {
			if !f.Tested {
				t.Errorf("%s is not tested: honest work must go on either way", f.ID)
			}
		}
		var refused []string // features whose coder made the mistake, in order
		for _, tr := range p.traces(store.TraceFilter{Type: control.TraceViolation, Agent: string(role.Coder)}) {
			if tr.Gate == gates.Scope && !slices.Contains(refused, tr.Context.Feature) {
				refused = append(refused, tr.Context.Feature)
			}
		}
		if len(refused) == 0 || refused[0] != "F-001" {
			t.Fatalf("refused on %v: the first coder must make the mistake", refused)
		}
		repeated := len(refused) - 1
		mu.Lock()
		rate[mode.name] = float64(repeated) / (features - 1)
		mu.Unlock()
		t.Logf("precedent %s: the mistake was repeated on %d of %d later features (%v)", mode.name, repeated, features-1, refused)
	})
	if len(rate) < 2 {
		return // one mode alone (go test -run …/on) measures no difference
	}
	t.Logf("repeated-mistake rate: precedent on %.0f%%, off %.0f%%", 100*rate["on"], 100*rate["off"])
	if rate["on"] != 0 || rate["off"] != 1 {
		t.Errorf("repeated-mistake rate on %.2f, off %.2f; want 0 with precedent and 1 without", rate["on"], rate["off"])
	}
}

// Every run has the context graph as MCP tools (ctxgraphd mcp, started by
// the real CLI, a client of the daemon's socket): on its retry the scripted
// coder asks query_traces for its feature and goes on only when the answer
// tells of its failed attempt; what it then stores is attributed to its
// run and marked source agent.
func TestRetryAsksTheGraphThroughMCP(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("mcp", feature("F-001", scriptedmodel.QueriesGraph)))
	p.runToEnd()
	if f := p.featureList().Feature("F-001"); f == nil || !f.Tested {
		var said []string
		for _, r := range p.runs() {
			said = append(said, fmt.Sprintf("%s %s attempt %d: %s", r.ID, r.Role, r.Attempt, r.Summary))
		}
		t.Fatalf("F-001 = %+v: the retry did not get its failure from the graph; the runs said:\n%s", f, strings.Join(said, "\n"))
	}
	var retry store.Run
	for _, r := range p.runs() {
		if r.Role == string(role.Coder) && r.Attempt == 2 {
			retry = r
		}
	}
	if retry.ID == "" {
		t.Fatal("no second coding attempt")
	}
	var stored []control.Trace
	for _, tr := range p.traces(store.TraceFilter{Type: control.TraceDecision}) {
		if tr.Source == control.SourceAgent {
			stored = append(stored, tr)
		}
	}
	if len(stored) != 1 || stored[0].Context != (control.TraceContext{Agent: string(role.Coder), Feature: "F-001", Run: retry.ID, Attempt: 2}) ||
		!strings.Contains(stored[0].Event.WhatHappened, "why attempt 1 of F-001 failed") {
		t.Fatalf("what the agent stored: %+v, want one decision of %s", stored, retry.ID)
	}
	// It hangs from its run in the graph: the retry's handoff.
	if stored[0].Parent == "" || stored[0].Parent != retry.Trace {
		t.Errorf("the agent's decision hangs from %q, want its run's node %q", stored[0].Parent, retry.Trace)
	}
}
