package gates

import (
	"os"
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

// A link that leads to a file not there yet (a dangling link) is judged as
// where it leads: a file tool that writes through it creates that file.
// An agent that links src/x.yaml to .claude/ctxgraphd/guards.yaml, or to
// .claude/settings.local.json, before either exists, and then writes the
// link with the Write tool, meets the rule of the file it would create.
func TestADanglingLinkIsJudgedAsWhereItLeads(t *testing.T) {
	e := newEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-1"}
	if err := os.MkdirAll(e.p(".claude/ctxgraphd"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"src/greet/guards.yaml":    "../../.claude/ctxgraphd/guards.yaml",
		"src/greet/settings.json":  e.p(".claude/settings.local.json"),
		"src/greet/chain.yaml":     "guards.yaml", // a link to the link
		"src/greet/gone/deep.yaml": "",            // under a dangling link to a directory
	} {
		if target == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(e.p(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, e.p(link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../.claude/nothere", e.p("src/greet/gone")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"src/greet/guards.yaml":    ".claude/ctxgraphd/guards.yaml",
		"src/greet/settings.json":  ".claude/settings.local.json",
		"src/greet/chain.yaml":     ".claude/ctxgraphd/guards.yaml",
		"src/greet/gone/deep.yaml": ".claude/nothere/deep.yaml",
	} {
		if got := e.state.rel(e.state.resolve(e.p(path))); got != want {
			t.Errorf("resolve(%s) = %s, want %s", path, got, want)
		}
		p := fixture(t, "PreToolUse.json", "Write", map[string]any{"file_path": e.p(path), "content": "guards: []\n"})
		if d := PreToolUse(Modes{}, coder, e.state, p); !d.Blocks() {
			t.Errorf("a coder's Write of %s, a link to %s: %+v, want it refused", path, want, d)
		}
	}
}
