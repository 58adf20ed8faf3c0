package orchestrator

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards/rulefile"
)

// TestRunIsGivenItsRolesHooks: each run's settings carry the hooks of its
// own role (gates.RunHooks): a tester's its Stop hook, which holds it to
// its test, and every run's the PostToolUse hook of Bash, which records
// the commands it ran; a coder's no Stop hook, which would decide nothing.
func TestRunIsGivenItsRolesHooks(t *testing.T) {
	h := newHarness(t)
	o := h.orchestrator(false)
	o.opts.Hook = gates.HookCommand{Path: "/opt/ctxgraphd/bin/ctxgraphd-hook"}
	events := func(role role.Role) []string {
		settings, err := o.runSettings(role, "F-001")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Hooks map[string][]struct {
				Matcher string
				Hooks   []struct{ Command string }
			}
		}
		if err := json.Unmarshal([]byte(settings), &s); err != nil {
			t.Fatal(err)
		}
		for e, g := range s.Hooks {
			if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != o.opts.Hook.Path {
				t.Errorf("%s's %s hooks: %+v", role, e, g)
			}
			if e == "PostToolUse" && g[0].Matcher != "Bash|Agent|Task" {
				t.Errorf("%s's PostToolUse hook matches %q, want Bash|Agent|Task", role, g[0].Matcher)
			}
		}
		return slices.Sorted(maps.Keys(s.Hooks))
	}
	all := []string{"PostToolUse", "PostToolUseFailure", "PreToolUse", "Stop", "StopFailure", "SubagentStop"}
	if got := events(role.Tester); !slices.Equal(got, all) {
		t.Errorf("a tester's run hooks %v, want %v", got, all)
	}
	for _, role := range []role.Role{role.Coder, role.Initializer} {
		want := slices.DeleteFunc(slices.Clone(all), func(e string) bool { return e == "Stop" || e == "SubagentStop" })
		if got := events(role); !slices.Equal(got, want) {
			t.Errorf("a %s's run hooks %v, want %v", role, got, want)
		}
	}
}

// A run's PreToolUse hook fires for the tools something decides on: the
// built-in gates' and, from the next run, those the project's guards
// judge (gates.PreToolUseMatcher).
func TestRunsPreToolUseHookFollowsTheGuards(t *testing.T) {
	h := newHarness(t)
	o := h.orchestrator(false)
	o.opts.Hook = gates.HookCommand{Path: "/opt/ctxgraphd/bin/ctxgraphd-hook"}
	matcher := func() string {
		o.loadGuardFile()
		settings, err := o.runSettings(role.Coder, "F-001")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Hooks map[string][]struct{ Matcher string }
		}
		if err := json.Unmarshal([]byte(settings), &s); err != nil {
			t.Fatal(err)
		}
		return s.Hooks["PreToolUse"][0].Matcher
	}
	if got, want := matcher(), "Agent|Bash|Edit|Monitor|MultiEdit|NotebookEdit|Read|Skill|Task|WebFetch|Workflow|Write"; got != want {
		t.Errorf("with no guard, PreToolUse matches %q, want %q", got, want)
	}
	file := filepath.Join(h.proj.Dir, filepath.FromSlash(rulefile.Path))
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, []byte("guards:\n  - {id: no-secrets, status: enforce, tool: Grep, match: {field: path, value: secrets}, message: not there}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := matcher(); !strings.Contains("|"+got+"|", "|Grep|") {
		t.Errorf("with a guard on Grep, PreToolUse matches %q: the guard would never be asked", got)
	}
}

// Every run's settings take away the tools of Claude Code that run
// something beside the agent's next calls, later or elsewhere
// (gates.DeniedTools): Monitor, a shell command in the background, which
// a hook naming Bash would see as a plain command; Workflow, subagents in
// the background; the Cron tools; the worktree tools; messages to other
// sessions.
func TestRunSettingsDenyToolsThatRunBeside(t *testing.T) {
	h := newHarness(t)
	o := h.orchestrator(false)
	o.opts.Hook = gates.HookCommand{Path: "/opt/ctxgraphd/bin/ctxgraphd-hook"}
	for _, role := range []role.Role{role.Initializer, role.Coder, role.Tester} {
		settings, err := o.runSettings(role, "F-001")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Permissions struct{ Deny []string }
		}
		if err := json.Unmarshal([]byte(settings), &s); err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"Monitor", "Workflow", "CronCreate", "EnterWorktree", "SendMessage"} {
			if !slices.Contains(s.Permissions.Deny, tool) {
				t.Errorf("a %s's run settings deny %v: %s is left to the agent", role, s.Permissions.Deny, tool)
			}
		}
	}
}
