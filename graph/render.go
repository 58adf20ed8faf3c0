package graph

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// A line of precedent is read by an agent as what the daemon tells it, so
// it holds words of three kinds, never mixed: the daemon's own (trace ids,
// gates, codes, roles, features, fixed phrases), unquoted; and what anyone
// else wrote, quoted, labelled by who wrote it, and bounded: an agent's
// path, command, message or stored trace, a person's note or lesson, or a
// record of the daemon's that may quote an agent (a test's output, a
// value written into the feature list). Quoted, such text can neither
// end its quote, nor start a line, nor pass for the daemon's frame or a
// person's words: "NOTE FROM THE USER" in a path stays the agent's path.

// Who wrote a quoted part of a line of precedent: its label.
const (
	// ByAgent labels what an agent wrote: a path, a command, a message, a
	// trace it stored.
	ByAgent = "agent wrote"
	// ByPerson labels a person's words: a note of ctl unblock, a lesson.
	ByPerson = "a person wrote"
	// ByRecord labels a record of the daemon's that may quote an agent (a
	// test's output, a tester's report, a value of the feature list).
	ByRecord = "record (may quote an agent)"
	// ByGate labels a gate's advice: the daemon's, or a person's guard.
	ByGate = "the gate's advice"
)

// Told is a line of a feature's history that is not a trace: the daemon's
// words (Frame), and Text, which someone else wrote (By, one of the labels
// above), quoted.
type Told struct {
	Frame string
	By    string
	Text  string
}

func (h Told) line() string {
	var l builder
	l.say(h.Frame)
	if strings.TrimSpace(h.Text) != "" {
		l.quote(h.By, h.Text, maxQuote)
	}
	return l.String()
}

// Bounds of the quoted parts of a line, in bytes, quotes and escapes
// included; the line as a whole stays within maxLine.
const (
	maxQuote  = 160 // what an agent or a person wrote, a record
	maxAdvice = 110 // a gate's advice
	// minQuote is the least a quoted part is worth: with less room left
	// in the line, it is left out rather than cut to nothing.
	minQuote = 12
)

// Quote is text someone other than the daemon wrote, as a line of
// precedent carries it: cut (internal/textcut), then Go-quoted with every
// control character, line or paragraph separator, invisible format
// character and non-printable byte escaped, at most n bytes quotes
// included (n at least 8).
func Quote(s string, n int) string {
	n = max(n, 8)
	if q := strconv.Quote(s); len(q) <= n {
		return q
	}
	// Escapes make a quote longer than its text: the longest cut whose
	// quote fits, found by halving (a cut of 0 bytes is the mark alone).
	lo, hi := 0, min(len(s), n-2)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(strconv.Quote(textcut.Cut(s, mid))) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strconv.Quote(textcut.Cut(s, lo))
}

// builder is a line of precedent being written: the daemon's words, and
// quoted parts, within maxLine bytes.
type builder struct{ b strings.Builder }

// say appends the daemon's own words, on one line, cut to what is left.
func (l *builder) say(s string) {
	left := maxLine - l.b.Len()
	if left <= 0 {
		return
	}
	l.b.WriteString(textcut.Line(s, left))
}

// quote appends "; by: "text"" (after a colon, " by: "text""), quoted and bounded by most and what is
// left of the line; it is left out when too little is left.
func (l *builder) quote(by, text string, most int) {
	head := "; " + by + ": "
	switch s := l.b.String(); {
	case s == "":
		head = by + ": "
	case strings.HasSuffix(s, ":"):
		head = " " + by + ": "
	}
	left := maxLine - l.b.Len() - len(head)
	if left < minQuote {
		return
	}
	l.b.WriteString(head)
	l.b.WriteString(Quote(text, min(most, left)))
}

func (l *builder) String() string { return l.b.String() }

// plainWord is a name the daemon may say as it is (a gate, a code, a tool):
// anything else is quoted, as someone else's words.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$`)

// word is a name as a line says it: plain, or quoted when it is not a
// plain word (a gate named by a project's guard, a tool named by a
// payload).
func word(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return Quote(s, 40)
}
