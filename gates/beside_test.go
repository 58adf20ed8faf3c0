package gates

import "testing"

// Nothing of an agent's runs beside the gates' judgement of its next call:
// a Bash command or a subagent asked for in the background, or a second
// subagent at once, is refused in a daemon's run (whose Claude Code has
// background tasks off); the same calls in the foreground, one at a time,
// and everything in a person's own session, go through.
func TestNothingRunsBesideTheGates(t *testing.T) {
	e := newEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001", Run: "r1"}
	yes, no := true, false
	for _, tt := range []struct {
		name      string
		actor     Actor
		tool      string
		input     map[string]any
		subagents int
		refused   bool
	}{
		{"a command left running in the background", coder, "Bash", map[string]any{"command": "python3 flip.py", "run_in_background": yes}, 0, true},
		{"a command in the foreground", coder, "Bash", map[string]any{"command": "go test ./... 2>&1 | tail -40", "run_in_background": no}, 0, false},
		{"a command that does not say", coder, "Bash", map[string]any{"command": "./server & pid=$!; curl -s localhost:8080; kill $pid"}, 0, false},
		{"a subagent that does not say (in the foreground: background tasks are off)", coder, "Agent", map[string]any{"prompt": "look around", "description": "explore"}, 0, false},
		{"a subagent asked for in the background", coder, "Agent", map[string]any{"prompt": "look around", "run_in_background": yes}, 0, true},
		{"a subagent in the foreground", coder, "Agent", map[string]any{"prompt": "look around", "run_in_background": no}, 0, false},
		{"a second subagent while one works", coder, "Agent", map[string]any{"prompt": "flip the link", "run_in_background": no}, 1, true},
		{"the old name of the subagent tool", coder, "Task", map[string]any{"prompt": "look around", "run_in_background": yes}, 0, true},
		{"a second subagent under the old name", coder, "Task", map[string]any{"prompt": "look around"}, 1, true},
		{"a tester's background command too", Actor{Role: Tester, Feature: "F-001", Run: "r2"}, "Bash", map[string]any{"command": "sleep 100", "run_in_background": yes}, 0, true},
		{"a person's own session", Actor{}, "Bash", map[string]any{"command": "npm run dev", "run_in_background": yes}, 0, false},
		{"a person's subagents", Actor{}, "Agent", map[string]any{"prompt": "look around"}, 2, false},
		{"a subagent in a worktree of its own", coder, "Agent", map[string]any{"prompt": "try it apart", "isolation": "worktree"}, 0, true},
		{"a subagent on a remote machine", coder, "Agent", map[string]any{"prompt": "try it apart", "isolation": "remote"}, 0, true},
		{"a subagent in a worktree under the old name", coder, "Task", map[string]any{"prompt": "try it apart", "isolation": "worktree"}, 0, true},
		{"a person's subagent in a worktree", Actor{}, "Agent", map[string]any{"prompt": "try it apart", "isolation": "worktree"}, 0, false},
		{"a teammate of an agent team", coder, "Agent", map[string]any{"prompt": "review as I go", "name": "reviewer", "team_name": "night"}, 0, true},
		{"a named subagent of no team", coder, "Agent", map[string]any{"prompt": "look around", "name": "scout"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := e.state
			s.Subagents = tt.subagents
			d := PreToolUse(Modes{}, tt.actor, s, fixture(t, "PreToolUse.json", tt.tool, tt.input))
			if got := d.Blocks(); got != tt.refused {
				t.Fatalf("refused = %v, want %v (%+v)", got, tt.refused, d)
			}
			code := "runs_beside"
			if _, ok := tt.input["isolation"]; ok {
				code = "runs_elsewhere"
			}
			if tt.refused && (d.Gate != RoleWritePolicy || d.Code != code || d.Suggestion == "") {
				t.Errorf("decision %+v, want role-write-policy/%s with what to do instead", d, code)
			}
		})
	}
}
