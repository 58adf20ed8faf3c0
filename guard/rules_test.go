package guard

import (
	"errors"
	"strings"
	"testing"
)

func TestRuleValidate(t *testing.T) {
	ok := Rule{ID: "g-1", Status: GuardEnforce, Tool: "Bash", Match: Match{Command: `\brm -rf\b`}, Message: "no rm -rf"}
	tests := []struct {
		name string
		edit func(r *Rule)
		want []string // "" when valid; else every part the error must name
	}{
		{name: "valid", edit: func(r *Rule) {}},
		{name: "valid path guard for any write tool", edit: func(r *Rule) { r.Tool, r.Match = "", Match{Path: "src/**/*.gen.go"} }},
		{name: "valid field guard", edit: func(r *Rule) { r.Tool, r.Match = "WebFetch", Match{Field: "url", Value: `^http://`} }},
		{name: "valid mcp tool", edit: func(r *Rule) { r.Tool, r.Match = "mcp__db__query", Match{Field: "sql", Value: `(?i)drop`} }},
		{name: "bad id", edit: func(r *Rule) { r.ID = "has space" }, want: []string{`id "has space"`, "letters"}},
		{name: "unknown status", edit: func(r *Rule) { r.Status = "on" }, want: []string{`"g-1"`, "status", `"on"`, "proposed, warn, enforce, retired"}},
		{name: "unknown event", edit: func(r *Rule) { r.Event = "Stop" }, want: []string{"event", `"Stop"`, "PreToolUse"}},
		{name: "unknown tool", edit: func(r *Rule) { r.Tool = "Bsh" }, want: []string{"tool", `"Bsh"`, "Bash"}},
		{name: "unknown role", edit: func(r *Rule) { r.Role = "coder" }, want: []string{"role", `"coder"`, "coding-agent"}},
		{name: "unknown action", edit: func(r *Rule) { r.Action = "block" }, want: []string{"action", `"block"`, "deny or warn"}},
		{name: "no match", edit: func(r *Rule) { r.Match = Match{} }, want: []string{"match", "at least one"}},
		{name: "bad regexp", edit: func(r *Rule) { r.Match.Command = "([" }, want: []string{"match.command", `"(["`, "regular expression"}},
		{name: "command on a file tool", edit: func(r *Rule) { r.Tool = "Write" }, want: []string{"tool", `"Write"`, "match.command reads a Bash command"}},
		{name: "bad glob", edit: func(r *Rule) { r.Match = Match{Path: "src/[a"} }, want: []string{"match.path", `"src/[a"`, "glob"}},
		{name: "field without value", edit: func(r *Rule) { r.Match = Match{Field: "url"} }, want: []string{"match.field", "go together"}},
		{name: "bad value regexp", edit: func(r *Rule) { r.Tool, r.Match = "", Match{Field: "url", Value: "*"} }, want: []string{"match.value", `"*"`}},
		{name: "no message", edit: func(r *Rule) { r.Message = " " }, want: []string{"message", "the model reads it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.edit(&r)
			err := r.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrRule) {
				t.Fatalf("Validate() = %v, want an ErrRule naming %q", err, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestValidateRulesRefusesDuplicateIDs(t *testing.T) {
	r := Rule{ID: "g-1", Status: GuardWarn, Match: Match{Command: "x"}, Message: "m"}
	err := ValidateRules([]Rule{r, r})
	if err == nil || !strings.Contains(err.Error(), "rules 1 and 2") {
		t.Fatalf("ValidateRules(twice the same id) = %v, want an error naming both", err)
	}
}

func TestGuards(t *testing.T) {
	e := newEnv(t)
	rmrf := Rule{ID: "no-rmrf", Status: GuardEnforce, Tool: "Bash", Match: Match{Command: `\brm\s+-rf\b`}, Message: "rm -rf is not for agents", Suggestion: "remove the files you mean by name"}
	gen := Rule{ID: "gen", Status: GuardEnforce, Role: Coder, Match: Match{Path: "src/**/*.gen.go"}, Message: "generated code", Suggestion: "run go generate"}
	http := Rule{ID: "http", Status: GuardEnforce, Action: ActionWarn, Tool: "WebFetch", Match: Match{Field: "url", Value: `^http://`}, Message: "plain http"}
	reading := Rule{ID: "secrets", Status: GuardEnforce, Tool: "Read", Role: RoleAny, Match: Match{Path: "secrets/**"}, Message: "secrets"}
	with := func(r Rule, status string) Rule { r.Status = status; return r }
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000001"}
	tests := []struct {
		name  string
		rules []Rule
		actor Actor
		tool  string
		input map[string]any
		want  []string // gate/code of each decision, in order
		block bool
	}{
		{name: "enforced deny guard denies", rules: []Rule{rmrf}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"},
			want: []string{"guard:no-rmrf/guard_denied"}, block: true},
		{name: "a command it does not match goes through", rules: []Rule{rmrf}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm build/x.o"}},
		{name: "guard in warn records a would-be denial and lets it through", rules: []Rule{with(rmrf, GuardWarn)}, actor: coder, tool: "Bash",
			input: map[string]any{"command": "rm -rf build"}, want: []string{"guard:no-rmrf/guard_would_deny"}},
		{name: "proposed guard does nothing", rules: []Rule{with(rmrf, GuardProposed)}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "retired guard does nothing", rules: []Rule{with(rmrf, GuardRetired)}, actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "a person is not an agent", rules: []Rule{rmrf}, actor: Actor{}, tool: "Bash", input: map[string]any{"command": "rm -rf build"}},
		{name: "role person holds a person", rules: []Rule{with(Rule{ID: "p", Role: RolePerson, Tool: "Bash", Match: Match{Command: "rm"}, Message: "m"}, GuardEnforce)},
			actor: Actor{}, tool: "Bash", input: map[string]any{"command": "rm x"}, want: []string{"guard:p/guard_denied"}, block: true},
		{name: "role person does not hold an agent", rules: []Rule{with(Rule{ID: "p", Role: RolePerson, Tool: "Bash", Match: Match{Command: "rm"}, Message: "m"}, GuardEnforce)},
			actor: coder, tool: "Bash", input: map[string]any{"command": "rm x"}},
		{name: "role any holds a person too", rules: []Rule{reading}, actor: Actor{}, tool: "Read", input: map[string]any{"file_path": e.p("secrets/key")},
			want: []string{"guard:secrets/guard_denied"}, block: true},
		{name: "path guard on Write, resolved against the project", rules: []Rule{gen}, actor: coder, tool: "Write",
			input: map[string]any{"file_path": e.p("src/a/../b/x.gen.go"), "content": "x"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard on a relative Edit path", rules: []Rule{gen}, actor: coder, tool: "Edit",
			input: map[string]any{"file_path": "src/b/x.gen.go", "old_string": "a", "new_string": "b"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard on a Bash redirection", rules: []Rule{gen}, actor: coder, tool: "Bash",
			input: map[string]any{"command": "echo x > src/b/x.gen.go"}, want: []string{"guard:gen/guard_denied"}, block: true},
		{name: "path guard ignores a Read unless it names Read", rules: []Rule{gen}, actor: coder, tool: "Read", input: map[string]any{"file_path": e.p("src/b/x.gen.go")}},
		{name: "path guard of another role", rules: []Rule{gen}, actor: Actor{Role: Tester, Feature: "F-001"}, tool: "Write",
			input: map[string]any{"file_path": e.p("src/b/x.gen.go"), "content": "x"}},
		{name: "field guard with action warn warns", rules: []Rule{http}, actor: coder, tool: "WebFetch", input: map[string]any{"url": "http://example.com", "prompt": "p"},
			want: []string{"guard:http/guard_warning"}},
		{name: "field guard: another value", rules: []Rule{http}, actor: coder, tool: "WebFetch", input: map[string]any{"url": "https://example.com"}},
		{name: "the blocking guard comes first", rules: []Rule{with(rmrf, GuardWarn), {ID: "b", Status: GuardEnforce, Match: Match{Command: "build"}, Message: "m"}},
			actor: coder, tool: "Bash", input: map[string]any{"command": "rm -rf build"}, want: []string{"guard:b/guard_denied", "guard:no-rmrf/guard_would_deny"}, block: true},
		{name: "an invalid rule does nothing", rules: []Rule{{ID: "bad", Status: GuardEnforce, Match: Match{Command: "(["}, Message: "m"}}, actor: coder, tool: "Bash",
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
	r := Rule{ID: "no-curl", Status: GuardEnforce, Tool: "Bash", Match: Match{Command: `^curl\b`}, Message: "no network from agents", Suggestion: "vendor it"}
	p := fixture(t, "PreToolUse.json", "Bash", map[string]any{"command": "curl example.com"})
	ds := Guards([]Rule{r}, Actor{Role: Coder}, e.state, p)
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
