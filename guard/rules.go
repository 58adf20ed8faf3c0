package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
)

// A guard is a project's own gate: a declarative rule, proposed from what
// happened again and again (graph.ProposeGuards) or written by a team in
// .claude/ctxgraphd/guards.yaml, that the hooks evaluate after the built-in
// gates have let an action through. Its evaluation lives here, beside the
// gates, so that the daemon and a hook deciding alone decide the same way.

// GuardPrefix begins the gate name of every guard's decision: guard:<id>.
const GuardPrefix = "guard:"

// Guard statuses. A guard moves proposed → warn → enforce, one step at a
// time and only by a person (`ctl guards promote`); retired ends it.
const (
	GuardProposed = "proposed" // derived from a pattern; does nothing until promoted
	GuardWarn     = "warn"     // lets the action through, tells the model, records a would-be denial
	GuardEnforce  = "enforce"  // acts: deny denies, warn warns
	GuardRetired  = "retired"  // ended; does nothing
)

// GuardStatuses lists the statuses in the order a guard moves through them.
var GuardStatuses = []string{GuardProposed, GuardWarn, GuardEnforce, GuardRetired}

// Guard actions.
const (
	ActionDeny = "deny"
	ActionWarn = "warn"
)

// Guard decision codes. A guard's decision carries the structured reason of
// the built-in gates, gate guard:<id>, with one of these codes.
const (
	CodeGuardDenied    = "guard_denied"     // an enforced deny guard refused the action
	CodeGuardWarning   = "guard_warning"    // an enforced warn guard let it through with a warning
	CodeGuardWouldDeny = "guard_would_deny" // a guard in warn would have refused it
	CodeGuardWouldWarn = "guard_would_warn" // a warn-action guard in warn would have warned
)

// Rule is one guard.
type Rule struct {
	ID     string `json:"id" yaml:"id"`
	Status string `json:"status" yaml:"status"`
	// Event is the hook event the guard judges; only PreToolUse ("" is
	// PreToolUse) for now: the action is judged before it runs.
	Event string `json:"event,omitempty" yaml:"event,omitempty"`
	// Tool is the tool the guard judges (Bash, Write, Edit, …); "" is
	// every tool the match can apply to.
	Tool string `json:"tool,omitempty" yaml:"tool,omitempty"`
	// Role is whose calls the guard judges: "" every agent's, an agent
	// role (coding-agent, …), "person" a person's interactive session
	// only, "any" everyone's.
	Role  string `json:"role,omitempty" yaml:"role,omitempty"`
	Match Match  `json:"match" yaml:"match"`
	// Action is deny (the default) or warn.
	Action     string    `json:"action,omitempty" yaml:"action,omitempty"`
	Message    string    `json:"message" yaml:"message"`
	Suggestion string    `json:"suggestion,omitempty" yaml:"suggestion,omitempty"`
	Source     string    `json:"source,omitempty" yaml:"source,omitempty"`
	Created    time.Time `json:"created,omitzero" yaml:"created,omitempty"`
}

// Match is what a call must show for a guard to apply: every part given
// must match.
type Match struct {
	// Command is a Go regular expression searched in a Bash command, as
	// written and as the shell reads each simple command of it
	// (commandMatches). Advisory: what the shell decides when it runs is
	// out of its reach.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// Path is a doublestar glob (`**` crosses directories) over the
	// project-relative path a file tool writes (Write, Edit, MultiEdit,
	// NotebookEdit; Read when Tool is Read) or a Bash command plainly
	// writes (>, >>, tee, touch), resolved like the built-in gates resolve
	// paths; a path outside the project is matched as its absolute path.
	// A guard on a path alone holds the file whatever program writes it
	// (HoldsFile): the verdict finds it in the run's change set
	// (GuardChanges) and the sandbox denies what the glob names
	// (SandboxGlobs).
	Path string `json:"path,omitempty" yaml:"path,omitempty"`
	// Field names a top-level field of tool_input; Value is a Go regular
	// expression searched in its value (a string as is, anything else as
	// JSON).
	Field string `json:"field,omitempty" yaml:"field,omitempty"`
	Value string `json:"value,omitempty" yaml:"value,omitempty"`
}

// Gate is the gate name of the guard's decisions.
func (r Rule) Gate() string { return GuardPrefix + r.ID }

// Active reports whether the guard acts at all (warn or enforce).
func (r Rule) Active() bool { return r.Status == GuardWarn || r.Status == GuardEnforce }

// action is r's action, deny when unset.
func (r Rule) action() string {
	if r.Action == "" {
		return ActionDeny
	}
	return r.Action
}

// Summary says the rule in a line: "coding-agent Bash command ~ `rm -rf` → deny".
func (r Rule) Summary() string {
	var b strings.Builder
	who := r.Role
	if who == "" {
		who = "agents"
	}
	tool := r.Tool
	if tool == "" {
		tool = "any tool"
	}
	fmt.Fprintf(&b, "%s, %s:", who, tool)
	if r.Match.Command != "" {
		fmt.Fprintf(&b, " command ~ /%s/", r.Match.Command)
	}
	if r.Match.Path != "" {
		fmt.Fprintf(&b, " path %s", r.Match.Path)
	}
	if r.Match.Field != "" {
		fmt.Fprintf(&b, " %s ~ /%s/", r.Match.Field, r.Match.Value)
	}
	fmt.Fprintf(&b, " → %s", r.action())
	return b.String()
}

// Tools a guard may name; an MCP tool (mcp__server__tool) is accepted too.
var guardTools = []string{"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Glob", "Grep", "WebFetch", "WebSearch", "Task", "TodoWrite"}

// fileTools are the tools whose path a Path match reads without a Tool.
var writeTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}

// Roles a guard may name besides the agent roles.
const (
	RolePerson = "person" // a person's interactive session (no run)
	RoleAny    = "any"    // everyone: agents and people
)

var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ErrRule wraps every problem of a guard.
var ErrRule = errors.New("guard")

// Validate says what is wrong with r, naming the guard, the field, the
// value and the fix; nil when nothing is.
func (r Rule) Validate() error {
	bad := func(field, value, fix string) error {
		return fmt.Errorf("%w %q: %s %q: %s", ErrRule, r.ID, field, value, fix)
	}
	if !idRe.MatchString(r.ID) {
		return fmt.Errorf("%w: id %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrRule, r.ID)
	}
	if !slices.Contains(GuardStatuses, r.Status) {
		return bad("status", r.Status, "want one of "+strings.Join(GuardStatuses, ", "))
	}
	if r.Event != "" && r.Event != "PreToolUse" {
		return bad("event", r.Event, "guards judge PreToolUse only (leave event out)")
	}
	if r.Tool != "" && !slices.Contains(guardTools, r.Tool) && !strings.HasPrefix(r.Tool, "mcp__") {
		return bad("tool", r.Tool, "want one of "+strings.Join(guardTools, ", ")+", an MCP tool mcp__SERVER__TOOL, or leave it out for any tool")
	}
	if r.Role != "" && r.Role != RolePerson && r.Role != RoleAny && !role.Role(r.Role).Valid() {
		return bad("role", r.Role, fmt.Sprintf("want one of %s, %s, %s, %s, or leave it out for every agent", role.Initializer, role.Coder, role.Tester, RolePerson))
	}
	if r.Action != "" && r.Action != ActionDeny && r.Action != ActionWarn {
		return bad("action", r.Action, "want deny or warn")
	}
	m := r.Match
	if m.Command == "" && m.Path == "" && m.Field == "" {
		return bad("match", "", "give at least one of match.command, match.path, match.field: a guard without one would judge every call")
	}
	if len(m.Command) > MaxPattern || len(m.Value) > MaxPattern || len(m.Path) > MaxPattern {
		return bad("match", "", fmt.Sprintf("a pattern of more than %d bytes: every hook of every run searches it; say it shorter", MaxPattern))
	}
	if m.Command != "" {
		if _, err := compile(m.Command); err != nil {
			return bad("match.command", m.Command, regexProblem(err))
		}
		if r.Tool != "" && r.Tool != "Bash" {
			return bad("tool", r.Tool, "match.command reads a Bash command: use tool Bash, or leave tool out")
		}
	}
	if m.Path != "" {
		if !doublestar.ValidatePattern(m.Path) {
			return bad("match.path", m.Path, "not a valid glob; use *, ** (across directories), ?, [a-z] and {a,b} with their brackets closed")
		}
		if r.Tool != "" && r.Tool != "Bash" && r.Tool != "Read" && !slices.Contains(writeTools, r.Tool) {
			return bad("tool", r.Tool, "match.path reads the path of Write, Edit, MultiEdit, NotebookEdit, Read or what a Bash command writes")
		}
	}
	if (m.Field == "") != (m.Value == "") {
		return bad("match.field", m.Field, "match.field and match.value go together: name a tool_input field and a regular expression for its value")
	}
	if m.Value != "" {
		if _, err := compile(m.Value); err != nil {
			return bad("match.value", m.Value, regexProblem(err))
		}
	}
	if strings.TrimSpace(r.Message) == "" {
		return bad("message", r.Message, "say what the guard refuses and why: the model reads it")
	}
	return nil
}

// regexProblem says what is wrong with a guard's regular expression.
func regexProblem(err error) string {
	var tl *tooLarge
	if errors.As(err, &tl) {
		return tl.Error()
	}
	return fmt.Sprintf("not a Go regular expression (%v); escape special characters with \\", regexErr(err))
}

// regexErr is the parser's complaint without the pattern it repeats.
func regexErr(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	return err.Error()
}

// ValidateRules validates every rule and refuses an id used twice.
func ValidateRules(rules []Rule) error {
	seen := map[string]int{}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return err
		}
		if j, ok := seen[r.ID]; ok {
			return fmt.Errorf("%w %q: used by rules %d and %d: ids must be unique", ErrRule, r.ID, j+1, i+1)
		}
		seen[r.ID] = i
	}
	return nil
}

// Guards judges a PreToolUse call by the active rules, after the built-in
// gates let it through. It returns a decision for every rule that matched,
// those that block first (the one the model reads), then the rest in rule
// order: each becomes a violation trace. Proposed and retired rules, and
// rules that do not validate, do nothing.
func Guards(rules []Rule, a Actor, s State, p *Payload) []*Decision {
	if p.Event != "PreToolUse" {
		return nil
	}
	var blocks, rest []*Decision
	own := ownTest(a, s, p)
	cmd := &shellView{line: p.Input().Command}
	for _, r := range rules {
		if !r.Active() || !r.matches(a, s, p, cmd) {
			continue
		}
		d := r.decision()
		if own && d.Blocks() {
			// The accepted feature list, a person's, says to run it; the
			// verdict needs its run. Denied, every attempt would fail.
			d.Mode, d.Code = Warn, CodeGuardWouldDeny
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

// decision is what r decides on a call it matched.
func (r Rule) decision() *Decision {
	d := &Decision{Gate: r.Gate(), Message: r.Message, Suggestion: r.Suggestion, Mode: Warn}
	switch {
	case r.Status == GuardEnforce && r.action() == ActionDeny:
		d.Code, d.Mode = CodeGuardDenied, Enforce
	case r.Status == GuardEnforce:
		d.Code = CodeGuardWarning
	case r.action() == ActionDeny:
		d.Code = CodeGuardWouldDeny
	default:
		d.Code = CodeGuardWouldWarn
	}
	if d.Suggestion == "" {
		d.Suggestion = "do it another way; if this guard is wrong, say so in your final report"
	}
	return d
}

// matches reports whether r applies to the call.
func (r Rule) matches(a Actor, s State, p *Payload, cmd *shellView) bool {
	if !r.holds(a.Role) {
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
		if p.ToolName != "Bash" || !commandMatches(compiled(m.Command), cmd) {
			return false
		}
	}
	if m.Path != "" && !r.pathMatches(s, p.ToolName, in) {
		return false
	}
	if m.Field != "" {
		v, ok := inputField(p.ToolInput, m.Field)
		if !ok || !compiled(m.Value).MatchString(v) {
			return false
		}
	}
	return true
}

// pathMatches matches the glob against what the call would write (or, for
// a Read guard, read), resolved as the built-in gates resolve it.
func (r Rule) pathMatches(s State, tool string, in ToolInput) bool {
	var raws []string
	switch {
	case tool == "Bash":
		raws = bashWriteTargets(in.Command)
	case slices.Contains(writeTools, tool), tool == "Read" && r.Tool == "Read":
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

// holds reports whether the guard judges the calls of role ("" a person).
func (r Rule) holds(who string) bool {
	switch r.Role {
	case RoleAny:
		return true
	case RolePerson:
		return who == ""
	case "":
		return who != ""
	}
	return who == r.Role
}

// HoldsFile reports whether r holds its path against whatever program
// writes it, not only against the calls the hook can read: an active guard
// with a path and nothing else to match (no command, no field) and no
// tool but a writing one (a Read guard holds reads). Such a guard is held
// by the verdict (GuardChanges: the run's change set), and, in enforce
// with action deny, by the sandbox of the runs of its role as far as its
// glob names paths when the run starts (see orchestrator policy).
func (r Rule) HoldsFile() bool {
	return r.Active() && r.Match.Path != "" && r.Match.Command == "" && r.Match.Field == "" && r.Tool != "Read" && r.Validate() == nil
}

// GuardChanges holds a run's change set (a file tool, Bash, a script, a
// background process, a link: whatever route made each change) to the
// guards that hold a file (HoldsFile), after the built-in gates: found are
// the built-in gates' findings, and a change an enforced built-in gate
// refuses already is not judged again. It returns a finding for every
// guard that matched a change, those that block first for each change:
// an enforced deny guard's change is put back like a built-in gate's.
func GuardChanges(rules []Rule, a Actor, changes []Change, found []Finding) []Finding {
	var out []Finding
	for _, c := range changes {
		if slices.ContainsFunc(found, func(f Finding) bool { return f.Path == c.Path && f.Mode == Enforce }) {
			continue
		}
		var blocks, rest []Finding
		for _, r := range rules {
			if !r.HoldsFile() || !r.holds(a.Role) {
				continue
			}
			if ok, _ := doublestar.Match(r.Match.Path, c.Path); !ok {
				continue
			}
			f := Finding{Change: c, Decision: *r.decision()}
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
func GuardRefusal(rules []Rule, a Actor, s State, r Refusal) *Decision {
	if r.Path == "" {
		return nil
	}
	name, inside := s.within(s.resolve(r.Path))
	if !inside {
		return nil
	}
	for _, g := range rules {
		if !g.HoldsFile() || !g.holds(a.Role) {
			continue
		}
		if ok, _ := doublestar.Match(g.Match.Path, name); ok {
			if d := g.decision(); d.Blocks() {
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
func SandboxGlobs(rules []Rule, role string) []string {
	var out []string
	if role == "" {
		return nil
	}
	for _, r := range rules {
		if r.HoldsFile() && r.holds(role) && r.decision().Blocks() {
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
