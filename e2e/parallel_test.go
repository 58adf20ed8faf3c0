package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every end-to-end test states its tier and runs beside the others
// (doc.go says how): its first statement is night(t, core) or night(t,
// extended), which skips it in a run of the other tier and calls
// t.Parallel(), so that what `make test` holds is said where each night is
// written and the suite's time grows with its slowest tests rather than
// with their sum.
func TestEveryNightStatesItsTier(t *testing.T) {
	night(t, core)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range nightsWithoutTier(fset, f) {
			t.Error(problem)
		}
	}
}

// nightsWithoutTier returns, for each test of f that does not start with
// night(t, core) or night(t, extended) on its own *testing.T, what is
// wrong and where.
func nightsWithoutTier(fset *token.FileSet, f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
			continue
		}
		if !statesTierFirst(fn) {
			out = append(out, fset.Position(fn.Pos()).String()+": "+fn.Name.Name+
				" does not start with night(t, core) or night(t, extended): say which of make test (core) and make test-all (extended) runs it; see e2e/doc.go")
		}
	}
	return out
}

// statesTierFirst reports whether fn's first statement is night(t, core)
// or night(t, extended), t being fn's *testing.T.
func statesTierFirst(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 || len(fn.Type.Params.List) != 1 || len(fn.Type.Params.List[0].Names) != 1 {
		return false
	}
	param := fn.Type.Params.List[0].Names[0].Name
	expr, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := expr.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return false
	}
	if fun, ok := call.Fun.(*ast.Ident); !ok || fun.Name != "night" {
		return false
	}
	if arg, ok := call.Args[0].(*ast.Ident); !ok || arg.Name != param {
		return false
	}
	tr, ok := call.Args[1].(*ast.Ident)
	return ok && (tr.Name == "core" || tr.Name == "extended")
}

// The check itself, against the ways a test can miss its tier.
func TestNightsWithoutTier(t *testing.T) {
	night(t, core)
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"core", "night(t, core); work(t)", true},
		{"extended", "night(t, extended)", true},
		{"only parallel", "t.Parallel(); work(t)", false},
		{"no statement", "", false},
		{"tier not first", "work(t); night(t, core)", false},
		{"a tier named as a string", `night(t, "core")`, false},
		{"another tier", "night(t, nightly)", false},
		{"another test's t", "night(other, core)", false},
		{"another helper", "tierOf(t, core)", false},
		{"a method named night", "p.night(t, core)", false},
		{"one argument", "night(t)", false},
	} {
		src := "package e2e\nfunc TestX(t *testing.T) {" + c.body + "}\nfunc TestMain(m *testing.M) {}\nfunc helper(t *testing.T) {}\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x_test.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := nightsWithoutTier(fset, f)
		if ok := len(got) == 0; ok != c.ok {
			t.Errorf("%s: %q: problems %q, want ok=%v", c.name, c.body, got, c.ok)
		}
		if !c.ok && (len(got) != 1 || !strings.Contains(got[0], "x_test.go:2") || !strings.Contains(got[0], "TestX")) {
			t.Errorf("%s: problems %q, want one naming TestX at x_test.go:2", c.name, got)
		}
	}
}
