package lazyregexp

import (
	"regexp"
	"slices"
	"testing"
)

// TestMethodsAreRegexps holds each method to regexp.Regexp's own answer.
func TestMethodsAreRegexps(t *testing.T) {
	const expr = `(\w+)=(\d+)`
	lazy, eager := New(expr), regexp.MustCompile(expr)
	for _, s := range []string{"", "a=1", "a=1 b=22 c=x", "no match"} {
		if got, want := lazy.MatchString(s), eager.MatchString(s); got != want {
			t.Errorf("MatchString(%q) = %v, want %v", s, got, want)
		}
		if got, want := lazy.FindStringSubmatch(s), eager.FindStringSubmatch(s); !slices.Equal(got, want) {
			t.Errorf("FindStringSubmatch(%q) = %q, want %q", s, got, want)
		}
		if got, want := lazy.FindAllStringSubmatch(s, -1), eager.FindAllStringSubmatch(s, -1); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("FindAllStringSubmatch(%q) = %q, want %q", s, got, want)
		}
		if got, want := lazy.ReplaceAllString(s, "$2"), eager.ReplaceAllString(s, "$2"); got != want {
			t.Errorf("ReplaceAllString(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestBadExpressionFailsInTests: in a test binary an expression compiles
// when it is declared, so that a bad one fails every test of its package.
func TestBadExpressionFailsInTests(t *testing.T) {
	if !inTest {
		t.Fatal("a test binary is not recognised as one")
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted a bad expression without compiling it")
		}
	}()
	New(`(`)
}
