package gates

import (
	"path/filepath"
	"testing"
)

// TestNestedClaudeConfigIsNoAgentsToWrite: claude_config refuses
// .claude/… and .mcp.json at the project's root only (write.go:
// `rel == ".mcp.json" || strings.HasPrefix(rel, ".claude/")`), while
// CLAUDE.md is refused in any directory "because Claude Code reads it in
// every later session, people's too". A .claude/settings.json (hooks, which
// run unsandboxed with the user's powers), a .claude/skills/ or
// .claude/agents/ definition (frontmatter hooks) or an .mcp.json in a
// subdirectory configures Claude Code just the same for a session started
// in that directory: a person's `claude` in src/ (a monorepo's package), or
// any run whose cwd is there. A coder whose scope holds the directory
// writes them freely, the verdict keeps them, and the commit puts them on
// the branch (e2e TestNestedClaudeSettingsReachAPersonsSession showed a
// person's session in src/ running the hook the agent wrote).
func TestNestedClaudeConfigIsNoAgentsToWrite(t *testing.T) {
	e := newWriteEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000002"} // scope src/**
	for _, rel := range []string{
		"src/.claude/settings.json",
		"src/.claude/settings.local.json",
		"src/.claude/skills/fmt/SKILL.md",
		"src/.claude/agents/helper.md",
		"src/.claude/commands/go.md",
		"src/pkg/.CLAUDE/settings.json",
		"docs/.Mcp.json",
		"src/.mcp.json",
	} {
		if d := PreToolUse(Modes{}, coder, e.state, writePayload("Write", filepath.Join(e.dir, rel))); !d.Blocks() {
			t.Errorf("Write %s by a coder (scope src/**): allowed; it configures Claude Code for every session started in src/", rel)
		}
		if fs := JudgeChanges(Modes{}, coder, e.state, []Change{{Path: rel, Kind: "added"}}); len(fs) == 0 {
			t.Errorf("a change of %s found in the tree: kept and committed", rel)
		}
	}
}

// What only looks like Claude Code's configuration is a coder's to write
// within its scope.
func TestLookalikesOfClaudeConfigAreWritable(t *testing.T) {
	e := newWriteEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000002"} // scope src/**
	for _, rel := range []string{"src/claude/settings.json", "src/.claude-notes.md", "src/mcp.json", "src/.mcp.json.example", "src/x.claude/y.go"} {
		if d := PreToolUse(Modes{}, coder, e.state, writePayload("Write", filepath.Join(e.dir, rel))); d.Blocks() {
			t.Errorf("Write %s by a coder (scope src/**): refused: %+v", rel, d)
		}
	}
}
