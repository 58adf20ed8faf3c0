package statemachine

import (
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// ScopesOverlap reports whether two features' scopes (progress.Feature.Scope:
// doublestar globs of the project paths a feature may change) could both
// hold one path, so that the two must not run in lanes at once. A feature
// without a scope may change anything: it overlaps every scope.
//
// It is an approximation that errs one way only: it may say "overlap" of
// scopes no path is in both of (the features then wait for each other), but
// never "disjoint" of scopes some path is in both of. Two globs are found
// disjoint only when
//
//   - one is a plain path: the other does not match it (doublestar.Match,
//     exact);
//   - neither's literal prefix (up to its first metacharacter, trailing
//     slashes left off, as "a/**" also matches "a") is a prefix of the
//     other's: every path either matches starts with both;
//   - both use only * and ? (no **, class, escape or brace): the paths
//     either matches have as many segments as it, so the two differ in
//     their number of segments, or in a segment whose literal prefixes, or
//     literal suffixes, part ways ("src/*.go" and "src/a/*.go"; "*.go" and
//     "*.md").
//
// Braces are expanded first ("{cmd,internal}/**" is two globs), as Match
// itself tries them; a glob too odd to expand keeps its literal prefix up to
// the brace. Each pair is judged as written and as the scope gate reads it
// (gateGlob), and overlaps when either says so. A glob that names a shared
// manifest (progress.OnlySharedManifest: package.json, go.sum, …) overlaps
// nothing: any feature may change those files whatever its scope, and two
// lanes that do meet in the merge queue.
func ScopesOverlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, p := range a {
		for _, q := range b {
			if progress.OnlySharedManifest(p) || progress.OnlySharedManifest(q) {
				continue // shared by every feature (progress.SharedManifest): met in the merge queue
			}
			if globsOverlap(p, q) || globsOverlap(gateGlob(p), gateGlob(q)) {
				return true
			}
		}
	}
	return false
}

// gateGlob is glob as the scope gate matches it (progress.ScopePattern,
// which gates.InScope reads scopes with too).
func gateGlob(glob string) string { return progress.ScopePattern(glob) }

// maxAlternatives bounds brace expansion: a glob of more alternatives is
// judged by its literal prefix alone.
const maxAlternatives = 64

func globsOverlap(p, q string) bool {
	for _, x := range expandBraces(p) {
		for _, y := range expandBraces(q) {
			if altsOverlap(x, y) {
				return true
			}
		}
	}
	return false
}

// altsOverlap judges two globs, brace-free unless expandBraces left them.
func altsOverlap(x, y string) bool {
	xp, yp, overlap, decided := literalOverlap(x, y)
	if decided {
		return overlap
	}
	xp, yp = strings.TrimRight(xp, "/"), strings.TrimRight(yp, "/")
	if !strings.HasPrefix(xp, yp) && !strings.HasPrefix(yp, xp) {
		return false
	}
	if !starsOnly(x) || !starsOnly(y) {
		return true
	}
	xs, ys := strings.Split(x, "/"), strings.Split(y, "/")
	if len(xs) != len(ys) {
		return false
	}
	for i := range xs {
		if !segmentsOverlap(xs[i], ys[i]) {
			return false
		}
	}
	return true
}

// segmentsOverlap judges two segments of globs that use only * and ?.
func segmentsOverlap(x, y string) bool {
	xp, yp, overlap, decided := literalOverlap(x, y)
	if decided {
		return overlap
	}
	// What follows the last * or ? ends every match.
	xs, ys := x[strings.LastIndexAny(x, "*?")+1:], y[strings.LastIndexAny(y, "*?")+1:]
	return (strings.HasPrefix(xp, yp) || strings.HasPrefix(yp, xp)) &&
		(strings.HasSuffix(xs, ys) || strings.HasSuffix(ys, xs))
}

// literalPrefix is glob up to its first metacharacter, which every path it
// matches begins with; literal reports that glob has none, and so matches
// only itself. Invalid UTF-8 and U+FFFD end the prefix too: Match compares
// runes, and every invalid byte decodes to U+FFFD.
func literalPrefix(glob string) (prefix string, literal bool) {
	for i, r := range glob {
		switch r {
		case '*', '?', '[', '{', '\\', utf8.RuneError:
			return glob[:i], false
		}
	}
	return glob, true
}

// starsOnly reports whether glob's only metacharacters are * and ?, neither
// of which matches a slash: its matches have as many segments as it. A
// class can match a slash, and ** many segments.
func starsOnly(glob string) bool {
	if strings.Contains(glob, "**") || !utf8.ValidString(glob) {
		return false
	}
	return !strings.ContainsAny(glob, "[{\\"+string(utf8.RuneError))
}

// expandBraces lists the brace-free globs that glob's alternatives stand
// for, expanding the first brace first as Match does; a glob it cannot
// expand safely (a class or an escape, whose brackets and backslashes
// change what a brace is; an unclosed brace; too many alternatives) is
// returned as it is.
func expandBraces(glob string) []string {
	if strings.ContainsAny(glob, "[\\") {
		return []string{glob}
	}
	out := []string{glob}
	for i := 0; i < len(out); {
		alts, ok := expandFirst(out[i])
		if !ok {
			return []string{glob}
		}
		if alts == nil {
			i++
			continue
		}
		out = append(out[:i], append(alts, out[i+1:]...)...)
		if len(out) > maxAlternatives {
			return []string{glob}
		}
	}
	return out
}

// expandFirst expands glob's first brace: nil when it has none, !ok when
// the brace is not closed.
func expandFirst(glob string) (alts []string, ok bool) {
	open := strings.IndexByte(glob, '{')
	if open < 0 {
		return nil, true
	}
	var commas []int
	depth := 0
	for i := open; i < len(glob); i++ {
		switch glob[i] {
		case '{':
			depth++
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		case '}':
			if depth--; depth > 0 {
				continue
			}
			start := open + 1
			for _, c := range append(commas, i) {
				alts = append(alts, glob[:open]+glob[start:c]+glob[i+1:])
				start = c + 1
			}
			return alts, true
		}
	}
	return nil, false
}

// literalOverlap decides two globs (or segments of them) of which one is a
// plain path: equal, or one matching the other, is overlap. Otherwise it
// gives their literal prefixes, undecided.
func literalOverlap(x, y string) (xp, yp string, overlap, decided bool) {
	xp, xLiteral := literalPrefix(x)
	yp, yLiteral := literalPrefix(y)
	switch {
	case xLiteral && yLiteral:
		return xp, yp, x == y, true
	case xLiteral:
		ok, _ := doublestar.Match(y, x)
		return xp, yp, ok, true
	case yLiteral:
		ok, _ := doublestar.Match(x, y)
		return xp, yp, ok, true
	}
	return xp, yp, false, false
}
