// Package terms is the one tokenizer of the context graph: the store
// indexes a trace's words with it when the trace is appended, and the
// graph splits a feature's text with it when it asks which traces are
// like it. Both must split alike, or a query would look for words the
// index never holds.
package terms

import (
	"strings"
	"unicode"
)

// Of returns the words of s that carry meaning, in order, repeats kept:
// lower case, letters and digits, at least three long, not among the
// commonest English words, cut at MaxLen bytes.
func Of(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := words[:0]
	for _, w := range words {
		if len(w) >= 3 && !stopWords[w] {
			if len(w) > MaxLen {
				w = w[:MaxLen]
			}
			out = append(out, w)
		}
	}
	return out
}

// MaxLen bounds a term's length in bytes: longer words (a hash, a path
// run together) are cut, so that an index key stays small.
const MaxLen = 64

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
