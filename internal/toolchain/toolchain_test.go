package toolchain

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUsed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		dirs  []string
		want  []string
	}{
		{"nothing", nil, nil, nil},
		{"go", []string{"go.mod"}, nil, []string{"Go"}},
		{"node", []string{"package.json"}, nil, []string{"Node"}},
		{"python by pyproject", []string{"pyproject.toml"}, nil, []string{"Python"}},
		{"python by requirements", []string{"requirements.txt"}, nil, []string{"Python"}},
		{"python by setup.py", []string{"setup.py"}, nil, []string{"Python"}},
		{"python named twice, counted once", []string{"pyproject.toml", "requirements.txt"}, nil, []string{"Python"}},
		{"rust", []string{"Cargo.toml"}, nil, []string{"Rust"}},
		{"several, in the table's order", []string{"Cargo.toml", "package.json", "go.mod"}, nil, []string{"Go", "Node", "Rust"}},
		{"a marker below the top says nothing", []string{"web/package.json"}, []string{"web"}, nil},
		{"a directory of a marker's name says nothing", nil, []string{"go.mod"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, tc := range Used(dir) {
				got = append(got, tc.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Used = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHosts(t *testing.T) {
	want := []string{"proxy.golang.org", "sum.golang.org", "storage.googleapis.com", "registry.npmjs.org",
		"pypi.org", "files.pythonhosted.org", "crates.io", "index.crates.io", "static.crates.io"}
	if got := Hosts(); !slices.Equal(got, want) {
		t.Errorf("Hosts() = %v, want %v", got, want)
	}
}

func TestByHost(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"proxy.golang.org", "Go"},
		{"storage.googleapis.com", "Go"},
		{"registry.npmjs.org", "Node"},
		{"files.pythonhosted.org", "Python"},
		{"static.crates.io", "Rust"},
		{"example.com", ""},
		{"", ""},
	} {
		got, ok := ByHost(tc.host)
		if got.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("ByHost(%q) = %q, %v; want %q", tc.host, got.Name, ok, tc.want)
		}
	}
}

// Every toolchain says how to find it, what to run, and how to fetch.
func TestEveryToolchainIsComplete(t *testing.T) {
	for _, tc := range All {
		if tc.Name == "" || len(tc.Markers) == 0 || len(tc.Programs) == 0 || len(tc.Hosts) == 0 || tc.Fetch == "" {
			t.Errorf("%+v: every field is needed", tc)
		}
		for _, h := range tc.Hosts {
			if h.Name == "" || h.What == "" {
				t.Errorf("%s: host %+v says nothing", tc.Name, h)
			}
		}
	}
}

// TestUsesCgo: UsesCgo on a tree, and CgoFile on each of its files, say
// the same.
func TestUsesCgo(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		links map[string]string // name: target
		want  bool
	}{
		{"pure Go", map[string]string{"a/a.go": "package a\n\nimport \"fmt\"\n\nvar _ = fmt.Sprint\n"}, nil, false},
		{"import C alone", map[string]string{"a/a.go": "package a\n\n// #include <stdio.h>\nimport \"C\"\n"}, nil, true},
		{"import C in a block, deep", map[string]string{"x/y/z.go": "package z\n\nimport (\n\t\"fmt\"\n\t\"C\"\n)\n\nvar _ = fmt.Sprint\n"}, nil, true},
		{"the text C elsewhere", map[string]string{"a/a.go": "package a\n\nconst s = \"import \\\"C\\\"\"\n"}, nil, false},
		{"cgo only in node_modules", map[string]string{"node_modules/x/x.go": "package x\n\nimport \"C\"\n"}, nil, false},
		{"a file that does not parse", map[string]string{"a/a.go": "package a\nimport ("}, nil, false},
		{"a package named C", map[string]string{"a/a.go": "package a\n\nimport C \"fmt\"\n\nvar _ = C.Sprint\n"}, nil, false},
		{"import C in a file not Go's", map[string]string{"a/a.go.txt": "package a\n\nimport \"C\"\n"}, nil, false},
		{"cgo in .git", map[string]string{".git/x/x.go": "package x\n\nimport \"C\"\n", "a/a.go": "package a\n"}, nil, false},
		// A change of x.impl alone could make x.go import "C".
		{"a Go file that is a link to pure Go", map[string]string{"a/x.impl": "package a\n"}, map[string]string{"a/x.go": "x.impl"}, true},
		{"a link named as Go, deep", map[string]string{"a/b/x.impl": "package b\n"}, map[string]string{"a/b/x.go": "x.impl"}, true},
		{"a link to a Go file, not named as one", map[string]string{"a/x.go": "package a\n"}, map[string]string{"a/x.impl": "x.go"}, false},
		{"a Go link in node_modules", map[string]string{"node_modules/m/x.impl": "package m\n"}, map[string]string{"node_modules/m/x.go": "x.impl"}, false},
		{"a dangling Go link", nil, map[string]string{"a/x.go": "gone"}, true},
	} {
		dir := t.TempDir()
		for name, content := range tt.files {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for name, target := range tt.links {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		if got := UsesCgo(dir); got != tt.want {
			t.Errorf("%s: UsesCgo = %v, want %v", tt.name, got, tt.want)
		}
		any := false
		for name, content := range tt.files {
			any = any || CgoFile(name, []byte(content))
		}
		for name := range tt.links {
			any = any || CgoLink(name)
		}
		if any != tt.want {
			t.Errorf("%s: CgoFile of its files = %v, want %v", tt.name, any, tt.want)
		}
	}
}

func TestCgoTreeEnv(t *testing.T) {
	got := CgoTreeEnv([]string{"PATH=/bin"}, "abc")
	want := []string{"CGO_CPPFLAGS=-DCTXGRAPHD_TREE_abc", "CGO_LDFLAGS=-O2 -g -L/ctxgraphd-tree-abc"}
	if !slices.Equal(got, want) {
		t.Errorf("CgoTreeEnv(no flags) = %q, want %q", got, want)
	}
	got = CgoTreeEnv([]string{"CGO_CPPFLAGS=-I/x", "CGO_LDFLAGS=-lm"}, "def")
	want = []string{"CGO_CPPFLAGS=-I/x -DCTXGRAPHD_TREE_def", "CGO_LDFLAGS=-lm -L/ctxgraphd-tree-def"}
	if !slices.Equal(got, want) {
		t.Errorf("CgoTreeEnv(the user's flags) = %q, want %q", got, want)
	}
}
