package judge

import (
	"path/filepath"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
)

// What is on disk while a run is in flight can be the run's doing, half-way,
// only if it is the start of what its hooks let its Write put there,
// anything after an Edit (whose result the hooks do not see), or the empty
// file the sandbox leaves where a denied path does not exist yet. The end
// of the run asks the stricter question: is it exactly what the run wrote?
func TestWhatARunMayBeWritingOfTheList(t *testing.T) {
	const content = `{"version": 1, "features": []}`
	for _, tc := range []struct {
		name           string
		tool           string // the run's let-through write of the list; "" for none
		data           string
		writing, wrote bool
	}{
		{"nothing written yet", "", `{"vers`, false, false},
		{"an empty file before any Write: the sandbox's mount point", "", "", true, false},
		{"an empty file, the Write's first piece", "Write", "", true, false},
		{"the Write half-way", "Write", content[:12], true, false},
		{"the Write whole", "Write", content, true, true},
		{"something else", "Write", `{"version": 2`, false, false},
		{"more than was written", "Write", content + " ", false, false},
		{"after an Edit, anything", "Edit", `{"vers`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			token := f.j.Register(gates.Actor{Role: gates.Initializer, Run: "run-1"})
			path := filepath.Join(f.dir, ".claude/progress/feature-list.json")
			switch tc.tool {
			case "Write":
				f.mustHook(token, "pre-tool-use", map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
					"tool_input": map[string]any{"file_path": path, "content": content}})
			case "Edit":
				f.mustHook(token, "pre-tool-use", map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Edit",
					"tool_input": map[string]any{"file_path": path, "old_string": "[]", "new_string": "[ ]"}})
			}
			if got := f.j.MayBeWritingList("run-1", []byte(tc.data)); got != tc.writing {
				t.Errorf("MayBeWritingList(%q) = %v, want %v", tc.data, got, tc.writing)
			}
			if got := f.j.MayHaveWrittenList("run-1", []byte(tc.data)); got != tc.wrote {
				t.Errorf("MayHaveWrittenList(%q) = %v, want %v", tc.data, got, tc.wrote)
			}
			if f.j.MayBeWritingList("run-2", []byte(tc.data)) {
				t.Error("a run the judge does not know is writing the list")
			}
		})
	}
}
