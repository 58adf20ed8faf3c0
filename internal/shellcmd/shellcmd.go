// Package shellcmd reads shell command lines the way a shell would, with a
// real parser (mvdan.cc/sh), for the two questions the gates ask of one:
// which project files a feature's test command runs (to freeze them, and to
// know whether the test can run at all), and what a command an agent ran,
// with its exit status, says of the feature's test: not a run, a pass, a
// failure, or a run whose outcome its status does not tell (RunOf).
// Reading commands is never what confines an agent (the sandbox does); it
// is what the record of "this run ran its test and saw it pass" rests on.
package shellcmd

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Test is what a feature's test command names, read with a shell
// parser: the words that are arguments (not redirection targets), each
// taken relative to the directory a `cd` before it moved to, and the
// scripts inside `sh -c '…'` read the same way.
type Test struct {
	// Files are the project files the command may run or read: its
	// relative path arguments, package.json for an npm, yarn or pnpm
	// script, the Makefile for make. Which of them exist is the tree's
	// to say; those that do are frozen with the list.
	Files []string
	// Scripts are the files the command runs as programs (`sh x.sh`,
	// `python3 x.py`, `node x.js`, `./x`): a test whose script is missing
	// cannot run.
	Scripts []string
	// Invalid says why the command is not valid shell, "" when it is.
	Invalid string
}

// interpreters run their first argument that is not an option.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true,
	"python": true, "python3": true, "node": true, "deno": true, "bun": true,
	"ruby": true, "perl": true, "php": true, "bats": true, "tclsh": true,
}

// ParseTest reads a test command.
func ParseTest(test string) Test {
	var tc Test
	f, err := syntax.NewParser().Parse(strings.NewReader(test), "")
	if err != nil {
		tc.Invalid = err.Error()
		return tc
	}
	seen := map[string]bool{}
	add := func(list *[]string, p string) {
		key := fmtKey(list == &tc.Scripts, p)
		if !seen[key] {
			seen[key] = true
			*list = append(*list, p)
		}
	}
	var stmts func(ss []*syntax.Stmt, cwd string) string
	var stmt func(s *syntax.Stmt, cwd string) string
	stmts = func(ss []*syntax.Stmt, cwd string) string {
		for _, s := range ss {
			cwd = stmt(s, cwd)
		}
		return cwd
	}
	// stmt walks one statement in the order a shell runs it and returns
	// the directory it leaves the shell in.
	stmt = func(s *syntax.Stmt, cwd string) string {
		switch c := s.Cmd.(type) {
		case *syntax.BinaryCmd:
			cwd = stmt(c.X, cwd)
			return stmt(c.Y, cwd)
		case *syntax.Subshell:
			stmts(c.Stmts, cwd) // its cd does not leak
		case *syntax.Block:
			return stmts(c.Stmts, cwd)
		case *syntax.CallExpr:
			args := make([]string, 0, len(c.Args))
			for _, w := range c.Args {
				lit, ok := Literal(w)
				if !ok {
					lit = "" // an expansion: not a name we can know
				}
				args = append(args, lit)
			}
			if len(args) == 0 || args[0] == "" {
				return cwd
			}
			name := args[0]
			switch {
			case name == "cd":
				if len(args) > 1 && args[1] != "" && !strings.HasPrefix(args[1], "/") {
					return path.Join(cwd, args[1])
				}
				return cwd
			case name == "npm" || name == "yarn" || name == "pnpm":
				add(&tc.Files, path.Join(cwd, "package.json"))
			case name == "make" || name == "gmake":
				for _, m := range []string{"Makefile", "makefile", "GNUmakefile"} {
					add(&tc.Files, path.Join(cwd, m))
				}
			}
			if strings.Contains(name, "/") {
				if p, ok := relative(cwd, name); ok {
					add(&tc.Scripts, p)
					add(&tc.Files, p)
				}
			}
			script := interpreters[base(name)]
			for i := 1; i < len(args); i++ {
				a := args[i]
				if interpreters[base(name)] && (a == "-c" || a == "-e") && i+1 < len(args) {
					// The program is the next word: read it as shell
					// when the interpreter is a shell.
					if isShell(base(name)) {
						inner := ParseTest(args[i+1])
						for _, p := range inner.Files {
							add(&tc.Files, path.Join(cwd, p))
						}
						for _, p := range inner.Scripts {
							add(&tc.Scripts, path.Join(cwd, p))
						}
					}
					script = false
					i++
					continue
				}
				if a == "-m" {
					script = false // python -m module
					continue
				}
				p, ok := relative(cwd, a)
				if !ok {
					continue
				}
				if script {
					add(&tc.Scripts, p)
					script = false
				}
				add(&tc.Files, p)
			}
		}
		return cwd
	}
	stmts(f.Stmts, ".")
	return tc
}

func fmtKey(script bool, p string) string {
	if script {
		return "s:" + p
	}
	return "f:" + p
}

func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh":
		return true
	}
	return false
}

func base(name string) string { return path.Base(name) }

// relative reads a word as a project-relative path, when it can be one: not
// an option, not absolute, not an assignment, not a glob, not a package
// pattern (./pkg/...).
func relative(cwd, w string) (string, bool) {
	if w == "" || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") ||
		strings.ContainsAny(w, "=*?[{$`") || strings.HasSuffix(w, "/...") {
		return "", false
	}
	p := path.Join(cwd, w)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

// Literal is the value of a word without expansions: plain text and
// quoted text, but not $VAR, $(…) or globs, whose value the shell decides.
func Literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// canonical prints a test command the way printStmt prints a statement, so
// that the two compare whatever the spacing and quoting.
func canonical(test string) (string, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader(test), "")
	if err != nil || len(f.Stmts) != 1 {
		if err == nil && len(f.Stmts) > 1 {
			// A multi-statement test: compare it as written, joined.
			var parts []string
			for _, s := range f.Stmts {
				p, ok := printStmt(s)
				if !ok {
					return "", false
				}
				parts = append(parts, p)
			}
			return strings.Join(parts, "; "), true
		}
		return "", false
	}
	return printStmt(f.Stmts[0])
}

// printStmt is a statement's key for comparison: a simple command by the
// words the shell would pass it (so that quoting does not matter), anything
// else as the printer writes it.
func printStmt(s *syntax.Stmt) (string, bool) {
	if c, ok := s.Cmd.(*syntax.CallExpr); ok && len(s.Redirs) == 0 && len(c.Assigns) == 0 && !s.Negated && !s.Background {
		words := make([]string, 0, len(c.Args))
		all := true
		for _, w := range c.Args {
			lit, ok := Literal(w)
			if !ok {
				all = false
				break
			}
			words = append(words, lit)
		}
		if all {
			return "argv\x00" + strings.Join(words, "\x00"), true
		}
	}
	var b strings.Builder
	if err := syntax.NewPrinter(syntax.Minify(true)).Print(&b, s); err != nil {
		return "", false
	}
	return strings.TrimSpace(b.String()), true
}
