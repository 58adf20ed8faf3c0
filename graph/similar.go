package graph

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/ctxgraphd/ctxgraphd/store"
)

// maxSimilar bounds the traces a precedent takes for their likeness alone:
// past that, the likeness of short texts says little.
const maxSimilar = 5

// BM25's usual parameters: term frequency saturates at k1, and b weighs
// the document's length against the average.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// similar ranks traces by how much their text is like query (Okapi BM25,
// over the traces given: their words are the collection), best first, and
// returns those that share at least one meaningful word with it.
func similar(traces []store.Trace, query string) []store.Trace {
	q := terms(query)
	if len(q) == 0 || len(traces) == 0 {
		return nil
	}
	docs := make([][]string, len(traces))
	df := map[string]int{}
	total := 0
	for i, t := range traces {
		docs[i] = terms(traceText(t))
		total += len(docs[i])
		seen := map[string]bool{}
		for _, w := range docs[i] {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	avg := float64(total) / float64(len(docs))
	n := float64(len(docs))
	type scored struct {
		t     store.Trace
		score float64
	}
	var out []scored
	for i, d := range docs {
		tf := map[string]int{}
		for _, w := range d {
			tf[w]++
		}
		var score float64
		for _, w := range uniq(q) {
			f := float64(tf[w])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[w])+0.5)/(float64(df[w])+0.5))
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(len(d))/avg))
		}
		if score > 0 {
			out = append(out, scored{traces[i], score})
		}
	}
	// Best first; between equals, the newest.
	slices.SortStableFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return b.t.Timestamp.Compare(a.t.Timestamp)
	})
	res := make([]store.Trace, 0, min(len(out), maxSimilar))
	for _, s := range out[:min(len(out), maxSimilar)] {
		res = append(res, s.t)
	}
	return res
}

func traceText(t store.Trace) string {
	return t.Event.WhatHappened + " " + t.Event.WhatWasCorrect + " " + t.Event.Why
}

// terms are the words of s that carry meaning: lower case, letters and
// digits, at least three long, not among the commonest English words.
func terms(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := words[:0]
	for _, w := range words {
		if len(w) >= 3 && !stopWords[w] {
			out = append(out, w)
		}
	}
	return out
}

func uniq(ws []string) []string {
	out := slices.Clone(ws)
	slices.Sort(out)
	return slices.Compact(out)
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and for are but not you all any can had her was one our out has him his how its
		may new now old see two way who did get let put say she too use that with have this will your from they
		been were what when which their there then them than some into only over also each just more most other
		such very should would could must shall feature agent`) {
		m[w] = true
	}
	return m
}()
