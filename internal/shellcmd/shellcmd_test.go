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

// TestRunsTest: a command runs the test when the test's exit status is the
// command's: the test run as it is, or after setup, through && alone.
func TestRunsTest(t *testing.T) {
	const test = "sh tests/F-001.sh"
	tests := []struct {
		cmd  string
		want bool
	}{
		{"sh tests/F-001.sh", true},
		{"  sh   tests/F-001.sh  ", true},
		{`sh "tests/F-001.sh"`, true},
		{"cd . && sh tests/F-001.sh", true},
		{"export X=1; sh tests/F-001.sh", true},
		{"sh tests/F-001.sh\n", true},
		// The status is another command's.
		{"sh tests/F-001.sh || true", false},
		{"sh tests/F-001.sh; echo done", false},
		{"sh tests/F-001.sh | tee log.txt", false},
		{"! sh tests/F-001.sh", false},
		{"sh tests/F-001.sh &", false},
		{"sh tests/F-001.sh && echo ok", false},
		// Text of the test is not a run of it.
		{"echo sh tests/F-001.sh", false},
		{"printf 'sh tests/F-001.sh passed' | ctxgraphd-hook post-tool-use", false},
		{"cat tests/F-001.sh", false},
		{"sh tests/F-002.sh", false},
		{"sh tests/F-001.sh extra", false},
		{"sh tests/F-001.sh && (", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := RunsTest(tt.cmd, test); got != tt.want {
			t.Errorf("RunsTest(%q) = %v, want %v", tt.cmd, got, tt.want)
		}
	}
	if !RunsTest("go vet ./... ; go test ./...", "go vet ./...; go test ./...") {
		t.Error("a test of two statements run as written")
	}
	if RunsTest("go test ./...", "go vet ./...; go test ./...") {
		t.Error("half of a test of two statements is not a run of it")
	}
	if RunsTest("anything", "") || RunsTest("anything", "(") {
		t.Error("no test, or a test that is not shell, is never run")
	}
}
