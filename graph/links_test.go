package graph

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
)

func ids(ts []control.Trace) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func node(typ, parent, what string) control.Trace {
	return control.Trace{Type: typ, Source: control.SourceAuto, Parent: parent, Context: control.TraceContext{Feature: "F-001"},
		Event: control.TraceEvent{WhatHappened: what}}
}

// TestLinksOf walks a night's graph: the feature, its attempt, a run, a
// refusal in it and what came after, the block and the correction that
// answered it.
func TestLinksOf(t *testing.T) {
	st := newStore(t,
		node(control.TraceTransition, "", "F-001 taken up"),                  // tr-1
		node(control.TraceTransition, "tr-1", "F-001 attempt 1 begins"),      // tr-2
		node(control.TraceHandoff, "tr-2", "run-000002 started"),             // tr-3
		node(control.TraceViolation, "tr-3", "Write src/x refused by scope"), // tr-4
		node(control.TraceLesson, "", "a lesson of the project"),             // tr-5: nothing to do with it
		node(control.TraceDecision, "tr-3", "F-001 attempt 1 failed"),        // tr-6
		node(control.TraceDecision, "tr-2", "F-001 blocked"),                 // tr-7
		node(control.TraceCorrection, "tr-7", "F-001 reopened by ctl retry"), // tr-8
		node(control.TraceViolation, "tr-3", "Bash refused by scope"),        // tr-9
	)
	tests := []struct {
		id                   string
		path, followed, next []string
	}{
		{id: "tr-1", path: []string{}, followed: []string{"tr-2"}, next: []string{}},
		{id: "tr-3", path: []string{"tr-1", "tr-2"}, followed: []string{"tr-4", "tr-6", "tr-9"}, next: []string{}},
		// A refusal: the path from the feature down to its run, and what the
		// run did after it.
		{id: "tr-4", path: []string{"tr-1", "tr-2", "tr-3"}, followed: []string{}, next: []string{"tr-6", "tr-9"}},
		{id: "tr-7", path: []string{"tr-1", "tr-2"}, followed: []string{"tr-8"}, next: []string{}},
		{id: "tr-8", path: []string{"tr-1", "tr-2", "tr-7"}, followed: []string{}, next: []string{}},
		{id: "tr-5", path: []string{}, followed: []string{}, next: []string{}},
	}
	for _, tt := range tests {
		l, ok, err := LinksOf(st, tt.id)
		if err != nil || !ok {
			t.Fatalf("LinksOf(%s) = %v, %v", tt.id, ok, err)
		}
		if l.Trace.ID != tt.id {
			t.Errorf("LinksOf(%s).Trace = %s", tt.id, l.Trace.ID)
		}
		for _, c := range []struct {
			name      string
			got, want []string
		}{{"path", ids(l.Path), tt.path}, {"followed", ids(l.Followed), tt.followed}, {"next", ids(l.Next), tt.next}} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("LinksOf(%s).%s = %v, want %v", tt.id, c.name, c.got, c.want)
			}
		}
	}
	if _, ok, err := LinksOf(st, "tr-99"); ok || err != nil {
		t.Errorf("LinksOf(tr-99) = %v, %v; want not found", ok, err)
	}
}

// TestLinksOfEndsOnGoneAndCyclicParents: a parent compacted away ends the
// path there, and a cycle (never written by the daemon, but a store is
// outside input to a walk) does not loop.
func TestLinksOfEndsOnGoneAndCyclicParents(t *testing.T) {
	st := newStore(t,
		node(control.TraceHandoff, "tr-50", "run started, its attempt gone"), // tr-1
		node(control.TraceViolation, "tr-1", "refused"),                      // tr-2
		node(control.TraceDecision, "tr-4", "a"),                             // tr-3
		node(control.TraceDecision, "tr-3", "b"),                             // tr-4
	)
	l, _, err := LinksOf(st, "tr-2")
	if err != nil || !slices.Equal(ids(l.Path), []string{"tr-1"}) {
		t.Errorf("path of tr-2 = %v, %v; want [tr-1]", ids(l.Path), err)
	}
	l, _, err = LinksOf(st, "tr-3")
	if err != nil || !slices.Equal(ids(l.Path), []string{"tr-4"}) {
		t.Errorf("path of tr-3 = %v, %v; want [tr-4] (the cycle cut)", ids(l.Path), err)
	}
}

// A path is at most maxDepth traces long: the nearest, root first.
func TestLinksOfBoundsThePath(t *testing.T) {
	var chain []control.Trace
	for i := range maxDepth + 8 {
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf("tr-%d", i)
		}
		chain = append(chain, node(control.TraceDecision, parent, fmt.Sprintf("step %d", i+1)))
	}
	last := fmt.Sprintf("tr-%d", len(chain))
	l, ok, err := LinksOf(newStore(t, chain...), last)
	if err != nil || !ok {
		t.Fatalf("LinksOf(%s) = %v, %v", last, ok, err)
	}
	var want []string
	for i := len(chain) - maxDepth; i < len(chain); i++ {
		want = append(want, fmt.Sprintf("tr-%d", i))
	}
	if got := ids(l.Path); !slices.Equal(got, want) {
		t.Errorf("path of %s = %v, want %v", last, got, want)
	}
}
