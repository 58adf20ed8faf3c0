package gates

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Project paths the rules name, with forward slashes.
const (
	featureListPath  = ".claude/progress/" + progress.FeatureListFile
	sessionStatePath = ".claude/progress/" + progress.SessionStateFile
	evidencePath     = ".claude/progress/" + progress.EvidenceDir
)

// daemonConfig are the project files that configure ctxgraphd and Claude
// Code for every later run: an agent that changed them would change its own
// gates, prompts or sandbox.
var daemonConfig = []string{".claude/ctxgraphd.yaml", ".claude/ctxgraphd/**", ".claude/settings.json", ".claude/settings.local.json"}

// judgeToolWrite judges a Write, Edit, MultiEdit or NotebookEdit: on the
// path it would really touch, symlinks and ".." resolved.
func judgeToolWrite(m Modes, a Actor, s State, tool, raw string, in ToolInput) *control.HookDecision {
	if raw == "" {
		return nil
	}
	p := s.resolve(raw)
	if d := s.touchesDaemon(m, p); d != nil {
		return d
	}
	rel, inside := s.within(p)
	if !inside {
		if a.Role == "" || s.writableOutside(p) {
			return nil
		}
		return decide(m, RoleWritePolicy, "outside_project",
			fmt.Sprintf("%s is outside the project (%s); agents write only in the project and in the temp and cache directories", p, s.ProjectDir),
			"write inside the project, or in $TMPDIR for scratch files")
	}
	if rel == featureListPath {
		return judgeFeatureList(m, a, s, tool, p, in)
	}
	return judgePath(m, a, s, rel)
}

// judgePath is the one rule for a change of a project file (rel, relative,
// forward slashes), by whatever route: a file tool, a Bash command that
// plainly writes it, or a change the daemon found in the project's tree
// after the run. The feature list is judged by its content elsewhere.
func judgePath(m Modes, a Actor, s State, rel string) *control.HookDecision {
	if rel == sessionStatePath {
		return decide(m, RoleWritePolicy, "session_state",
			"session-state.json is written by the daemon only", "read it if you need the state; do not write it")
	}
	if a.Role == "" {
		return nil // a person at an interactive session
	}
	switch {
	case InGitDir(rel):
		return decide(m, RoleWritePolicy, "git_internals",
			fmt.Sprintf("%s is inside a .git directory (the repository's own or a nested one); ctxgraphd commits tested work itself, and a repository inside the project would keep code out of it", rel),
			"leave git to the daemon: change the project's files only, and never run git init inside the project")
	case IsGitRules(rel):
		return decide(m, RoleWritePolicy, "git_rules",
			fmt.Sprintf("%s decides what git records of the project (what it ignores, how it converts content); only a person changes it", rel),
			"keep the file as it is; if the project needs a file ignored or treated differently, say so in your final report")
	case MatchAny(daemonConfig, rel):
		return decide(m, RoleWritePolicy, "daemon_files",
			fmt.Sprintf("%s configures ctxgraphd and Claude Code; agents do not change it", rel), "report what you need changed in your final message")
	case isClaudeConfig(rel):
		return decide(m, RoleWritePolicy, "claude_config",
			fmt.Sprintf("%s configures Claude Code for every later session started there, ctxgraphd's runs' and people's (its hooks run outside any sandbox): agents do not change it", rel),
			"report what you need changed in your final message")
	case isClaudeMd(rel):
		return decide(m, RoleWritePolicy, "claude_config",
			fmt.Sprintf("%s is read by Claude Code in every later session, ctxgraphd's agents' and people's: agents do not change it", rel),
			"say what later agents should know in your final report, or propose a lesson (record_lesson): a person decides what CLAUDE.md says")
	case strings.HasPrefix(rel, evidencePath+"/"):
		return judgeEvidence(m, a, rel)
	case strings.HasPrefix(rel, ".claude/progress/"):
		return decide(m, RoleWritePolicy, "daemon_files",
			fmt.Sprintf("%s is in the daemon's progress directory", rel), "only your feature's entry in feature-list.json and its evidence are yours to write")
	case s.Frozen[rel]:
		return decide(m, FrozenTests, "frozen_test",
			fmt.Sprintf("%s is an acceptance test, frozen when the feature list was accepted; no agent changes it", rel),
			"make the code pass the test as it is; if the test itself is wrong, say so in your final report")
	case s.List != nil && a.Role != Initializer && MatchAny(s.ProtectedGlobs, rel):
		// The initializer writes the tests with the list; once the list is
		// accepted and its run is over, nobody else adds or changes one.
		return decide(m, FrozenTests, "protected_test",
			fmt.Sprintf("%s is where the project's tests live (gates.protected); once the feature list is accepted agents do not add, change or remove tests", rel),
			"make the code pass the feature's own test; if a test is missing or wrong, say so in your final report")
	}
	switch a.Role {
	case Tester:
		return decide(m, RoleWritePolicy, "tester_edits_source",
			fmt.Sprintf("a tester does not change the project (%s); it judges it", rel),
			fmt.Sprintf("write test output under .claude/progress/evidence/%s/ and report what is wrong; the coding agent will fix it", a.Feature))
	case Coder:
		f := s.feature(a.Feature)
		if f == nil || len(f.Scope) == 0 || InScope(f.Scope, rel) || progress.SharedManifest(rel) {
			return nil // a dependency's manifest and lock are every feature's
		}
		return decide(m, Scope, "out_of_scope",
			fmt.Sprintf("%s is outside the scope of %s (%s)", rel, a.Feature, strings.Join(f.Scope, ", ")),
			"change only the files of your feature; if the feature needs more, say so in your final report")
	}
	return nil
}

// judgeEvidence: evidence is the tester's, of its own feature.
func judgeEvidence(m Modes, a Actor, rel string) *control.HookDecision {
	own := evidencePath + "/" + a.Feature + "/"
	switch {
	case a.Role == Tester && a.Feature != "" && strings.HasPrefix(rel, own):
		return nil
	case a.Role == Coder:
		return decide(m, RoleWritePolicy, "coder_sets_evidence", "evidence is the tester's to write",
			"run the feature's test yourself if you like, but leave evidence and tested to the tester")
	}
	return decide(m, RoleWritePolicy, "not_your_feature",
		fmt.Sprintf("%s is not the evidence of %s", rel, a.Feature), fmt.Sprintf("write under %s", own))
}

// InScope reports whether rel (project-relative, forward slashes) matches
// one of a feature's scope globs ("**" crosses directories).
func InScope(scope []string, rel string) bool {
	for _, glob := range scope {
		if ok, _ := doublestar.Match(progress.ScopePattern(glob), rel); ok {
			return true
		}
	}
	return false
}

// MatchAny reports whether rel (project-relative, forward slashes) matches
// one of globs.
func MatchAny(globs []string, rel string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, rel); ok {
			return true
		}
	}
	return false
}

// Change is one file a run changed in the project, as the daemon found it
// in the project's tree after the run: whatever route made the change.
type Change struct {
	Path string // project-relative, forward slashes
	Kind string // "added", "modified" or "deleted"
	// Refused says why git cannot record the path (a name it refuses, a
	// repository nested in the project, a file that is not a file): it is
	// on disk but cannot be in a commit, so a test could pass on what the
	// commit lacks. "" for an ordinary change.
	Refused string
	// Size is the file's size on disk after the change, in bytes (0 for
	// a deletion, or where it is not known).
	Size int64
}

// NotAFile is Change.Refused for a link or a special file in the
// evidence directory (which is in no change set): a finding against the
// run that left it, which goes whole.
const NotAFile = "not a regular file"

// Finding is a change a gate does not let stand.
type Finding struct {
	Change
	control.HookDecision
}

// JudgeChanges holds what a run changed, by any route (a file tool, Bash,
// a script, a program it started), to the same rule as a file tool's
// write: the outcome is judged, not the commands. The feature list and the
// rest of .claude/progress are not in a change set (the daemon watches
// them itself).
func JudgeChanges(m Modes, a Actor, s State, changes []Change) []Finding {
	var out []Finding
	for _, c := range changes {
		d := judgePath(m, a, s, c.Path)
		if d == nil && c.Refused == NotAFile && a.Role != "" {
			d = decide(m, RoleWritePolicy, "evidence_not_a_file",
				fmt.Sprintf("%s is a symbolic link or a special file in the evidence directory: evidence is regular files, which the daemon reads and copies and never follows", c.Path),
				"save what a command printed as a file (`cmd > "+evidencePath+"/<id>/test.log 2>&1`); never link to a file or a directory")
		}
		if d == nil && c.Refused != "" && a.Role != "" {
			d = decide(m, RoleWritePolicy, "git_refuses_path",
				fmt.Sprintf("%s cannot be recorded by git (%s): a commit would lack what a test ran on", c.Path, c.Refused),
				"give files ordinary names, keep them regular files or symlinks, and never run git init inside the project")
		}
		if d == nil && s.MaxFileSize > 0 && c.Size > s.MaxFileSize && a.Role != "" {
			d = decide(m, RoleWritePolicy, "file_too_large",
				fmt.Sprintf("%s is %d MiB, past sandbox.max_file_mb (%d MiB): it is not committed", c.Path, c.Size>>20, s.MaxFileSize>>20),
				"keep generated data, downloads and build output out of the project, or have a person raise sandbox.max_file_mb")
		}
		if d != nil {
			out = append(out, Finding{Change: c, HookDecision: *d})
		}
	}
	return out
}

// InGitDir reports whether rel (project-relative, forward slashes) has a
// component git reserves: ".git" in any case, the repository's own at the
// top or a nested repository's anywhere below. Git refuses every such path
// (it would not be in a commit), so no agent writes one.
func InGitDir(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(part, ".git") {
			return true
		}
	}
	return false
}

// IsGitRules reports whether rel is a .gitignore or .gitattributes file, in
// any directory of the project (any case: macOS's file system ignores it).
// They decide what git leaves out and how it converts what it takes: a
// person's, protected like the feature list.
func IsGitRules(rel string) bool {
	base := path.Base(rel)
	return strings.EqualFold(base, ".gitignore") || strings.EqualFold(base, ".gitattributes")
}

// isClaudeMd reports whether rel is a memory file Claude Code reads in
// every session that touches its directory: CLAUDE.md or CLAUDE.local.md,
// at the root or below (any case: macOS's file system ignores it).
// isClaudeConfig reports whether rel configures Claude Code for a session
// started in its directory or below: a .claude directory's content (its
// settings, whose hooks run unsandboxed, its skills, agents and commands)
// or an .mcp.json, in any directory of the project and in any case, as
// CLAUDE.md is. The daemon's own .claude/progress at the top is the
// daemon's (its own rules come before this one).
func isClaudeConfig(rel string) bool {
	if strings.HasPrefix(rel, ".claude/progress/") {
		return false
	}
	dirs := strings.Split(rel, "/")
	for _, d := range dirs[:len(dirs)-1] {
		if strings.EqualFold(d, ".claude") {
			return true
		}
	}
	return strings.EqualFold(dirs[len(dirs)-1], ".mcp.json")
}

func isClaudeMd(rel string) bool {
	base := path.Base(rel)
	return strings.EqualFold(base, "CLAUDE.md") || strings.EqualFold(base, "CLAUDE.local.md")
}
