package testreport

import (
	"path"
	"slices"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
)

// The runners whose reports this package reads, by the names reasons use.
const (
	GoTest = "go test"
	Pytest = "pytest"
	Node   = "node --test"
	Jest   = "jest"
	Vitest = "vitest"
	Cargo  = "cargo test"
)

// textRunners are read off plain output, in the order a report names them.
var textRunners = []string{Pytest, Node, Jest, Vitest, Cargo}

// call is one simple command of a test command that runs a runner, or
// that runs something whose output may hold a runner's report (a script,
// npm test, make): a wrapper.
type call struct {
	runner  string // "" for a wrapper
	wrapper bool
	// insert is where " -json" goes for a go test without it, as a byte
	// offset into the test command; -1 when there is nothing to insert
	// or it cannot be inserted (the go test is inside a quoted program
	// whose text is not the command's own bytes).
	insert int
}

// prefixes run the command that follows them (their own options and
// operands skipped): `env X=1 go test`, `timeout 60 pytest`.
var prefixes = map[string]bool{"env": true, "timeout": true, "nice": true, "command": true, "exec": true}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true}

// scan reads a test command's simple commands as the shell would and
// returns those that matter here, in source order. base is the offset of
// src within the whole command (for the program of an `sh -c`); mappable
// says whether src's bytes are the command's own, so that offsets in it
// are offsets in the command.
func scan(src string, base int, mappable bool, depth int) ([]call, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, false
	}
	var calls []call
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		calls = append(calls, classify(c, base, mappable, depth)...)
		return true
	})
	return calls, true
}

// classify says what one simple command runs.
func classify(c *syntax.CallExpr, base int, mappable bool, depth int) []call {
	words := make([]string, len(c.Args))
	for i, w := range c.Args {
		words[i], _ = shellcmd.Literal(w) // an expansion reads as "": no name we know
	}
	i := skipPrefixes(words)
	if i >= len(words) {
		return nil
	}
	name := path.Base(words[i])
	args := words[i+1:]
	switch {
	case name == "go":
		j := 0
		if j+1 < len(args) && args[j] == "-C" {
			j += 2 // go -C dir test
		}
		if j >= len(args) || args[j] != "test" {
			return nil
		}
		if hasJSON(args[j+1:]) {
			return []call{{runner: GoTest, insert: -1}}
		}
		if !mappable {
			// Its output will be text, which carries no counts: read
			// whatever reports the output holds, as for a script.
			return []call{{wrapper: true, insert: -1}}
		}
		return []call{{runner: GoTest, insert: base + int(c.Args[i+1+j].End().Offset())}}
	case name == "pytest" || name == "py.test":
		return []call{{runner: Pytest, insert: -1}}
	case strings.HasPrefix(name, "python"):
		for k := 0; k+1 < len(args); k++ {
			if args[k] == "-m" {
				if args[k+1] == "pytest" {
					return []call{{runner: Pytest, insert: -1}}
				}
				return nil
			}
		}
		return nil
	case name == "node":
		if slices.Contains(args, "--test") {
			return []call{{runner: Node, insert: -1}}
		}
		return nil
	case name == "jest":
		return []call{{runner: Jest, insert: -1}}
	case name == "vitest":
		return []call{{runner: Vitest, insert: -1}}
	case name == "npx" || name == "yarn" || name == "pnpm" || name == "npm":
		for _, a := range args {
			if strings.HasPrefix(a, "-") || a == "exec" {
				continue
			}
			switch a {
			case "jest":
				return []call{{runner: Jest, insert: -1}}
			case "vitest":
				return []call{{runner: Vitest, insert: -1}}
			}
			break
		}
		if name == "npx" {
			return nil // some other package's binary
		}
		// npm test, yarn test, pnpm run test…: package.json decides what
		// runs, so its output is what says.
		return []call{{wrapper: true, insert: -1}}
	case name == "cargo":
		for _, a := range args {
			if strings.HasPrefix(a, "+") || strings.HasPrefix(a, "-") {
				continue // cargo +nightly test, cargo --locked test
			}
			if a == "test" {
				return []call{{runner: Cargo, insert: -1}}
			}
			return nil
		}
		return nil
	case shells[name]:
		for k := 0; k < len(args); k++ {
			if args[k] == "-c" && k+1 < len(args) {
				if depth > 4 {
					return nil
				}
				ibase, imappable := innerBase(c.Args[i+1+k+1])
				inner, ok := scan(args[k+1], base+ibase, mappable && imappable, depth+1)
				if !ok {
					return nil
				}
				return inner
			}
		}
		return []call{{wrapper: true, insert: -1}} // sh script.sh
	case name == "make" || name == "gmake" || strings.Contains(words[i], "/") || strings.HasSuffix(name, ".sh"):
		return []call{{wrapper: true, insert: -1}}
	}
	return nil
}

// skipPrefixes returns the index of the word that names the program a
// command runs, past env, timeout and the like with their operands.
func skipPrefixes(words []string) int {
	i := 0
	for i < len(words) && prefixes[path.Base(words[i])] {
		p := path.Base(words[i])
		i++
		for i < len(words) {
			w := words[i]
			switch {
			case strings.HasPrefix(w, "-"):
				i++
				if (p == "timeout" && (w == "-s" || w == "-k" || w == "--signal" || w == "--kill-after")) ||
					(p == "nice" && w == "-n") || (p == "env" && (w == "-u" || w == "-C")) {
					i++ // the option's value
				}
				continue
			case p == "env" && strings.Contains(w, "="):
				i++
				continue
			case p == "timeout":
				i++ // the duration
			}
			break
		}
	}
	return i
}

// hasJSON reports whether go test's arguments already ask for -json
// (before -args, after which they are the test binary's).
func hasJSON(args []string) bool {
	for _, a := range args {
		switch {
		case a == "-args" || a == "--args":
			return false
		case a == "-json" || a == "--json" || strings.HasPrefix(a, "-json=") || strings.HasPrefix(a, "--json="):
			return true
		}
	}
	return false
}

// innerBase is where the program of `sh -c WORD` starts in the command,
// and whether its bytes are the command's own (so that an offset in the
// program is one in the command): a plain word, a '…' word, or a "…" word
// with no expansion and no backslash.
func innerBase(w *syntax.Word) (int, bool) {
	if len(w.Parts) != 1 {
		return 0, false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return int(p.ValuePos.Offset()), !strings.Contains(p.Value, `\`)
	case *syntax.SglQuoted:
		return int(p.Left.Offset()) + 1, !p.Dollar
	case *syntax.DblQuoted:
		if p.Dollar {
			return 0, false
		}
		if len(p.Parts) == 0 {
			return int(p.Left.Offset()) + 1, true
		}
		if len(p.Parts) != 1 {
			return 0, false
		}
		lit, ok := p.Parts[0].(*syntax.Lit)
		if !ok || strings.Contains(lit.Value, `\`) {
			return 0, false
		}
		return int(p.Left.Offset()) + 1, true
	}
	return 0, false
}

// Instrument returns the command the daemon should run in place of the
// test command test, so that its runner's report can be read: every
// simple command that is `go test …` without -json gets -json right after
// `test` (also inside `sh -c '…'`, and after env, timeout, nice, command
// or exec). Everything else is kept byte for byte: the flag is inserted
// into the text, not printed from a syntax tree, so that quoting, spacing
// and comments stay the author's. The other runners print counts in
// their plain output and are left alone, and so is a command that is not
// valid shell or runs no go test. Read reads the output of the command
// Instrument returns; it takes either command.
func Instrument(test string) string {
	calls, ok := scan(test, 0, true, 0)
	if !ok {
		return test
	}
	var at []int
	for _, c := range calls {
		if c.insert >= 0 && c.insert <= len(test) {
			at = append(at, c.insert)
		}
	}
	if len(at) == 0 {
		return test
	}
	sort.Sort(sort.Reverse(sort.IntSlice(at)))
	out := test
	for _, o := range at {
		out = out[:o] + " -json" + out[o:]
	}
	return out
}
