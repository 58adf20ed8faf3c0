package gates

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
)

// Refusal is what Claude Code's sandbox refused a command, as the command's
// own output says: a write to a read-only path, or a host not on the allow
// list. The sandbox is what enforces; this is only how the refusal becomes
// visible (a violation trace, naming the gate whose rule the path falls
// under), since the sandbox itself records nothing the daemon can read.
type Refusal struct {
	Path string // a file the command could not write, as the error names it
	Host string // a host the command could not reach
}

var (
	// readOnlyRe finds the path in the errors of shells, coreutils and
	// interpreters for a write to a read-only mount or a denied path:
	//   /bin/bash: line 1: tests/a.sh: Read-only file system
	//   sed: couldn't open temporary file tests/sedAbc: Read-only file system
	//   sed: cannot rename ./sedAbc: Device or resource busy (a denied file)
	//   OSError: [Errno 30] Read-only file system: 'tests/a.sh'
	//   Error: EROFS: read-only file system, open 'tests/a.sh'
	//   fatal: Unable to create '/p/.git/index.lock': Read-only file system.
	readOnlyRe = []*lazyregexp.Regexp{
		lazyregexp.New(`(?m)(?:^|: |\s)([^\s:'"]+): (?:Read-only file system|Permission denied|Device or resource busy)\s*$`),
		lazyregexp.New(`(?:Read-only file system|Permission denied): '([^']+)'`),
		lazyregexp.New(`(?i)EROFS: read-only file system, \w+ '([^']+)'`),
		lazyregexp.New(`'([^']+)': (?:Read-only file system|Permission denied|Device or resource busy)`),
	}
	// leadingCdRe finds the directory a command changes to before anything
	// else (`cd .claude/progress && sed -i …`): the relative paths in its
	// errors are relative to it, not to the project.
	leadingCdRe = lazyregexp.New(`^\s*cd\s+([^\s;&|<>()'"$\x60*?~]+)\s*(?:&&|;)`)
	// deniedHostRe reads the sandbox's own report of a refused connection.
	deniedHostRe = lazyregexp.New(`deny network-outbound ([^\s:]+)`)
)

// SandboxRefusals reads what the sandbox refused a Bash call from the
// call's result (PostToolUse or PostToolUseFailure). It is best effort: a
// relative path is read as relative to the project, or to the directory
// the command changed to first (`cd DIR && …`; a command that changes
// directory later names it otherwise), and a program that swallows its
// errors leaves nothing to read. What the sandbox refused stays refused.
func SandboxRefusals(p *Payload) []Refusal {
	if p.ToolName != "Bash" {
		return nil
	}
	text := p.Error
	if p.Event == "PostToolUse" {
		var r BashResponse
		json.Unmarshal(p.ToolResponse, &r)
		text = r.Stdout + "\n" + r.Stderr
	}
	dir := ""
	if m := leadingCdRe.FindStringSubmatch(p.Input().Command); m != nil {
		dir = m[1]
	}
	var out []Refusal
	seen := map[string]bool{}
	for _, re := range readOnlyRe {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			path := strings.TrimSpace(m[1])
			if path != "" && dir != "" && !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			if path != "" && !seen[path] {
				seen[path] = true
				out = append(out, Refusal{Path: path})
			}
		}
	}
	if i := strings.Index(text, "<sandbox_violations>"); i >= 0 {
		for _, m := range deniedHostRe.FindAllStringSubmatch(text[i:], -1) {
			if !seen["host:"+m[1]] {
				seen["host:"+m[1]] = true
				out = append(out, Refusal{Host: m[1]})
			}
		}
	}
	return out
}

// JudgeRefusal names the rule a refused write would have broken: the gate
// a file tool's write of the same path meets (judgePath), or, for a path
// no rule holds (outside the project), role-write-policy's
// outside_project. A refused host has no gate of its own.
func JudgeRefusal(a Actor, s State, r Refusal) *control.HookDecision {
	if r.Path == "" {
		return nil
	}
	p := s.resolve(r.Path)
	if rel, inside := s.within(p); inside {
		if rel == featureListPath {
			return decide(Modes{}, RoleWritePolicy, "bash_writes_feature_list",
				"changes to feature-list.json go through the Edit or Write tool, where the gates can check them", "use the Edit tool to change your own feature's entry")
		}
		return judgePath(Modes{}, a, s, rel)
	}
	if d := s.touchesDaemon(Modes{}, p); d != nil {
		return d
	}
	return decide(Modes{}, RoleWritePolicy, "outside_project",
		p+" is outside the project; agents write only in the project and in the temp and cache directories", "write inside the project, or in $TMPDIR for scratch files")
}

// Believable reports whether the sandbox of a run that denies the paths
// denied (absolute; nil: not known, every refusal is believed) can have
// refused r: a path in the project only when it is a denied path, inside
// one, or holds one (renaming a directory that holds a denied path fails
// too); a path outside the project or a host always. A refusal is read
// off the command's output, which the command writes: `echo
// "src/x.go: Read-only file system" >&2` is no refusal, and must not
// become a violation trace of the daemon's (a pattern a guard is proposed
// from, a line of precedent another agent reads) with the agent's text.
func Believable(s State, r Refusal, denied []string) bool {
	if denied == nil || r.Path == "" {
		return true
	}
	p := s.resolve(r.Path)
	rel, inside := s.within(p)
	if !inside {
		return true
	}
	if rel == "." {
		return false // the project itself: the sandbox lets the run write it
	}
	for _, d := range denied {
		d = s.resolve(d)
		if under(p, d) || under(d, p) {
			return true
		}
	}
	return false
}
