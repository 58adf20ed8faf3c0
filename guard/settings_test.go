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
