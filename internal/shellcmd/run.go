package shellcmd

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Outcome is what one command an agent ran, and its exit status, say of a
// feature's test.
type Outcome int

// Outcomes, from "not a run" up.
const (
	// NotRun: the command is not a run of the test, or may not have
	// reached it (`false && sh t.sh`), or hides its status on purpose
	// (`sh t.sh || true`), or lists tests without running them.
	NotRun Outcome = iota
	// Unknown: the test ran, but the command's exit status is not the
	// test's own (`sh t.sh | tail`, `sh t.sh > log; cat log`) or the run
	// may have selected nothing (`go test -run X`): enough to say a test
	// ran, never a pass by itself.
	Unknown
	// Failed: the test ran and failed.
	Failed
	// Passed: the test ran and passed: the exit status is its own.
	Passed
)

func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "ran, outcome unknown"
	case Failed:
		return "failed"
	case Passed:
		return "passed"
	}
	return "not a run"
}

// Ran reports whether the test ran, whatever its outcome.
func (o Outcome) Ran() bool { return o != NotRun }

// RunOf says what cmd, run from dir (the project's absolute path; "" when
// unknown) and exiting with exit, says of the feature's test: whether one
// of its simple commands, as the shell reads it, is the test, and whether
// the exit status is the test's own.
//
// The rule, as people and models write a test run:
//
//   - the test runs when one of the command's simple commands runs the
//     test's one command (after the test's own setup, `cd x && …`), with
//     redirections (`2>&1`, `> log`, `&>`), assignments (`FOO=1 …`),
//     wrappers that run it (`timeout N`, `env`, `time`, `nice`, `nohup`,
//     `stdbuf`, `command`, `exec`), `sh -c '…'` read again, the same
//     script however it is spelled (`./tests/x.sh`, `tests/x.sh`,
//     `bash tests/x.sh`, its absolute path in the project), and, for the
//     known runners (go test, pytest, npm/yarn/pnpm scripts, node --test,
//     cargo test, make), flags that only change how they report;
//   - setup before it (`cd`, `mkdir`, `export`, `set`, `source`, …)
//     through `&&` or `;` keeps its status; any other command before `&&`
//     makes it reached only on success: exit 0 is the test's, a failure
//     may be the earlier command's (not a run);
//   - where the exit status is not the test's own (a pipeline without
//     `set -o pipefail`, a later command after `;`, a failure after
//     `&&`), the test ran, outcome unknown; with pipefail, exit 0 is a
//     pass, and a failure is the test's when every other stage is a
//     filter that does not fail (tail, tee, cat, head…), except 141 when
//     a stage stops reading early (head): SIGPIPE, outcome unknown;
//   - a runner's selection (`-run X`, `-k X`, a test name filter) or a
//     flag the rule does not know narrows the run: exit 0 is outcome
//     unknown (it may have selected nothing), a failure is a failure
//     (pytest's 5, nothing collected, is not a run); wider targets
//     (`go test ./...` for `go test ./pkg/`) make exit 0 a pass and a
//     failure unknown; other targets are not a run;
//   - not a run: text of the test in another command (echo, printf, a
//     heredoc, a comment), a flag that lists instead of running
//     (`--collect-only`, `-list`, `--version`, `-n`), `… || X` exiting 0,
//     a background `&`, the test inside if/while/for or a function.
func RunOf(cmd, test, dir string, exit int) Outcome {
	spec, ok := readTest(test, dir)
	if !ok {
		return NotRun
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(cmd), "")
	if err != nil || len(f.Stmts) == 0 {
		return NotRun
	}
	if spec.multi != "" {
		// A test of several statements runs as written, whole.
		if got, ok := canonical(cmd); ok && got == spec.multi {
			return own(exit)
		}
		return NotRun
	}
	w := &walker{test: spec, dir: dir}
	st := w.stmts(f.Stmts, &env{cwd: "."})
	if st == nil {
		return NotRun
	}
	return st(exit)
}

// status maps the exit status of a command to what it says of the test;
// nil: the test is not in the command.
type status func(exit int) Outcome

func own(exit int) Outcome {
	if exit == 0 {
		return Passed
	}
	return Failed
}

// join is what is known when either a or b may be the case.
func join(a, b Outcome) Outcome {
	switch {
	case a == b:
		return a
	case a == NotRun || b == NotRun:
		return NotRun
	}
	return Unknown
}

// anyway is what is known of a test that ran with a status nobody saw.
func anyway(f status) Outcome { return join(f(0), f(1)) }

func constant(o Outcome) status { return func(int) Outcome { return o } }

// env is the shell's state as the walk goes: where it is, and pipefail.
type env struct {
	cwd      string // project-relative; "" when not known (outside the project)
	pipefail bool
}

type walker struct {
	test  testSpec
	dir   string
	depth int
}

// stmts reads a list: its status is its last statement's; a test before
// it ran with a status nobody saw.
func (w *walker) stmts(ss []*syntax.Stmt, e *env) status {
	var acc status
	for _, s := range ss {
		f := w.stmt(s, e)
		switch {
		case f != nil && acc != nil:
			before := anyway(acc)
			acc = func(x int) Outcome {
				if o := f(x); o != NotRun {
					return o
				}
				return before
			}
		case f != nil:
			acc = f
		case acc != nil:
			acc = constant(anyway(acc))
		}
	}
	return acc
}

func (w *walker) stmt(s *syntax.Stmt, e *env) status {
	if s.Background || s.Coprocess {
		return nil // not waited for: its status is nobody's
	}
	var f status
	if w.test.whole != "" && w.wholeRuns(s) {
		f = own
	}
	if f == nil {
		f = w.command(s.Cmd, e)
	}
	if f == nil {
		return nil
	}
	if s.Negated {
		return func(x int) Outcome {
			if x == 0 {
				return f(1)
			}
			return anyway(f)
		}
	}
	return f
}

// wholeRuns reports whether s is a test of one statement that is not one
// command (`go vet ./... && go test ./...`) as written, after setup
// through &&.
func (w *walker) wholeRuns(s *syntax.Stmt) bool {
	if got, ok := printStmt(&syntax.Stmt{Cmd: s.Cmd}); ok && got == w.test.whole {
		return true
	}
	ops := andChain(s)
	k := len(w.test.chain)
	if k < 2 || len(ops) <= k {
		return false
	}
	for i, op := range ops[len(ops)-k:] {
		if got, ok := printStmt(&syntax.Stmt{Cmd: op.Cmd}); !ok || got != w.test.chain[i] {
			return false
		}
	}
	for _, op := range ops[:len(ops)-k] {
		if !isSetup(op) {
			return false
		}
	}
	return true
}

// andChain is the operands of a && b && c, in order.
func andChain(s *syntax.Stmt) []*syntax.Stmt {
	if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && b.Op == syntax.AndStmt && !s.Negated && !s.Background {
		return append(andChain(b.X), andChain(b.Y)...)
	}
	return []*syntax.Stmt{s}
}

func (w *walker) command(c syntax.Command, e *env) status {
	switch c := c.(type) {
	case *syntax.CallExpr:
		return w.call(c, e)
	case *syntax.Subshell:
		sub := *e
		return w.stmts(c.Stmts, &sub)
	case *syntax.Block:
		return w.stmts(c.Stmts, e)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			return w.stmt(c.Stmt, e)
		}
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt:
			return w.and(c, e)
		case syntax.OrStmt:
			return w.or(c, e)
		case syntax.Pipe, syntax.PipeAll:
			return w.pipeline(c, e)
		}
	}
	// if, while, for, case, a function: what runs depends on more than
	// the status; the test inside is not read.
	return nil
}

// and reads X && Y.
func (w *walker) and(c *syntax.BinaryCmd, e *env) status {
	setup := isSetup(c.X)
	fx := w.stmt(c.X, e)
	fy := w.stmt(c.Y, e)
	switch {
	case fx == nil && fy == nil:
		return nil
	case fx == nil && setup:
		return fy
	case fx == nil:
		// Y runs only when X succeeded: a failure may be X's.
		return func(x int) Outcome {
			if x == 0 {
				return fy(0)
			}
			return NotRun
		}
	case fy == nil:
		ok := alwaysSucceeds(c.Y)
		return func(x int) Outcome {
			if x == 0 || ok {
				return fx(x)
			}
			return join(fx(x), fx(0)) // the test's failure, or Y's
		}
	}
	return func(x int) Outcome {
		if x == 0 {
			return join(fx(0), fy(0))
		}
		return join(fx(x), fy(x))
	}
}

// or reads X || Y: a status of 0 hides a failure of X.
func (w *walker) or(c *syntax.BinaryCmd, e *env) status {
	fx := w.stmt(c.X, e)
	fy := w.stmt(c.Y, e)
	switch {
	case fx == nil && fy == nil:
		return nil
	case fx == nil:
		return func(x int) Outcome {
			if x == 0 {
				return NotRun // X may have succeeded, Y never run
			}
			return fy(x)
		}
	case fy == nil:
		return func(x int) Outcome {
			if x == 0 {
				return NotRun // `|| true`: its status hidden on purpose
			}
			return fx(1) // X failed (with a status nobody saw), then Y
		}
	}
	return func(x int) Outcome {
		if x == 0 {
			return NotRun
		}
		return join(fx(1), fy(x))
	}
}

// pipeline reads P1 | P2 | …: each stage runs in a subshell; the status is
// the last stage's, or, with pipefail, the last failing stage's.
func (w *walker) pipeline(c *syntax.BinaryCmd, e *env) status {
	var stages []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && !s.Negated && !s.Background && len(s.Redirs) == 0 {
			flatten(b.X)
			flatten(b.Y)
			return
		}
		stages = append(stages, s)
	}
	flatten(c.X)
	flatten(c.Y)
	at, fs := -1, status(nil)
	for i, s := range stages {
		sub := *e
		if f := w.stmt(s, &sub); f != nil {
			at, fs = i, f
		}
	}
	if fs == nil {
		return nil
	}
	last := at == len(stages)-1
	if !e.pipefail {
		if last {
			return fs
		}
		return constant(anyway(fs))
	}
	safe, closes := true, false
	for i, s := range stages {
		if i == at {
			continue
		}
		k := filterKind(s)
		safe = safe && k != notFilter
		closes = closes || (k == closesEarly && i > at)
	}
	return func(x int) Outcome {
		switch {
		case x == 0:
			return fs(0) // every stage succeeded
		case !safe:
			return join(fs(x), fs(0)) // the failure may be another stage's
		case x == 141 && closes:
			return join(fs(0), fs(x)) // SIGPIPE: head stopped reading
		}
		return fs(x)
	}
}

type filter int

const (
	notFilter filter = iota
	readsAll
	closesEarly
)

// filterKind says whether a pipeline stage is a filter that succeeds on any
// input, and whether it may stop reading before its input ends.
func filterKind(s *syntax.Stmt) filter {
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || s.Negated || len(c.Args) == 0 {
		return notFilter
	}
	name, ok := Literal(c.Args[0])
	if !ok {
		return notFilter
	}
	switch path.Base(name) {
	case "tail", "tee", "cat", "sort", "uniq", "wc", "cut", "tr", "nl", "less", "more", "column", "ts", "fold", "fmt", "ansi2txt":
		return readsAll
	case "head", "sed", "awk":
		return closesEarly
	}
	return notFilter
}

// isSetup reports whether s is setup that does not fail in practice and
// does not run the test: moving, making directories, the environment.
func isSetup(s *syntax.Stmt) bool {
	if s.Negated || s.Background {
		return false
	}
	switch c := s.Cmd.(type) {
	case *syntax.DeclClause:
		return true
	case *syntax.BinaryCmd:
		return c.Op == syntax.AndStmt && isSetup(c.X) && isSetup(c.Y)
	case *syntax.CallExpr:
		if len(c.Args) == 0 {
			return true // assignments
		}
		name, _ := Literal(c.Args[0])
		switch name {
		case "cd", "pushd", "mkdir", "export", "unset", "set", "true", ":", "source", ".", "umask", "ulimit", "rm", "echo", "printf", "clear", "hash":
			return true
		}
	}
	return false
}

// alwaysSucceeds reports whether s cannot fail in practice.
func alwaysSucceeds(s *syntax.Stmt) bool {
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || s.Negated || len(c.Args) == 0 {
		return false
	}
	name, _ := Literal(c.Args[0])
	switch name {
	case "echo", "printf", "true", ":":
		return true
	}
	return false
}

// call reads one simple command: setup that moves the shell, a run of
// the test, or neither.
func (w *walker) call(c *syntax.CallExpr, e *env) status {
	args, ok := words(c.Args)
	if !ok || len(args) == 0 {
		return nil
	}
	switch args[0] {
	case "cd", "pushd":
		e.cwd = w.chdir(e.cwd, args[1:])
		return nil
	case "popd":
		e.cwd = ""
		return nil
	case "set":
		for i := 1; i < len(args); i++ {
			a := args[i]
			if (strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")) && strings.Contains(a, "o") && i+1 < len(args) && args[i+1] == "pipefail" {
				e.pipefail = a[0] == '-'
				i++
			}
		}
		return nil
	}
	args = unwrap(args)
	if len(args) == 0 {
		return nil
	}
	if script, pipefail, ok := shellScript(args); ok {
		if w.depth >= 3 {
			return nil
		}
		f, err := syntax.NewParser().Parse(strings.NewReader(script), "")
		if err != nil {
			return nil
		}
		inner := &walker{test: w.test, dir: w.dir, depth: w.depth + 1}
		sub := *e
		sub.pipefail = pipefail
		return inner.stmts(f.Stmts, &sub)
	}
	if w.test.inv == nil || e.cwd == "" {
		return nil
	}
	got := readInvocation(args, e.cwd, w.dir)
	return compare(got, *w.test.inv)
}

// chdir is where `cd ARGS` from cwd leads, project-relative, or "" when
// it leaves the project or cannot be known.
func (w *walker) chdir(cwd string, args []string) string {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || args[0] == "" || args[0] == "-" || strings.HasPrefix(args[0], "~") {
		return ""
	}
	to := args[0]
	if strings.HasPrefix(to, "/") {
		if w.dir == "" {
			return ""
		}
		rel, ok := within(w.dir, to)
		if !ok {
			return ""
		}
		return rel
	}
	if cwd == "" {
		return ""
	}
	p := path.Join(cwd, to)
	if p == ".." || strings.HasPrefix(p, "../") {
		return ""
	}
	return p
}

// within is abs relative to dir, when abs is dir or inside it.
func within(dir, abs string) (string, bool) {
	dir, abs = path.Clean(dir), path.Clean(abs)
	if abs == dir {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(abs, strings.TrimSuffix(dir, "/")+"/"); ok {
		return rel, true
	}
	return "", false
}

// words are the literal words of a command; false when one is an
// expansion, whose value the shell decides.
func words(ws []*syntax.Word) ([]string, bool) {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		lit, ok := Literal(w)
		if !ok {
			return nil, false
		}
		out = append(out, lit)
	}
	return out, true
}

// unwrap takes off the commands that run their arguments as a command:
// `timeout 60 X`, `env A=1 X`, `nice -n 5 X`, `time X`, ….
func unwrap(args []string) []string {
	for range 8 {
		if len(args) == 0 {
			return args
		}
		name := path.Base(args[0])
		rest := args[1:]
		switch name {
		case "timeout":
			rest = skipOptions(rest, map[string]bool{"-s": true, "--signal": true, "-k": true, "--kill-after": true})
			if len(rest) > 0 {
				rest = rest[1:] // the duration
			}
		case "env":
			rest = skipOptions(rest, map[string]bool{"-u": true, "--unset": true, "-C": true, "--chdir": true, "-S": true})
			for len(rest) > 0 && strings.Contains(rest[0], "=") && !strings.HasPrefix(rest[0], "=") {
				rest = rest[1:]
			}
		case "nice":
			rest = skipOptions(rest, map[string]bool{"-n": true, "--adjustment": true})
		case "time":
			rest = skipOptions(rest, map[string]bool{"-f": true, "--format": true, "-o": true, "--output": true})
		case "nohup", "command", "exec":
			rest = skipOptions(rest, nil)
		case "stdbuf":
			rest = skipOptions(rest, map[string]bool{"-i": true, "-o": true, "-e": true})
		default:
			return args
		}
		args = rest
	}
	return args
}

// skipOptions drops leading options (and the values of those in valued).
func skipOptions(args []string, valued map[string]bool) []string {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		if args[0] == "--" {
			return args[1:]
		}
		if valued[args[0]] && len(args) > 1 {
			args = args[1:]
		}
		args = args[1:]
	}
	return args
}

// shellScript is the script of `sh -c SCRIPT` (bash, dash too), and
// whether its options turn pipefail on.
func shellScript(args []string) (script string, pipefail, ok bool) {
	if !isShell(path.Base(args[0])) {
		return "", false, false
	}
	c := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "+o":
			if i+1 < len(args) {
				pipefail = pipefail || (a == "-o" && args[i+1] == "pipefail")
				i++
			}
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--"):
			if strings.Contains(a, "c") {
				c = true
			}
			if strings.HasSuffix(a, "o") && i+1 < len(args) {
				pipefail = pipefail || args[i+1] == "pipefail"
				i++
			}
		case strings.HasPrefix(a, "--"):
		default:
			if c {
				return a, pipefail, true
			}
			return "", false, false
		}
	}
	return "", false, false
}

// testSpec is a feature's test, read once: its one command and where it
// runs, or, for a test of several commands, the test as a whole.
type testSpec struct {
	inv   *invocation
	whole string   // a test of one statement that is not one command
	chain []string // its operands, when it is a && b && …
	multi string   // a test of several statements
}

func readTest(test, dir string) (testSpec, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader(test), "")
	if err != nil || len(f.Stmts) == 0 {
		return testSpec{}, false
	}
	var spec testSpec
	e := &env{cwd: "."}
	var leaf *syntax.CallExpr
	var walk func(s *syntax.Stmt) bool
	walk = func(s *syntax.Stmt) bool {
		if s.Negated || s.Background {
			return false
		}
		switch c := s.Cmd.(type) {
		case *syntax.BinaryCmd:
			if c.Op != syntax.AndStmt || leaf != nil {
				return false
			}
			return walk(c.X) && walk(c.Y)
		case *syntax.CallExpr:
			if isSetup(s) {
				if leaf != nil {
					return false // setup after the test
				}
				args, ok := words(c.Args)
				if ok && len(args) > 0 && (args[0] == "cd" || args[0] == "pushd") {
					e.cwd = (&walker{dir: dir}).chdir(e.cwd, args[1:])
				}
				return true
			}
			if leaf != nil {
				return false
			}
			leaf = c
			return true
		case *syntax.DeclClause:
			return leaf == nil
		}
		return false
	}
	simple := true
	for _, s := range f.Stmts {
		simple = simple && walk(s)
	}
	if simple && leaf != nil && e.cwd != "" {
		if args, ok := words(leaf.Args); ok {
			if args = unwrap(args); len(args) > 0 {
				inv := readInvocation(args, e.cwd, dir)
				spec.inv = &inv
				return spec, true
			}
		}
	}
	if len(f.Stmts) > 1 {
		spec.multi, _ = canonical(test)
		return spec, spec.multi != ""
	}
	spec.whole, _ = printStmt(&syntax.Stmt{Cmd: f.Stmts[0].Cmd})
	if ops := andChain(f.Stmts[0]); len(ops) > 1 {
		for _, op := range ops {
			p, ok := printStmt(&syntax.Stmt{Cmd: op.Cmd})
			if !ok {
				return spec, spec.whole != ""
			}
			spec.chain = append(spec.chain, p)
		}
	}
	return spec, spec.whole != ""
}

// invocation is a command that may run a test, read for comparison.
type invocation struct {
	kind    string // script, go, pytest, npm, node, cargo, make, argv
	prog    string // the script (project-relative), the package manager and script, the program
	family  string // for a script: how it runs (sh, python, node, direct, or the interpreter)
	cwd     string
	targets []string // what it runs: packages, files, node ids, goals
	all     bool     // no targets: everything there is
	filters []string // selections that narrow what runs
	other   []string // flags the rule does not know
	noRun   bool     // it lists, or builds, without running tests
	args    []string // a script's arguments; a program's arguments
	noTests int      // the exit status that says nothing was selected (0: none)
}

var pyFamily = map[string]string{"python": "python", "python3": "python", "sh": "sh", "bash": "sh", "dash": "sh"}

func readInvocation(args []string, cwd, dir string) invocation {
	name := path.Base(args[0])
	rest := args[1:]
	inv := invocation{kind: "argv", prog: args[0], cwd: cwd, args: rest}
	switch {
	case name == "go" && len(rest) > 0 && rest[0] == "test":
		return readGo(inv, rest[1:])
	case name == "pytest" || name == "py.test":
		return readPytest(inv, rest)
	case name == "npm" || name == "yarn" || name == "pnpm":
		return readNpm(inv, name, rest)
	case name == "cargo" && len(rest) > 0 && rest[0] == "test":
		return readCargo(inv, rest[1:])
	case name == "make" || name == "gmake":
		return readMake(inv, rest)
	case name == "node" && slices.Contains(rest, "--test"):
		return readNodeTest(inv, rest)
	case interpreters[name]:
		fam := pyFamily[name]
		if fam == "" {
			fam = name
		}
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			if fam == "python" && a == "-m" && i+1 < len(rest) {
				if rest[i+1] == "pytest" {
					return readPytest(inv, rest[i+2:])
				}
				return invocation{kind: "argv", prog: "python -m " + rest[i+1], cwd: cwd, args: rest[i+2:]}
			}
			if strings.HasPrefix(a, "-") {
				if a != "-x" && a != "-v" && a != "-u" && a != "-B" {
					inv.other = append(inv.other, a)
				}
				continue
			}
			if p, ok := scriptPath(a, cwd, dir); ok {
				return invocation{kind: "script", prog: p, family: fam, args: rest[i+1:], other: inv.other}
			}
			break
		}
	case strings.Contains(args[0], "/"):
		if p, ok := scriptPath(args[0], cwd, dir); ok {
			return invocation{kind: "script", prog: p, family: "direct", args: rest}
		}
	}
	return inv
}

// scriptPath is a script's path, project-relative.
func scriptPath(w, cwd, dir string) (string, bool) {
	if strings.HasPrefix(w, "/") {
		if dir == "" {
			return "", false
		}
		rel, ok := within(dir, w)
		return rel, ok && rel != "."
	}
	return relative(cwd, w)
}

// flagName splits --name=value into name (no dashes) and value.
func flagName(a string) (name, value string, hasValue bool) {
	a = strings.TrimLeft(a, "-")
	name, value, hasValue = strings.Cut(a, "=")
	return name, value, hasValue
}

func readGo(inv invocation, args []string) invocation {
	inv.kind, inv.prog, inv.args = "go", "go test", nil
	valued := set("run", "skip", "count", "timeout", "p", "parallel", "cpu", "tags", "coverprofile", "covermode", "coverpkg",
		"bench", "benchtime", "o", "exec", "mod", "vet", "shuffle", "list", "memprofile", "cpuprofile", "blockprofile",
		"mutexprofile", "trace", "outputdir", "fuzz", "fuzztime", "fuzzminimizetime", "ldflags", "gcflags", "asmflags",
		"modfile", "C", "overlay", "pgo", "toolexec")
	harmless := set("v", "count", "race", "cover", "covermode", "coverprofile", "coverpkg", "timeout", "failfast", "json",
		"p", "parallel", "shuffle", "cpu", "x", "o", "trimpath", "mod", "benchmem", "outputdir", "fullpath")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-args" || a == "--args" {
			inv.other = append(inv.other, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") {
			inv.targets = append(inv.targets, goPkg(inv.cwd, a))
			continue
		}
		name, value, has := flagName(a)
		name = strings.TrimPrefix(name, "test.")
		if valued[name] && !has && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch {
		case name == "run" || name == "skip" || name == "short":
			inv.filters = append(inv.filters, name+"="+value)
		case name == "list" || name == "n" || name == "c" || name == "h" || name == "help":
			inv.noRun = true
		case harmless[name]:
		default:
			inv.other = append(inv.other, name+"="+value)
		}
	}
	if len(inv.targets) == 0 {
		inv.targets = []string{goPkg(inv.cwd, ".")}
	}
	return inv
}

// goPkg is a package pattern, project-relative when it is a directory
// (`./pkg/`, `./...`), as written otherwise (an import path).
func goPkg(cwd, p string) string {
	if p != "." && p != "./..." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") {
		return "import:" + p
	}
	dots := strings.HasSuffix(p, "/...")
	p = path.Join(cwd, strings.TrimSuffix(p, "/..."))
	if dots {
		return p + "/..."
	}
	return p
}

func readPytest(inv invocation, args []string) invocation {
	inv.kind, inv.prog, inv.args, inv.noTests = "pytest", "pytest", nil, 5
	valuedLong := set("tb", "maxfail", "junitxml", "junit-xml", "cov", "cov-report", "cov-config", "cov-fail-under", "basetemp",
		"durations", "durations-min", "log-level", "log-cli-level", "ignore", "ignore-glob", "deselect", "import-mode",
		"confcutdir", "rootdir", "color", "capture", "override-ini", "timeout", "dist", "numprocesses", "reruns", "html", "lfnf",
		"last-failed-no-failures", "keyword", "markexpr", "pyargs")
	harmlessLong := set("tb", "maxfail", "junitxml", "junit-xml", "durations", "durations-min", "color", "capture", "no-header",
		"no-summary", "showlocals", "verbose", "quiet", "exitfirst", "full-trace", "ff", "failed-first", "nf", "new-first",
		"cache-clear", "cov", "cov-report", "cov-config", "log-level", "log-cli-level", "disable-warnings",
		"disable-pytest-warnings", "numprocesses", "dist", "timeout", "basetemp", "html", "no-cov", "code-highlight")
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--"):
			name, value, has := flagName(a)
			if valuedLong[name] && !has && i+1 < len(args) {
				i++
				value = args[i]
			}
			switch name {
			case "collect-only", "co", "version", "help", "fixtures", "fixtures-per-test", "markers", "setup-plan", "setup-only":
				inv.noRun = true
			case "keyword", "markexpr", "deselect", "ignore", "ignore-glob", "lf", "last-failed", "sw", "stepwise", "sw-skip", "stepwise-skip":
				inv.filters = append(inv.filters, name+"="+value)
			default:
				if !harmlessLong[name] {
					inv.other = append(inv.other, name+"="+value)
				}
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			letters := a[1:]
			for j := 0; j < len(letters); j++ {
				l := letters[j]
				if strings.IndexByte("kmpcoWnr", l) >= 0 {
					value := letters[j+1:]
					if value == "" && i+1 < len(args) {
						i++
						value = args[i]
					}
					switch l {
					case 'k', 'm':
						inv.filters = append(inv.filters, string(l)+"="+value)
					case 'n', 'r':
					default:
						inv.other = append(inv.other, string(l)+"="+value)
					}
					break
				}
				switch l {
				case 'h', 'V':
					inv.noRun = true
				case 'v', 'q', 's', 'x', 'l':
				default:
					inv.other = append(inv.other, string(l))
				}
			}
		default:
			inv.targets = append(inv.targets, pathTarget(inv.cwd, a))
		}
	}
	return inv
}

// pathTarget is a file, directory or node id (file::test), project-relative.
func pathTarget(cwd, a string) string {
	file, node, hasNode := strings.Cut(a, "::")
	p := path.Join(cwd, file)
	if hasNode {
		return p + "::" + node
	}
	return p
}

func readNpm(inv invocation, manager string, args []string) invocation {
	harmless := func(a string) bool {
		return a == "--silent" || a == "-s" || strings.HasPrefix(a, "--loglevel") || a == "--no-color"
	}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		if !harmless(args[i]) {
			inv.other = append(inv.other, args[i])
		}
	}
	if i == len(args) {
		return inv
	}
	script, sub := "", args[i]
	i++
	switch {
	case sub == "test" || sub == "t" || sub == "tst":
		script = "test"
	case sub == "run" || sub == "run-script":
		for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
			if !harmless(args[i]) {
				inv.other = append(inv.other, args[i])
			}
		}
		if i == len(args) {
			return inv
		}
		script = args[i]
		i++
	case manager != "npm":
		script = sub // yarn NAME, pnpm NAME
	default:
		return inv
	}
	for ; i < len(args); i++ {
		if !harmless(args[i]) {
			// The script's own arguments (`-- --grep x`): what they do
			// is the script's to say.
			inv.other = append(inv.other, args[i])
		}
	}
	inv.kind, inv.prog, inv.args, inv.targets = "npm", manager+" run "+script, nil, nil
	return inv
}

func readNodeTest(inv invocation, args []string) invocation {
	inv.kind, inv.prog, inv.args = "node", "node --test", nil
	valued := set("test-reporter", "test-reporter-destination", "test-name-pattern", "test-skip-pattern", "test-concurrency",
		"test-timeout", "test-shard", "import", "require", "loader", "experimental-loader", "r")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			inv.targets = append(inv.targets, pathTarget(inv.cwd, a))
			continue
		}
		name, value, has := flagName(a)
		if valued[name] && !has && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch name {
		case "test", "test-reporter", "test-reporter-destination", "test-concurrency", "test-timeout", "test-force-exit",
			"enable-source-maps", "no-warnings", "trace-warnings":
		case "test-name-pattern", "test-skip-pattern", "test-only", "test-shard":
			inv.filters = append(inv.filters, name+"="+value)
		case "version", "v", "help", "h", "check", "c":
			inv.noRun = true
		default:
			inv.other = append(inv.other, name+"="+value)
		}
	}
	return inv
}

func readCargo(inv invocation, args []string) invocation {
	inv.kind, inv.prog, inv.args = "cargo", "cargo test", nil
	valued := set("p", "package", "test", "bin", "example", "bench", "features", "F", "target", "target-dir", "j", "jobs",
		"manifest-path", "profile", "color", "message-format", "Z", "exclude", "test-threads", "format", "skip")
	selection := set("p", "package", "lib", "bins", "bin", "test", "tests", "examples", "example", "benches", "bench", "doc", "all-targets")
	harmless := set("q", "quiet", "v", "verbose", "vv", "release", "color", "j", "jobs", "no-fail-fast", "locked", "offline",
		"frozen", "message-format", "target-dir")
	harmlessAfter := set("nocapture", "show-output", "test-threads", "color", "q", "quiet", "format")
	after := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" && !after {
			after = true
			continue
		}
		if !strings.HasPrefix(a, "-") {
			inv.filters = append(inv.filters, "name="+a) // a test name filter, before or after --
			continue
		}
		name, value, has := flagName(a)
		if valued[name] && !has && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch {
		case name == "no-run" || name == "help" || name == "h" || name == "version" || name == "V" || (after && name == "list"):
			inv.noRun = true
		case !after && (name == "workspace" || name == "all"):
			inv.all = true
		case !after && selection[name]:
			if name == "package" {
				name = "p"
			}
			inv.targets = append(inv.targets, name+"="+value)
		case after && (name == "exact" || name == "skip" || name == "ignored"):
			inv.filters = append(inv.filters, name+"="+value)
		case !after && name == "exclude":
			inv.filters = append(inv.filters, name+"="+value)
		case after && harmlessAfter[name], !after && harmless[name]:
		default:
			inv.other = append(inv.other, name+"="+value)
		}
	}
	return inv
}

func readMake(inv invocation, args []string) invocation {
	inv.kind, inv.prog, inv.args = "make", "make", nil
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--dry-run" || a == "--just-print" || a == "--recon" || a == "-q" || a == "--question" ||
			a == "-t" || a == "--touch" || a == "-p" || a == "--print-data-base" || a == "-h" || a == "--help" || a == "-v" || a == "--version":
			inv.noRun = true
		case a == "-s" || a == "--silent" || a == "--quiet" || a == "-k" || a == "--keep-going" || a == "-B" ||
			a == "--no-print-directory" || a == "-w" || strings.HasPrefix(a, "-j") || strings.HasPrefix(a, "-O") || strings.HasPrefix(a, "--output-sync") || strings.HasPrefix(a, "--jobs"):
			if a == "-j" && i+1 < len(args) && strings.Trim(args[i+1], "0123456789") == "" {
				i++
			}
		case strings.HasPrefix(a, "-"):
			inv.other = append(inv.other, a)
			if (a == "-C" || a == "-f" || a == "-I" || a == "-o" || a == "-W") && i+1 < len(args) {
				i++
				inv.other = append(inv.other, args[i])
			}
		case strings.Contains(a, "="):
			inv.other = append(inv.other, a)
		default:
			inv.targets = append(inv.targets, a)
		}
	}
	return inv
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// compare says how a command an agent ran runs the test: got is the
// command, want the test's.
func compare(got, want invocation) status {
	if got.kind != want.kind || got.prog != want.prog || got.noRun {
		return nil
	}
	switch got.kind {
	case "script":
		if got.family != want.family && got.family != "direct" && want.family != "direct" {
			return nil
		}
		if !slices.Equal(got.args, want.args) {
			return nil
		}
		if len(extra(got.other, want.other)) > 0 {
			return constant(Unknown)
		}
		return own
	case "argv":
		if got.cwd != want.cwd {
			return nil
		}
		if slices.Equal(got.args, want.args) {
			return own
		}
		// The same words with options added: what the options do is the
		// program's; a listing one is not a run.
		if !slices.Equal(nonOptions(got.args), nonOptions(want.args)) || len(extra(options(want.args), options(got.args))) > 0 {
			return nil
		}
		for _, o := range extra(options(got.args), options(want.args)) {
			if name, _, _ := flagName(o); listing[name] {
				return nil
			}
		}
		return constant(Unknown)
	}
	if got.cwd != want.cwd {
		return nil
	}
	wider := false
	switch {
	case got.all && !want.all:
		wider = true
	case want.all && !got.all:
		return nil
	case got.kind == "npm" || got.kind == "make":
		if !sameSet(got.targets, want.targets) {
			return nil
		}
	default:
		covers, exact := coverage(got, want)
		if !covers {
			return nil
		}
		wider = !exact
	}
	narrower := len(extra(got.filters, want.filters)) > 0
	wider = wider || len(extra(want.filters, got.filters)) > 0
	unknownFlags := len(extra(got.other, want.other)) > 0 || len(extra(want.other, got.other)) > 0
	noTests := got.noTests
	return func(x int) Outcome {
		switch {
		case noTests != 0 && x == noTests && (narrower || unknownFlags):
			return NotRun // nothing was selected
		case unknownFlags || (narrower && wider):
			return Unknown
		case narrower:
			if x == 0 {
				return Unknown // it may have selected nothing
			}
			return Failed
		case wider:
			if x == 0 {
				return Passed
			}
			return Unknown // another target may have failed
		}
		return own(x)
	}
}

var listing = set("version", "V", "help", "h", "list", "l", "collect-only", "co", "listTests", "list-tests", "dry-run", "no-run", "n")

// coverage says whether got's targets run every target of want's, and
// whether they are the same.
func coverage(got, want invocation) (covers, exact bool) {
	if len(got.targets) == 0 && len(want.targets) == 0 {
		return true, true
	}
	if sameSet(got.targets, want.targets) {
		return true, true
	}
	if len(got.targets) == 0 && got.kind != "go" {
		return true, false // pytest, node --test, cargo test: everything there is
	}
	for _, t := range want.targets {
		if !slices.ContainsFunc(got.targets, func(g string) bool { return targetCovers(got.kind, g, t) }) {
			return false, false
		}
	}
	return true, false
}

func targetCovers(kind, g, t string) bool {
	if g == t {
		return true
	}
	if kind == "go" {
		if base, ok := strings.CutSuffix(g, "/..."); ok {
			t = strings.TrimSuffix(t, "/...")
			return !strings.HasPrefix(t, "import:") && (base == "." || t == base || strings.HasPrefix(t, base+"/"))
		}
		return false
	}
	if kind == "cargo" {
		return false
	}
	return g == "." || strings.HasPrefix(t, g+"/") || strings.HasPrefix(t, g+"::")
}

func sameSet(a, b []string) bool {
	return len(extra(a, b)) == 0 && len(extra(b, a)) == 0
}

// extra are the elements of a not in b.
func extra(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func options(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

func nonOptions(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}
