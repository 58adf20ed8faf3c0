package diagnose

import (
	"regexp"
	"strings"
)

// noise are lines that a user's shell tools print when a shell starts in
// the sandbox, whatever the test says: Claude Code's Bash tool starts from
// the user's shell profile, whose `eval "$(pyenv init -)"` and direnv hook
// then fail to write their own files. Such a line says nothing about the
// test, and, in every failure's reason, it crowds out what does.
var noise = []struct {
	name string
	line *regexp.Regexp
}{
	// pyenv-rehash, from `pyenv init -` with its shims read-only.
	{"pyenv rehash", regexp.MustCompile(`^pyenv: cannot rehash: (?:\S.* isn't writable|couldn't acquire lock \S.*)$`)},
	// direnv's hook: loading, exporting, and refusing an .envrc.
	{"direnv", regexp.MustCompile(`^direnv: `)},
	// A locale the machine does not have, named in the profile.
	{"setlocale", regexp.MustCompile(`^(?:\S*/)?(?:ba|z)?sh: (?:line \d+: )?warning: setlocale: `)},
	// An interactive bash without a terminal.
	{"bash without a terminal", regexp.MustCompile(`^(?:\S*/)?bash: (?:cannot set terminal process group \(-?\d+\): Inappropriate ioctl for device|no job control in this shell)$`)},
}

// Quiet is output without the lines of known start-up noise of a user's
// shell tools (see noise). Everything else, blank lines included, is kept
// as it was, in order.
func Quiet(output string) string {
	lines := strings.SplitAfter(output, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !isNoise(strings.TrimSpace(l)) {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

func isNoise(line string) bool {
	for _, n := range noise {
		if n.line.MatchString(line) {
			return true
		}
	}
	return false
}
