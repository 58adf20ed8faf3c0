package fleet

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAWorkersProgressFilesStayInTheirPlace: of the files of
// .claude/progress an outcome carries, only the feature list and evidence
// are written, and nothing outside the directory or through a link.
func TestAWorkersProgressFilesStayInTheirPlace(t *testing.T) {
	tests := []struct {
		rel   string
		lands bool // mayReturn lets it through and writeProgress writes it
	}{
		{"feature-list.json", true},
		{"evidence/F-001/test.log", true},
		{"goal.md", false},
		{"session-state.json", false},
		{"feature-list.json.bak", false},
		{"evidence", false},
		{"evidence/../../../src/x.go", false},
		{"evidence/F-001/../../goal.md", false},
		{"/etc/passwd", false},
		{"evidence\\..\\goal.md", false},
		{"evidence/F-002/through-link/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			lane := t.TempDir()
			progress := filepath.Join(lane, ".claude/progress")
			os.MkdirAll(filepath.Join(progress, "evidence"), 0o755)
			os.MkdirAll(filepath.Join(lane, "src"), 0o755)
			os.Symlink(filepath.Join(lane, "src"), filepath.Join(progress, "evidence/F-002"))
			lands := mayReturn(tt.rel) && writeProgress(lane, map[string][]byte{tt.rel: []byte("x")}) == nil
			if lands != tt.lands {
				t.Errorf("%q landed: %v, want %v", tt.rel, lands, tt.lands)
			}
			if entries, _ := os.ReadDir(filepath.Join(lane, "src")); len(entries) > 0 {
				t.Errorf("%q wrote into src: %v", tt.rel, entries)
			}
		})
	}
}
