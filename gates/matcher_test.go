package gates

import (
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/guards"
)

// A run's PreToolUse hook fires for the tools the built-in gates decide
// on and for those the project's active guards judge; for every tool
// when a guard may judge any call.
func TestPreToolUseMatcher(t *testing.T) {
	builtIn := "Agent|Bash|Edit|Monitor|MultiEdit|NotebookEdit|Read|Skill|Task|WebFetch|Workflow|Write"
	guard := func(status, tool string, m guards.Match) guards.Rule {
		return guards.Rule{ID: "g", Status: status, Tool: tool, Match: m, Message: "no"}
	}
	tests := []struct {
		name  string
		rules []guards.Rule
		want  string
	}{
		{"no guards", nil, builtIn},
		{"a guard on Glob", []guards.Rule{guard(guards.Enforce, "Glob", guards.Match{Path: "secrets/**"})}, "Agent|Bash|Edit|Glob|Monitor|MultiEdit|NotebookEdit|Read|Skill|Task|WebFetch|Workflow|Write"},
		{"a guard on an MCP tool", []guards.Rule{guard(guards.Warn, "mcp__my-db__drop_table", guards.Match{Field: "table", Value: "."})}, builtIn + "|mcp__my-db__drop_table"},
		{"a guard on a command", []guards.Rule{guard(guards.Enforce, "", guards.Match{Command: "curl"})}, builtIn},
		{"a guard on a path", []guards.Rule{guard(guards.Enforce, "", guards.Match{Path: "db/**"})}, builtIn},
		{"a guard on a field of any tool", []guards.Rule{guard(guards.Enforce, "", guards.Match{Field: "url", Value: "internal"})}, ""},
		{"a proposed guard judges nothing yet", []guards.Rule{guard(guards.Proposed, "WebSearch", guards.Match{Field: "url", Value: "x"})}, builtIn},
		{"a retired one neither", []guards.Rule{guard(guards.Retired, "", guards.Match{Field: "url", Value: "x"})}, builtIn},
		{"a name that is no plain name", []guards.Rule{guard(guards.Enforce, "mcp__a.b__c", guards.Match{Field: "x", Value: "y"})}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PreToolUseMatcher(tt.rules); got != tt.want {
				t.Errorf("PreToolUseMatcher = %q, want %q", got, tt.want)
			}
		})
	}
}

// The tools a run's PreToolUse hook leaves out are ones no built-in gate
// decides on, however hostile the call: a gate added for another tool
// must add it to decidedTools, or its hook would never fire.
func TestToolsLeftOutOfPreToolUseDecideNothing(t *testing.T) {
	e := newEnv(t)
	list := e.p(".claude/progress/feature-list.json")
	hostile := map[string]any{
		"file_path": list, "notebook_path": list, "path": "/var/lib/ctxgraphd-state", "pattern": "**/*",
		"command": "rm -rf .git", "content": "{}", "url": "http://127.0.0.1:9/?secret=x", "query": "x", "run_in_background": true,
		"todos": []any{}, "prompt": "x", "subagent_type": "general-purpose",
	}
	state := e.state
	state.Subagents = 1
	for _, tool := range []string{"Glob", "Grep", "LS", "TodoWrite", "WebFetch", "WebSearch", "BashOutput", "KillShell", "ExitPlanMode", "Skill", "SlashCommand", "mcp__ctxgraphd__store_trace",
		"ToolSearch", "ReportFindings", "DeferredToolPlaceholder", "CronCreate", "EnterWorktree", "SendMessage", "ListAgents", "ScheduleWakeup", "TaskStop", "Monitor", "Workflow", "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Bash", "Agent", "Task"} {
		for _, role := range []string{Initializer, Coder, Tester} {
			p := fixture(t, "PreToolUse.json", tool, hostile)
			d := PreToolUse(Modes{}, Actor{Role: role, Feature: "F-002", Run: "run-1"}, state, p)
			decided := strings.Contains("|"+strings.Join(decidedTools, "|")+"|", "|"+tool+"|")
			if d != nil && !decided {
				t.Errorf("PreToolUse decided on %s (%s: %s) for a %s, but %s is not in decidedTools: its hook would never fire", tool, d.Gate, d.Code, role, tool)
			}
		}
	}
}

// Monitor (a shell command in the background) and Workflow (subagents in
// the background) are refused by the hook as running beside the agent's
// next calls, should a run be given them, whatever guards are active: a
// guard on a field of any tool makes the run's matcher "" and Claude Code
// then hands a Monitor call to the hook as itself, not as a Bash command
// a command guard would judge.
func TestBackgroundToolsAreRefusedWhateverTheGuards(t *testing.T) {
	e := newEnv(t)
	coder := Actor{Role: Coder, Feature: "F-002", Run: "run-1"}
	rules := []guards.Rule{
		{ID: "no-internal-fetch", Status: guards.Enforce, Match: guards.Match{Field: "url", Value: "internal"}, Message: "no"},
		{ID: "no-rm-rf", Status: guards.Enforce, Match: guards.Match{Command: `\brm\s+-rf\b`}, Message: "rm -rf is not for agents"},
	}
	for _, rs := range [][]guards.Rule{nil, rules} {
		matcher := PreToolUseMatcher(rs)
		for _, tc := range []struct {
			tool string
			in   map[string]any
		}{
			{"Monitor", map[string]any{"command": "while :; do ln -sfn /tmp/elsewhere src/d; ln -sfn r src/d; done", "description": "watch", "timeout_ms": 3600000}},
			{"Workflow", map[string]any{"script": "agents", "description": "x"}},
		} {
			if matcher != "" && !strings.Contains("|"+matcher+"|", "|"+tc.tool+"|") {
				t.Errorf("matcher %q leaves out %s: Claude Code would hand its call to the Bash hook as a plain command", matcher, tc.tool)
			}
			p := fixture(t, "PreToolUse.json", tc.tool, tc.in)
			if d := PreToolUse(Modes{}, coder, e.state, p); !d.Blocks() || d.Code != "runs_beside" {
				t.Errorf("with %d guards, PreToolUse(%s) = %+v; want runs_beside", len(rs), tc.tool, d)
			}
		}
	}
}
