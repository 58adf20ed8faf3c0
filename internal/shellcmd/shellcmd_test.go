package shellcmd

import (
	"slices"
	"testing"
)

// TestScriptsAreWhatMustExist: the files a test command runs as programs
// are what must exist for it to run at all; other words may be outputs or
// names of things that are not files.
func TestScriptsAreWhatMustExist(t *testing.T) {
	tests := []struct {
		test    string
		scripts []string
		invalid bool
	}{
		{"sh tests/a.sh", []string{"tests/a.sh"}, false},
		{"cd sub && sh t.sh", []string{"sub/t.sh"}, false},
		{"./run.sh > out.log", []string{"run.sh"}, false},
		{"python3 -m pytest tests/", nil, false},
		{"python3 check.py arg.txt", []string{"check.py"}, false},
		{"node --test test/a.test.js", []string{"test/a.test.js"}, false},
		{`bash -c "cd x && ./t.sh"`, []string{"x/t.sh"}, false},
		{"go test ./...", nil, false},
		{"sh tests/a.sh && (", nil, true},
	}
	for _, tt := range tests {
		tc := ParseTest(tt.test)
		if (tc.Invalid != "") != tt.invalid {
			t.Errorf("ParseTest(%q).Invalid = %q", tt.test, tc.Invalid)
		}
		if !slices.Equal(tc.Scripts, tt.scripts) {
			t.Errorf("ParseTest(%q).Scripts = %q, want %q", tt.test, tc.Scripts, tt.scripts)
		}
	}
}
