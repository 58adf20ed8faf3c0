// Package graph is ctxgraphd's context graph: what the traces of a project
// mean for the agents that come after them. The store keeps the bytes;
// this package decides which past traces a run is told about (its
// precedent), so that a mistake refused on one feature is not made again
// on the next by an agent nobody told.
package graph

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Traces is where the graph reads traces from: the daemon's store.
type Traces interface {
	Traces(store.TraceFilter) ([]store.Trace, error)
}

// Subject is the run a precedent is chosen for.
type Subject struct {
	Role    string // the run's role, as traces name agents ("coding-agent")
	Feature string // its feature's id; "" for the initializer
	// Text is what the feature is about: its title, description and steps.
	Text string
	// History are lines about the feature that are not traces (its last
	// failure, a person's note): they come first, whatever they cost.
	History []string
}

// Window bounds how many of the newest traces of each kind a selection
// reads, so that it costs the same on the thousandth run as on the first.
const Window = 2000

// maxLine bounds one line of precedent, in bytes.
const maxLine = 300

// Select chooses the precedent of a run within budget tokens, most useful
// first:
//
//  1. the feature's own history (given), then its own refusals and
//     corrections, newest first;
//  2. the project's lessons;
//  3. refusals of agents of the same role on other features, one line per
//     gate and reason with how often it happened: the mistakes agents of
//     this role make here;
//  4. traces of other features whose text is like the feature's (BM25).
//
// Each line is short and names its trace, so that an agent, or a person
// reading the command, can look it up (ctl trace ID). A budget of 0 or
// less selects nothing.
func Select(src Traces, subj Subject, budget int) ([]string, error) {
	if budget <= 0 {
		return nil, nil
	}
	sel := selection{left: budget, seen: map[string]bool{}}
	for _, h := range subj.History {
		sel.add("", clip(h))
	}
	if subj.Feature != "" {
		own, err := src.Traces(store.TraceFilter{Feature: subj.Feature, Limit: Window})
		if err != nil {
			return sel.lines, err
		}
		for _, t := range slices.Backward(own) {
			switch {
			case t.Type == store.TraceCorrection && told(subj.History, t.Event.WhatWasCorrect):
				// A person's note the history already carries.
			case t.Type == store.TraceViolation || t.Type == store.TraceCorrection:
				sel.add(t.ID, ownLine(t))
			}
		}
	}
	lessons, err := src.Traces(store.TraceFilter{Type: store.TraceLesson, Limit: Window})
	if err != nil {
		return sel.lines, err
	}
	for _, t := range slices.Backward(lessons) {
		// An agent's lesson is a proposal until a person promotes it: one
		// agent must not steer the others.
		if t.Source != store.SourceAgent {
			sel.add(t.ID, clip(fmt.Sprintf("%s lesson: %s", t.ID, t.Event.WhatHappened)))
		}
	}
	violations, err := src.Traces(store.TraceFilter{Type: store.TraceViolation, Limit: Window})
	if err != nil {
		return sel.lines, err
	}
	if subj.Role != "" {
		for _, p := range roleMistakes(violations, subj) {
			sel.add(p.example.ID, p.line())
		}
	}
	others := slices.DeleteFunc(violations, func(t store.Trace) bool {
		return subj.Feature != "" && t.Context.Feature == subj.Feature
	})
	for _, t := range similar(others, subj.Text) {
		sel.add(t.ID, clip(fmt.Sprintf("%s like this feature, on %s: %s", t.ID, featureOf(t), refusal(t))))
	}
	return sel.lines, nil
}

// selection is a precedent being filled: each trace once, within budget.
type selection struct {
	lines []string
	left  int
	seen  map[string]bool
}

func (s *selection) add(id, line string) {
	if id != "" && s.seen[id] || line == "" {
		return
	}
	n := Tokens(line)
	if n > s.left {
		return
	}
	s.left -= n
	s.lines = append(s.lines, line)
	if id != "" {
		s.seen[id] = true
	}
}

// Tokens estimates what a line costs a model: about four bytes a token
// for English text, rounded up, so that a budget errs on the safe side.
func Tokens(s string) int { return (len(s) + 3) / 4 }

// told reports whether a line of history already says text.
func told(history []string, text string) bool {
	return text != "" && slices.ContainsFunc(history, func(h string) bool { return strings.Contains(h, text) })
}

func ownLine(t store.Trace) string {
	if t.Type == store.TraceCorrection {
		line := fmt.Sprintf("%s a person: %s", t.ID, t.Event.WhatHappened)
		if t.Event.WhatWasCorrect != "" {
			line += ": " + t.Event.WhatWasCorrect
		}
		return clip(line)
	}
	return clip(fmt.Sprintf("%s %s", t.ID, refusal(t)))
}

// refusal says what a violation was and what was right instead.
func refusal(t store.Trace) string {
	s := fmt.Sprintf("refused by %s", cmp.Or(t.Gate, "the daemon"))
	if t.Code != "" {
		s += " (" + t.Code + ")"
	}
	s += ": " + t.Event.WhatHappened
	if t.Event.WhatWasCorrect != "" {
		s += "; instead: " + t.Event.WhatWasCorrect
	}
	return s
}

func featureOf(t store.Trace) string { return cmp.Or(t.Context.Feature, "no feature") }

// mistake is one kind of refusal agents of a role met on other features.
type mistake struct {
	example  store.Trace // the newest
	count    int
	features []string // where it happened, newest first
}

func (m mistake) line() string {
	where := m.features[0]
	if n := len(m.features) - 1; n > 0 {
		where += fmt.Sprintf(" and %d other feature%s", n, plural(n))
	}
	if m.count > 1 {
		where += fmt.Sprintf(" (%d times)", m.count)
	}
	return clip(fmt.Sprintf("%s on %s, a %s was %s", m.example.ID, where, m.example.Context.Agent, refusal(m.example)))
}

// roleMistakes groups the refusals of agents of subj's role on other
// features by gate and reason: most frequent first, then most recent.
func roleMistakes(violations []store.Trace, subj Subject) []mistake {
	byKind := map[string]*mistake{}
	var order []*mistake
	for _, t := range slices.Backward(violations) { // newest first
		if t.Context.Agent != subj.Role || t.Context.Feature == subj.Feature || t.Source == store.SourceAgent {
			continue
		}
		k := t.Gate + "\x00" + t.Code
		m := byKind[k]
		if m == nil {
			m = &mistake{example: t}
			byKind[k] = m
			order = append(order, m)
		}
		m.count++
		if f := featureOf(t); !slices.Contains(m.features, f) {
			m.features = append(m.features, f)
		}
	}
	slices.SortStableFunc(order, func(a, b *mistake) int { return cmp.Compare(b.count, a.count) })
	out := make([]mistake, len(order))
	for i, m := range order {
		out[i] = *m
	}
	return out
}

func clip(s string) string { return textcut.Line(s, maxLine) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
