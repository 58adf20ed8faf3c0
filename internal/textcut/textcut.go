// Package textcut fits text into one-line places: traces, precedent lines,
// reasons, logs. Each cut keeps whole UTF-8 characters and marks itself
// with "…", so that what is stored stays valid text and says it is cut.
package textcut

import "strings"

// Mark ends (or, for Tail, starts) a text that was cut.
const Mark = "…"

// Fold is s on one line, runs of white space as one space: text from a
// feature list or an agent kept from breaking a table or a terminal line.
func Fold(s string) string { return strings.Join(strings.Fields(s), " ") }

// Line is s on one line (Fold), cut to at most n bytes, the mark included.
func Line(s string, n int) string { return Cut(Fold(s), n) }

// Runes is s cut to at most n characters, the mark included: where what
// counts is what a person sees (a terminal's columns, a short summary),
// not bytes.
func Runes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + Mark
}

// Cut is s cut to at most n bytes, the mark included, at a character
// boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := max(n-len(Mark), 0)
	for end > 0 && !startsRune(s[end]) {
		end--
	}
	return s[:end] + Mark
}

// Tail is the end of s on one line, at most n bytes, the mark included: a
// test runner's verdict is at the end of its output.
func Tail(s string, n int) string {
	s = Fold(s)
	if len(s) <= n {
		return s
	}
	start := len(s) - max(n-len(Mark), 0)
	for start < len(s) && !startsRune(s[start]) {
		start++
	}
	return Mark + s[start:]
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }
