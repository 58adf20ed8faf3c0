package guard

import (
	"path/filepath"
	"testing"
)

// TestInsideTheProjectIsTheProjectAndBelow: a path is inside the project
// when it is the project or below it, and nothing else is: not its parent,
// not a sibling whose name starts with the project's, not a path that
// cannot be made relative to it.
func TestInsideTheProjectIsTheProjectAndBelow(t *testing.T) {
	root := t.TempDir()
	s := State{ProjectDir: filepath.Join(root, "p")}
	tests := []struct {
		path   string
		rel    string
		inside bool
	}{
		{filepath.Join(root, "p"), ".", true},
		{filepath.Join(root, "p", "src", "a.go"), "src/a.go", true},
		{filepath.Join(root, "p", "..p", "a"), "..p/a", true}, // a name that starts with two dots
		{root, "", false},
		{filepath.Join(root, "q", "a.go"), "", false},
		{filepath.Join(root, "p2", "a.go"), "", false},
		{"", "", false},
		{"relative/a.go", "", false},
	}
	for _, tt := range tests {
		rel, inside := s.within(tt.path)
		if rel != tt.rel || inside != tt.inside {
			t.Errorf("within(%q) = %q, %v; want %q, %v", tt.path, rel, inside, tt.rel, tt.inside)
		}
	}
}
