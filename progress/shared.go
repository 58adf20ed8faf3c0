package progress

import "strings"

// manifestNames are the file names of the dependency manifests and lock
// files of the toolchains ctxgraphd knows, which the toolchains' own
// commands write (`npm install x`, `go get`, `uv add`, `cargo add`).
var manifestNames = map[string]bool{
	// Node
	"package.json": true, "package-lock.json": true, "npm-shrinkwrap.json": true,
	"yarn.lock": true, "pnpm-lock.yaml": true, "bun.lock": true, "bun.lockb": true,
	// Go
	"go.mod": true, "go.sum": true, "go.work": true, "go.work.sum": true,
	// Python (requirements*.txt below)
	"pyproject.toml": true, "uv.lock": true, "poetry.lock": true, "pdm.lock": true,
	"Pipfile": true, "Pipfile.lock": true,
	// Rust
	"Cargo.toml": true, "Cargo.lock": true,
	// Ruby, PHP
	"Gemfile": true, "Gemfile.lock": true, "composer.json": true, "composer.lock": true,
}

// notProjectDirs hold other people's manifests (installed packages,
// vendored modules) or fixtures, never the project's own: a go.mod under
// testdata is a test's input, a package.json under node_modules is a
// package's.
var notProjectDirs = map[string]bool{"node_modules": true, "vendor": true, "testdata": true, "site-packages": true}

// SharedManifest reports whether rel (project-relative, forward slashes) is
// one of the project's dependency manifests or lock files: package.json,
// package-lock.json, go.mod, go.sum, requirements*.txt, pyproject.toml,
// Cargo.lock and the like (manifestNames), at the top or in a nested
// project (a workspace member, a second Go module, a front end beside a
// back end: each toolchain writes its lock beside its manifest), but not
// inside node_modules, vendor, testdata, site-packages or a hidden
// directory. Names match exactly: a copy (package.json.bak,
// requirements.txt.orig) is an ordinary file.
//
// They are shared: any feature may change them whatever its scope, since
// adding a dependency writes them wherever the feature's code lies. This
// is the one rule, read by the scope gate (gates), in the hooks and in the
// verdict's change set alike, and by the lanes' overlap of scopes
// (statemachine.ScopesOverlap). Two lanes that change one meet in the
// merge queue as any two changes do: the second to land that conflicts
// starts again on the branch as it is.
func SharedManifest(rel string) bool {
	dirs := strings.Split(rel, "/")
	base := dirs[len(dirs)-1]
	for _, d := range dirs[:len(dirs)-1] {
		if d == "" || d == "." || d == ".." || strings.HasPrefix(d, ".") || notProjectDirs[d] {
			return false
		}
	}
	if manifestNames[base] {
		return true
	}
	// requirements.txt, requirements-dev.txt, requirements_test.txt;
	// requirements/base.txt as pip-tools lays them out.
	if strings.HasSuffix(base, ".txt") && (strings.HasPrefix(base, "requirements") ||
		len(dirs) > 1 && dirs[len(dirs)-2] == "requirements") {
		return true
	}
	return false
}

// OnlySharedManifest reports whether every path a scope glob matches is a
// shared manifest (SharedManifest): it names one such path, with no
// wildcard or escape. Two scopes that meet only on such globs do not keep their
// features out of lanes at once.
func OnlySharedManifest(glob string) bool {
	// A backslash is an escape to doublestar and a separator to the
	// gate (ScopePattern): a glob read two ways is judged as any glob.
	return !strings.ContainsAny(glob, "*?[]{}\\") && SharedManifest(ScopePattern(glob))
}
