package gates

import (
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/guards"
)

func TestGuards(t *testing.T) {
	e := newEnv(t)
	rmrf := guards.Rule{ID: "no-rmrf", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `\brm\s+-rf\b`}, Message: "rm -rf is not for agents", Suggestion: "remove the files you mean by name"}
	gen := guards.Rule{ID: "gen", Status: guards.Enforce, Role: Coder, Match: guards.Match{Path: "src/**/*.gen.go"}, Message: "generated code", Suggestion: "run go generate"}
	http := guards.Rule{ID: "http", Status: guards.Enforce, Action: guards.ActionWarn, Tool: "WebFetch", Match: guards.Match{Field: "url", Value: `^http://`}, Message: "plain http"}
	reading := guards.Rule{ID: "secrets", Status: guards.Enforce, Tool: "Read", Role: guards.RoleAny, Match: guards.Match{Path: "secrets/**"}, Message: "secrets"}
	with := func(r guards.Rule, status string) guards.Rule { r.Status = status; return r }
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000001"}
	tests := []struct {
		name  string
		rules []guards.Rule
		actor Actor
		tool  string
		input map[string]any
		want  []string // gate/code of each decision, in order
		block bool
	}{
		{name: "enforced deny guard denies", rules: []guards.Rule{rmrf}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"},
			want: []string{"guard:no-rmrf/guard_denied"}, block: true},
		{name: "a command it does not match goes through", rules: []guards.Rule{rmrf}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm build/x.o"}},
		{name: "guard in warn records a would-be denial and lets it through", rules: []guards.Rule{with(rmrf, guards.Warn)}, actor: coder, tool: "Bash",
			input: map[string]any{"command": "rm -rf build"}, want: []string{"guard:no-rmrf/guard_would_deny"}},
		{name: "proposed guard does nothing", rules: []guards.Rule{with(rmrf, guards.Proposed)}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "retired guard does nothing", rules: []guards.Rule{with(rmrf, guards.Retired)}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "a person is not an agent", rules: []guards.Rule{rmrf}, actor: Actor{}, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "role person holds a person", rules: []guards.Rule{with(guards.Rule{ID: "p", Role: guards.RolePerson, Tool: "Bash", Match: guards.Match{Command: "rm"}, Message: "m"}, guards.Enforce)},
			actor: Actor{}, tool: "Bash", input: map[string]any{"command": "rm x"}, want: []string{"guard:p/guard_denied"}, block: true},
		{name: "role person does not hold an agent", rules: []guards.Rule{with(guards.Rule{ID: "p", Role: guards.RolePerson, Tool: "Bash", Match: guards.Match{Command: "rm"}, Message: "m"}, guards.Enforce)},
			actor: coder, tool: "Bash", input: map[string]any{"command": "rm x"}},
		{name: "role any holds a person too", rules: []guards.Rule{reading}, actor: Actor{}, tool: "Read", input: map[string]any{"file_path": e.p("secrets/key")},
			want: []string{"guard:secrets/guard_denied"}, block: true},
		{name: "path guard on Write, resolved against the project", rules: []guards.Rule{gen}, actor: coder, tool: "Write",
			input: map[string]any{"file_path": e.p("src/a/../b/x.gen.go"), "content": "x"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard on a relative Edit path", rules: []guards.Rule{gen}, actor: coder, tool: "Edit",
			input: map[string]any{"file_path": "src/b/x.gen.go", "old_string": "a", "new_string": "b"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard on a Bash redirection", rules: []guards.Rule{gen}, actor: coder, tool: "Bash",
			input: map[string]any{"command": "echo x > src/b/x.gen.go"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard ignores a Read unless it names Read", rules: []guards.Rule{gen}, actor: coder, tool: "Read", input: map[string]any{"file_path": e.p("src/b/x.gen.go")}},
		{name: "path guard of another role", rules: []guards.Rule{gen}, actor: Actor{Role: Tester, Feature: "F-001"}, tool: "Write",
			input: map[string]any{"file_path": e.p("src/b/x.gen.go"), "content": "x"}},
		{name: "field guard with action warn warns", rules: []guards.Rule{http}, actor: coder, tool: "WebFetch", input: map[string]any{"url": "http://example.com", "prompt": "p"},
			want: []string{"guard:http/guard_warning"}},
		{name: "field guard: another value", rules: []guards.Rule{http}, actor: coder, tool: "WebFetch", input: map[string]any{"url": "https://example.com"}},
		{name: "the blocking guard comes first", rules: []guards.Rule{with(rmrf, guards.Warn), {ID: "b", Status: guards.Enforce, Match: guards.Match{Command: "build"}, Message: "m"}},
			actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}, want: []string{"guard:b/guard_denied", "guard:no-rmrf/guard_would_deny"}, block: true},
		{name: "an invalid rule does nothing", rules: []guards.Rule{{ID: "bad", Status: guards.Enforce, Match: guards.Match{Command: "(["}, Message: "m"}}, actor: coder, tool: "Bash",
			input: map[string]any{"command": "(["}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fixture(t, "PreToolUse.json", tt.tool, tt.input)
			ds := Guards(tt.rules, tt.actor, e.state, p)
			var got []string
			for _, d := range ds {
				got = append(got, d.Gate+"/"+d.Code)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("Guards() = %v, want %v", got, tt.want)
			}
			if len(ds) > 0 && ds[0].Blocks() != tt.block {
				t.Errorf("Blocks() = %v, want %v", ds[0].Blocks(), tt.block)
			}
			if len(ds) > 0 && (ds[0].Message == "" || ds[0].Suggestion == "") {
				t.Errorf("decision %+v lacks a message or a suggestion: the model reads both", ds[0])
			}
		})
	}
}

func TestGuardDenialIsStructuredLikeTheGates(t *testing.T) {
	e := newEnv(t)
	r := guards.Rule{ID: "no-curl", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `^curl\b`}, Message: "no network from agents", Suggestion: "vendor it"}
	p := fixture(t, "PreToolUse.json", "Bash", map[string]any{"command": "curl example.com"})
	ds := Guards([]guards.Rule{r}, Actor{Role: Coder}, e.state, p)
	if len(ds) != 1 {
		t.Fatalf("Guards() = %v, want one decision", ds)
	}
	out := string(Render("PreToolUse", ds[0]))
	for _, w := range []string{`"permissionDecision":"deny"`, `\"status\":\"blocked\"`, `\"gate\":\"guard:no-curl\"`, `\"code\":\"guard_denied\"`, `\"suggestion\":\"vendor it\"`} {
		if !strings.Contains(out, w) {
			t.Errorf("Render() = %s, want it to hold %s", out, w)
		}
	}
}
