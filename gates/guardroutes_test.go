package gates

import (
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

// An agent that writes a guarded file with a program the hook cannot read
// (python3, a script, cp, sed -i, a background process, a link) changes
// the tree all the same: the run's change set holds it to the guards that
// hold a file, after the built-in gates.
func TestGuardChanges(t *testing.T) {
	gen := guards.Rule{ID: "gen", Status: guards.Enforce, Role: Coder, Match: guards.Match{Path: "src/**/*.gen.go"}, Message: "generated code", Suggestion: "run go generate"}
	with := func(r guards.Rule, edit func(*guards.Rule)) guards.Rule { edit(&r); return r }
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000001"}
	added := []Change{{Path: "src/a/x.gen.go", Kind: "added"}, {Path: "src/a/x.go", Kind: "modified"}}
	tests := []struct {
		name    string
		rules   []guards.Rule
		actor   Actor
		changes []Change
		found   []Finding
		want    []string // path gate/code mode
	}{
		{name: "an enforced deny guard's file is put back", rules: []guards.Rule{gen}, actor: coder, changes: added,
			want: []string{"src/a/x.gen.go guard:gen/guard_denied enforce"}},
		{name: "a deleted file too", rules: []guards.Rule{gen}, actor: coder, changes: []Change{{Path: "src/x.gen.go", Kind: "deleted"}},
			want: []string{"src/x.gen.go guard:gen/guard_denied enforce"}},
		{name: "a guard in warn records a would-be denial", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Status = guards.Warn })}, actor: coder, changes: added,
			want: []string{"src/a/x.gen.go guard:gen/guard_would_deny warn"}},
		{name: "a warn action warns", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Action = guards.ActionWarn })}, actor: coder, changes: added,
			want: []string{"src/a/x.gen.go guard:gen/guard_warning warn"}},
		{name: "a tool that writes holds the file as well", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Tool = "Write" })}, actor: coder, changes: added,
			want: []string{"src/a/x.gen.go guard:gen/guard_denied enforce"}},
		{name: "another role's guard", rules: []guards.Rule{gen}, actor: Actor{Role: Tester, Feature: "F-001"}, changes: added},
		{name: "a person's guard holds no agent", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Role = guards.RolePerson })}, actor: coder, changes: added},
		{name: "proposed and retired guards hold nothing", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Status = guards.Proposed }), with(gen, func(r *guards.Rule) { r.ID, r.Status = "g2", guards.Retired })},
			actor: coder, changes: added},
		{name: "a Read guard holds reads, not changes", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Tool = "Read" })}, actor: coder, changes: added},
		{name: "a guard that also matches a command cannot be read off a change", rules: []guards.Rule{with(gen, func(r *guards.Rule) { r.Match.Command = "protoc" })}, actor: coder, changes: added},
		{name: "a change an enforced built-in gate refuses is not judged again", rules: []guards.Rule{gen}, actor: coder, changes: added,
			found: []Finding{{Change: added[0], HookDecision: control.HookDecision{Gate: Scope, Code: "out_of_scope", Mode: Enforce}}}},
		{name: "a change a built-in gate warns of is", rules: []guards.Rule{gen}, actor: coder, changes: added,
			found: []Finding{{Change: added[0], HookDecision: control.HookDecision{Gate: Scope, Code: "out_of_scope", Mode: Warn}}},
			want:  []string{"src/a/x.gen.go guard:gen/guard_denied enforce"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range GuardChanges(tt.rules, tt.actor, tt.changes, tt.found) {
				got = append(got, f.Path+" "+f.Gate+"/"+f.Code+" "+string(f.Mode))
				if f.Message == "" || f.Suggestion == "" {
					t.Errorf("finding %+v lacks a message or a suggestion", f)
				}
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Fatalf("GuardChanges() = %q, want %q", got, tt.want)
			}
		})
	}
}

// What the sandbox refuses for a guard is that guard's refusal.
func TestGuardRefusal(t *testing.T) {
	e := newEnv(t)
	gen := guards.Rule{ID: "gen", Status: guards.Enforce, Role: Coder, Match: guards.Match{Path: "src/**/*.gen.go"}, Message: "generated code"}
	coder := Actor{Role: Coder, Feature: "F-001"}
	if d := GuardRefusal([]guards.Rule{gen}, coder, e.state, Refusal{Path: "src/a/x.gen.go"}); d == nil || d.Gate != "guard:gen" || d.Code != guards.CodeDenied {
		t.Errorf("GuardRefusal(a guarded path) = %+v, want guard:gen's denial", d)
	}
	if d := GuardRefusal([]guards.Rule{gen}, coder, e.state, Refusal{Path: e.p("src/a/x.gen.go")}); d == nil || d.Gate != "guard:gen" {
		t.Errorf("GuardRefusal(a guarded absolute path) = %+v, want guard:gen's denial", d)
	}
	if d := GuardRefusal([]guards.Rule{gen}, coder, e.state, Refusal{Path: "src/a/x.go"}); d != nil {
		t.Errorf("GuardRefusal(another path) = %+v, want nil", d)
	}
	warn := gen
	warn.Status = guards.Warn
	if d := GuardRefusal([]guards.Rule{warn}, coder, e.state, Refusal{Path: "src/a/x.gen.go"}); d != nil {
		t.Errorf("GuardRefusal(a guard in warn, which the sandbox does not hold) = %+v, want nil", d)
	}
}

// The sandbox of a run holds the globs of its role's enforced deny guards
// that hold a file, and no other.
func TestSandboxGlobs(t *testing.T) {
	rules := []guards.Rule{
		{ID: "gen", Status: guards.Enforce, Role: Coder, Match: guards.Match{Path: "gen/**"}, Message: "m"},
		{ID: "all", Status: guards.Enforce, Match: guards.Match{Path: "vendor/**"}, Message: "m"},
		{ID: "warned", Status: guards.Warn, Match: guards.Match{Path: "a/**"}, Message: "m"},
		{ID: "warns", Status: guards.Enforce, Action: guards.ActionWarn, Match: guards.Match{Path: "b/**"}, Message: "m"},
		{ID: "reads", Status: guards.Enforce, Tool: "Read", Match: guards.Match{Path: "c/**"}, Message: "m"},
		{ID: "cmd", Status: guards.Enforce, Match: guards.Match{Path: "d/**", Command: "x"}, Message: "m"},
		{ID: "person", Status: guards.Enforce, Role: guards.RolePerson, Match: guards.Match{Path: "e/**"}, Message: "m"},
	}
	if got := strings.Join(SandboxGlobs(rules, Coder), " "); got != "gen/** vendor/**" {
		t.Errorf("SandboxGlobs(coder) = %q, want gen/** vendor/**", got)
	}
	if got := strings.Join(SandboxGlobs(rules, Tester), " "); got != "vendor/**" {
		t.Errorf("SandboxGlobs(tester) = %q, want vendor/**", got)
	}
}

// A command guard meets the command as the shell reads it, not only as it
// is written: quotes, lists, sh -c and eval do not hide it. What the shell
// decides when it runs (variables, base64, a script) still does: command
// guards are advisory.
func TestCommandGuardReadsTheShell(t *testing.T) {
	e := newEnv(t)
	rmrf := guards.Rule{ID: "no-rmrf", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `\brm\s+-rf\b`}, Message: "rm -rf is not for agents"}
	deploy := guards.Rule{ID: "deploy", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `^\s*make\s+deploy\s*$`}, Message: "make deploy fails"}
	tests := []struct {
		rule  guards.Rule
		cmd   string
		match bool
	}{
		{rmrf, "rm -rf build", true},
		{rmrf, `r''m -rf build`, true},
		{rmrf, `r\m -rf build`, true},
		{rmrf, `"rm" "-rf" build`, true},
		{rmrf, `sh -c 'r""m -rf build'`, true},
		{rmrf, `bash -lc "cd x && r''m -rf build"`, true},
		{rmrf, `eval "r''m" -rf build`, true},
		{rmrf, "rm -r build", false},
		{deploy, "make deploy", true},
		{deploy, "cd . && make deploy", true},
		{deploy, "true; make deploy || true", true},
		{deploy, "sh -c 'make deploy'", true},
		{deploy, "make deploy-docs", false},
		{deploy, "echo make deploy", false},
		// Out of reach, and said so in docs/gates.md.
		{rmrf, `X=rm; $X -rf build`, false},
		{rmrf, `echo cm0gLXJmIGJ1aWxk | base64 -d | sh`, false},
	}
	for _, tt := range tests {
		p := fixture(t, "PreToolUse.json", "Bash", map[string]any{"command": tt.cmd})
		if got := len(Guards([]guards.Rule{tt.rule}, Actor{Role: Coder}, e.state, p)) > 0; got != tt.match {
			t.Errorf("guard %s on %q: matched %v, want %v", tt.rule.ID, tt.cmd, got, tt.match)
		}
	}
}

// A guard that matches the feature's own test command, exactly as the
// accepted feature list gives it, does not deny it: every attempt would
// fail for want of the test run the verdict needs. It is let through and
// recorded as a would-be denial; a command that only contains the test
// (setup before it, more after it) is denied as ever.
func TestAGuardDoesNotDenyTheFeaturesOwnTest(t *testing.T) {
	e := newEnv(t)
	sh := guards.Rule{ID: "no-sh", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `\bsh\b`}, Message: "no sh"}
	for _, tt := range []struct {
		actor Actor
		cmd   string
		block bool
	}{
		{Actor{Role: Tester, Feature: "F-001"}, "sh tests/F-001.sh", false},
		{Actor{Role: Coder, Feature: "F-001"}, "sh  tests/F-001.sh ", false},
		{Actor{Role: Tester, Feature: "F-001"}, "rm -rf src && sh tests/F-001.sh", true},
		{Actor{Role: Tester, Feature: "F-001"}, "sh tests/F-001.sh; sh evil.sh", true},
		{Actor{Role: Tester, Feature: "F-002"}, "sh tests/F-001.sh", true}, // not its feature's test
		{Actor{Role: Tester, Feature: "F-001"}, "sh tests/other.sh", true},
	} {
		p := fixture(t, "PreToolUse.json", "Bash", map[string]any{"command": tt.cmd})
		ds := Guards([]guards.Rule{sh}, tt.actor, e.state, p)
		if len(ds) != 1 || ds[0].Blocks() != tt.block {
			t.Errorf("%s of %s runs %q: %+v, want a decision that blocks: %v", tt.actor.Role, tt.actor.Feature, tt.cmd, ds, tt.block)
			continue
		}
		if !tt.block && (ds[0].Code != guards.CodeWouldDeny || !strings.Contains(ds[0].Message, "own test command")) {
			t.Errorf("the own test let through as %+v, want a would-be denial that says why", ds[0])
		}
	}
}

// A refusal is read off a command's output, which the command writes: one
// the run's sandbox cannot have made (a path in the project it does not
// deny) is not believed, so that an agent cannot forge the daemon's
// violation traces, with its own text, by printing a sandbox's error.
func TestOnlyARefusalTheSandboxCanHaveMadeIsBelieved(t *testing.T) {
	e := newEnv(t)
	denied := []string{e.p("tests/F-001.sh"), e.p(".git"), e.p("gen")}
	for _, tt := range []struct {
		r    Refusal
		want bool
	}{
		{Refusal{Path: "tests/F-001.sh"}, true},
		{Refusal{Path: e.p("tests/F-001.sh")}, true},
		{Refusal{Path: ".git/index.lock"}, true},
		{Refusal{Path: "gen/new.go"}, true},
		{Refusal{Path: "tests"}, true}, // a directory that holds a denied path
		{Refusal{Path: "."}, false},
		{Refusal{Path: "src/shared.txt"}, false},
		{Refusal{Path: "tests/F-002.sh"}, false},
		{Refusal{Path: "/etc/passwd"}, true},
		{Refusal{Host: "evil.example"}, true},
	} {
		if got := Believable(e.state, tt.r, denied); got != tt.want {
			t.Errorf("Believable(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
	if !Believable(e.state, Refusal{Path: "src/shared.txt"}, nil) {
		t.Error("with what the sandbox denies unknown, a refusal is not believed")
	}
	if Believable(e.state, Refusal{Path: "tests/F-001.sh"}, []string{}) {
		t.Error("with no sandbox (confinement off), a refusal in the project is believed")
	}
}
