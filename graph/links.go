package graph

import (
	"slices"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Reader is where the graph reads traces one by one and by filter.
type Reader interface {
	Traces
	Trace(id string) (control.Trace, bool, error)
}

// Links is where a trace stands in the context graph: the path that led
// to it (feature → attempt → run → the refusal under it → the correction
// that answered it …) and what followed.
type Links struct {
	Trace control.Trace
	// Path is what led to the trace: the root first, its parent last.
	Path []control.Trace
	// Followed are the traces that follow from it (whose parent it is),
	// oldest first: a run's refusals and verdict, the correction of a
	// block, the commit of a verdict.
	Followed []control.Trace
	// Next, for a trace nothing followed from, is what happened after it
	// under the same parent: the rest of its run after a refusal.
	Next []control.Trace
}

// Bounds of a walk: a path is a handful of levels deep, and a run's
// children can be many (every refused tool call).
const (
	maxDepth    = 32
	maxFollowed = 50
	maxNext     = 10
)

// LinksOf walks the graph around trace id. ok is false when there is no
// such trace. A parent that is gone (compacted away) ends the path where
// it is; a cycle, which the daemon never writes, ends it too.
func LinksOf(src Reader, id string) (l Links, ok bool, err error) {
	t, ok, err := src.Trace(id)
	if err != nil || !ok {
		return Links{}, ok, err
	}
	l.Trace = t
	seen := map[string]bool{t.ID: true}
	for p := t.Parent; p != "" && !seen[p] && len(l.Path) < maxDepth; {
		seen[p] = true
		pt, found, err := src.Trace(p)
		if err != nil {
			return l, true, err
		}
		if !found {
			break
		}
		l.Path = append(l.Path, pt)
		p = pt.Parent
	}
	slices.Reverse(l.Path)
	if l.Followed, err = src.Traces(store.TraceFilter{Parent: t.ID, Limit: maxFollowed}); err != nil {
		return l, true, err
	}
	if len(l.Followed) > 0 || t.Parent == "" {
		return l, true, nil
	}
	siblings, err := src.Traces(store.TraceFilter{Parent: t.Parent, Limit: Window})
	if err != nil {
		return l, true, err
	}
	after := slices.DeleteFunc(siblings, func(s control.Trace) bool { return seqOf(s.ID) <= seqOf(t.ID) })
	l.Next = after[:min(len(after), maxNext)]
	return l, true, nil
}
