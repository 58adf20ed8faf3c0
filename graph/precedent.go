// Package graph is ctxgraphd's context graph: what the traces of a project
// mean for the agents that come after them. The store keeps the bytes;
// this package decides which past traces a run is told about (its
// precedent), so that a mistake refused on one feature is not made again
// on the next by an agent nobody told.
package graph

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Traces is where the graph reads traces from: the daemon's store.
type Traces interface {
	Traces(store.TraceFilter) ([]control.Trace, error)
}

// Index is what Select reads: traces by filter and one by one, and what
// the store keeps up to date as traces are appended (the refusals of each
// role counted, the postings of the violations' words), so that choosing
// a precedent costs the same with a million traces as with a thousand.
type Index interface {
	Reader
	Mistakes(role, except string) ([]store.MistakeKind, error)
	Postings(terms []string, visit func(term string, p store.Posting) bool) (store.Collection, error)
}

// Subject is the run a precedent is chosen for.
type Subject struct {
	Role    string // the run's role, as traces name agents ("coding-agent")
	Feature string // its feature's id; "" for the initializer
	// Text is what the feature is about: its title, description and steps.
	Text string
	// Scope are the globs of the files the feature may change: what was
	// refused about those files, on any feature, concerns its run.
	Scope []string
	// History are lines about the feature that are not traces (its last
	// failure, a person's note): they come first, whatever they cost.
	History []Told
}

// Window bounds how many of the newest traces of a kind a reader of
// traces (patterns, ctl) looks at, so that it costs the same on the
// thousandth run as on the first.
const Window = 2000

// maxLine bounds one line of precedent, in bytes.
const maxLine = 300

// minLineTokens is what the shortest line of precedent costs ("tr-1 a
// person: x"): a budget of n tokens holds at most n/minLineTokens lines,
// so that no more traces of a kind need be read.
const minLineTokens = 4

// Select chooses the precedent of a run within budget tokens, most useful
// first:
//
//  1. the feature's own history (given), then its own refusals and
//     corrections, newest first;
//  2. the project's lessons;
//  3. refusals of agents of the same role on other features, one line per
//     gate and reason with how often it happened: the mistakes agents of
//     this role make here (counted since the first trace, by the store);
//  4. refusals about the files of the feature's scope on other features
//     (files.go);
//  5. violations of other features whose text is like the feature's
//     (BM25 over the store's postings: similar.go).
//
// Each line is short and names its trace, so that an agent, or a person
// reading the command, can look it up (ctl trace ID). A budget of 0 or
// less selects nothing. It reads only as many traces of each kind as the
// budget left could hold.
func Select(src Index, subj Subject, budget int) ([]string, error) {
	if budget <= 0 {
		return nil, nil
	}
	sel := selection{left: budget, seen: map[string]bool{}}
	for _, h := range subj.History {
		sel.add("", h.line())
	}
	if subj.Feature != "" {
		err := sel.each(src, func(t control.Trace) string {
			if t.Type == control.TraceCorrection && told(subj.History, t.Event.WhatWasCorrect) {
				return "" // a person's note the history already carries
			}
			return ownLine(t)
		}, store.TraceFilter{Feature: subj.Feature, Type: control.TraceViolation}, store.TraceFilter{Feature: subj.Feature, Type: control.TraceCorrection})
		if err != nil {
			return sel.lines, err
		}
	}
	err := sel.each(src, func(t control.Trace) string {
		// An agent's lesson is a proposal until a person promotes it: one
		// agent must not steer the others.
		if t.Source == control.SourceAgent {
			return ""
		}
		var l builder
		l.say(t.ID + " lesson")
		l.quote(author(t), t.Event.WhatHappened, maxQuote)
		return l.String()
	}, store.TraceFilter{Type: control.TraceLesson})
	if err != nil {
		return sel.lines, err
	}
	if subj.Role != "" {
		ms, err := roleMistakes(src, subj)
		if err != nil {
			return sel.lines, err
		}
		for _, m := range ms {
			sel.add(m.example.ID, m.line())
		}
	}
	onFiles, err := sameFiles(src, subj)
	if err != nil {
		return sel.lines, err
	}
	for _, t := range onFiles {
		var l builder
		refusal(&l, fmt.Sprintf("%s on this feature's files, on %s: ", t.ID, featureOf(t)), t)
		sel.add(t.ID, l.String())
	}
	like, err := similar(src, subj)
	if err != nil {
		return sel.lines, err
	}
	for _, t := range like {
		var l builder
		refusal(&l, fmt.Sprintf("%s like this feature, on %s: ", t.ID, featureOf(t)), t)
		sel.add(t.ID, l.String())
	}
	return sel.lines, nil
}

// each adds the lines of the traces matching any of fs, newest first
// (line says a trace's line, "" for none), while another could fit: at
// most as many traces as the budget left could hold lines, and none once
// the budget left is less than the shortest line of the kind so far (the
// lines of a kind are alike). It reads a page at a time, each twice the
// last, so that a precedent filled by its first lines decodes about as
// many traces as it tells.
func (s *selection) each(src Traces, line func(control.Trace) string, fs ...store.TraceFilter) error {
	most := min(s.fits(), Window)
	shortest := math.MaxInt
	before := ""
	for read, k := 0, 16; read < most; k *= 2 {
		n := min(k, most-read)
		ts, err := newest(src, n, before, fs...)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if l := line(t); l != "" {
				shortest = min(shortest, Tokens(l))
				s.add(t.ID, l)
			}
		}
		read += len(ts)
		if len(ts) < n || s.left < shortest {
			return nil
		}
		before = ts[len(ts)-1].ID
	}
	return nil
}

// newest returns the newest n traces appended before the trace before
// ("" for all) that match any of fs, newest first.
func newest(src Traces, n int, before string, fs ...store.TraceFilter) ([]control.Trace, error) {
	var out []control.Trace
	for _, f := range fs {
		f.Limit, f.Before = n, before
		ts, err := src.Traces(f)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	// Ids are sequences: tr-10 was appended after tr-9.
	slices.SortFunc(out, func(a, b control.Trace) int { return cmp.Compare(seqOf(b.ID), seqOf(a.ID)) })
	return out[:min(len(out), n)], nil
}

func seqOf(id string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(id, "tr-"), 10, 64)
	return n
}

// selection is a precedent being filled: each trace once, within budget.
type selection struct {
	lines []string
	left  int
	seen  map[string]bool
}

// fits is how many more lines the budget left could hold at most.
func (s *selection) fits() int { return s.left/minLineTokens + 1 }

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
func told(history []Told, text string) bool {
	return text != "" && slices.ContainsFunc(history, func(h Told) bool { return strings.Contains(h.Text, text) })
}

// ownLine is a line of the feature's own refusals and corrections.
func ownLine(t control.Trace) string {
	var l builder
	if t.Type == control.TraceCorrection {
		if t.Source != control.SourceUser {
			// Not the daemon's record of a person's move: all of it is
			// someone else's words.
			l.say(t.ID + " correction")
			l.quote(author(t), strings.TrimSuffix(t.Event.WhatHappened+": "+t.Event.WhatWasCorrect, ": "), maxQuote)
			return l.String()
		}
		// The daemon's words of what a person did ("F-001 reopened by ctl
		// unblock"), then the person's own.
		l.say(t.ID + " " + t.Event.WhatHappened)
		if t.Event.WhatWasCorrect != "" {
			l.quote(ByPerson, t.Event.WhatWasCorrect, maxQuote)
		}
		return l.String()
	}
	refusal(&l, t.ID+" ", t)
	return l.String()
}

// author labels the words of a trace by who wrote them.
func author(t control.Trace) string {
	switch t.Source {
	case control.SourceUser:
		return ByPerson
	case control.SourceAgent:
		return ByAgent
	}
	return ByRecord
}

// refusal says what a violation was and what was right instead: the gate
// and code in the daemon's words; what the agent wrote (the tool call's
// input, or the path) quoted as the agent's; a record that may quote an
// agent quoted as such; and the gate's advice, quoted. prefix is the
// daemon's words that start the line.
func refusal(l *builder, prefix string, t control.Trace) {
	if t.Source == control.SourceAgent {
		// Agents store no violations; one that says it is one is its
		// agent's words, all of it.
		l.say(prefix + "told by an agent, not refused by the daemon")
		l.quote(ByAgent, strings.TrimSuffix(t.Event.WhatHappened+"; "+t.Event.WhatWasCorrect, "; "), maxQuote)
		return
	}
	s := prefix + "refused by " + word(cmp.Or(t.Gate, "the daemon"))
	if t.Code != "" {
		s += " (" + word(t.Code) + ")"
	}
	switch {
	case t.Tool != nil && t.Tool.Name != "":
		s += " of " + word(t.Tool.Name)
	case t.Path != "":
		s += " of a file"
	}
	l.say(s)
	switch {
	case t.Tool != nil && t.Tool.Input != "":
		l.quote(ByAgent, t.Tool.Input, maxQuote)
	case t.Path != "":
		l.quote(ByAgent, t.Path, maxQuote)
	case t.Tool == nil && t.Event.WhatHappened != "":
		// No call or path to quote apart: the record is told, quoted,
		// for what it may quote of an agent (a test's output, a value
		// written into the feature list).
		l.quote(ByRecord, t.Event.WhatHappened, maxQuote)
	}
	if t.Event.WhatWasCorrect != "" {
		l.quote(ByGate, t.Event.WhatWasCorrect, maxAdvice)
	}
}

func featureOf(t control.Trace) string { return cmp.Or(t.Context.Feature, "no feature") }

// mistake is one kind of refusal agents of a role met on other features.
type mistake struct {
	example  control.Trace // the newest
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
	var l builder
	refusal(&l, fmt.Sprintf("%s on %s, a %s was ", m.example.ID, where, word(m.example.Context.Agent)), m.example)
	return l.String()
}

// roleMistakes are the refusals of agents of subj's role on other
// features, by gate and reason, from the store's counts: most frequent
// first, then most recent.
func roleMistakes(src Index, subj Subject) ([]mistake, error) {
	kinds, err := src.Mistakes(subj.Role, subj.Feature)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(kinds, func(a, b store.MistakeKind) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(b.NewestSeq, a.NewestSeq)
	})
	out := make([]mistake, 0, len(kinds))
	for _, k := range kinds {
		ex, ok, err := src.Trace(k.Newest)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // compaction keeps the newest of each kind; a damaged store may not
		}
		fs := make([]string, len(k.Features))
		for i, f := range k.Features {
			fs[i] = cmp.Or(f, "no feature")
		}
		out = append(out, mistake{example: ex, count: k.Count, features: fs})
	}
	return out, nil
}

func clip(s string) string { return textcut.Line(s, maxLine) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
