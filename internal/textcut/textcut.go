// Package textcut fits text into one-line places: traces, precedent lines,
// reasons, logs. Each cut keeps whole UTF-8 characters and marks itself
// with "…", so that what is stored stays valid text and says it is cut.
package textcut

import "strings"

// Mark ends (or, for Tail, starts) a text that was cut.
const Mark = "…"

// Line is s on one line, runs of white space as one space, cut to at most
// n bytes, the mark included.
func Line(s string, n int) string { return Cut(strings.Join(strings.Fields(s), " "), n) }

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
	s = strings.Join(strings.Fields(s), " ")
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
