// Package textcut fits text into one-line places: traces, precedent lines,
// reasons, logs. Each cut keeps whole UTF-8 characters and marks itself
// with "…", so that what is stored stays valid text and says it is cut.
package textcut

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mark ends (or, for Tail, starts) a text that was cut.
const Mark = "…"

// Fold is s on one line, runs of white space as one space, and nothing in
// it that acts rather than shows: text from a feature list or an agent
// kept from breaking a table or a terminal line, or from driving the
// terminal of the person who reads it (Printable).
func Fold(s string) string { return Printable(strings.Join(strings.Fields(s), " ")) }

// Printable is s with what would act on a terminal or a renderer, rather
// than show, written out as Go quotes it: control characters (C0, DEL and
// C1: an escape sequence erases a line and draws another, retitles the
// terminal, sets its clipboard), format characters (bidirectional
// overrides and isolates, zero-width characters, which make text read
// otherwise than it is) and bytes that are not UTF-8 (a lone 0x9b is a
// CSI to some terminals). New lines and tabs are escaped too: Fold has
// made them spaces before, and elsewhere a line stays one line.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if acts(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case acts(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// acts reports whether r is a control or format character, or stands for
// a byte that is not UTF-8.
func acts(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

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

// FirstN is up to n of names, joined with commas, and a mark when there
// were more: a list of paths or ids a message names without running on.
func FirstN(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", …"
}
