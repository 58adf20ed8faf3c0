// Package lazyregexp is a package-level regular expression compiled the
// first time it is used, not at start-up (as Go's own cmd/go does it).
//
// The hook binary starts on every tool call of every agent, and compiling
// the gates' expressions at init cost it more than a millisecond, most of
// them for rules the call at hand never reaches. In a test binary every
// expression compiles at once, so that a bad one fails its package's tests
// rather than the first call that reaches it.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use. Its methods are
// regexp.Regexp's.
type Regexp struct {
	re func() *regexp.Regexp
}

// inTest reports whether this is a test binary (`go test` names them
// pkg.test), without linking package testing into the binaries that ship.
var inTest = len(os.Args) > 0 && strings.HasSuffix(strings.TrimSuffix(os.Args[0], ".exe"), ".test")

// New returns expr, to be compiled by regexp.MustCompile on first use (at
// once in a test binary).
func New(expr string) *Regexp {
	r := &Regexp{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
	if inTest {
		r.re()
	}
	return r
}

func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }
