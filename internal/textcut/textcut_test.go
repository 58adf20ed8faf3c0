package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCuts(t *testing.T) {
	for _, tt := range []struct {
		name, got, want string
	}{
		{"short line", Line("a  b\n\tc", 10), "a b c"},
		{"exactly n", Line("abcde", 5), "abcde"},
		{"one over", Line("abcdef", 5), "ab…"},
		{"runes kept whole", Line("ééééé", 8), "éé…"},
		{"n smaller than the mark", Cut("abcdef", 2), "…"},
		{"cut keeps new lines", Cut("a\nbcdef", 5), "a\n…"},
		{"tail", Tail("first line\nlast words", 10), "…t words"},
		{"tail short", Tail("ok\n", 10), "ok"},
		{"tail runes", Tail("aéééé", 7), "…éé"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func FuzzCuts(f *testing.F) {
	f.Add("héllo wörld", 5)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		for _, out := range []string{Line(s, n), Cut(s, n), Tail(s, n)} {
			if len(out) > max(n, len(Mark)) {
				t.Fatalf("%q: %d bytes, over %d", out, len(out), n)
			}
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("%q cut to invalid text %q", s, out)
			}
		}
		if len(s) <= n && Cut(s, n) != s || strings.Contains(Line(s, n), "\n") {
			t.Fatal("Cut changed a short text, or Line kept a new line")
		}
	})
}
