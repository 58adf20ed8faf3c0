package graph

import (
	"cmp"
	"math"
	"slices"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/terms"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// maxSimilar bounds the traces a precedent takes for their likeness alone:
// past that, the likeness of short texts says little.
const maxSimilar = 5

// maxPostings bounds the violations a query term brings in as candidates,
// the newest first, so that a common word costs the same with a million
// traces as with a thousand. Its weight (idf) still comes from the whole
// collection.
const maxPostings = 500

// BM25's usual parameters: term frequency saturates at k1, and b weighs
// the document's length against the average.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// similar ranks the violations of features other than subj's by how much
// their text is like subj's (Okapi BM25: the store keeps the postings and
// the collection's counts, the ranking is here), best first, and returns
// those that share at least one meaningful word with it. Between equals,
// the newest.
func similar(src Index, subj Subject) ([]control.Trace, error) {
	q := terms.Of(subj.Text)
	slices.Sort(q)
	q = slices.Compact(q)
	if len(q) == 0 {
		return nil, nil
	}
	type cand struct {
		seq   uint64
		score float64
	}
	byID := map[uint64]*cand{}
	taken := map[string]int{}
	type hit struct {
		term string
		p    store.Posting
	}
	hits := make([]hit, 0, len(q)*maxPostings/4)
	col, err := src.Postings(q, func(term string, p store.Posting) bool {
		if subj.Feature != "" && p.Feature == subj.Feature {
			return true
		}
		hits = append(hits, hit{term, p})
		taken[term]++
		return taken[term] < maxPostings
	})
	if err != nil || col.Docs == 0 {
		return nil, err
	}
	n, avg := float64(col.Docs), float64(col.Words)/float64(col.Docs)
	for _, h := range hits {
		df := float64(col.DF[h.term])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		f := float64(h.p.TF)
		c := byID[h.p.Seq]
		if c == nil {
			c = &cand{seq: h.p.Seq}
			byID[h.p.Seq] = c
		}
		c.score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(h.p.Len)/avg))
	}
	ranked := make([]*cand, 0, len(byID))
	for _, c := range byID {
		if c.score > 0 {
			ranked = append(ranked, c)
		}
	}
	slices.SortFunc(ranked, func(a, b *cand) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	var out []control.Trace
	for _, c := range ranked {
		if len(out) == maxSimilar {
			break
		}
		t, ok, err := src.Trace(store.TraceID(c.seq))
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}
