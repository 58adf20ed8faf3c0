// Package progress reads and writes the files under .claude/progress/: the
// feature list that agents and people edit, the goal, and
// the session-state mirror that only the daemon writes.
//
// The feature list is outside input: agents and people write it by any
// route, so Parse never panics and explains every problem with the path of
// the offending value and what to do about it (see ParseError). Two formats
// are read, the version 1 list of the contract and the bare array written by
// Anthropic's autonomous-coding quickstart; Marshal always writes version 1.
//
// Unknown keys, at the top level or in a feature, are ignored on read so that
// a list written by a newer tool (or annotated by a person) still loads.
// They are not kept: a list the daemon rewrites loses them.
package progress

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// Names of the files and directories under .claude/progress/ (contract).
const (
	FeatureListFile  = "feature-list.json"
	SessionStateFile = "session-state.json"
	GoalFile         = "goal.md"
	EvidenceDir      = paths.EvidenceDir
)

// Status is where a feature stands in its lifecycle (contract). The zero
// value, an empty status, means Pending.
type Status string

// The statuses of a feature (contract).
const (
	Pending    Status = "pending"
	InProgress Status = "in_progress"
	Completed  Status = "completed"
	Blocked    Status = "blocked"
)

// statuses lists the valid statuses in the order error messages name them.
var statuses = []Status{Pending, InProgress, Completed, Blocked}

// valid reports whether s is one of the four statuses or empty (pending).
func (s Status) valid() bool { return s == "" || slices.Contains(statuses, s) }

// normal returns s with the empty status spelled out as Pending.
func (s Status) normal() Status {
	if s == "" {
		return Pending
	}
	return s
}

// Feature is one unit of work in the feature list (contract keys).
type Feature struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Category    string   `json:"category,omitempty"`
	Steps       []string `json:"steps,omitempty"`
	DependsOn   []string `json:"depends_on,omitempty"`
	Scope       []string `json:"scope,omitempty"`
	Test        string   `json:"test,omitempty"`
	Status      Status   `json:"status"`
	Tested      bool     `json:"tested"`
	Evidence    []string `json:"evidence,omitempty"`
}

// clone returns f with its own copies of the slices.
func (f Feature) clone() Feature {
	c := f
	for _, fd := range Fields {
		if fd.Kind == TextListField {
			fd.Copy(&c, &f)
		}
	}
	return c
}

// Format is the shape a feature list was read from.
type Format int

// The formats Parse reads.
const (
	// FormatV1 is {"version": 1, "features": [...]} (contract).
	FormatV1 Format = iota
	// FormatQuickstart is the bare array of {category, description, steps,
	// passes} written by Anthropic's autonomous-coding quickstart.
	FormatQuickstart
)

// String returns the name of the format for messages and logs.
func (f Format) String() string {
	switch f {
	case FormatV1:
		return "v1"
	case FormatQuickstart:
		return "quickstart"
	}
	return "unknown"
}

// List is the feature list. A list returned by Parse is valid, has Version
// 1, spells an empty status as Pending and holds nil rather than empty
// slices, so that two parses of equivalent files compare equal.
type List struct {
	Version int `json:"version"`
	// Setup is the setup step the initializer proposes (a shell command
	// that prepares a tree: dependencies, a venv), for a project whose
	// person gave no setup: of their own. Like the tests, it is fixed once
	// written: the person's to change, never an agent's.
	Setup    string    `json:"setup,omitempty"`
	Features []Feature `json:"features"`
	Format   Format    `json:"-"` // what Parse read; Marshal always writes FormatV1
}

// Marshal returns the list in the version 1 format: two-space indent, keys
// in the order of the Feature fields, a trailing newline. The same list
// always gives the same bytes, which is how the daemon recognises its own
// writes. An empty status is written as "pending" and Version as 1, so that
// what Marshal writes reads back as the same list.
func (l *List) Marshal() []byte {
	out := l.Clone()
	out.Version = 1
	if out.Features == nil {
		out.Features = []Feature{} // "features": [] rather than null
	}
	for i := range out.Features {
		out.Features[i].Status = out.Features[i].Status.normal()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Test commands are full of && and >; escaping them as \u0026 would make
	// the file hard to read and edit for the people who own it.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		// Strings, slices of strings, ints and bools always encode.
		panic("progress: encoding a feature list: " + err.Error())
	}
	return buf.Bytes()
}

// Clone returns a deep copy of l: changing one never changes the other.
func (l *List) Clone() *List {
	c := *l
	if l.Features != nil {
		c.Features = make([]Feature, len(l.Features))
		for i, f := range l.Features {
			c.Features[i] = f.clone()
		}
	}
	return &c
}

// Feature returns the feature with the given id, or nil if there is none.
// The pointer is into l.Features: changes through it change the list.
func (l *List) Feature(id string) *Feature {
	for i := range l.Features {
		if l.Features[i].ID == id {
			return &l.Features[i]
		}
	}
	return nil
}

// Counts is how many features are in each state (the "features" object of
// session-state.json and of `ctl status --json`).
//
// Tested counts features with tested: true, whatever their status; the
// status counts are of the features that are not tested, so that Pending +
// InProgress + Completed + Blocked + Tested == Total on a valid list.
type Counts struct {
	Total      int `json:"total"`
	Pending    int `json:"pending"`
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"`
	Tested     int `json:"tested"`
	Blocked    int `json:"blocked"`
}

// Counts counts the features of l. A status outside the four (only possible
// in a list that was not validated) is counted in Total alone.
func (l *List) Counts() Counts {
	c := Counts{Total: len(l.Features)}
	for _, f := range l.Features {
		if f.Tested {
			c.Tested++
			continue
		}
		switch f.Status.normal() {
		case Pending:
			c.Pending++
		case InProgress:
			c.InProgress++
		case Completed:
			c.Completed++
		case Blocked:
			c.Blocked++
		}
	}
	return c
}

// Cycles returns the dependency cycles of l, one per group of features that
// depend on each other (a strongly connected component), each as the path
// of ids that closes the loop: [F-1 F-2 F-1] means F-1 depends on F-2,
// which depends on F-1. A feature that depends on itself is [F-1 F-1].
//
// A cycle is not a parse error (it is reported, not looped on): its
// features simply never become ready. The path shown starts at the
// cycle's first feature in list order and is the shortest loop back to it;
// cycles come in the list order of those first features, so the result is
// deterministic. Unknown dependencies are ignored, and a duplicated id
// stands for its first occurrence. Nil when there is no cycle.
func (l *List) Cycles() [][]string {
	n := len(l.Features)
	index := make(map[string]int, n)
	for i, f := range l.Features {
		if _, dup := index[f.ID]; !dup {
			index[f.ID] = i
		}
	}
	edges := make([][]int, n)
	for i, f := range l.Features {
		if index[f.ID] != i {
			continue // a duplicate: its first occurrence speaks for it
		}
		for _, d := range f.DependsOn {
			if j, ok := index[d]; ok {
				edges[i] = append(edges[i], j)
			}
		}
	}

	comp := components(edges)
	var cycles [][]string
	done := make(map[int]bool)
	for i := range n {
		c := comp[i]
		if c < 0 || done[c] {
			continue
		}
		done[c] = true
		if path := shortestLoop(edges, comp, i); path != nil {
			ids := make([]string, len(path))
			for k, v := range path {
				ids[k] = l.Features[v].ID
			}
			cycles = append(cycles, ids)
		}
	}
	return cycles
}

// components labels each node with its strongly connected component
// (Tarjan's algorithm, iterative so that the depth of a dependency chain in
// a hostile file costs heap, not stack).
func components(edges [][]int) []int {
	n := len(edges)
	const unvisited = -1
	index := make([]int, n)
	low := make([]int, n)
	comp := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i], comp[i] = unvisited, unvisited
	}
	var stack []int
	next, label := 0, 0
	type frame struct{ v, edge int }
	for root := range n {
		if index[root] != unvisited {
			continue
		}
		calls := []frame{{v: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			top := &calls[len(calls)-1]
			v := top.v
			if top.edge < len(edges[v]) {
				w := edges[v][top.edge]
				top.edge++
				switch {
				case index[w] == unvisited:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{v: w})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				parent := calls[len(calls)-1].v
				low[parent] = min(low[parent], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = label
					if w == v {
						break
					}
				}
				label++
			}
		}
	}
	return comp
}

// shortestLoop returns the shortest path start -> ... -> start that stays in
// start's component, or nil when start is on no cycle (a component of one
// feature that does not depend on itself). Edges are tried in depends_on
// order, so ties go to the dependency listed first.
func shortestLoop(edges [][]int, comp []int, start int) []int {
	prev := make(map[int]int)
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range edges[v] {
			if comp[w] != comp[start] {
				continue
			}
			if w == start {
				path := []int{start}
				for u := v; u != start; u = prev[u] {
					path = append(path, u)
				}
				path = append(path, start)
				// Built backwards from the end; the first element is start.
				slices.Reverse(path[1 : len(path)-1])
				return path
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil
}
