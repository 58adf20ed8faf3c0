package testreport

import (
	"path"
	"slices"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
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
	// inserts are the texts Instrument puts into the test command (for a
	// go test: " -json" without it, goGuard's -exec, -v=test2json after a
	// -v of its own), at byte offsets into the test command; none when
	// there is nothing to insert or it cannot be inserted (the go test is
	// inside a quoted program whose text is not the command's own bytes).
	inserts []insertion
	// unguarded: a go test whose test binaries run without goGuard (it
	// names an -exec of its own, or Instrument cannot reach it), so that
	// its report's framing may be the test's own code's.
	unguarded bool
}

// insertion is text to insert into a test command at a byte offset.
type insertion struct {
	at   int
	text string
}

// GuardName is the test that go test -json names, in its events, as the
// one running while a test binary prints before the testing package's
// first line: goGuard makes it the current test for test2json.
const GuardName = "(before tests)"

// goGuard is the -exec program Instrument gives go test: it runs each test
// binary, after one line of its own. With -json, go test runs a binary
// with -test.v=test2json, and the testing package marks every line of its
// framing ("=== RUN", "--- PASS", "PASS") with a leading ^V (0x16); but
// test2json believes unmarked framing lines until it has seen a marked
// one, so a test's code that prints "=== RUN   TestX", "--- PASS: TestX"
// and "PASS" from an init function and exits 0 would make go test report
// a run and a pass. The guard's line is marked framing (an "=== NAME"
// line, which makes no event): from it on, test2json takes only marked
// lines for framing, and what the binary prints before its first test is
// output of GuardName's. The shell execs the binary, so nothing stands
// between it and go test: its output, signals, exit status and parent are
// what they were. (go test splits an -exec value into words, honouring
// '…' and "…" without escapes; and it caches no result of a run through
// -exec, so each run runs its tests, as it did in the daemon's jail,
// whose build cache is read-only to a test.)
const goGuard = `/bin/sh -c 'printf "\026=== NAME  ` + GuardName + `\n"; exec "$0" "$@"'`

// prefixes run the command that follows them (their own options and
// operands skipped): `env X=1 go test`, `timeout 60 pytest`.
var prefixes = map[string]bool{"env": true, "timeout": true, "nice": true, "command": true, "exec": true}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true}

// scan reads a test command's simple commands as the shell would and
// returns those that matter here, in source order. base is the offset of
// src within the whole command (for the program of an `sh -c`); mappable
// says whether src's bytes are the command's own, so that offsets in it
// are offsets in the command; quotes are the quoting of the words src is
// nested in, the outermost first ('s' for '…', 'd' for "…", 'l' for a
// plain word), which text inserted into src must be escaped for.
func scan(src string, base int, mappable bool, depth int, quotes string) ([]call, bool) {
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
		calls = append(calls, classify(c, base, mappable, depth, quotes)...)
		return true
	})
	return calls, true
}

// classify says what one simple command runs.
func classify(c *syntax.CallExpr, base int, mappable bool, depth int, quotes string) []call {
	words := make([]string, len(c.Args))
	for i, w := range c.Args {
		words[i], _ = unquote(w) // an expansion reads as "": no name we know
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
		rest := args[j+1:]
		json, execs := hasJSON(rest), execFlags(rest)
		// -v makes go test run its binaries with -test.v=true in place of
		// -test.v=test2json, and the testing package then marks no
		// framing line at all: -v=test2json after the last one keeps the
		// marks (go test takes the last -v).
		v, vJSON := lastV(rest)
		// Its own -exec, whatever it is, is where Instrument would put
		// the guard, and the last -exec is the one go test runs: a go
		// test that names one keeps it, unguarded, unless it is exactly
		// the guard (an instrumented command, read again).
		own := len(execs) > 0 && (len(execs) > 1 || execs[0] != goGuard)
		var ins []insertion
		add := ""
		if !json {
			add = " -json"
		}
		if len(execs) == 0 {
			add += " -exec=" + shellQuote(goGuard)
		}
		if add != "" {
			ins = append(ins, insertion{base + int(c.Args[i+1+j].End().Offset()), add})
		}
		if v >= 0 && !vJSON {
			ins = append(ins, insertion{base + int(c.Args[i+2+j+v].End().Offset()), " -v=test2json"})
		}
		switch {
		case len(ins) == 0:
			return []call{{runner: GoTest, unguarded: own}}
		case !mappable && json:
			return []call{{runner: GoTest, unguarded: true}}
		case !mappable:
			// Its output will be text, which carries no counts: read
			// whatever reports the output holds, as for a script.
			return []call{{wrapper: true}}
		}
		for n := range ins {
			for k := len(quotes) - 1; k >= 0; k-- {
				ins[n].text = escapeFor(quotes[k], ins[n].text)
			}
		}
		return []call{{runner: GoTest, inserts: ins, unguarded: own}}
	case name == "pytest" || name == "py.test":
		return []call{{runner: Pytest}}
	case strings.HasPrefix(name, "python"):
		for k := 0; k+1 < len(args); k++ {
			if args[k] == "-m" {
				if args[k+1] == "pytest" {
					return []call{{runner: Pytest}}
				}
				return nil
			}
		}
		return nil
	case name == "node":
		if slices.Contains(args, "--test") {
			return []call{{runner: Node}}
		}
		return nil
	case name == "jest":
		return []call{{runner: Jest}}
	case name == "vitest":
		return []call{{runner: Vitest}}
	case name == "npx" || name == "yarn" || name == "pnpm" || name == "npm":
		for _, a := range args {
			if strings.HasPrefix(a, "-") || a == "exec" {
				continue
			}
			switch a {
			case "jest":
				return []call{{runner: Jest}}
			case "vitest":
				return []call{{runner: Vitest}}
			}
			break
		}
		if name == "npx" {
			return nil // some other package's binary
		}
		// npm test, yarn test, pnpm run test…: package.json decides what
		// runs, so its output is what says.
		return []call{{wrapper: true}}
	case name == "cargo":
		for _, a := range args {
			if strings.HasPrefix(a, "+") || strings.HasPrefix(a, "-") {
				continue // cargo +nightly test, cargo --locked test
			}
			if a == "test" {
				return []call{{runner: Cargo}}
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
				ibase, imappable, quote := innerBase(c.Args[i+1+k+1])
				inner, ok := scan(args[k+1], base+ibase, mappable && imappable, depth+1, quotes+string(quote))
				if !ok {
					return nil
				}
				return inner
			}
		}
		return []call{{wrapper: true}} // sh script.sh
	case name == "make" || name == "gmake" || strings.Contains(words[i], "/") || strings.HasSuffix(name, ".sh"):
		return []call{{wrapper: true}}
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

// execFlags are the values of the -exec flags among go test's arguments
// (before -args), in order; go test runs the last.
func execFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-args" || a == "--args":
			return out
		case a == "-exec" || a == "--exec":
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		case strings.HasPrefix(a, "-exec=") || strings.HasPrefix(a, "--exec="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, v)
		}
	}
	return out
}

// lastV is the index among go test's arguments (before -args) of the last
// -v flag (-1 for none), and whether it asks for test2json's framing.
func lastV(args []string) (int, bool) {
	at, json := -1, false
	for i, a := range args {
		if a == "-args" || a == "--args" {
			break
		}
		name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "v" || name == "test.v") {
			at, json = i, val == "test2json"
		}
	}
	return at, json
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
// whether its bytes are the command's own (so that an offset in the
// program is one in the command): a plain word, a '…' word, or a "…" word
// with no expansion and no backslash; and its quoting ('l', 's', 'd').
func innerBase(w *syntax.Word) (int, bool, byte) {
	if len(w.Parts) != 1 {
		return 0, false, 0
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return int(p.ValuePos.Offset()), !strings.Contains(p.Value, `\`), 'l'
	case *syntax.SglQuoted:
		return int(p.Left.Offset()) + 1, !p.Dollar, 's'
	case *syntax.DblQuoted:
		if p.Dollar {
			return 0, false, 0
		}
		if len(p.Parts) == 0 {
			return int(p.Left.Offset()) + 1, true, 'd'
		}
		if len(p.Parts) != 1 {
			return 0, false, 0
		}
		lit, ok := p.Parts[0].(*syntax.Lit)
		if !ok || strings.Contains(lit.Value, `\`) {
			return 0, false, 0
		}
		return int(p.Left.Offset()) + 1, true, 'd'
	}
	return 0, false, 0
}

// unquote is the word the shell makes of w where w expands nothing: its
// quotes removed and its backslashes read; false when it expands
// something (a variable, a command), which has no text to read here.
func unquote(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(lit.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape reads the backslashes of a literal's source: outside quotes a
// backslash keeps the next byte as it is; inside "…" only before $, `,
// ", \ and a newline; a backslash and a newline are no text at all.
func unescape(s string, dquoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!dquoted || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// shellQuote is s as one word of the shell: single-quoted, each single
// quote of s closing the quotes, escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// escapeFor is text as it must be written inside a word quoted as q (see
// scan) for the shell to read text back out of it.
func escapeFor(q byte, text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case q == 's' && c == '\'':
			b.WriteString(`'\''`)
			continue
		case q == 'd' && strings.IndexByte("$`\"\\", c) >= 0,
			q == 'l' && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_=./,:@%+", c) >= 0):
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Instrument returns the command the daemon should run in place of the
// test command test, so that its runner's report can be read: every
// simple command that is `go test …` gets -json (where it lacks it) and
// goGuard's -exec (where it names no -exec of its own) right after
// `test`, and -v=test2json after its last -v (also inside `sh -c '…'`, escaped for its quotes, and after env,
// timeout, nice, command or exec). Everything else is kept byte for
// byte: the flags are inserted into the text, not printed from a syntax
// tree, so that quoting, spacing and comments stay the author's. The
// other runners print counts in their plain output and are left alone,
// and so is a command that is not valid shell or runs no go test. Read
// reads the output of the command Instrument returns; it takes either
// command.
func Instrument(test string) string {
	calls, ok := scan(test, 0, true, 0, "")
	if !ok {
		return test
	}
	var at []insertion
	for _, c := range calls {
		for _, in := range c.inserts {
			if in.at >= 0 && in.at <= len(test) {
				at = append(at, in)
			}
		}
	}
	sort.SliceStable(at, func(a, b int) bool { return at[a].at > at[b].at })
	out := test
	for _, in := range at {
		out = out[:in.at] + in.text + out[in.at:]
	}
	return out
}
