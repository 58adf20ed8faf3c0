package main

// The docs say what the code does. The tests of this file read both and
// fail when they part: a package, a route, an error code, a configuration
// key or default, a command, a link that the docs no longer tell truly.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/ctxgraphd/ctxgraphd/control/server"
	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/orchestrator"
	"github.com/ctxgraphd/ctxgraphd/records"
)

// modulePath is the module's import path, which the docs leave out.
const modulePath = "github.com/ctxgraphd/ctxgraphd"

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of doc from the line heading (exact, "## X")
// to the next heading of the same or a higher level.
func section(t *testing.T, doc, name, heading string) string {
	t.Helper()
	level := strings.IndexByte(heading, ' ')
	var out []string
	in, code := false, false
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if in && !code && strings.HasPrefix(line, "#") {
			if l := strings.IndexByte(line, ' '); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				break
			}
		}
		if line == heading {
			in = true
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no heading %q", name, heading)
	}
	return strings.Join(out, "\n")
}

// tableRows returns the cells of the rows of the first Markdown table in
// text whose header line starts with header, the header and rule left out.
func tableRows(t *testing.T, text, name, header string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case !in && strings.HasPrefix(line, header):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return rows
		case in && strings.HasPrefix(line, "|---"):
		case in:
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		}
	}
	if !in {
		t.Fatalf("%s has no table headed %q", name, header)
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

// modulePackages returns each package of the module (relative to it, "."
// for the root) with the module packages its non-test files import.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.Bytes())
	}
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	pkgs := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		name, _ := rel(f[0])
		pkgs[name] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				pkgs[name] = append(pkgs[name], r)
			}
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the check would hold for nothing", len(pkgs))
	}
	return pkgs
}

// TestPackageMap holds the package map of docs/architecture.md to the
// module: every package is in it, nothing else is, and each package
// imports only packages listed below it.
func TestPackageMap(t *testing.T) {
	pkgs := modulePackages(t)
	const doc = "docs/architecture.md"
	rows := tableRows(t, section(t, readDoc(t, doc), doc, "## Packages"), doc, "| package | owns |")
	row := map[string]int{}
	for i, cells := range rows {
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := row[m[1]]; dup {
				t.Errorf("%s: package %s is in the map twice", doc, m[1])
			}
			row[m[1]] = i
		}
	}
	for p := range pkgs {
		if _, ok := row[p]; !ok {
			t.Errorf("%s: package %s is not in the package map; add a row saying what it owns, below every package that imports it and above those it imports", doc, p)
		}
	}
	for p := range row {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("%s: the package map lists %s, which is not a package of the module", doc, p)
		}
	}
	for p, imports := range pkgs {
		i, ok := row[p]
		if !ok {
			continue
		}
		for _, imp := range imports {
			if j, ok := row[imp]; ok && j <= i {
				t.Errorf("%s: %s imports %s, which the package map lists above it (or in its row); dependencies point down there: move one of them", doc, p, imp)
			}
		}
	}
}

// daemonRoutes are the routes the daemon answers: its server, built on
// the orchestrator as `ctxgraphd run` builds it. New only looks at which
// interfaces the backend has, so a nil orchestrator does.
func daemonRoutes(t *testing.T) []string {
	t.Helper()
	routes := server.New((*orchestrator.Orchestrator)(nil), (*judge.Judge)(nil), (*records.Service)(nil), fleet.Local, nil).Routes()
	if len(routes) < 10 {
		t.Fatalf("the daemon's server has %d routes: the check would hold for nothing", len(routes))
	}
	return routes
}

// routeRef is a route named in the docs: a method and a path under /v1/,
// with placeholders ({id}, ID) for the path's variables.
var routeRef = regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE|HEAD) (/v1/[^`?\\s]*)")

// TestControlAPIRoutes: every route the daemon answers is in
// docs/control-api.md, written as registered ("POST /v1/guards/{id}/retire"),
// and every route any doc names is one the daemon answers.
func TestControlAPIRoutes(t *testing.T) {
	routes := daemonRoutes(t)
	const doc = "docs/control-api.md"
	api := readDoc(t, doc)
	for _, r := range routes {
		if !strings.Contains(api, "`"+r+"`") {
			t.Errorf("%s does not document %s, which the daemon answers: add it to the table of routes under Endpoints and say what it does", doc, r)
		}
	}
	var patterns []*regexp.Regexp
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		expr := regexp.QuoteMeta(path)
		expr = regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(expr, `[^/]+`)
		patterns = append(patterns, regexp.MustCompile("^"+method+" "+expr+"$"))
	}
	for _, name := range docFiles(t) {
		for _, m := range routeRef.FindAllStringSubmatch(readDoc(t, name), -1) {
			ref := m[1] + " " + m[2]
			if !slices.ContainsFunc(patterns, func(p *regexp.Regexp) bool { return p.MatchString(ref) }) {
				t.Errorf("%s names %s, which the daemon does not answer (its routes: %s)", name, ref, strings.Join(routes, ", "))
			}
		}
	}
}

// docFiles are the README and the Markdown files of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	out := []string{"README.md"}
	for _, n := range names {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(n, repoRoot+string(filepath.Separator))))
	}
	return out
}

// errorCode is an error code the server can send, with its status when the
// code says it (0 when a status is computed).
type errorCode struct {
	status int
	code   string
}

func (e errorCode) String() string { return fmt.Sprintf("%d %s", e.status, e.code) }

// TestControlAPIErrorCodes: every error code the server can send is in the
// error table of docs/control-api.md with its status, and the table has no
// row the code cannot send.
func TestControlAPIErrorCodes(t *testing.T) {
	sent := sentErrorCodes(t)
	const doc = "docs/control-api.md"
	rows := tableRows(t, readDoc(t, doc), doc, "| status | code | when |")
	documented := map[errorCode]bool{}
	for _, cells := range rows {
		status, err := strconv.Atoi(cells[0])
		if err != nil || len(cells) < 3 {
			t.Errorf("%s: error table row %q: want | status | `code` | when |", doc, strings.Join(cells, " | "))
			continue
		}
		documented[errorCode{status, strings.Trim(cells[1], "`")}] = true
	}
	sends := func(d errorCode) bool {
		return slices.ContainsFunc(sent, func(s errorCode) bool { return s == d || (s.status == 0 && s.code == d.code) })
	}
	for _, s := range sent {
		ok := documented[s]
		if s.status == 0 {
			for d := range documented {
				ok = ok || d.code == s.code
			}
		}
		if !ok {
			t.Errorf("%s: the error table lacks `%s` (%s), which the server can send: add a row saying when", doc, s.code, s)
		}
	}
	for d := range documented {
		if !sends(d) {
			t.Errorf("%s: the error table has %s, which nothing in the code sends: drop the row, or correct its status", doc, d)
		}
	}
}

// sentErrorCodes reads the codes the server can send from the module's
// source: the control.Code* constants with the statuses CodeForStatus
// gives them, and the status and code of every control.APIError written
// outside the client (whose own errors never cross the socket). A code
// that is neither a string literal nor a control.Code* constant cannot be
// checked, and fails the test.
func sentErrorCodes(t *testing.T) []errorCode {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != repoRoot && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(strings.TrimPrefix(path, repoRoot+string(filepath.Separator)))] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The constants, from package control.
	consts := map[string]string{}
	for name, f := range files {
		if filepath.Dir(name) != "control" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if strings.HasPrefix(id.Name, "Code") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	if len(consts) == 0 {
		t.Fatal("no control.Code* constants found: the check would hold for nothing")
	}

	statusOf := func(e ast.Expr) int {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "Status") {
			return 0
		}
		for s := 100; s < 600; s++ {
			if "Status"+strings.NewReplacer(" ", "", "-", "").Replace(http.StatusText(s)) == sel.Sel.Name {
				return s
			}
		}
		return 0
	}
	constOf := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.Ident:
			v, ok := consts[e.Name]
			return v, ok
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "control" {
				v, ok := consts[e.Sel.Name]
				return v, ok
			}
		}
		return "", false
	}

	var sent []errorCode
	seen := map[string]bool{} // the constants every path reaches
	for name, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name != "CodeForStatus" || filepath.Dir(name) != "control" {
					return true
				}
				// The codes of statuses the server answers without one
				// of its own: a route that is not there, a bare error.
				ast.Inspect(n.Body, func(n ast.Node) bool {
					cc, ok := n.(*ast.CaseClause)
					if !ok || len(cc.List) != 1 || len(cc.Body) != 1 {
						return true
					}
					ret, ok := cc.Body[0].(*ast.ReturnStmt)
					if !ok || len(ret.Results) != 1 {
						return true
					}
					code, ok := constOf(ret.Results[0])
					if status := statusOf(cc.List[0]); ok && status != 0 {
						sent = append(sent, errorCode{status, code})
						seen[code] = true
					}
					return true
				})
			case *ast.CompositeLit:
				if name == "control/client.go" || !isAPIError(n.Type) {
					return true
				}
				var status int
				var code string
				known := false
				for _, el := range n.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					switch {
					case key == nil:
					case key.Name == "HTTPStatus":
						status = statusOf(kv.Value)
					case key.Name == "Code":
						if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							code, _ = strconv.Unquote(lit.Value)
							known = true
						} else if v, ok := constOf(kv.Value); ok {
							code, known = v, true
						} else if call, ok := kv.Value.(*ast.CallExpr); ok && isCodeForStatus(call.Fun) {
							return true // the codes of CodeForStatus
						} else {
							t.Errorf("%s: an APIError's code is neither a string literal nor a control.Code* constant; the docs cannot be checked against it", fset.Position(kv.Pos()))
							return true
						}
					}
				}
				if known {
					sent = append(sent, errorCode{status, code})
					seen[code] = true
				}
			}
			return true
		})
	}
	for _, v := range consts {
		if !seen[v] {
			sent = append(sent, errorCode{0, v})
		}
	}
	slices.SortFunc(sent, func(a, b errorCode) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(sent)
}

func isAPIError(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "APIError"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "control" && e.Sel.Name == "APIError"
	}
	return false
}

func isCodeForStatus(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "CodeForStatus"
	case *ast.SelectorExpr:
		return e.Sel.Name == "CodeForStatus"
	}
	return false
}

// TestREADMEConfiguration: the YAML under the README's Configuration
// heading has every key `ctxgraphd config` prints, no other, and each with
// its default value (how the value is written, and the comments, may
// differ: the README's block, read as a project's configuration, must
// give what the defaults give).
func TestREADMEConfiguration(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "CTXGRAPHD_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	block := readmeConfig(t)

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("README.md: the configuration block is not YAML: %v", err)
	}
	var keys []string
	var flatten func(prefix string, n *yaml.Node)
	flatten = func(prefix string, n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			keys = append(keys, prefix)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if prefix != "" {
				k = prefix + "." + k
			}
			flatten(k, n.Content[i+1])
		}
	}
	if len(doc.Content) != 1 {
		t.Fatal("README.md: the configuration block is empty")
	}
	flatten("", doc.Content[0])

	defaults := configValues(t, t.TempDir())
	for k := range defaults {
		if !slices.Contains(keys, k) {
			t.Errorf("README.md: the configuration block lacks %s (default %s)", k, defaults[k])
		}
	}
	for _, k := range keys {
		if _, ok := defaults[k]; !ok {
			t.Errorf("README.md: the configuration block has %s, which `ctxgraphd config` does not print", k)
		}
	}

	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".claude", "ctxgraphd.yaml"), []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := configValues(t, proj)
	for k, want := range defaults {
		if got, ok := readme[k]; ok && got != want && slices.Contains(keys, k) {
			t.Errorf("README.md: the configuration block gives %s = %s; the default is %s", k, got, want)
		}
	}
}

// readmeConfig returns the first YAML block under the README's
// Configuration heading.
func readmeConfig(t *testing.T) string {
	t.Helper()
	text := section(t, readDoc(t, "README.md"), "README.md", "## Configuration")
	_, rest, ok := strings.Cut(text, "\n```yaml\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatal("README.md: no ```yaml block under ## Configuration")
	}
	return block
}

// configValues runs `ctxgraphd config --project dir` and returns each
// key's value as it prints it, without where it came from.
func configValues(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, errOut, code := ctl(t, "config", "--project", dir)
	if code != 0 {
		t.Fatalf("ctxgraphd config --project %s: exit %d\n%s", dir, code, errOut)
	}
	values := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
			continue // a note below a key
		}
		key, rest, ok := strings.Cut(line, " = ")
		if !ok {
			t.Fatalf("ctxgraphd config printed %q: want key = value  # source", line)
		}
		if i := strings.LastIndex(rest, "  # "); i >= 0 {
			rest = rest[:i]
		}
		values[strings.TrimSpace(key)] = strings.TrimSpace(rest)
	}
	if len(values) < 10 {
		t.Fatalf("ctxgraphd config printed %d keys: the check would hold for nothing\n%s", len(values), out)
	}
	return values
}

// TestCommandsDocumented: every command of the CLI is named in the README
// or docs/ ("ctxgraphd service install"), and every ctl command in the
// README or docs/operations.md ("ctl lessons add"), where people look.
func TestCommandsDocumented(t *testing.T) {
	var all strings.Builder
	for _, name := range docFiles(t) {
		all.WriteString(readDoc(t, name))
	}
	ops := readDoc(t, "README.md") + readDoc(t, "docs/operations.md")
	var walk func(c *cobra.Command, path string)
	count := 0
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			p := strings.TrimSpace(path + " " + sub.Name())
			count++
			switch {
			case strings.HasPrefix(p, "ctl "):
				if !strings.Contains(ops, "ctl "+strings.TrimPrefix(p, "ctl ")) {
					t.Errorf("`ctxgraphd %s` is in neither README.md nor docs/operations.md: say what it does there", p)
				}
			case !strings.Contains(all.String(), "ctxgraphd "+p):
				t.Errorf("`ctxgraphd %s` is named nowhere in README.md or docs/: say what it does", p)
			}
			walk(sub, p)
		}
	}
	walk(newRootCmd(), "")
	if count < 20 {
		t.Fatalf("the CLI has %d commands: the check would hold for nothing", count)
	}
}

// mdLink is a Markdown link to a relative path, with its anchor.
var mdLink = regexp.MustCompile(`\]\(([^)\s:]*)\)`)

// TestDocLinks: every relative link of the README and docs/ reaches a file
// of the repository, and its anchor a heading of that file.
func TestDocLinks(t *testing.T) {
	checked := 0
	for _, name := range docFiles(t) {
		for _, m := range mdLink.FindAllStringSubmatch(readDoc(t, name), -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			file := name
			if target != "" {
				file = filepath.ToSlash(filepath.Join(filepath.Dir(name), target))
			}
			checked++
			if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", name, m[1])
				continue
			}
			if anchor != "" && !slices.Contains(anchors(t, file), anchor) {
				t.Errorf("%s links to %s: %s has no heading whose anchor is #%s", name, m[1], file, anchor)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("%d links checked: the check would hold for nothing", checked)
	}
}

// anchors returns the anchors of the headings of a Markdown file, as
// GitHub makes them: lower case, spaces to hyphens, punctuation dropped.
func anchors(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	inCode := false
	for line := range strings.SplitSeq(readDoc(t, name), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// outsideCitation is how the repository's text once cited a specification
// that was never in it.
var outsideCitation = regexp.MustCompile(`\bSPEC\b`)

// TestNothingCitesAFileOutside: no doc, comment or script of the
// repository cites the specification the project started from, which is
// not in it: whoever reads the repository has only the repository.
func TestNothingCitesAFileOutside(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".txtar", ".yaml", ".yml", ".sh", ".tmpl":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if outsideCitation.MatchString(line) {
				t.Errorf("%s:%d cites a file that is not in the repository: say what it needs here instead\n\t%s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("%d files read: the check would hold for nothing", checked)
	}
}

// TestREADMEShowsVerifyUnconfinedInCI holds the README's CI section to
// the command: a job, valid YAML, one of whose steps runs `ctxgraphd verify
// --unconfined`, a flag the command has and whose help says that it runs
// agent-written code as the caller.
func TestREADMEShowsVerifyUnconfinedInCI(t *testing.T) {
	readme := readDoc(t, "README.md")
	_, section, ok := strings.Cut(readme, "\n## In CI\n")
	if !ok {
		t.Fatal("README.md has no \"## In CI\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("README.md's CI section shows no ```yaml job")
	}
	var job struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(block), &job); err != nil {
		t.Fatalf("README.md's CI job is not valid YAML: %v", err)
	}
	runs := 0
	for _, j := range job.Jobs {
		for _, s := range j.Steps {
			if strings.TrimSpace(s.Run) == "ctxgraphd verify --unconfined" {
				runs++
			}
		}
	}
	if runs == 0 {
		t.Errorf("no step of README.md's CI job runs `ctxgraphd verify --unconfined`:\n%s", block)
	}
	verify, _, err := newRootCmd().Find([]string{"verify"})
	if err != nil {
		t.Fatal(err)
	}
	f := verify.Flags().Lookup("unconfined")
	if f == nil || !strings.Contains(f.Usage, "agent-written code runs as you") || !strings.Contains(verify.Long, "It runs agent-written code as you") {
		t.Errorf("verify's help does not say that --unconfined runs agent-written code as you")
	}
}
