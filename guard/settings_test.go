package guard

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestHookSettingsCoverEveryGateEvent(t *testing.T) {
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Type, Command string
				Args          []string
				Timeout       int
			}
		}
	}
	if err := json.Unmarshal([]byte(HookSettings("/usr/bin/ctxgraphd")), &s); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"SessionStart", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop", "SubagentStop", "StopFailure"} {
		g := s.Hooks[e]
		if len(g) != 1 || len(g[0].Hooks) != 1 {
			t.Fatalf("%s: %+v", e, g)
		}
		h := g[0].Hooks[0]
		if h.Type != "command" || h.Command != "/usr/bin/ctxgraphd" || len(h.Args) != 2 || h.Args[0] != "hook" || Events[h.Args[1]] != e || h.Timeout <= 0 {
			t.Fatalf("%s handler: %+v", e, h)
		}
	}
}

func TestMergeKeepsTheUsersSettingsAndHooks(t *testing.T) {
	user := `{"permissions": {"allow": ["Bash(npm test)"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}]}}`
	out, changed, err := MergeHookSettings([]byte(user), "/bin/ctxgraphd")
	if err != nil || !changed {
		t.Fatal(err, changed)
	}
	text := string(out)
	for _, want := range []string{`"my-linter"`, `"Bash(npm test)"`, `"pre-tool-use"`, `"session-start"`} {
		if !strings.Contains(text, want) {
			t.Errorf("merged settings lost or lack %s:\n%s", want, text)
		}
	}
	again, changed, err := MergeHookSettings(out, "/bin/ctxgraphd")
	if err != nil || changed || string(again) != text {
		t.Fatalf("a second merge changed the file (changed=%v, err=%v)", changed, err)
	}
	if _, _, err := MergeHookSettings([]byte(`{"hooks": [1]}`), "x"); err == nil {
		t.Fatal("hooks that are not an object were clobbered")
	}
	if _, _, err := MergeHookSettings([]byte(`{broken`), "x"); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("broken settings: %v", err)
	}
}

// TestMergeIntoNoSettings: a project without a settings file (nil) or with
// an empty one gets every hook event, marked interactive, and nothing else.
func TestMergeIntoNoSettings(t *testing.T) {
	for _, existing := range [][]byte{nil, {}} {
		out, changed, err := MergeHookSettings(existing, "/bin/ctxgraphd")
		if err != nil || !changed {
			t.Fatalf("MergeHookSettings(%q): changed %v, %v", existing, changed, err)
		}
		var s map[string]map[string][]struct {
			Hooks []struct {
				Type, Command string
				Args          []string
			}
		}
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatal(err)
		}
		if len(s) != 1 || len(s["hooks"]) != len(hookEvents) {
			t.Fatalf("MergeHookSettings(%q) =\n%s", existing, out)
		}
		for _, e := range hookEvents {
			g := s["hooks"][e.claude]
			if len(g) != 1 || len(g[0].Hooks) != 1 {
				t.Fatalf("%s: %+v", e.claude, g)
			}
			h := g[0].Hooks[0]
			if h.Type != "command" || h.Command != "/bin/ctxgraphd" || !slices.Equal(h.Args, []string{"hook", e.kebab, InteractiveFlag}) {
				t.Errorf("%s handler: %+v", e.claude, h)
			}
		}
	}
}

// TestMergeCompletesAPartialInstall: the events whose hook is already
// installed are left as they are, and every other event still gets its
// own, whichever events come first; a handler of ours found beside the
// user's own in one group counts as installed.
func TestMergeCompletesAPartialInstall(t *testing.T) {
	ours := func(event string) map[string]any {
		return map[string]any{"type": "command", "command": "/bin/ctxgraphd", "args": []any{"hook", event, InteractiveFlag}}
	}
	linter := map[string]any{"type": "command", "command": "my-linter"}
	existing, _ := json.Marshal(map[string]any{"hooks": map[string]any{
		// The first event of the install, alone in its group.
		"SessionStart": []any{map[string]any{"hooks": []any{ours("session-start")}}},
		// Ours after the user's in the same group.
		"PreToolUse": []any{map[string]any{"hooks": []any{linter, ours("pre-tool-use")}}},
	}})
	out, changed, err := MergeHookSettings(existing, "/bin/ctxgraphd")
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string
				Args    []string
			}
		}
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	for _, e := range hookEvents {
		var handlers []string
		for _, g := range s.Hooks[e.claude] {
			for _, h := range g.Hooks {
				if h.Command == "/bin/ctxgraphd" && slices.Equal(h.Args, []string{"hook", e.kebab, InteractiveFlag}) {
					handlers = append(handlers, h.Command)
				}
			}
		}
		if len(handlers) != 1 {
			t.Errorf("%s: %d handlers of ours, want exactly 1:\n%s", e.claude, len(handlers), out)
		}
	}
	if g := s.Hooks["PreToolUse"]; len(g) != 1 || len(g[0].Hooks) != 2 || g[0].Hooks[0].Command != "my-linter" {
		t.Errorf("the user's group was changed: %+v", g)
	}
}
