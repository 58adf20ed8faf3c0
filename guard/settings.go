package guard

import (
	"encoding/json"
	"fmt"
	"slices"
)

// hookEvents are the Claude Code events ctxgraphd hooks, with the kebab
// name of `ctxgraphd hook EVENT`.
var hookEvents = []struct{ claude, kebab string }{
	{"SessionStart", "session-start"},
	{"PreToolUse", "pre-tool-use"},
	{"PostToolUse", "post-tool-use"},
	{"PostToolUseFailure", "post-tool-use-failure"},
	{"Stop", "stop"},
	{"SubagentStop", "subagent-stop"},
	{"StopFailure", "stop-failure"},
}

// hookTimeout is the seconds Claude Code gives a hook. A hook answers in
// milliseconds; the bound is there so that a wedged daemon cannot hang a
// run, and a hook that times out does not gate, so it must be generous
// enough never to be reached by a live one.
const hookTimeout = 30

// HookSettings returns the settings JSON that installs ctxgraphd's hooks:
// the exec form (command + args, no shell quoting) of `binary hook EVENT`
// for every event the gates need. The daemon passes it to every run with
// --settings.
func HookSettings(binary string) string {
	data, _ := json.Marshal(map[string]any{"hooks": hookTable(binary)})
	return string(data)
}

func hookTable(binary string) map[string]any {
	t := map[string]any{}
	for _, e := range hookEvents {
		t[e.claude] = []any{map[string]any{"hooks": []any{handler(binary, e.kebab)}}}
	}
	return t
}

func handler(binary, event string, extra ...string) map[string]any {
	args := []any{"hook", event}
	for _, a := range extra {
		args = append(args, a)
	}
	return map[string]any{"type": "command", "command": binary, "args": args, "timeout": hookTimeout}
}

// InteractiveFlag marks the hooks `ctxgraphd init --install-hooks` writes
// into .claude/settings.json. Claude Code runs those hooks in the daemon's
// runs too, beside the ones passed with --settings; marked, they stand aside
// there (CTXGRAPH_RUN is set) so that no event is judged or recorded twice,
// and they gate interactive sessions, where no --settings hooks run.
const InteractiveFlag = "--interactive"

// MergeHookSettings adds ctxgraphd's hooks (marked with InteractiveFlag) to
// an existing settings file's content (nil or empty for none), keeping every
// other key and every hook already there; a handler that is already
// installed is not added twice.
func MergeHookSettings(existing []byte, binary string) ([]byte, bool, error) {
	settings := map[string]any{}
	if len(existing) > 0 {
		if err := json.Unmarshal(existing, &settings); err != nil {
			return nil, false, fmt.Errorf("not valid JSON (%v); fix it or move it aside, nothing was changed", err)
		}
	}
	hooks, _ := settings["hooks"].(map[string]any)
	if hooks == nil {
		if _, exists := settings["hooks"]; exists {
			return nil, false, fmt.Errorf(`"hooks" is not an object; fix it, nothing was changed`)
		}
		hooks = map[string]any{}
	}
	changed := false
	for _, e := range hookEvents {
		groups, _ := hooks[e.claude].([]any)
		if hasHandler(groups, binary, e.kebab) {
			continue
		}
		hooks[e.claude] = append(groups, map[string]any{"hooks": []any{handler(binary, e.kebab, InteractiveFlag)}})
		changed = true
	}
	settings["hooks"] = hooks
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return nil, false, err
	}
	return append(out, '\n'), changed, nil
}

func hasHandler(groups []any, binary, event string) bool {
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		hs, _ := gm["hooks"].([]any)
		for _, h := range hs {
			hm, _ := h.(map[string]any)
			if hm["command"] != binary {
				continue
			}
			args, _ := hm["args"].([]any)
			if slices.Equal(args, []any{"hook", event, InteractiveFlag}) {
				return true
			}
		}
	}
	return false
}
