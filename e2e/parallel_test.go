package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// serialMark starts the line of a test's doc comment that says why the
// test must run alone.
const serialMark = "Serial:"

// Every end-to-end test runs beside the others (doc.go says how), so that
// the suite's time grows with its slowest tests rather than with their
// sum: each test's first statement is t.Parallel(), or its doc comment
// has a line that starts "Serial:" and says why it cannot be.
func TestEveryTestRunsInParallel(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			if parallelFirst(fn) || saysWhySerial(fn) {
				continue
			}
			t.Errorf("%s: %s neither calls t.Parallel() first nor says why it must run alone (a line of its doc comment starting %q); see e2e/doc.go",
				fset.Position(fn.Pos()), fn.Name.Name, serialMark)
		}
	}
}

// parallelFirst reports whether fn's first statement is t.Parallel() on
// its *testing.T.
func parallelFirst(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 || len(fn.Type.Params.List) != 1 || len(fn.Type.Params.List[0].Names) != 1 {
		return false
	}
	param := fn.Type.Params.List[0].Names[0].Name
	expr, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := expr.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Parallel" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == param
}

// saysWhySerial reports whether fn's doc comment has a line that starts
// with serialMark and goes on to say why.
func saysWhySerial(fn *ast.FuncDecl) bool {
	if fn.Doc == nil {
		return false
	}
	for _, line := range strings.Split(fn.Doc.Text(), "\n") {
		if why, ok := strings.CutPrefix(strings.TrimSpace(line), serialMark); ok && strings.TrimSpace(why) != "" {
			return true
		}
	}
	return false
}
