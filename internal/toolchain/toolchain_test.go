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
