package guards

import (
	"errors"
	"strings"
	"testing"
)

func TestRuleValidate(t *testing.T) {
	ok := Rule{ID: "g-1", Status: Enforce, Tool: "Bash", Match: Match{Command: `\brm -rf\b`}, Message: "no rm -rf"}
	tests := []struct {
		name string
		edit func(r *Rule)
		want []string // "" when valid; else every part the error must name
	}{
		{name: "valid", edit: func(r *Rule) {}},
		{name: "valid path guard for any write tool", edit: func(r *Rule) { r.Tool, r.Match = "", Match{Path: "src/**/*.gen.go"} }},
		{name: "valid field guard", edit: func(r *Rule) { r.Tool, r.Match = "WebFetch", Match{Field: "url", Value: `^http://`} }},
		{name: "valid mcp tool", edit: func(r *Rule) {
			r.Tool, r.Match = "mcp__db__query", Match{Field: "sql", Value: `(?i)drop`}
		}},
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
	r := Rule{ID: "g-1", Status: Warn, Match: Match{Command: "x"}, Message: "m"}
	err := ValidateRules([]Rule{r, r})
	if err == nil || !strings.Contains(err.Error(), "rules 1 and 2") {
		t.Fatalf("ValidateRules(twice the same id) = %v, want an error naming both", err)
	}
}

// A guard's patterns are bounded: every hook of every run searches them.
func TestGuardPatternsAreBounded(t *testing.T) {
	r := Rule{ID: "big", Status: Enforce, Tool: "Bash", Match: Match{Command: strings.Repeat("a|", MaxPattern)}, Message: "m"}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "say it shorter") {
		t.Errorf("Validate(a %d-byte pattern) = %v, want a refusal", len(r.Match.Command), err)
	}
}

// A short pattern can compile to a large program, which Go searches in
// time linear in the command times its size: such a guard is refused, as
// one too long is, and names the fix.
func TestAGuardsProgramIsBounded(t *testing.T) {
	r := Rule{ID: "slow", Status: Enforce, Tool: "Bash", Match: Match{Command: strings.Repeat(`[\s\S]{1000}`, 60)}, Message: "m"}
	if len(r.Match.Command) > MaxPattern {
		t.Fatalf("the pattern is %d bytes, want it under MaxPattern so that the program's size is what refuses it", len(r.Match.Command))
	}
	err := r.Validate()
	if err == nil || !strings.Contains(err.Error(), "instructions") || !strings.Contains(err.Error(), "match.command") {
		t.Fatalf("Validate(a pattern of 60,000 instructions) = %v, want a refusal that says so", err)
	}
	r.Match = Match{}
	r.Tool, r.Match.Field, r.Match.Value = "WebFetch", "url", strings.Repeat(`\w{500}`, 10)
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "match.value") {
		t.Errorf("Validate(a large value pattern) = %v, want a refusal", err)
	}
	// What guards are written for stays well inside.
	for _, ok := range []string{`\brm\s+-rf\b`, `(?i)\b(curl|wget)\b.*https?://`, `^\s*make\s+deploy\s*$`, `^\s*` + strings.Repeat(`go\s+build\s+\./\.\.\.\s+`, 20) + `\s*$`} {
		if n := programSize(ok); n > MaxProgram/2 {
			t.Errorf("%s compiles to %d instructions, want room to spare", ok, n)
		}
	}
}

// What a rule says of itself: its gate name, whether it acts, what it
// does, and its one-line summary.
func TestRuleSaysWhatItIs(t *testing.T) {
	for _, tt := range []struct {
		rule    Rule
		active  bool
		effect  string
		summary string
	}{
		{Rule{ID: "a", Status: Proposed, Match: Match{Path: "x"}}, false, ActionDeny, "agents, any tool: path x → deny"},
		{Rule{ID: "b", Status: Warn, Role: "coding-agent", Tool: "Bash", Action: ActionWarn, Match: Match{Command: "rm"}}, true, ActionWarn, "coding-agent, Bash: command ~ /rm/ → warn"},
		{Rule{ID: "c", Status: Enforce, Tool: "WebFetch", Match: Match{Field: "url", Value: "evil"}}, true, ActionDeny, "agents, WebFetch: url ~ /evil/ → deny"},
		{Rule{ID: "d", Status: Retired, Match: Match{Command: "x", Path: "y"}}, false, ActionDeny, "agents, any tool: command ~ /x/ path y → deny"},
	} {
		if got := tt.rule.Gate(); got != "guard:"+tt.rule.ID {
			t.Errorf("%s: Gate() = %q", tt.rule.ID, got)
		}
		if got := tt.rule.Active(); got != tt.active {
			t.Errorf("%s: Active() = %v, want %v", tt.rule.ID, got, tt.active)
		}
		if got := tt.rule.Effect(); got != tt.effect {
			t.Errorf("%s: Effect() = %q, want %q", tt.rule.ID, got, tt.effect)
		}
		if got := tt.rule.Summary(); got != tt.summary {
			t.Errorf("%s: Summary() = %q, want %q", tt.rule.ID, got, tt.summary)
		}
	}
}

// Whose calls a guard judges, and which guards hold a file whatever
// program writes it.
func TestHolds(t *testing.T) {
	for _, tt := range []struct {
		role string
		who  map[string]bool // caller ("" a person) → judged
	}{
		{"", map[string]bool{"": false, "coding-agent": true, "tester-agent": true}},
		{RoleAny, map[string]bool{"": true, "coding-agent": true}},
		{RolePerson, map[string]bool{"": true, "coding-agent": false}},
		{"tester-agent", map[string]bool{"": false, "coding-agent": false, "tester-agent": true}},
	} {
		for who, want := range tt.who {
			if got := (Rule{Role: tt.role}).Holds(who); got != want {
				t.Errorf("a guard of role %q judging %q: %v, want %v", tt.role, who, got, want)
			}
		}
	}
	file := Rule{ID: "f", Status: Enforce, Match: Match{Path: "secrets/**"}, Message: "m"}
	for _, tt := range []struct {
		name string
		edit func(*Rule)
		want bool
	}{
		{"an active path guard", func(*Rule) {}, true},
		{"in warn", func(r *Rule) { r.Status = Warn }, true},
		{"proposed", func(r *Rule) { r.Status = Proposed }, false},
		{"with a command too", func(r *Rule) { r.Match.Command = "cat" }, false},
		{"with a field too", func(r *Rule) { r.Match.Field, r.Match.Value = "x", "y" }, false},
		{"a Read guard", func(r *Rule) { r.Tool = "Read" }, false},
		{"a Write guard", func(r *Rule) { r.Tool = "Write" }, true},
		{"no path", func(r *Rule) { r.Match.Path, r.Match.Command = "", "cat" }, false},
		{"invalid", func(r *Rule) { r.Message = "" }, false},
	} {
		r := file
		tt.edit(&r)
		if got := r.HoldsFile(); got != tt.want {
			t.Errorf("%s: HoldsFile() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Each pattern is bounded at MaxPattern bytes exactly, and a rule's tool
// must be one its match can read.
func TestValidateBounds(t *testing.T) {
	ok := func(m Match, tool string) Rule {
		return Rule{ID: "b", Status: Warn, Tool: tool, Match: m, Message: "m"}
	}
	// A class of many letters is one instruction: only the length counts.
	at, over := "["+strings.Repeat("a", MaxPattern-2)+"]", "["+strings.Repeat("a", MaxPattern-1)+"]"
	for _, tt := range []struct {
		name string
		rule Rule
		ok   bool
	}{
		{"a command of MaxPattern bytes", ok(Match{Command: at}, ""), true},
		{"a command of one more", ok(Match{Command: over}, ""), false},
		{"a value of MaxPattern bytes", ok(Match{Field: "f", Value: at}, ""), true},
		{"a value of one more", ok(Match{Field: "f", Value: over}, ""), false},
		{"a path of MaxPattern bytes", ok(Match{Path: at}, ""), true},
		{"a path of one more", ok(Match{Path: over}, ""), false},
		{"a command for Bash", ok(Match{Command: "x"}, "Bash"), true},
		{"a command for Write", ok(Match{Command: "x"}, "Write"), false},
		{"a path for Bash", ok(Match{Path: "x"}, "Bash"), true},
		{"a path for Read", ok(Match{Path: "x"}, "Read"), true},
		{"a path for Edit", ok(Match{Path: "x"}, "Edit"), true},
		{"a path for WebFetch", ok(Match{Path: "x"}, "WebFetch"), false},
	} {
		if err := tt.rule.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// A program of exactly MaxProgram instructions is taken; one more is not.
func TestProgramBoundIsInclusive(t *testing.T) {
	expr := ""
	for k := 1; k < 4*MaxProgram; k++ {
		if e := strings.Repeat("a", k); programSize(e) == MaxProgram {
			expr = e
			break
		}
	}
	if expr == "" {
		t.Fatal("no run of a's compiles to exactly MaxProgram instructions")
	}
	if _, err := compile(expr); err != nil {
		t.Errorf("a program of exactly MaxProgram instructions: %v", err)
	}
	if _, err := compile(expr + "a"); err == nil {
		t.Error("a program of MaxProgram+1 instructions was taken")
	}
	defer func() {
		if recover() == nil {
			t.Error("Compiled of an expression Validate refuses did not panic")
		}
	}()
	Compiled("(")
}
