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
		{"an escape sequence shows, and does not act", Fold("ok\x1b[1A\x1b[2K\rforged"), `ok\x1b[1A\x1b[2K forged`},
		{"a terminal's title and clipboard", Fold("\x1b]0;owned\x07\x1b]52;c;cm0=\x07"), `\x1b]0;owned\a\x1b]52;c;cm0=\a`},
		{"C1 controls, as UTF-8 and as a lone byte", Fold("a\u009b2Kb\x9b2K"), `a\u009b2Kb\x9b2K`},
		{"bidirectional overrides and zero-width characters", Fold("tested\u202e\u2066x\u200b"), `tested\u202e\u2066x\u200b`},
		{"DEL", Fold("a\x7fb"), `a\x7fb`},
		{"what only shows is left as it is", Fold("héllo — wörld ✓ 中文"), "héllo — wörld ✓ 中文"},
		{"a tail is printable too", Tail("out\x1b[2K", 20), `out\x1b[2K`},
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
		for _, r := range Fold(s) {
			if acts(r) {
				t.Fatalf("Fold(%q) keeps %U, which acts on a terminal", s, r)
			}
		}
		if !utf8.ValidString(Fold(s)) {
			t.Fatalf("Fold(%q) is not UTF-8", s)
		}
		if len(s) <= n && Cut(s, n) != s || strings.Contains(Line(s, n), "\n") {
			t.Fatal("Cut changed a short text, or Line kept a new line")
		}
	})
}

// Fold puts text on one line; Runes cuts what a person sees, in
// characters, marked.
func TestFoldAndRunes(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		fold     string
		runes    string
	}{
		{"short", "a b", 5, "a b", "a b"},
		{"newlines and tabs", "a\n\tb  c", 20, "a b c", "a\n\tb  c"},
		{"exactly n characters", "héllo", 5, "héllo", "héllo"},
		{"one character more", "héllo!", 5, "héllo!", "héll…"},
		{"wide characters count once each", "日本語のテキスト", 4, "日本語のテキスト", "日本語…"},
		{"n of one", "abc", 1, "abc", "…"},
		{"empty", "", 3, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fold(tt.in); got != tt.fold {
				t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.fold)
			}
			if got := Runes(tt.in, tt.n); got != tt.runes {
				t.Errorf("Runes(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.runes)
			}
		})
	}
}
