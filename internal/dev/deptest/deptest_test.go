package deptest

import "testing"

// A rule names one package, or with "/..." the package and every package
// under it, never a package that merely shares its prefix.
func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"example.com/a", "example.com/a", true},
		{"example.com/a", "example.com/a/b", false},
		{"example.com/a/...", "example.com/a", true},
		{"example.com/a/...", "example.com/a/b/c", true},
		{"example.com/a/...", "example.com/ab", false},
		{"example.com/a", "example.com/ab", false},
		{"net/http", "net/http/httptest", false},
	} {
		if got := Match(tt.pattern, tt.pkg); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.pkg, got, tt.want)
		}
	}
}
