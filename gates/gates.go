// Package gates holds the quality gates of ctxgraphd (docs/gates.md): pure
// functions that judge what an agent is about to do, or has done, from the
// hook payload Claude Code sends, who the agent is, and what the daemon
// knows. The hook command and the daemon share them, so that a gate decides
// the same way whether the daemon answers or the hook has to decide alone,
// and whether a change arrives through a tool call or is found afterwards
// in the project's tree.
package gates

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Gate names. They are a contract: the configuration's gates.<name> keys,
// the traces' gate, the denials the model reads.
const (
	TestedNeedsEvidence = "tested-needs-evidence"
	TesterMustTest      = "tester-must-test"
	RoleWritePolicy     = "role-write-policy"
	Scope               = "scope"
	LogReadLimit        = "log-read-limit"
	HooksLive           = "hooks-live"
	FrozenTests         = "frozen-tests"
	RedBeforeGreen      = "red-before-green"
)

// Gates lists every built-in gate, each configurable as gates.<name>.
var Gates = []string{TestedNeedsEvidence, TesterMustTest, RoleWritePolicy, Scope, LogReadLimit, HooksLive, FrozenTests, RedBeforeGreen}

// Mode is how a gate acts: enforce blocks, warn lets the action through and
// records it, off does nothing.
type Mode string

// Modes of a gate. Untyped, so that a decision's mode, a string on the
// wire (control.HookDecision.Mode), compares with them as a Mode does.
const (
	Enforce = "enforce"
	Warn    = "warn"
	Off     = "off"
)

// Modes maps gate names to modes; a gate not in the map is enforced.
type Modes map[string]Mode

// Of returns the mode of gate.
func (m Modes) Of(gate string) Mode {
	if v, ok := m[gate]; ok {
		return v
	}
	return Enforce
}

// Roles, as in CTXGRAPH_AGENT, named once in package role. An empty role
// is an interactive session that runs the hooks installed by
// `ctxgraphd init --install-hooks`: a person's.
const (
	Initializer = string(role.Initializer)
	Coder       = string(role.Coder)
	Tester      = string(role.Tester)
)

// Actor is who acts. For a daemon's run the daemon knows it from the run's
// token; a hook deciding alone takes it from the run's environment.
type Actor struct {
	Role    string `json:"role"`
	Feature string `json:"feature,omitempty"`
	Run     string `json:"run,omitempty"`
}

// State is what the gates know besides the payload.
type State struct {
	// ProjectDir is the project's real path (symlinks resolved).
	ProjectDir string
	// List is the canonical feature list (the daemon's) or, when the hook
	// decides alone, the one on disk. Nil before the initializer wrote one.
	List *progress.List
	// Commands are the Bash commands this run has run so far.
	Commands []control.CommandRecord
	// StopBlocks is how many times this run's Stop was blocked already.
	StopBlocks int
	// Subagents is how many of this run's subagent calls are at work (a
	// PreToolUse let through, no PostToolUse yet).
	Subagents int
	// Offline: the daemon did not answer; tested:true fails closed.
	Offline bool
	// Protected are directories of the daemon (state, socket) no agent may
	// write or read.
	Protected []string
	// Frozen are the acceptance tests, project-relative with forward
	// slashes: the files the features' test commands run and the files of
	// ProtectedGlobs as they were when the list was accepted. No agent
	// changes them.
	Frozen map[string]bool
	// ProtectedGlobs (gates.protected) are where tests live: once the list
	// is accepted, no agent adds, changes or removes a file there.
	ProtectedGlobs []string
	// Writable are the directories outside the project that agents may
	// write: temp and tool caches, as the sandbox allows them.
	Writable []string
	// Network is what the run may reach over the network: WebFetch is
	// held to it. The zero value reaches no host.
	Network Network
	// MaxReadBytes is the log-read-limit threshold; 0 means 256 KiB.
	MaxReadBytes int64
	// MaxFileSize is sandbox.max_file_mb in bytes; 0: no bound. A change
	// set's file past it is a finding (it is never committed), whatever
	// wrote it.
	MaxFileSize int64
	// ReadFile reads a file of the project; nil means os.ReadFile, or,
	// Remote, that no file of the project can be read.
	ReadFile func(string) ([]byte, error)
	// Remote: the run's files are on another machine (a worker's clone,
	// at ProjectDir there). The gates reason about its paths as they are
	// written, and never look this machine's disk up by them: no link is
	// followed, no size read, no file read but through ReadFile. What is
	// at such a path here is another file, or an attacker's: a run must
	// not be judged by it, nor learn of it by the decision.
	Remote bool
}

// errRemoteFile is the read of a file of a Remote run without a ReadFile.
var errRemoteFile = errors.New("the run's files are on another machine")

// MaxStopBlocks is how often tester-must-test blocks a Stop before it lets
// the run end (Claude Code gives up after 8 consecutive blocks itself; the
// attempt then fails for want of a verdict).
const MaxStopBlocks = 7

// Denial is the structured reason the model reads. Its JSON shape is a
// contract: models and the scripts of outside tools read these keys.
type Denial struct {
	Status     string `json:"status"`
	Gate       string `json:"gate"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// denialOf is d as the model sees it.
func denialOf(d *control.HookDecision) Denial {
	return Denial{Status: "blocked", Gate: d.Gate, Code: d.Code, Message: d.Message, Suggestion: d.Suggestion}
}

// decide builds a decision for gate in its configured mode; off gates
// decide nothing.
func decide(m Modes, gate, code, msg, suggestion string) *control.HookDecision {
	mode := m.Of(gate)
	if mode == Off {
		return nil
	}
	return &control.HookDecision{Gate: gate, Code: code, Message: msg, Suggestion: suggestion, Mode: string(mode)}
}

// decidedTools are the tools whose calls PreToolUse decides on by
// itself: the file tools, Read and Bash, and the subagent and background
// tools (judgeBeside), and WebFetch, which the sandbox's network allowlist
// does not reach (judgeWebFetch). It allows every other tool's call. Named in the
// matcher, Monitor reaches the hook as itself: Claude Code hands a tool the
// matcher does not name to a hook of a kindred one it does (a Monitor
// call to a Bash hook, as a plain command).
var decidedTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Bash", "Agent", "Task", "Monitor", "Workflow", "WebFetch"}

// seenTools are the tools whose calls PreToolUse allows but whose hook
// must fire all the same, so that hooks-live sees them (Hooked): a Skill
// may fork a subagent (context: fork) that acts with no Agent call, and
// with hooks off its calls might not reach the run's stream.
var seenTools = []string{"Skill"}

// PreToolUseMatcher is the matcher of a daemon's run's PreToolUse hook:
// the tools the built-in gates decide on and those the active guards
// judge, and the seenTools, or "" (every tool) when a guard may judge
// any. Claude Code starts a process for every hook it runs and handles it
// at a cost a run feels: a ToolSearch, a WebSearch or a call of the
// daemon's own MCP tools (a Glob, a Grep, a TodoWrite in the versions of
// Claude Code that have them), which nothing decides on, need none.
func PreToolUseMatcher(rules []guards.Rule) string {
	names := slices.Concat(decidedTools, seenTools)
	for _, r := range rules {
		if !r.Active() {
			continue
		}
		tools, any := r.Tools()
		if any {
			return ""
		}
		names = append(names, tools...)
	}
	for _, n := range names {
		// Claude Code reads a matcher of names, digits, '_', '-' and '|'
		// as names to match exactly; anything else would be a regular
		// expression, which a tool's name is not meant to be.
		if strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" || n == "" {
			return ""
		}
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), "|")
}

// Hooked reports whether Claude Code runs the PreToolUse hook of matcher
// (PreToolUseMatcher's) for a call of tool: "" names every tool, and
// Claude Code reads a list of plain names as names to match exactly. A
// run that makes such a call while none of its hooks reaches the daemon
// runs without gates (hooks-live).
func Hooked(matcher, tool string) bool {
	return matcher == "" || slices.Contains(strings.Split(matcher, "|"), tool)
}

// FailsInert reports whether a failed call of tool did nothing: Claude
// Code refuses a file tool's call on its input (a file not read yet, a
// string not found) before its PreToolUse hook runs, and a file tool that
// fails reads and writes nothing. A failed Bash command, fetch or
// subagent may have acted all the same.
func FailsInert(tool string) bool {
	switch tool {
	case "Write", "Edit", "MultiEdit", "NotebookEdit", "Read":
		return true
	}
	return false
}

// PreToolUse judges a tool call before it runs. Nil means allowed.
func PreToolUse(m Modes, a Actor, s State, p *Payload) *control.HookDecision {
	if d := judgeBeside(m, a, s, p); d != nil {
		return d
	}
	in := p.Input()
	switch p.ToolName { // decidedTools
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
		return judgeToolWrite(m, a, s, p.ToolName, toolPath(p.ToolName, in), in)
	case "Read":
		return judgeRead(m, a, s, in)
	case "Bash":
		return judgeBash(m, a, s, in.Command)
	case "WebFetch":
		return judgeWebFetch(a, s, in.URL)
	}
	return nil
}

// toolPath is the file a file tool writes.
func toolPath(tool string, in ToolInput) string {
	if tool == "NotebookEdit" {
		return in.NotebookPath
	}
	return in.FilePath
}

// WritesFeatureList reports whether p is a file tool's write of the
// feature list, wherever its path leads. Confined, it is the only way an
// agent writes the list: a list broken while no such write went through was
// broken by someone else.
func WritesFeatureList(s State, p *Payload) bool {
	switch p.ToolName {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
	default:
		return false
	}
	raw := toolPath(p.ToolName, p.Input())
	if raw == "" {
		return false
	}
	rel, inside := s.within(s.resolve(raw))
	return inside && rel == featureListPath
}

// Stop judges a Stop or SubagentStop: a tester may not end before it ran a
// test.
func Stop(m Modes, a Actor, s State, p *Payload) *control.HookDecision {
	if a.Role != Tester {
		return nil
	}
	for _, c := range s.Commands {
		if c.IsTest {
			return nil
		}
	}
	if s.StopBlocks >= MaxStopBlocks {
		return nil // let it end: the attempt fails without a verdict
	}
	testCmd := ""
	if f := s.feature(a.Feature); f != nil {
		testCmd = f.Test
	}
	return decide(m, TesterMustTest, "no_test_run",
		fmt.Sprintf("%s may not stop before it has run a test (block %d of %d)", a.Role, s.StopBlocks+1, MaxStopBlocks),
		fmt.Sprintf("%s, save its output under .claude/progress/evidence/%s/, then give your verdict (a failing test is a verdict too)", TestHint(testCmd), a.Feature))
}

// judgeRead keeps agents out of the daemon's files and huge files out of
// their context.
func judgeRead(m Modes, a Actor, s State, in ToolInput) *control.HookDecision {
	if in.FilePath == "" {
		return nil
	}
	path := s.resolve(in.FilePath)
	if d := s.touchesDaemon(m, path); d != nil && a.Role != "" {
		return d
	}
	if in.Limit != nil || in.Offset != nil || s.Remote {
		return nil // Remote: the file's size is not known here
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Size() <= s.maxRead() {
		return nil
	}
	return decide(m, LogReadLimit, "file_too_large",
		fmt.Sprintf("%s is %d bytes; reading it whole would flood the context", s.rel(path), fi.Size()),
		"use Grep for what you need, or Read with offset and limit (e.g. the last 200 lines)")
}

func (s State) feature(id string) *progress.Feature {
	if s.List == nil {
		return nil
	}
	return s.List.Feature(id)
}

func (s State) read(p string) ([]byte, error) {
	switch {
	case s.ReadFile != nil:
		return s.ReadFile(p)
	case s.Remote:
		return nil, errRemoteFile
	}
	return os.ReadFile(p)
}

func (s State) maxRead() int64 {
	if s.MaxReadBytes > 0 {
		return s.MaxReadBytes
	}
	return 256 << 10
}
