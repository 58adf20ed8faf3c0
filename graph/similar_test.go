package graph

import (
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// postings is an index of violations as the store keeps it for BM25: the
// collection's counts and each term's postings, newest first.
type postings struct {
	col    store.Collection
	byTerm map[string][]store.Posting
}

func (x *postings) Traces(store.TraceFilter) ([]control.Trace, error) { return nil, nil }
func (x *postings) Trace(id string) (control.Trace, bool, error) {
	return control.Trace{ID: id}, true, nil
}
func (x *postings) Mistakes(string, string) ([]store.MistakeKind, error) {
	return nil, nil
}

func (x *postings) Postings(terms []string, visit func(string, store.Posting) bool) (store.Collection, error) {
	for _, term := range terms {
		for _, p := range x.byTerm[term] {
			if !visit(term, p) {
				break
			}
		}
	}
	return x.col, nil
}

// violation is one indexed violation: its sequence, length in terms,
// feature, and how often it holds each term.
type violation struct {
	seq     uint64
	length  int
	feature string
	tf      map[string]int
}

// index is a collection of docs violations of words terms in all, with
// df the number of them holding each term, of which vs are the ones
// holding a term of the query.
func index(docs, words int, df map[string]int, vs ...violation) *postings {
	x := &postings{col: store.Collection{Docs: docs, Words: words, DF: df}, byTerm: map[string][]store.Posting{}}
	for _, v := range slices.Backward(vs) { // newest first
		for term, tf := range v.tf {
			x.byTerm[term] = append(x.byTerm[term], store.Posting{Seq: v.seq, TF: tf, Len: v.length, Feature: v.feature})
		}
	}
	return x
}

// other is a violation of another feature than those of the tests.
func other(seq uint64, length int, tf map[string]int) violation {
	return violation{seq: seq, length: length, feature: "F-100", tf: tf}
}

// The violations like a feature's text are ranked by Okapi BM25 (k1 1.2,
// b 0.75, the idf of Lucene): each case is a trade-off the ranking makes,
// between two violations of ten whose terms average 10.
func TestSimilarRanksByBM25(t *testing.T) {
	ten := func(df map[string]int, vs ...violation) *postings { return index(10, 100, df, vs...) }
	for _, tt := range []struct {
		name string
		idx  *postings
		subj Subject
		want []string
	}{{
		name: "a rarer word weighs more",
		idx:  ten(map[string]int{"webhook": 1, "retry": 5}, other(1, 10, map[string]int{"webhook": 1}), other(2, 10, map[string]int{"retry": 1})),
		subj: Subject{Text: "webhook retry"},
		want: []string{"tr-1", "tr-2"},
	}, {
		name: "a word more often weighs more",
		idx:  ten(map[string]int{"webhook": 2}, other(1, 10, map[string]int{"webhook": 3}), other(2, 10, map[string]int{"webhook": 1})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-1", "tr-2"},
	}, {
		name: "a word in a shorter violation weighs more",
		idx:  ten(map[string]int{"webhook": 2}, other(1, 5, map[string]int{"webhook": 1}), other(2, 20, map[string]int{"webhook": 1})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-1", "tr-2"},
	}, {
		name: "a word every violation holds still counts; between equals, the newest first",
		idx:  index(2, 20, map[string]int{"webhook": 2}, other(1, 10, map[string]int{"webhook": 1}), other(2, 10, map[string]int{"webhook": 1})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-2", "tr-1"},
	}, {
		// 2.2/(1+1.2·0.4) = 1.49 against 4.4/(2+1.2·0.85) = 1.46
		name: "once in 2 terms outweighs twice in 8",
		idx:  ten(map[string]int{"webhook": 3}, other(1, 2, map[string]int{"webhook": 1}), other(2, 8, map[string]int{"webhook": 2})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-1", "tr-2"},
	}, {
		// 4.4/(2+1.2·0.625) = 1.6 against 2.2/(1+1.2·0.4) = 1.49
		name: "twice in 5 terms outweighs once in 2",
		idx:  ten(map[string]int{"webhook": 3}, other(1, 5, map[string]int{"webhook": 2}), other(2, 2, map[string]int{"webhook": 1})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-1", "tr-2"},
	}, {
		// idf ln(1+9.5/1.5) = 1.99 against ln(1+7.5/3.5)·1.375 = 1.57
		name: "a word of one violation once outweighs a word of three twice",
		idx:  ten(map[string]int{"webhook": 1, "retry": 3}, other(1, 10, map[string]int{"webhook": 1}), other(2, 10, map[string]int{"retry": 2})),
		subj: Subject{Text: "webhook retry"},
		want: []string{"tr-1", "tr-2"},
	}, {
		// idf ln(1+9.5/1.5) = 1.99 against ln(1+8.5/2.5)·1.375 = 2.04
		name: "a word of two violations twice outweighs a word of one once",
		idx:  ten(map[string]int{"webhook": 1, "retry": 2}, other(1, 10, map[string]int{"webhook": 1}), other(2, 10, map[string]int{"retry": 2})),
		subj: Subject{Text: "webhook retry"},
		want: []string{"tr-2", "tr-1"},
	}, {
		name: "the feature's own violations are not among those like it",
		idx:  ten(map[string]int{"webhook": 2}, violation{seq: 1, length: 10, feature: "F-001", tf: map[string]int{"webhook": 3}}, other(2, 10, map[string]int{"webhook": 1})),
		subj: Subject{Feature: "F-001", Text: "webhook"},
		want: []string{"tr-2"},
	}, {
		name: "the initializer is told of violations made on no feature",
		idx:  ten(map[string]int{"webhook": 1}, violation{seq: 1, length: 10, feature: "", tf: map[string]int{"webhook": 1}}),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-1"},
	}, {
		// The index is outside input to the ranking: one that lists a
		// violation under a word it holds no times (the store never writes
		// one) makes it like nothing.
		name: "a violation that holds the word no times is not like the text",
		idx:  ten(map[string]int{"webhook": 1}, other(1, 10, map[string]int{"webhook": 0}), other(2, 10, map[string]int{"webhook": 1})),
		subj: Subject{Text: "webhook"},
		want: []string{"tr-2"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := similar(tt.idx, tt.subj)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("got %v, want %v", ids(got), tt.want)
			}
		})
	}
}

// A common word brings in its newest maxPostings violations and no more,
// however many hold it: an older one that holds it more often is not
// looked at.
func TestSimilarReadsTheNewestPostingsOfAWord(t *testing.T) {
	var vs []violation
	for seq := uint64(1); seq <= maxPostings+1; seq++ {
		tf := 1
		if seq == 1 {
			tf = 5 // the oldest
		}
		vs = append(vs, other(seq, 10, map[string]int{"webhook": tf}))
	}
	n := len(vs)
	got, err := similar(index(n, 10*n, map[string]int{"webhook": n}, vs...), Subject{Text: "webhook"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tr-501", "tr-500", "tr-499", "tr-498", "tr-497"}
	if !slices.Equal(ids(got), want) {
		t.Errorf("got %v, want %v", ids(got), want)
	}
}
