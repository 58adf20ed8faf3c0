package terms

import (
	"slices"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Write src/shared.txt is OUTSIDE the scope", []string{"write", "src", "shared", "txt", "outside", "scope"}},
		{"the and of a to go", nil}, // stop words and words under three letters
		{"retry retries Retry", []string{"retry", "retries", "retry"}},
		{"café naïve 2026", []string{"café", "naïve", "2026"}},
		{strings.Repeat("x", MaxLen+10), []string{strings.Repeat("x", MaxLen)}},
	} {
		if got := Of(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Of(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
