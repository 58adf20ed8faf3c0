package progress

import "testing"

// TestSharedManifest: the manifests and lock files of the toolchains, at
// the top and in nested projects, are shared; the names beside them that
// only look alike are not.
func TestSharedManifest(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"package.json", true},
		{"package-lock.json", true},
		{"npm-shrinkwrap.json", true},
		{"yarn.lock", true},
		{"pnpm-lock.yaml", true},
		{"bun.lockb", true},
		{"go.mod", true},
		{"go.sum", true},
		{"go.work", true},
		{"go.work.sum", true},
		{"requirements.txt", true},
		{"requirements-dev.txt", true},
		{"requirements_test.txt", true},
		{"requirements/base.txt", true},
		{"pyproject.toml", true},
		{"uv.lock", true},
		{"poetry.lock", true},
		{"Pipfile.lock", true},
		{"Cargo.toml", true},
		{"Cargo.lock", true},
		{"Gemfile.lock", true},
		{"composer.json", true},

		// Nested projects: a workspace member, a second module, a front end.
		{"packages/ui/package.json", true},
		{"web/package-lock.json", true},
		{"src/package-lock.json", true},
		{"tools/go.mod", true},
		{"tools/go.sum", true},
		{"crates/core/Cargo.toml", true},
		{"services/api/requirements.txt", true},

		// Near misses: copies, other files of the same family, other cases.
		{"package.json.bak", false},
		{"package.json~", false},
		{"old-package.json", false},
		{"package-lock.json.orig", false},
		{"requirements.txt.orig", false},
		{"requirements.md", false},
		{"dev-requirements.in", false},
		{"requirements/README.md", false},
		{"go.mod.bak", false},
		{"go.summary", false},
		{"Go.mod", false},
		{"cargo.toml", false},
		{"PACKAGE.JSON", false},
		{"tsconfig.json", false},
		{".npmrc", false},
		{"setup.py", false},
		{"Makefile", false},
		{"src/main.go", false},
		{"package.json/index.js", false}, // a directory of that name holds ordinary files

		// Other people's manifests, and fixtures: never the project's own.
		{"node_modules/is-number/package.json", false},
		{"web/node_modules/left-pad/package.json", false},
		{"vendor/github.com/google/uuid/go.mod", false},
		{"testdata/go.mod", false},
		{"internal/x/testdata/mod/go.sum", false},
		{".venv/lib/python3.11/site-packages/x/pyproject.toml", false},
		{"lib/site-packages/x/requirements.txt", false},
		{".claude/ctxgraphd/package.json", false},
		{".git/package.json", false},
		{"../package.json", false},
		{"./package.json", false},
		{"a//package.json", false},
	}
	for _, tt := range tests {
		if got := SharedManifest(tt.path); got != tt.want {
			t.Errorf("SharedManifest(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestOnlySharedManifest: a scope glob is all shared manifest only when it
// names one, as the scope gate reads it; a wildcard may reach other files.
func TestOnlySharedManifest(t *testing.T) {
	tests := []struct {
		glob string
		want bool
	}{
		{"package.json", true},
		{"./go.sum", true},
		{"web/package-lock.json", true},
		{`web\package.json`, false},  // an escape to doublestar, a separator to the gate
		{"**/package.json", false},   // node_modules/x/package.json too
		{"requirements*.txt", false}, // a wildcard: judged as any glob
		{"package.json.bak", false},
		{"testdata/go.mod", false},
		{"src/**", false},
		{"**", false},
	}
	for _, tt := range tests {
		if got := OnlySharedManifest(tt.glob); got != tt.want {
			t.Errorf("OnlySharedManifest(%q) = %v, want %v", tt.glob, got, tt.want)
		}
	}
}
