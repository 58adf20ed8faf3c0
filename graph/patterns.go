package graph

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// maxExamples is how many examples a pattern names.
const maxExamples = 3

// Patterns groups what happened again and again, at least atLeast times:
// refusals by role, gate and reason; failing commands; files put back. The
// most frequent first. What agents stored themselves is not counted: it
// is their word, not what happened.
func Patterns(traces []control.Trace, commands []control.CommandRecord, atLeast int) []control.Pattern {
	groups := map[string]*control.Pattern{}
	var order []*control.Pattern
	// mixed: the traces of a pattern were about different paths (or, for a
	// file put back, by different roles), so none is the pattern's.
	mixedPath, mixedRole := map[*control.Pattern]bool{}, map[*control.Pattern]bool{}
	add := func(key string, p control.Pattern, feature, example string, at time.Time, path, role string) {
		g := groups[key]
		if g == nil {
			g = &p
			g.Path, g.Role = path, role
			groups[key] = g
			order = append(order, g)
		}
		if g.Path != path {
			mixedPath[g] = true
		}
		if g.Role != role {
			mixedRole[g] = true
		}
		g.Count++
		if feature != "" && !slices.Contains(g.Features, feature) {
			g.Features = append(g.Features, feature)
		}
		g.Examples = append(g.Examples, example)
		if at.After(g.Last) {
			g.Last = at
		}
	}
	for _, t := range traces {
		if t.Type != control.TraceViolation || t.Source == control.SourceAgent {
			continue
		}
		what := fmt.Sprintf("%s refused by %s", cmp.Or(t.Context.Agent, "an agent"), cmp.Or(t.Gate, "the daemon"))
		if t.Code != "" {
			what += " (" + t.Code + ")"
		}
		add(control.PatternRefusal+"\x00"+t.Context.Agent+"\x00"+t.Gate+"\x00"+t.Code,
			control.Pattern{Kind: control.PatternRefusal, What: what, Role: t.Context.Agent, Gate: t.Gate, Code: t.Code},
			t.Context.Feature, t.ID, t.Timestamp, t.Path, t.Context.Agent)
		if t.Path != "" && strings.Contains(t.Event.WhatHappened, "put back") {
			add(control.PatternRevertedFile+"\x00"+t.Path, control.Pattern{Kind: control.PatternRevertedFile, What: t.Path + " put back after a run"},
				t.Context.Feature, t.ID, t.Timestamp, t.Path, t.Context.Agent)
		}
	}
	for _, c := range commands {
		if c.ExitCode == 0 {
			continue
		}
		cmd := strings.Join(strings.Fields(c.Command), " ")
		add(control.PatternFailingCommand+"\x00"+cmd, control.Pattern{Kind: control.PatternFailingCommand, What: clip(cmd), Command: cmd}, c.Feature, c.Run, c.Time, "", "")
		if c.IsTest {
			groups[control.PatternFailingCommand+"\x00"+cmd].Test = true
		}
	}
	var out []control.Pattern
	for _, g := range order {
		if g.Count < atLeast {
			continue
		}
		if mixedPath[g] {
			g.Path = ""
		}
		if mixedRole[g] {
			g.Role = ""
		}
		// The newest examples, newest first.
		slices.Reverse(g.Examples)
		g.Examples = slices.Compact(g.Examples)
		g.Examples = g.Examples[:min(len(g.Examples), maxExamples)]
		if g.Features == nil {
			g.Features = []string{}
		}
		out = append(out, *g)
	}
	slices.SortStableFunc(out, func(a, b control.Pattern) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return b.Last.Compare(a.Last)
	})
	return out
}
