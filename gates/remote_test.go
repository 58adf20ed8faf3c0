package gates

import (
	"errors"
	"os"
	"testing"
)

// TestRemoteRunsAreJudgedByPathsAlone: the files of a Remote run are on a
// worker; what lies on the daemon's disk at the same paths (a link, a
// large file, a feature list) is no part of the run and does not change
// a decision. A local run is judged by its files, as before.
func TestRemoteRunsAreJudgedByPathsAlone(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.p("src/greet"), 0o755); err != nil {
		t.Fatal(err)
	}
	// On the daemon's disk, a link from the coder's scope to a frozen test.
	if err := os.Symlink("../../tests/F-001.sh", e.p("src/greet/link.sh")); err != nil {
		t.Fatal(err)
	}
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-1"}
	listPath := e.p(".claude/progress/feature-list.json")
	served := func(string) ([]byte, error) { return []byte(listJSON), nil }
	unreadable := func(string) ([]byte, error) { return nil, errors.New("no such file") }
	tests := []struct {
		name     string
		tool     string
		input    map[string]any
		readFile func(string) ([]byte, error)
		local    string // the code local runs meet, "" for none
		remote   string // the code remote runs meet
	}{
		{"a write through a link here", "Write", map[string]any{"file_path": e.p("src/greet/link.sh"), "content": "x"}, nil, "frozen_test", ""},
		{"a write of the frozen test itself", "Write", map[string]any{"file_path": e.p("tests/F-001.sh"), "content": "x"}, nil, "frozen_test", "frozen_test"},
		{"a read of a large file here", "Read", map[string]any{"file_path": e.p("build.log")}, nil, "file_too_large", ""},
		{"a cat of a large file here", "Bash", map[string]any{"command": "cat build.log"}, nil, "file_too_large", ""},
		{"an edit of the list, unread", "Edit", map[string]any{"file_path": listPath, "old_string": "Greeting", "new_string": "Greeting"}, nil, "", "feature_list_unseen"},
		{"an edit of the list, unreadable", "Edit", map[string]any{"file_path": listPath, "old_string": "Greeting", "new_string": "Greeting"}, unreadable, "", "feature_list_unseen"},
		{"an edit of the list as served", "Edit", map[string]any{"file_path": listPath, "old_string": "Greeting", "new_string": "Greeting"}, served, "", ""},
		{"an edit the served list lacks", "Edit", map[string]any{"file_path": listPath, "old_string": "Hello", "new_string": "Hi"}, served, "", "feature_list_unseen"},
	}
	for _, tt := range tests {
		for _, remote := range []bool{false, true} {
			want := tt.local
			if remote {
				want = tt.remote
			} else if tt.readFile != nil {
				continue // the local run reads its own file
			}
			name := tt.name + map[bool]string{false: " (local)", true: " (remote)"}[remote]
			t.Run(name, func(t *testing.T) {
				s := e.state
				s.Frozen = map[string]bool{"tests/F-001.sh": true}
				s.Remote, s.ReadFile = remote, tt.readFile
				d := PreToolUse(Modes{}, coder, s, fixture(t, "PreToolUse.json", tt.tool, tt.input))
				switch {
				case want == "" && d != nil:
					t.Fatalf("refused %s/%s: %s", d.Gate, d.Code, d.Message)
				case want != "" && (d == nil || d.Code != want):
					t.Fatalf("got %+v, want %s", d, want)
				}
			})
		}
	}
}
