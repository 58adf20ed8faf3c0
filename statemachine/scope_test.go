package statemachine

import (
	"fmt"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

var scopeCases = []struct {
	name string
	a, b []string
	want bool
}{
	{"no scope overlaps everything", nil, []string{"src/a.go"}, true},
	{"two features without scope overlap", nil, nil, true},
	{"an empty scope is no scope", []string{}, []string{"docs/**"}, true},
	{"disjoint directories", []string{"cmd/**"}, []string{"internal/**"}, false},
	{"nested directories", []string{"internal/**"}, []string{"internal/auth/**"}, true},
	{"a directory and a file in it", []string{"internal/**"}, []string{"internal/auth/login.go"}, true},
	{"a directory and a file beside it", []string{"internal/auth/**"}, []string{"internal/authz.go"}, false},
	{"a directory and its name as a file: a/** matches a", []string{"a/**"}, []string{"a"}, true},
	{"the same file", []string{"src/a.go"}, []string{"src/a.go"}, true},
	{"two files", []string{"src/a.go"}, []string{"src/ab.go"}, false},
	{"the same glob", []string{"src/*.go"}, []string{"src/*.go"}, true},
	{"* does not cross a slash: src/*.go and src/a/b.go", []string{"src/*.go"}, []string{"src/a/b.go"}, false},
	{"* matches the file", []string{"src/*.go"}, []string{"src/b.go"}, true},
	{"* globs a segment apart", []string{"src/*.go"}, []string{"src/a/*.go"}, false},
	{"* globs of other extensions", []string{"src/*.go"}, []string{"src/*.md"}, false},
	{"* globs whose suffixes agree", []string{"src/*.go"}, []string{"src/*_test.go"}, true},
	{"* globs whose prefixes agree", []string{"src/a*"}, []string{"src/ab*.go"}, true},
	{"* globs whose prefixes part", []string{"src/a*"}, []string{"src/b*"}, false},
	{"? globs", []string{"src/?.go"}, []string{"src/ab.go"}, false},
	{"a * segment against a named one", []string{"*/x.go"}, []string{"cmd/*.go"}, true},
	{"** first overlaps every glob", []string{"**"}, []string{"docs/*.md"}, true},
	{"**/*.go and a directory", []string{"**/*.go"}, []string{"docs/**"}, true},
	{"**/*.go and a Go file", []string{"**/*.go"}, []string{"cmd/main.go"}, true},
	{"**/*.go and a Markdown file", []string{"**/*.go"}, []string{"docs/readme.md"}, false},
	{"** inside a directory, against a sibling", []string{"src/**/*.go"}, []string{"lib/**"}, false},
	{"brace alternatives, one shared", []string{"{cmd,internal}/**"}, []string{"internal/auth/**"}, true},
	{"brace alternatives, none shared", []string{"{cmd,internal}/**"}, []string{"docs/**"}, false},
	{"brace alternatives against a file", []string{"{a,b}/**"}, []string{"b/x.go"}, true},
	{"nested braces", []string{"src/{a,{b,c}}.go"}, []string{"src/c.go"}, true},
	{"an unclosed brace: conservative", []string{"src/{a"}, []string{"src/b/**"}, true},
	{"a class: conservative, as a class may match a slash", []string{"src/[ab]*"}, []string{"src/c/**"}, true},
	{"a class against a file it does not match", []string{"src/[ab].go"}, []string{"src/c.go"}, false},
	{"a trailing slash is read as the gate reads it", []string{"src/"}, []string{"src/**"}, true},
	{"a trailing slash names the file, for the gate", []string{"src/"}, []string{"src/a.go"}, false},
	{"a leading ./ is read as the gate reads it", []string{"./src/**"}, []string{"src/a.go"}, true},
	{"backslashes are read as the gate reads them", []string{"src\\**"}, []string{"src/a/b.go"}, true},
	{"one glob of many overlaps", []string{"docs/**", "cmd/**"}, []string{"internal/**", "cmd/ctl.go"}, true},
	{"scopes that meet only on shared manifests", []string{"package.json", "package-lock.json", "src/a/**"}, []string{"src/b/**", "package-lock.json", "package.json"}, false},
	{"a shared manifest overlaps nothing, not even everything", []string{"go.mod"}, []string{"**"}, false},
	{"a nested project's lock and its directory", []string{"web/package-lock.json"}, []string{"web/**"}, false},
	{"a manifest named by a wildcard is judged as any glob", []string{"**/package.json"}, []string{"node_modules/**"}, true},
	{"a fixture named like a manifest is any file", []string{"testdata/go.mod"}, []string{"testdata/**"}, true},
	{"a manifest's copy is any file", []string{"package.json.bak"}, []string{"*.bak"}, true},
	{"shared manifests beside globs that overlap", []string{"go.mod", "src/**"}, []string{"go.mod", "src/a/**"}, true},
	{"many globs, none overlaps", []string{"docs/**", "cmd/**"}, []string{"internal/**", "web/*.js"}, false},
}

func TestScopesOverlap(t *testing.T) {
	for _, tt := range scopeCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := ScopesOverlap(tt.a, tt.b); got != tt.want {
				t.Errorf("ScopesOverlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := ScopesOverlap(tt.b, tt.a); got != tt.want {
				t.Errorf("ScopesOverlap(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

// FuzzScopesOverlap: the answer is symmetric, and never "disjoint" when a
// path is in both scopes, as doublestar.Match reads a glob and as the scope
// gate does (gates.InScope). Besides the fuzzed globs it tries globs made
// from the path, which the path is sure to match.
func FuzzScopesOverlap(f *testing.F) {
	for _, tt := range scopeCases {
		for _, p := range tt.a {
			for _, q := range tt.b {
				f.Add(p, q, strings.TrimRight(q, "/*"))
			}
		}
	}
	for _, s := range [][3]string{
		{"a/**", "a", "a"},
		{"a/**/", "a/*", "a/"},
		{"a//**", "a/", "a/"},
		{"{a,b/c}*", "b/*", "b/cd"},
		{"{,x}/**", "/y", "/y"},
		{"[^a]b", "/b", "/b"},
		{"a\\*", "a*", "a*"},
		{"a\\b/**", "a/b/c", "a/b/c"},
		{"x/../y/**", "y/z", "y/z"},
		{"\xff", "\xfe", "\xfe"},
		{"\uFFFD", "*", "\xff"},
		{"*{a,}", "x*", "xa"},
		{"src/{a,b}{c,d}.go", "src/bd.go", "src/bd.go"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, p, q, name string) {
		if ScopesOverlap([]string{p}, []string{q}) != ScopesOverlap([]string{q}, []string{p}) {
			t.Fatalf("ScopesOverlap is not symmetric for %q and %q", p, q)
		}
		globs := []string{p, q, name, path.Dir(name) + "/**", "**/" + path.Base(name), "*" + path.Ext(name)}
		if i := strings.IndexByte(name, '/'); i >= 0 {
			globs = append(globs, name[:i]+"/*"+name[i+1:], "*"+name[i:])
		}
		if r, size := utf8.DecodeRuneInString(name); size > 0 {
			globs = append(globs, "?"+name[size:], "{"+string(r)+",x}"+name[size:])
		}
		if progress.SharedManifest(progress.ScopePattern(name)) {
			return // shared by every scope: no glob that names it alone overlaps
		}
		clean := name != "" && path.Clean(name) == name && !strings.HasPrefix(name, "/") && name != ".." && !strings.HasPrefix(name, "../")
		var matching, inGate []string
		for _, g := range globs {
			if ok, _ := doublestar.Match(g, name); ok {
				matching = append(matching, g)
			}
			if clean && gates.InScope([]string{g}, name) {
				inGate = append(inGate, g)
			}
		}
		for reading, in := range map[string][]string{"doublestar.Match": matching, "gates.InScope": inGate} {
			for i, x := range in {
				for _, y := range in[i:] {
					if !ScopesOverlap([]string{x}, []string{y}) {
						t.Fatalf("ScopesOverlap(%q, %q) = false, but %q is in both (%s)", x, y, name, reading)
					}
				}
			}
		}
	})
}

// TestBraceExpansionIsBounded: a glob of up to maxAlternatives brace
// alternatives, in one brace or a product of braces, is judged alternative
// by alternative (found apart from a sibling directory); past the bound it
// is judged by its literal prefix alone, which may only say "overlap". At
// every size it overlaps a path it holds.
func TestBraceExpansionIsBounded(t *testing.T) {
	brace := func(prefix string, n int) string {
		alts := make([]string, n)
		for i := range alts {
			alts[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return "{" + strings.Join(alts, ",") + "}"
	}
	for _, factors := range [][]int{
		{1}, {2}, {maxAlternatives - 1}, {maxAlternatives}, {maxAlternatives + 1}, {2 * maxAlternatives},
		{2, 2, 2, 2, 2, 2}, {2, 2, 2, 2, 2, 2, 2}, {8, 8}, {7, 9}, {5, 13}, {maxAlternatives, 1}, {1, maxAlternatives + 1},
	} {
		n, glob := 1, "src/"
		for i, f := range factors {
			n *= f
			glob += brace(string(rune('a'+i)), f)
		}
		glob += "/**"
		t.Run(fmt.Sprint(factors), func(t *testing.T) {
			want := n > maxAlternatives
			if got := ScopesOverlap([]string{glob}, []string{"src/z/**"}); got != want {
				t.Errorf("%d alternatives: ScopesOverlap(%q, src/z/**) = %v, want %v", n, glob, got, want)
			}
			held := "src/"
			for i := range factors {
				held += string(rune('a'+i)) + "0"
			}
			if !ScopesOverlap([]string{glob}, []string{held + "/x.go"}) {
				t.Errorf("%d alternatives: %q found apart from %s/x.go, which it holds", n, glob, held)
			}
		})
	}
}
