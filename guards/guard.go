// Package guards holds a project's guards: its own gates, declarative
// rules proposed from what happened again and again (package
// guards/propose) or written by a team in .claude/ctxgraphd/guards.yaml
// (package guards/rulefile), that the hooks evaluate after the built-in
// gates have let an action through. This package is the rule itself: its
// fields, its statuses, and the checks that keep its patterns cheap enough
// for every hook of every run. How a call or a change set is held to the
// guards is package gates' (gates/guards.go), beside the built-in gates, so
// that the daemon and a hook deciding alone decide the same way.
package guards

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
)

// Prefix begins the gate name of every guard's decision: guard:<id>.
const Prefix = "guard:"

// Guard statuses. A guard moves proposed → warn → enforce, one step at a
// time and only by a person (`ctl guards promote`); retired ends it.
const (
	Proposed = "proposed" // derived from a pattern; does nothing until promoted
	Warn     = "warn"     // lets the action through, tells the model, records a would-be denial
	Enforce  = "enforce"  // acts: deny denies, warn warns
	Retired  = "retired"  // ended; does nothing
)

// Statuses lists the statuses in the order a guard moves through them.
var Statuses = []string{Proposed, Warn, Enforce, Retired}

// Guard actions.
const (
	ActionDeny = "deny"
	ActionWarn = "warn"
)

// Guard decision codes. A guard's decision carries the structured reason of
// the built-in gates, gate guard:<id>, with one of these codes.
const (
	CodeDenied    = "guard_denied"     // an enforced deny guard refused the action
	CodeWarning   = "guard_warning"    // an enforced warn guard let it through with a warning
	CodeWouldDeny = "guard_would_deny" // a guard in warn would have refused it
	CodeWouldWarn = "guard_would_warn" // a warn-action guard in warn would have warned
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
func (r Rule) Gate() string { return Prefix + r.ID }

// Active reports whether the guard acts at all (warn or enforce).
func (r Rule) Active() bool { return r.Status == Warn || r.Status == Enforce }

// Effect is what r does when it matches: its action, deny when unset.
func (r Rule) Effect() string {
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
	fmt.Fprintf(&b, " → %s", r.Effect())
	return b.String()
}

// Tools a guard may name; an MCP tool (mcp__server__tool) is accepted too.
var guardTools = []string{"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Glob", "Grep", "WebFetch", "WebSearch", "Task", "TodoWrite"}

// Tools are the tools whose calls r can judge, or any when it may judge
// a call of any tool (a match on a field alone, or on nothing): a command
// is Bash's, a path the file tools' and Bash's (and Read's, named).
func (r Rule) Tools() (names []string, any bool) {
	switch {
	case r.Tool != "":
		return []string{r.Tool}, false
	case r.Match.Field != "":
		return nil, true
	case r.Match.Command != "":
		return []string{"Bash"}, false
	case r.Match.Path != "":
		return append([]string{"Bash"}, WriteTools...), false
	}
	return nil, true
}

// fileTools are the tools whose path a Path match reads without a Tool.
var WriteTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}

// Roles a guard may name besides the agent roles.
const (
	RolePerson = "person" // a person's interactive session (no run)
	RoleAny    = "any"    // everyone: agents and people
)

var idRe = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

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
	if !slices.Contains(Statuses, r.Status) {
		return bad("status", r.Status, "want one of "+strings.Join(Statuses, ", "))
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
		if r.Tool != "" && r.Tool != "Bash" && r.Tool != "Read" && !slices.Contains(WriteTools, r.Tool) {
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

// holds reports whether the guard judges the calls of role ("" a person).
func (r Rule) Holds(who string) bool {
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
