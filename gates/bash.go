package gates

import (
	"fmt"
	"os"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// judgeBash reads what it can off a command line, for early, structured
// feedback: the sandbox is what keeps a Bash command from writing what it
// must not, and the verdict judges what the run changed whatever it ran.
func judgeBash(m Modes, a Actor, s State, cmd string) *control.HookDecision {
	if d := s.touchesDaemon(m, cmd); d != nil {
		return d
	}
	if strings.Contains(cmd, progress.SessionStateFile) && writes(cmd) {
		return decide(m, RoleWritePolicy, "session_state",
			"session-state.json is written by the daemon only", "read it if you need the state; do not write it")
	}
	if strings.Contains(cmd, progress.FeatureListFile) && writes(cmd) {
		return decide(m, RoleWritePolicy, "bash_writes_feature_list",
			"changes to feature-list.json go through the Edit or Write tool, where the gates can check them",
			"use the Edit tool to change your own feature's entry")
	}
	for _, target := range bashWriteTargets(cmd) {
		if rel, inside := s.within(s.resolve(target)); inside {
			if d := judgePath(m, a, s, rel); d != nil {
				return d
			}
		}
	}
	if mm := catRe.FindStringSubmatch(cmd); mm != nil && !s.Remote { // Remote: the file's size is not known here
		path := s.resolve(mm[1])
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Size() > s.maxRead() {
			return decide(m, LogReadLimit, "file_too_large",
				fmt.Sprintf("%s is %d bytes; printing it whole would flood the context", s.rel(path), fi.Size()),
				fmt.Sprintf("use grep, or tail -n 200 %s, or sed -n '1,200p' %s", mm[1], mm[1]))
		}
	}
	return nil
}

var catRe = lazyregexp.New(`(?:^|[;&|]\s*)cat\s+([^\s;&|<>]+)\s*(?:$|[;&|])`)

// redirectRe and teeRe find the files a shell command plainly writes: the
// target of >, >>, 2>, &> and of tee. What a script or an interpreter
// writes cannot be read off the command; the sandbox and the verdict's
// change set hold those.
var (
	redirectRe = lazyregexp.New(`(?:^|[^<>=\-])(?:[0-9]|&)?>>?[ \t]*([^\s;&|<>()]+)`)
	teeRe      = lazyregexp.New(`\btee\b((?:[ \t]+-[a-z-]+)*)((?:[ \t]+[^\s;&|<>()-][^\s;&|<>()]*)+)`)
	quotedRe   = lazyregexp.New(`'[^']*'|"(?:[^"\\]|\\.)*"`)
	touchRe    = lazyregexp.New(`\btouch((?:[ \t]+[^\s;&|<>()]+)+)`)
)

// bashWriteTargets lists the paths a command visibly writes, skipping
// file descriptors and paths that depend on the shell's expansion.
func bashWriteTargets(cmd string) []string {
	// A here-document's body is data, not commands: judge the line that
	// opens it and nothing after.
	if i := strings.Index(cmd, "<<"); i >= 0 {
		if j := strings.IndexByte(cmd[i:], '\n'); j >= 0 {
			cmd = cmd[:i+j]
		}
	}
	// A > inside quotes is text ("a > b"), not a redirection.
	cmd = quotedRe.ReplaceAllString(cmd, "''")
	var out []string
	add := func(t string) {
		t = strings.Trim(t, `'"`)
		if t == "" || strings.HasPrefix(t, "&") || strings.HasPrefix(t, "-") || strings.ContainsAny(t, "$`*?[{~") {
			return
		}
		out = append(out, t)
	}
	for _, m := range redirectRe.FindAllStringSubmatch(cmd, -1) {
		add(m[1])
	}
	for _, m := range teeRe.FindAllStringSubmatch(cmd, -1) {
		for _, t := range strings.Fields(m[2]) {
			add(t)
		}
	}
	for _, m := range touchRe.FindAllStringSubmatch(cmd, -1) {
		for _, t := range strings.Fields(m[1]) {
			add(t)
		}
	}
	return out
}

// writeRe matches the shell idioms that change files. It errs on the side
// of blocking: a read-only command that looks like a write is rare, and the
// agent is told to use the Edit tool instead.
var writeRe = lazyregexp.New(`>|\btee\b|\bsed\s+-i|\bperl\s+-[a-z]*i|\bmv\b|\bcp\b|\brm\b|\btruncate\b|\bdd\b|\bpython3?\b|\bnode\b|\bruby\b|\bjq\b.*>|\bln\b|\binstall\b|\bchmod\b|\btouch\b`)

func writes(cmd string) bool { return writeRe.MatchString(cmd) }
