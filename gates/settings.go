package gates

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// hookEvents are the Claude Code events ctxgraphd hooks, with the kebab
// name of `ctxgraphd hook EVENT`. In a daemon's run (RunHooks), an event
// with a matcher fires only for the tools it matches, and one with roles
// only in runs of those roles: what the gates decide on and record, and
// nothing more.
var hookEvents = []struct {
	claude, kebab string
	matcher       string   // in a run: only these tools ("" for all)
	roles         []string // in a run: only these roles (nil for all)
	// gating: the event's hook decides whether an action goes ahead, so
	// a hook that cannot judge it must refuse it (Gating). A hook of any
	// other event that fails leaves a gate closed by itself: a tester
	// whose commands were not recorded has not run its test.
	gating bool
}{
	// No SessionStart: a run's hooks show they run by the first of them
	// that reaches the daemon (gate hooks-live, judged on the tools the
	// run's stream shows: Hooked). A SessionStart hook would say so
	// sooner, but Claude Code waits for it before its first request, a
	// process and some 30 ms on every run, for no tool call it gates.
	{claude: "PreToolUse", kebab: "pre-tool-use", gating: true},
	// They record Bash commands (RecordCommand) and read the sandbox's
	// refusals off a Bash command's output (SandboxRefusals), and tell a
	// subagent's end (one works at a time: see judgeBeside): nothing of
	// another tool's result.
	{claude: "PostToolUse", kebab: "post-tool-use", matcher: "Bash|Agent|Task"},
	{claude: "PostToolUseFailure", kebab: "post-tool-use-failure", matcher: "Bash|Agent|Task"},
	// They gate a tester's end (tester-must-test); Stop decides nothing
	// for another role.
	{claude: "Stop", kebab: "stop", roles: []string{Tester}, gating: true},
	{claude: "SubagentStop", kebab: "subagent-stop", roles: []string{Tester}, gating: true},
	{claude: "StopFailure", kebab: "stop-failure"},
}

// hookTimeout is the seconds Claude Code gives a hook. A hook answers in
// milliseconds; the bound is there so that a wedged daemon cannot hang a
// run, and a hook that times out does not gate, so it must be generous
// enough never to be reached by a live one.
const hookTimeout = 30

// HookCommand is the program Claude Code runs for a hook event, with the
// arguments that come before the event's name: the lean companion binary
// (`ctxgraphd-hook EVENT`) or the main one (`ctxgraphd hook EVENT`).
type HookCommand struct {
	Path string
	Args []string
}

// MainHook is the hook as the ctxgraphd binary at path runs it.
func MainHook(path string) HookCommand { return HookCommand{Path: path, Args: []string{"hook"}} }

// String is the command line, as a person would type it, up to the event.
func (c HookCommand) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

// Hooks returns the "hooks" value of Claude Code's settings that installs
// ctxgraphd's hooks: the exec form (command + args, no shell quoting) of
// cmd EVENT for every event the gates need. The daemon passes it, with the
// sandbox, to every run with --settings.
func Hooks(cmd HookCommand) map[string]any {
	t := map[string]any{}
	for _, e := range hookEvents {
		t[e.claude] = []any{map[string]any{"hooks": []any{handler(cmd, e.kebab)}}}
	}
	return t
}

// RunHooks returns the "hooks" value of the settings of a daemon's run of
// role: Hooks, less the events no gate of that role decides on or
// records, with preToolUse the PreToolUse hook's matcher
// (PreToolUseMatcher; "" for every tool). Claude Code starts a process
// for every hook of every event, and its own handling of one costs more
// than the hook: a PostToolUse of a Read, or a coder's Stop, would be a
// process for nothing.
func RunHooks(cmd HookCommand, role, preToolUse string) map[string]any {
	t := map[string]any{}
	for _, e := range hookEvents {
		if e.roles != nil && !slices.Contains(e.roles, role) {
			continue
		}
		g := map[string]any{"hooks": []any{handler(cmd, e.kebab)}}
		matcher := e.matcher
		if e.claude == "PreToolUse" {
			matcher = preToolUse
		}
		if matcher != "" {
			g["matcher"] = matcher
		}
		t[e.claude] = []any{g}
	}
	return t
}

// RunSettings is the --settings of a daemon's run: its hooks (nil:
// none), the tools no run may use (DeniedTools), and the "sandbox" value
// of its confinement (nil: none; sandbox.Policy.Settings). The daemon
// and a worker make a run's settings here alike, each with its own paths.
func RunSettings(hooks, sandbox map[string]any) (string, error) {
	settings := map[string]any{"hooks": hooks, "permissions": map[string]any{"deny": DeniedTools}}
	if sandbox != nil {
		settings["sandbox"] = sandbox
	}
	data, err := json.Marshal(settings)
	if err != nil {
		return "", fmt.Errorf("the settings of a run: %w", err)
	}
	return string(data), nil
}

// Gating reports whether event (kebab case) is one whose hook decides
// whether an action goes ahead: a hook that cannot judge it must block.
func Gating(event string) bool {
	for _, e := range hookEvents {
		if e.kebab == event {
			return e.gating
		}
	}
	return false
}

// HookSettings returns the settings JSON that installs only ctxgraphd's
// hooks, as the ctxgraphd binary at path runs them.
func HookSettings(path string) string {
	data, _ := json.Marshal(map[string]any{"hooks": Hooks(MainHook(path))})
	return string(data)
}

func handler(cmd HookCommand, event string, extra ...string) map[string]any {
	args := []any{}
	for _, a := range cmd.Args {
		args = append(args, a)
	}
	args = append(args, event)
	for _, a := range extra {
		args = append(args, a)
	}
	return map[string]any{"type": "command", "command": cmd.Path, "args": args, "timeout": hookTimeout}
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
		hooks[e.claude] = append(groups, map[string]any{"hooks": []any{handler(MainHook(binary), e.kebab, InteractiveFlag)}})
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
