package gates

// This file holds a call and a change set to a project's guards (package
// guards): after the built-in gates have let them through, in the daemon
// and in a hook deciding alone alike.

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

// Guards judges a PreToolUse call by the active rules, after the built-in
// gates let it through. It returns a decision for every rule that matched,
// those that block first (the one the model reads), then the rest in rule
// order: each becomes a violation trace. Proposed and retired rules, and
// rules that do not validate, do nothing.
func Guards(rules []guards.Rule, a Actor, s State, p *Payload) []*control.HookDecision {
	if p.Event != "PreToolUse" {
		return nil
	}
	var blocks, rest []*control.HookDecision
	own := ownTest(a, s, p)
	cmd := &shellView{line: p.Input().Command}
	for _, r := range rules {
		if !r.Active() || !matches(r, a, s, p, cmd) {
			continue
		}
		d := guardDecision(r)
		if own && d.Blocks() {
			// The accepted feature list, a person's, says to run it; the
			// verdict needs its run. Denied, every attempt would fail.
			d.Mode, d.Code = Warn, guards.CodeWouldDeny
			d.Message += " (let through: it is the feature's own test command, as the accepted feature list gives it, and no guard stops the test the verdict needs)"
		}
		if d.Blocks() {
			blocks = append(blocks, d)
		} else {
			rest = append(rest, d)
		}
	}
	return append(blocks, rest...)
}

// guardDecision is what r decides on a call it matched.
func guardDecision(r guards.Rule) *control.HookDecision {
	d := &control.HookDecision{Gate: r.Gate(), Message: r.Message, Suggestion: r.Suggestion, Mode: Warn}
	switch {
	case r.Status == guards.Enforce && r.Effect() == guards.ActionDeny:
		d.Code, d.Mode = guards.CodeDenied, Enforce
	case r.Status == guards.Enforce:
		d.Code = guards.CodeWarning
	case r.Effect() == guards.ActionDeny:
		d.Code = guards.CodeWouldDeny
	default:
		d.Code = guards.CodeWouldWarn
	}
	if d.Suggestion == "" {
		d.Suggestion = "do it another way; if this guard is wrong, say so in your final report"
	}
	return d
}

// matches reports whether r applies to the call.
func matches(r guards.Rule, a Actor, s State, p *Payload, cmd *shellView) bool {
	if !r.Holds(a.Role) {
		return false
	}
	if r.Tool != "" && r.Tool != p.ToolName {
		return false
	}
	if r.Validate() != nil {
		return false // never act on a rule nobody could read
	}
	in := p.Input()
	m := r.Match
	if m.Command != "" {
		if p.ToolName != "Bash" || !commandMatches(guards.Compiled(m.Command), cmd) {
			return false
		}
	}
	if m.Path != "" && !pathMatches(r, s, p.ToolName, in) {
		return false
	}
	if m.Field != "" {
		v, ok := inputField(p.ToolInput, m.Field)
		if !ok || !guards.Compiled(m.Value).MatchString(v) {
			return false
		}
	}
	return true
}

// pathMatches matches the glob against what the call would write (or, for
// a Read guard, read), resolved as the built-in gates resolve it.
func pathMatches(r guards.Rule, s State, tool string, in ToolInput) bool {
	var raws []string
	switch {
	case tool == "Bash":
		raws = bashWriteTargets(in.Command)
	case slices.Contains(guards.WriteTools, tool), tool == "Read" && r.Tool == "Read":
		raws = []string{toolPath(tool, in)}
	}
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		p := s.resolve(raw)
		name, inside := s.within(p)
		if !inside {
			name = p
		}
		if ok, _ := doublestar.Match(r.Match.Path, name); ok {
			return true
		}
	}
	return false
}

// inputField is a top-level field of tool_input as text.
func inputField(raw json.RawMessage, field string) (string, bool) {
	var fields map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &fields) != nil {
		return "", false
	}
	v, ok := fields[field]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	return string(v), true
}

// GuardChanges holds a run's change set (a file tool, Bash, a script, a
// background process, a link: whatever route made each change) to the
// guards that hold a file (HoldsFile), after the built-in gates: found are
// the built-in gates' findings, and a change an enforced built-in gate
// refuses already is not judged again. It returns a finding for every
// guard that matched a change, those that block first for each change:
// an enforced deny guard's change is put back like a built-in gate's.
func GuardChanges(rules []guards.Rule, a Actor, changes []Change, found []Finding) []Finding {
	var out []Finding
	for _, c := range changes {
		if slices.ContainsFunc(found, func(f Finding) bool { return f.Path == c.Path && f.Mode == Enforce }) {
			continue
		}
		var blocks, rest []Finding
		for _, r := range rules {
			if !r.HoldsFile() || !r.Holds(a.Role) {
				continue
			}
			if ok, _ := doublestar.Match(r.Match.Path, c.Path); !ok {
				continue
			}
			f := Finding{Change: c, HookDecision: *guardDecision(r)}
			if f.Blocks() {
				blocks = append(blocks, f)
			} else {
				rest = append(rest, f)
			}
		}
		out = append(append(out, blocks...), rest...)
	}
	return out
}

// GuardRefusal names the guard a write the sandbox refused falls under,
// when no built-in gate does: the sandbox of a run holds the paths of its
// role's enforced deny guards (SandboxGlobs), and the refusal is then
// that guard's, as visible as its denial of a file tool's write.
func GuardRefusal(rules []guards.Rule, a Actor, s State, r Refusal) *control.HookDecision {
	if r.Path == "" {
		return nil
	}
	name, inside := s.within(s.resolve(r.Path))
	if !inside {
		return nil
	}
	for _, g := range rules {
		if !g.HoldsFile() || !g.Holds(a.Role) {
			continue
		}
		if ok, _ := doublestar.Match(g.Match.Path, name); ok {
			if d := guardDecision(g); d.Blocks() {
				return d
			}
		}
	}
	return nil
}

// SandboxGlobs are the path globs the sandbox of a run of role holds for
// the guards: those of enforced deny guards that hold a file (HoldsFile)
// for that role. The sandbox takes paths, not globs: the daemon expands
// them against the project's tree when the run starts, and what a glob
// would match only later (a file the run creates) is held by the verdict.
func SandboxGlobs(rules []guards.Rule, role string) []string {
	var out []string
	if role == "" {
		return nil
	}
	for _, r := range rules {
		if r.HoldsFile() && r.Holds(role) && guardDecision(r).Blocks() {
			out = append(out, r.Match.Path)
		}
	}
	return out
}

// ownTest reports whether the call is a Bash run of the actor's feature's
// test command exactly as the feature list gives it (whitespace aside):
// not a command that merely contains it, which could do anything before
// or after it.
func ownTest(a Actor, s State, p *Payload) bool {
	if p.ToolName != "Bash" || a.Role == "" {
		return false
	}
	f := s.feature(a.Feature)
	if f == nil || strings.TrimSpace(f.Test) == "" {
		return false
	}
	return strings.Join(strings.Fields(p.Input().Command), " ") == strings.Join(strings.Fields(f.Test), " ")
}
