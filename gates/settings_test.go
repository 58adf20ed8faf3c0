package gates

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/progress"
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
	if _, ok := s.Hooks["SessionStart"]; ok {
		t.Error("a SessionStart hook is installed: Claude Code waits for it at every start, and no gate needs it")
	}
	for _, e := range []string{"PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop", "SubagentStop", "StopFailure"} {
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
	for _, want := range []string{`"my-linter"`, `"Bash(npm test)"`, `"pre-tool-use"`, `"stop"`} {
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
		"Stop": []any{map[string]any{"hooks": []any{ours("stop")}}},
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

// TestRunHooksLeaveOutOnlyWhatDecidesNothing: a daemon's run gets every
// event's hook but those no gate of its role decides on or records: the
// PostToolUse hooks of tools other than Bash, and Stop and SubagentStop
// outside a tester's run. Each left out is held to deciding nothing.
func TestRunHooksLeaveOutOnlyWhatDecidesNothing(t *testing.T) {
	cmd := HookCommand{Path: "/bin/ctxgraphd-hook"}
	type group struct {
		Matcher string
		Hooks   []struct {
			Type, Command string
			Args          []string
		}
	}
	for _, role := range []string{Initializer, Coder, Tester} {
		data, err := json.Marshal(RunHooks(cmd, role, ""))
		if err != nil {
			t.Fatal(err)
		}
		var hooks map[string][]group
		if err := json.Unmarshal(data, &hooks); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"PreToolUse": "", "PostToolUse": "Bash|Agent|Task", "PostToolUseFailure": "Bash|Agent|Task", "StopFailure": ""}
		if role == Tester {
			want["Stop"], want["SubagentStop"] = "", ""
		}
		if len(hooks) != len(want) {
			t.Errorf("%s: events %v, want %v", role, slices.Sorted(maps.Keys(hooks)), slices.Sorted(maps.Keys(want)))
		}
		for e, matcher := range want {
			g := hooks[e]
			if len(g) != 1 || g[0].Matcher != matcher || len(g[0].Hooks) != 1 {
				t.Fatalf("%s %s: %+v, want matcher %q", role, e, g, matcher)
			}
			h := g[0].Hooks[0]
			if h.Type != "command" || h.Command != cmd.Path || len(h.Args) != 1 || Events[h.Args[0]] != e {
				t.Fatalf("%s %s handler: %+v", role, e, h)
			}
		}
	}

	// What is left out decides nothing and records nothing.
	dir := t.TempDir()
	list := &progress.List{Version: 1, Features: []progress.Feature{{ID: "F-001", Title: "x", Test: "sh tests/F-001.sh"}}}
	for _, role := range []string{Initializer, Coder, "", "some-future-role"} {
		a := Actor{Role: role, Feature: "F-001", Run: "r1"}
		for _, blocks := range []int{0, MaxStopBlocks - 1} {
			for _, event := range []string{"stop", "subagent-stop"} {
				p, err := ParsePayload(event, []byte(`{"hook_event_name":"`+Events[event]+`","cwd":"`+dir+`"}`))
				if err != nil {
					t.Fatal(err)
				}
				if d := Stop(Modes{}, a, State{ProjectDir: dir, List: list, StopBlocks: blocks}, p); d != nil {
					t.Errorf("%s by %q decided %+v: its run has no such hook", event, role, d)
				}
			}
		}
	}
	// (The same payloads do decide for a tester, and for Bash.)
	stop, _ := ParsePayload("stop", []byte(`{"hook_event_name":"Stop","cwd":"`+dir+`"}`))
	if Stop(Modes{}, Actor{Role: Tester, Feature: "F-001", Run: "r1"}, State{ProjectDir: dir, List: list}, stop) == nil {
		t.Fatal("a tester's Stop without a test run is not blocked: the check above proves nothing")
	}
	for _, tool := range []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "WebFetch", "Task", "mcp__ctxgraphd__query_traces", "BashOutput"} {
		for _, event := range []string{"post-tool-use", "post-tool-use-failure"} {
			payload := `{"hook_event_name":"` + Events[event] + `","cwd":"` + dir + `","tool_name":"` + tool + `",` +
				`"tool_input":{"command":"sh tests/F-001.sh","file_path":"` + dir + `/x"},` +
				`"tool_response":{"stdout":"touch: cannot touch 'src/x': Read-only file system","stderr":""},"error":"Exit code 1\ntouch: cannot touch 'src/x': Read-only file system"}`
			p, err := ParsePayload(event, []byte(payload))
			if err != nil {
				t.Fatal(err)
			}
			rec, ok := RecordCommand(Actor{Role: Tester, Feature: "F-001", Run: "r1"}, "sh tests/F-001.sh", dir, p)
			if tool == "Bash" {
				if !ok || len(SandboxRefusals(p)) == 0 {
					t.Fatalf("%s of Bash: recorded %v, refusals %v: the checks below prove nothing", event, ok, SandboxRefusals(p))
				}
				continue
			}
			if ok {
				t.Errorf("%s of %s recorded %+v: runs hook it for Bash only", event, tool, rec)
			}
			if r := SandboxRefusals(p); len(r) != 0 {
				t.Errorf("%s of %s read refusals %+v: runs hook it for Bash only", event, tool, r)
			}
		}
	}
}

// TestGatingEventsAreThoseThatDecide: a hook that cannot judge blocks on
// the events whose hook decides whether an action goes ahead, and only on
// them (a PostToolUse that fails leaves its gate closed
// by itself; blocking there would stop honest runs for nothing).
func TestGatingEventsAreThoseThatDecide(t *testing.T) {
	want := map[string]bool{"pre-tool-use": true, "stop": true, "subagent-stop": true}
	for event := range Events {
		if got := Gating(event); got != want[event] {
			t.Errorf("Gating(%q) = %v, want %v", event, got, want[event])
		}
	}
	if Gating("no-such-event") {
		t.Error("an unknown event is gating")
	}
}
