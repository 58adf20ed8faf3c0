package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Unconfined (sandbox.enabled: false, `ctxgraphd verify --unconfined`), a
// test still finds the dependencies git does not carry where the work tree
// has them, as the jail binds them: a Node or Python test would otherwise
// fail for want of its runner. What is linked in lies in the work tree
// (DepsFrom, or Mount's directory), and nothing else.
func TestUnconfinedTestSeesTheWorkTreesDependencies(t *testing.T) {
	proj, checkout := t.TempDir(), t.TempDir()
	for _, f := range []string{"node_modules/dep/index.js", ".venv/bin/python"} {
		p := filepath.Join(proj, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("from the work tree\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := filepath.Join(t.TempDir(), "node_modules")
	lane := t.TempDir() // a lane's work tree, with no dependencies of its own: the project's are lent
	for _, from := range []string{proj, "", lane} {
		j := TestJail{Off: true, Checkout: checkout, Mount: proj, DepsFrom: from, Env: []string{"PATH=" + os.Getenv("PATH")},
			Deps: []string{filepath.Join(proj, "node_modules"), filepath.Join(proj, ".venv"), elsewhere}}
		var out bytes.Buffer
		if _, err := j.Run(context.Background(), "cat node_modules/dep/index.js .venv/bin/python", &out); err != nil {
			t.Fatalf("DepsFrom %q: the test did not find the work tree's dependencies: %v\n%s", from, err, out.String())
		}
		if got := out.String(); got != "from the work tree\nfrom the work tree\n" {
			t.Errorf("DepsFrom %q: the test read %q", from, got)
		}
		entries, _ := os.ReadDir(checkout)
		if len(entries) != 2 {
			t.Errorf("DepsFrom %q: the checkout holds %v; a directory outside the work tree must not be linked in", from, entries)
		}
		for _, e := range entries {
			os.Remove(filepath.Join(checkout, e.Name()))
		}
	}
}
