// Package sandbox confines agent runs with Claude Code's own sandbox.
//
// Reading an agent's commands cannot make it safe: a shell line can hide
// what it does behind a script it wrote a moment ago, an interpreter, or a
// test that runs whatever it likes. So ctxgraphd does not try. It confines
// what any program an agent runs can touch, and judges the outcome elsewhere
// (the daemon runs a feature's test itself, in VerdictEnv). With the sandbox
// enabled, Claude Code runs every Bash call in bubblewrap on Linux and in
// sandbox-exec on macOS: the project is writable except for the paths the
// daemon owns (Policy.DenyWrite), the rest of the filesystem is read-only
// except for temp and tool caches (Policy.AllowWrite), the daemon's state
// cannot be read (Policy.DenyRead), Unix sockets cannot be created, the
// network goes through a proxy that lets only Policy.AllowedDomains through,
// and what a command leaves running in the background dies when the command
// ends (each Bash call has its own pid namespace). claude_test.go checks
// each of these against the real CLI.
//
// What it does not cover: the Write, Edit and Read tools run inside Claude
// Code itself, outside the sandbox, and so do hooks. The daemon's hooks
// judge the paths of those tools (after resolving symlinks); the sandbox
// only confines the programs an agent starts.
//
// Policy.Settings is the value of the "sandbox" key of the settings the
// daemon passes with --settings, and Check finds out at daemon start
// whether the sandbox can run here at all: with failIfUnavailable set, a
// run on a machine without it ends before its first request, and that must
// never count as an agent's failed attempt.
package sandbox

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
)

// ErrUnavailable is the error Check's errors wrap: the sandbox cannot run
// on this machine, and agents must not run without it.
var ErrUnavailable = errors.New("the sandbox for agent commands is unavailable")

// Policy is what one run may touch. Every path is absolute; Settings
// cleans them.
type Policy struct {
	// ProjectDir is the project, writable but for DenyWrite.
	ProjectDir string
	// DenyWrite are paths, files or directories, existing or not, that
	// agents must not write: the feature list, session-state.json, the
	// .claude settings, configuration and prompt overrides, frozen tests.
	DenyWrite []string
	// DenyRead are paths agents must not read: the daemon's state and
	// socket directories.
	DenyRead []string
	// AllowWrite are directories writable besides the project: temp and
	// tool caches (see CacheDirs).
	AllowWrite []string
	// AllowedDomains are the hosts the sandbox's network proxy lets
	// through (see DefaultAllowedDomains). None means no network.
	AllowedDomains []string
}

// Denied is every path p keeps its run from writing: DenyWrite, and the
// project's .claude/, which Claude Code's sandbox holds read-only by
// itself. The hooks believe a refusal a run's command prints only for
// these.
func (p Policy) Denied() []string {
	return append(slices.Clone(p.DenyWrite), filepath.Join(p.ProjectDir, ".claude"))
}

// DefaultAllowedDomains are the package registries an honest build needs to
// fetch its dependencies, and nothing else: an agent has no business
// talking to any other host. Each serves one toolchain (toolchain.All says
// which, and what for), so that a project can narrow the list to its own.
var DefaultAllowedDomains = toolchain.Hosts()

// Settings returns the value of the "sandbox" key of Claude Code's settings
// for p. Every Bash call runs sandboxed (autoAllowBashIfSandboxed, without
// asking), a command cannot ask to run outside it
// (allowUnsandboxedCommands false: the tool's dangerouslyDisableSandbox is
// ignored), and a machine where it cannot run makes the run fail at start
// instead of running unconfined (failIfUnavailable). The network proxy
// refuses every host not in AllowedDomains (strictAllowlist).
//
// Paths are cleaned, deduplicated and sorted, so that the same policy gives
// the same JSON; an empty list is an empty array, which the CLI accepts.
// The project goes into allowWrite although the CLI makes the working
// directory of a run writable by itself: the settings then say all that
// the run may write, wherever it is started.
func (p Policy) Settings() map[string]any {
	allow := p.AllowWrite
	if p.ProjectDir != "" {
		allow = append([]string{p.ProjectDir}, allow...)
	}
	return map[string]any{
		"enabled":                  true,
		"failIfUnavailable":        true,
		"allowUnsandboxedCommands": false,
		"autoAllowBashIfSandboxed": true,
		"filesystem": map[string]any{
			"allowWrite": cleanPaths(allow),
			"denyWrite":  cleanPaths(p.DenyWrite),
			"denyRead":   cleanPaths(p.DenyRead),
		},
		"network": map[string]any{
			"allowedDomains": sorted(p.AllowedDomains),
			// Without it the proxy asks about any other host, and in a
			// headless run with bypassPermissions the answer is yes.
			"strictAllowlist": true,
		},
	}
}

// cleanPaths returns paths cleaned, without empty entries and duplicates,
// sorted.
func cleanPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			out = append(out, filepath.Clean(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sorted returns the non-empty strings of ss, deduplicated and sorted.
func sorted(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
