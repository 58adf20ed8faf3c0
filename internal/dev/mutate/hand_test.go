package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryHandFindsItsCode holds the audit's rows to the code as it is,
// in a second rather than the audit's hour: a refactor that moves or
// rewrites a guarantee must move its row with it, or `make audit` would
// report an error where it should report a catch.
func TestEveryHandFindsItsCode(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	testFuncs := map[string][]string{} // package dir → its test functions' names
	funcRE := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, h := range Hands {
		b, err := os.ReadFile(filepath.Join(root, h.File))
		if err != nil {
			t.Errorf("%q: %v", h.Guarantee, err)
			continue
		}
		if n := strings.Count(string(b), h.Old); n != 1 {
			t.Errorf("%q: %s holds the code to change %d times, not once", h.Guarantee, h.File, n)
		}
		if h.Old == h.New {
			t.Errorf("%q: changes nothing", h.Guarantee)
		}
		// -run matches top-level tests by its pattern's first element.
		run, err := regexp.Compile(strings.SplitN(h.Run, "/", 2)[0])
		if err != nil {
			t.Errorf("%q: -run %q: %v", h.Guarantee, h.Run, err)
			continue
		}
		names, ok := testFuncs[h.Pkg]
		if !ok {
			files, _ := filepath.Glob(filepath.Join(root, h.Pkg, "*_test.go"))
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range funcRE.FindAllStringSubmatch(string(src), -1) {
					names = append(names, m[1])
				}
			}
			testFuncs[h.Pkg] = names
		}
		found := false
		for _, n := range names {
			if run.MatchString(n) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%q: no test of ./%s matches -run %q", h.Guarantee, h.Pkg, h.Run)
		}
	}
}
