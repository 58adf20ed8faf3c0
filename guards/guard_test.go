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
