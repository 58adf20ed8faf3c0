// Package toolchain names the toolchains ctxgraphd knows by sight: how a
// project says it uses one (a file at its top), the program its tests run
// with, the hosts its package manager fetches from, and the command that
// fetches a project's dependencies ahead of time. The sandbox's default
// network allowlist is made of these hosts, the start-up check asks about
// the toolchains a project uses, and a test that could not reach a
// registry is told apart from a failing one by them: one table, so that
// the three agree.
package toolchain

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Toolchain is one language's tools, as a project's test runs need them.
type Toolchain struct {
	Name string
	// Markers are files at a project's top that say it uses the
	// toolchain.
	Markers []string
	// Programs are the names its program goes by on PATH, the usual
	// first: one of them must be there.
	Programs []string
	// Hosts are what its package manager fetches from by default, each
	// with what it serves there.
	Hosts []Host
	// Docs are where its documentation is read: hosts an agent's WebFetch
	// may read by default, and its programs may not reach.
	Docs []Host
	// Fetch says how a project's dependencies are downloaded where its
	// test runs find them without a network: the command, in backquotes,
	// and where it puts them when that matters.
	Fetch string
	// Warm is a shell command, run in a checkout of the project before
	// the daemon runs a test there, that fills the verdict's own caches
	// of compiled code and runs none of the project's code (compiling
	// only): the test run then sees those caches read-only, so that no
	// test can leave an entry in them that vouches for another tree's
	// build, and still finds what it needs compiled. "": the toolchain's
	// test runs keep no cache across runs.
	Warm string
}

// Host is a host a package manager fetches from.
type Host struct {
	Name string
	What string
}

// All are the toolchains ctxgraphd knows, in the order people read them.
var All = []Toolchain{
	{
		Name: "Go", Markers: []string{"go.mod"}, Programs: []string{"go"},
		Hosts: []Host{
			{"proxy.golang.org", "the Go module proxy (GOPROXY's default)"},
			{"sum.golang.org", "the Go checksum database (GOSUMDB's default)"},
			// That opens all of Cloud Storage, a way out for data, but Go
			// downloads need it.
			{"storage.googleapis.com", "where proxy.golang.org redirects module zips"},
		},
		Docs:  []Host{{"go.dev", "Go's documentation and specification"}, {"pkg.go.dev", "Go packages' documentation"}},
		Fetch: "`go mod download`",
		// -c compiles and links each package's test binary, into a
		// directory the jail discards, and runs none: go test's own
		// build of the same tree then finds every step cached.
		Warm: "go test -c -o /tmp/ctxgraphd-warm/ ./... >/dev/null 2>&1",
	},
	{
		Name: "Node", Markers: []string{"package.json"}, Programs: []string{"node"},
		Hosts: []Host{{"registry.npmjs.org", "npm's registry (package metadata and tarballs)"}},
		Docs: []Host{{"nodejs.org", "Node.js's documentation"}, {"developer.mozilla.org", "the JavaScript reference (MDN)"},
			{"docs.npmjs.com", "npm's documentation"}},
		Fetch: "`npm ci` (the test runs borrow the project's node_modules, read-only)",
	},
	{
		Name: "Python", Markers: []string{"pyproject.toml", "requirements.txt", "setup.py"}, Programs: []string{"python3", "python"},
		Hosts: []Host{
			{"pypi.org", "PyPI's index (pip's /simple/ pages)"},
			{"files.pythonhosted.org", "PyPI's package files"},
		},
		Docs:  []Host{{"docs.python.org", "Python's documentation"}, {"docs.pytest.org", "pytest's documentation"}},
		Fetch: "`pip install` into the project's .venv (the test runs borrow it, read-only)",
	},
	{
		Name: "Rust", Markers: []string{"Cargo.toml"}, Programs: []string{"cargo"},
		Hosts: []Host{
			{"crates.io", "crates.io's API and index"},
			{"index.crates.io", "Cargo's sparse index"},
			{"static.crates.io", "crate downloads"},
		},
		Docs:  []Host{{"doc.rust-lang.org", "Rust's documentation"}, {"docs.rs", "crates' documentation"}},
		Fetch: "`cargo fetch`",
	},
}

// Hosts are the hosts of every toolchain, in the order of All: the
// sandbox's default network allowlist.
func Hosts() []string { return names(func(t Toolchain) []Host { return t.Hosts }) }

// DocHosts are the documentation hosts of every toolchain, in the order of
// All: the hosts an agent's WebFetch may read by default besides the
// sandbox's allowlist.
func DocHosts() []string { return names(func(t Toolchain) []Host { return t.Docs }) }

// names are the names of the hosts of every toolchain that of picks.
func names(of func(Toolchain) []Host) []string {
	var out []string
	for _, t := range All {
		for _, h := range of(t) {
			out = append(out, h.Name)
		}
	}
	return out
}

// About says whose host host is, and what for, among every toolchain's
// registries and documentation.
func About(host string) (string, bool) {
	for _, t := range All {
		for _, h := range slices.Concat(t.Hosts, t.Docs) {
			if h.Name == host {
				return t.Name + ": " + h.What, true
			}
		}
	}
	return "", false
}

// ByHost is the toolchain that fetches from host, if one does by default.
func ByHost(host string) (Toolchain, bool) {
	for _, t := range All {
		if slices.ContainsFunc(t.Hosts, func(h Host) bool { return h.Name == host }) {
			return t, true
		}
	}
	return Toolchain{}, false
}

// Used are the toolchains whose markers are at dir's top, in the order of
// All.
func Used(dir string) []Toolchain {
	var out []Toolchain
	for _, t := range All {
		for _, m := range t.Markers {
			if fi, err := os.Stat(filepath.Join(dir, m)); err == nil && !fi.IsDir() {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// UsesCgo reports whether a Go file of the tree at dir imports "C". Go's
// build cache keys a cgo package by its own files and flags only: a header
// it includes from elsewhere in the tree, or a library it links from
// there, is not in the key, and a cache shared between trees would build
// one tree with another's. Which files count is CgoFile's; a link named
// as a Go file counts whatever it points to (CgoLink).
func UsesCgo(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || found:
			return filepath.SkipDir
		case d.IsDir() && cgoSkips(d.Name()):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(d.Name(), ".go"):
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			rel, err := filepath.Rel(dir, p)
			found = err != nil || CgoLink(filepath.ToSlash(rel))
			if found {
				return filepath.SkipAll
			}
			return nil
		}
		src, err := os.ReadFile(p)
		if err == nil && importsC(src) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// CgoFile reports whether the file at rel (slash-separated, relative to a
// tree) with content src is one that makes its tree use cgo (UsesCgo): a
// Go file, outside the directories git or the toolchains keep to
// themselves (.git, node_modules), that imports "C".
func CgoFile(rel string, src []byte) bool {
	return goOutsideSkips(rel) && importsC(src)
}

// CgoLink reports whether a symbolic link at rel (slash-separated,
// relative to a tree) makes its tree count as one that uses cgo: a link
// named as a Go file, outside .git and node_modules. Go builds what it
// points to, and a change of the target (not named as Go) can make it
// import "C" with no Go file of the tree changed, so such a tree counts
// as cgo's from the start, whatever the target says now.
func CgoLink(rel string) bool { return goOutsideSkips(rel) }

// goOutsideSkips reports whether rel names a Go file outside the
// directories git and the toolchains keep to themselves.
func goOutsideSkips(rel string) bool {
	if !strings.HasSuffix(rel, ".go") {
		return false
	}
	for _, dir := range strings.Split(path.Dir(rel), "/") {
		if cgoSkips(dir) {
			return false
		}
	}
	return true
}

func cgoSkips(dir string) bool { return dir == ".git" || dir == "node_modules" }

func importsC(src []byte) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ImportsOnly)
	if err != nil {
		return false
	}
	for _, im := range f.Imports {
		if im.Path.Value == `"C"` {
			return true
		}
	}
	return false
}

// CgoTreeEnv are the variables that make the cache keys of a tree's cgo
// builds the tree's own (tree: its id), given env's: a define no code
// reads and a library directory that does not exist, both named for the
// tree, added to what env sets (or to Go's defaults). Pure Go packages
// keep their keys, and are shared between trees as before.
func CgoTreeEnv(env []string, tree string) []string {
	get := func(k, def string) string {
		v := def
		for _, kv := range env {
			if x, ok := strings.CutPrefix(kv, k+"="); ok {
				v = x
			}
		}
		return v
	}
	salt := "ctxgraphd-tree-" + tree
	return []string{
		"CGO_CPPFLAGS=" + strings.TrimSpace(get("CGO_CPPFLAGS", "")+" -DCTXGRAPHD_TREE_"+tree),
		"CGO_LDFLAGS=" + strings.TrimSpace(get("CGO_LDFLAGS", "-O2 -g")+" -L/"+salt),
	}
}

// DependencyDirs are the directories at a project's top that hold what a
// build installs and git does not carry: where a tree the daemon tests has
// none, the run's work tree's is lent to the test, read-only (judge); a
// run on a worker sends its own back with its result (fleet).
var DependencyDirs = []string{"node_modules", ".venv", "venv"}
