package toolchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSafeSetupOf: what the daemon fetches by itself for each layout of
// manifests, and where it asks for a setup instead: never a fetch that
// runs code (install scripts, a source build, a toolchain download), never
// one nothing verifies.
func TestSafeSetupOf(t *testing.T) {
	const (
		goStep   = "GOTOOLCHAIN=local go mod download"
		npmStep  = "npm ci --ignore-scripts --no-audit --no-fund"
		pipStep  = "python3 -m venv .venv && .venv/bin/python -m pip install --only-binary=:all: --no-input --disable-pip-version-check -r requirements.txt"
		pipAgain = ".venv/bin/python -m pip install --only-binary=:all: --no-input --disable-pip-version-check -r requirements.txt"
	)
	lock := func(pkgs string) string { return `{"lockfileVersion": 3, "packages": {` + pkgs + `}}` }
	for _, tc := range []struct {
		name  string
		files map[string]string
		steps []string
		ask   []string // a word each request must hold
	}{
		{"nothing", nil, nil, nil},
		{"go with go.sum", map[string]string{"go.mod": "module m\n\nrequire golang.org/x/mod v0.17.0\n", "go.sum": "x"}, []string{goStep}, nil},
		{"go without requirements", map[string]string{"go.mod": "module m\n\ngo 1.22\n"}, nil, nil},
		{"go requires without go.sum", map[string]string{"go.mod": "module m\n\nrequire (\n\tgolang.org/x/mod v0.17.0\n)\n"}, nil, []string{"go.sum"}},
		{"npm with a lock", map[string]string{"package.json": `{"dependencies": {"a": "1"}}`, "package-lock.json": lock(`"": {}, "node_modules/a": {"version": "1.0.0"}`)}, []string{npmStep}, nil},
		{"npm with a shrinkwrap", map[string]string{"package.json": `{}`, "npm-shrinkwrap.json": lock(`"node_modules/a": {}`)}, []string{npmStep}, nil},
		{"npm with install scripts", map[string]string{"package.json": `{}`, "package-lock.json": lock(`"node_modules/esbuild": {"hasInstallScript": true}, "node_modules/b": {"hasInstallScript": false}`)}, nil, []string{"(esbuild), which the daemon does not run by itself: give `setup: npm ci`"}},
		{"npm without a lock, with dependencies", map[string]string{"package.json": `{"devDependencies": {"a": "^1"}}`}, nil, []string{"package-lock.json"}},
		{"npm without a lock or dependencies", map[string]string{"package.json": `{"name": "x", "dependencies": {}}`}, nil, nil},
		{"npm, a package.json that is not JSON", map[string]string{"package.json": `{`}, nil, nil},
		{"pip", map[string]string{"requirements.txt": "x==1\n"}, []string{pipStep}, nil},
		{"pip into a venv there", map[string]string{"requirements.txt": "x==1\n", ".venv/bin/python": "#!"}, []string{pipAgain}, nil},
		{"a python package", map[string]string{"pyproject.toml": "[project]\n"}, nil, []string{"runs its build"}},
		{"a setup.py", map[string]string{"setup.py": ""}, nil, []string{"runs its build"}},
		{"every toolchain", map[string]string{"go.mod": "module m\n", "go.sum": "", "package.json": `{}`, "package-lock.json": lock(``), "requirements.txt": ""}, []string{goStep, npmStep, pipStep}, nil},
		{"a manifest that is a directory", map[string]string{"go.sum/x": "", "go.mod": "module m\nrequire a v1\n"}, nil, []string{"go.sum"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := SafeSetupOf(dir)
			if strings.Join(s.Steps, "\n") != strings.Join(tc.steps, "\n") {
				t.Errorf("steps %q, want %q", s.Steps, tc.steps)
			}
			if s.Script != strings.Join(tc.steps, " && ") {
				t.Errorf("script %q, want the steps joined", s.Script)
			}
			if len(s.Ask) != len(tc.ask) {
				t.Fatalf("asks %q, want %d holding %q", s.Ask, len(tc.ask), tc.ask)
			}
			for i, w := range tc.ask {
				if !strings.Contains(s.Ask[i], w) {
					t.Errorf("ask %q lacks %q", s.Ask[i], w)
				}
			}
		})
	}
}

// IsManifest knows the manifests and locks at any depth, and not files
// whose names come near them.
func TestIsManifest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"go.mod", true}, {"go.sum", true}, {"sub/module/go.mod", true}, {"go.work", true},
		{"package.json", true}, {"web/package-lock.json", true}, {"yarn.lock", true}, {"pnpm-lock.yaml", true}, {".npmrc", true},
		{"requirements.txt", true}, {"requirements-test.txt", true}, {"pyproject.toml", true}, {"poetry.lock", true}, {"setup.cfg", true},
		{"Cargo.toml", true}, {"crates/x/Cargo.lock", true},
		{"go.mod.bak", false}, {"xgo.mod", false}, {"go.mod/readme", false}, {"package.jsonc", false}, {"my-package.json", false},
		{"requirements", false}, {"requirements.txt.orig", false}, {"docs/requirements.md", false}, {"main.go", false}, {"", false},
	} {
		if got := IsManifest(tc.path); got != tc.want {
			t.Errorf("IsManifest(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
