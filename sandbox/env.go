package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// CacheDirs returns the directories outside the project that honest Go,
// Node and Python work writes, found in env (KEY=VALUE entries, the last
// one of a key winning, as in exec.Cmd): Go's build and module caches and
// GOTMPDIR; the caches of npm, yarn, pnpm and node-gyp; pip's and uv's
// caches; Cargo's registry and git directories when Rust is around; and
// $TMPDIR when it is set. Without them in Policy.AllowWrite, `go test` or
// `npm install` fail in the sandbox with "read-only file system". Paths are
// absolute, cleaned and deduplicated; a variable holding a relative path is
// ignored, as the tools themselves refuse it or resolve it against the
// directory of the moment.
//
// Configuration is left out on purpose: not ~/.config (where `go env -w`
// writes), ~/.npmrc, ~/.gitconfig, pip.conf, nor anything else whose content
// changes how later runs behave. An agent that could write there would
// change the daemon's own test runs, which judge its work, and every later
// agent's. For the same reason Go's settings from `go env -w` are not read
// here: pass GOCACHE and GOMODCACHE in the environment to move the caches.
//
// Caches are not inert either: Go trusts what its build cache and module
// cache hold, and pip reuses the wheels it cached. The daemon's own test
// runs must therefore not share these directories with the agents (give
// them their own GOCACHE and GOMODCACHE, or the agents theirs).
func CacheDirs(env []string) []string {
	return cacheDirs(env, runtime.GOOS)
}

func cacheDirs(env []string, goos string) []string {
	var dirs []string
	for _, c := range caches(env, goos) {
		dirs = append(dirs, c.Dir)
	}
	return absUnique(dirs)
}

// AgentWritable is the one definition of where an agent's run may write
// outside its work tree: the toolchains' caches of env (CacheDirs), what a
// person named in sandbox.allow_write, and the temp directory Claude Code
// gives the run (TempDir). The sandbox's policy lets the run's programs
// write exactly these, and the hooks let its Write and Edit tools write
// exactly these, so that no file tool reaches what no program can.
//
// A directory that holds one of keepOut (or is one) is left out and
// returned in dropped: the project, another lane's clone, the daemon's
// state and the checkouts it tests live below the places keepOut names
// (the system's temp directory among them, where demo, CI and tests put
// them), and a cache or allow_write entry above them would open them all.
// The caller says so to the person, who moves the cache.
func AgentWritable(env, allowWrite []string, keepOut ...string) (dirs, dropped []string) {
	all := absUnique(slices.Concat(CacheDirs(env), allowWrite, []string{TempDir(env)}))
	// Compared as written and as their links resolve, as the hooks judge
	// a path: a cache that is a link to the project's parent holds it.
	var out []string
	for _, k := range keepOut {
		if filepath.IsAbs(k) {
			out = append(out, resolved(filepath.Clean(k))...)
		}
	}
	for _, d := range all {
		if slices.ContainsFunc(out, func(k string) bool { return within(k, resolved(d)) }) {
			dropped = append(dropped, d)
			continue
		}
		dirs = append(dirs, d)
	}
	return dirs, dropped
}

// resolved is p, and where its links lead when that is elsewhere.
func resolved(p string) []string {
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		return []string{p, real}
	}
	return []string{p}
}

// Cache is a directory outside the project that a toolchain writes.
type Cache struct {
	// Toolchain is its toolchain, by toolchain.All's name.
	Toolchain string
	// What it holds, and Var, the variable that moves it.
	What, Var string
	Dir       string
	// Essential: the toolchain's usual work fails without it, where the
	// others serve a tool not every project of it uses (yarn, pnpm, uv).
	// The start-up check asks about these.
	Essential bool
}

// DependencyDirs are the caches of env that a test reads its dependencies
// from when it runs (Go's module cache, Cargo's registry and git
// checkouts): the daemon's test runs see them, read-only, and no other
// directory agents may write (see TestJail.Hide).
func DependencyDirs(env []string) []string {
	var dirs []string
	for _, c := range caches(env, runtime.GOOS) {
		if c.Var == "GOMODCACHE" || c.Var == "CARGO_HOME" {
			dirs = append(dirs, c.Dir)
		}
	}
	return absUnique(dirs)
}

// GoModCache is Go's module cache in env ("" when env says nothing of
// where it would be).
func GoModCache(env []string) string {
	for _, c := range caches(env, runtime.GOOS) {
		if c.Var == "GOMODCACHE" && filepath.IsAbs(c.Dir) {
			return c.Dir
		}
	}
	return ""
}

// caches are CacheDirs' directories, each with what it is, in CacheDirs'
// order; a Dir may be empty or relative, which CacheDirs
// leaves out.
func caches(env []string, goos string) []Cache {
	get := lookup(env)
	home := get("HOME")
	// userCache is os.UserCacheDir's answer for env, which is where Go,
	// yarn, pnpm, node-gyp and pip put their caches by default.
	userCache := join(home, ".cache")
	if x := get("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		userCache = x
	}
	if goos == "darwin" {
		userCache = join(home, "Library", "Caches")
	}
	first := func(vals ...string) string {
		for _, v := range vals {
			if v != "" {
				return v
			}
		}
		return ""
	}

	var out []Cache
	// Go: `go env GOCACHE`, `go env GOMODCACHE`, GOTMPDIR.
	if c := get("GOCACHE"); c != "off" {
		out = append(out, Cache{"Go", "its build cache", "GOCACHE", first(c, join(userCache, "go-build")), true})
	}
	gopath, _, _ := strings.Cut(get("GOPATH"), string(filepath.ListSeparator))
	out = append(out, Cache{"Go", "its module cache", "GOMODCACHE", first(get("GOMODCACHE"), join(gopath, "pkg", "mod"), join(home, "go", "pkg", "mod")), true})
	// The checksum database's state (the signed tree head it has seen,
	// "latest"), which `go get` and `go mod tidy` write when they verify a
	// module new to go.sum: $GOPATH/pkg/sumdb, beside the module cache only
	// by default, whatever GOMODCACHE says. Its tiles go in the module
	// cache (cache/download/sumdb).
	out = append(out, Cache{"Go", "its checksum database's state", "GOPATH", first(join(gopath, "pkg", "sumdb"), join(home, "go", "pkg", "sumdb")), true})
	out = append(out, Cache{"Go", "its temporary builds", "GOTMPDIR", get("GOTMPDIR"), false})

	// Node: npm's cache (its logs live there too), yarn 1's cache and
	// yarn 2+'s global folder, pnpm's store and cache, node-gyp's headers.
	out = append(out, Cache{"Node", "npm's cache", "npm_config_cache", first(get("npm_config_cache"), get("NPM_CONFIG_CACHE"), join(home, ".npm")), true})
	yarnCache, pnpmStore := join(userCache, "yarn"), join(first(abs(get("XDG_DATA_HOME")), join(home, ".local", "share")), "pnpm", "store")
	if goos == "darwin" {
		yarnCache, pnpmStore = join(userCache, "Yarn"), join(home, "Library", "pnpm", "store")
	}
	out = append(out,
		Cache{"Node", "yarn's cache", "YARN_CACHE_FOLDER", first(get("YARN_CACHE_FOLDER"), yarnCache), false},
		Cache{"Node", "yarn's global folder", "YARN_GLOBAL_FOLDER", first(get("YARN_GLOBAL_FOLDER"), join(home, ".yarn", "berry")), false},
		Cache{"Node", "pnpm's store", "npm_config_store_dir", first(get("npm_config_store_dir"), get("NPM_CONFIG_STORE_DIR"), pnpmStore), false},
		Cache{"Node", "pnpm's cache", "XDG_CACHE_HOME", join(userCache, "pnpm"), false},
		Cache{"Node", "node-gyp's headers", "npm_config_devdir", first(get("npm_config_devdir"), get("NPM_CONFIG_DEVDIR"), join(userCache, "node-gyp")), false},
	)

	// Python: pip's cache; uv's, which is $XDG_CACHE_HOME/uv or
	// ~/.cache/uv on macOS too.
	out = append(out, Cache{"Python", "pip's cache", "PIP_CACHE_DIR", first(get("PIP_CACHE_DIR"), join(userCache, "pip")), true})
	uvCache := join(home, ".cache", "uv")
	if x := get("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		uvCache = join(x, "uv")
	}
	out = append(out, Cache{"Python", "uv's cache", "UV_CACHE_DIR", first(get("UV_CACHE_DIR"), uvCache), false})

	// Rust, when it is around: only the registry (index, crate files,
	// sources) and the git checkouts of $CARGO_HOME. Never CARGO_HOME
	// itself: config.toml and credentials.toml live there, and bin/ is on
	// PATH, where an agent's own `go` or `sh` would take over later runs.
	if cargoHome := first(abs(get("CARGO_HOME")), join(home, ".cargo")); rustAround(get, cargoHome) {
		out = append(out,
			Cache{"Rust", "Cargo's registry", "CARGO_HOME", join(cargoHome, "registry"), true},
			Cache{"Rust", "Cargo's git checkouts", "CARGO_HOME", join(cargoHome, "git"), true})
	}
	return out
}

// rustAround reports whether Rust's tools are installed for env: CARGO_HOME
// or RUSTUP_HOME is set, cargoHome exists, or cargo is on env's PATH. A home
// without Rust gets no ~/.cargo made for it.
func rustAround(get func(string) string, cargoHome string) bool {
	if get("CARGO_HOME") != "" || get("RUSTUP_HOME") != "" {
		return true
	}
	if fi, err := os.Stat(cargoHome); err == nil && fi.IsDir() {
		return true
	}
	for _, dir := range filepath.SplitList(get("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, "cargo")); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// TempDir returns the directory Claude Code gives sandboxed commands as
// their TMPDIR, $CLAUDE_CODE_TMPDIR/claude-<uid> or by default
// /tmp/claude-<uid> (seen with Claude Code 2.1.330 on Linux). The CLI makes
// it writable in every run whatever the policy says, and every run of the
// same user shares it: it belongs in VerdictEnv's agentWritable. Setting
// CLAUDE_CODE_TMPDIR per project keeps projects out of each other's temp
// files; keep it short (about 30 bytes at most), as the CLI binds Unix
// sockets below it.
func TempDir(env []string) string {
	base := lookup(env)("CLAUDE_CODE_TMPDIR")
	if !filepath.IsAbs(base) {
		base = "/tmp"
	}
	return filepath.Join(base, "claude-"+strconv.Itoa(os.Getuid()))
}

// ByproductEnv returns the variables that send what Python and pytest
// write beside the code they run to dir, a directory every run may write
// outside the project (TempDir): bytecode (PYTHONPYCACHEPREFIX, which
// pytest's rewritten test modules follow too) and pytest's cache (`-o
// cache_dir=…` added to PYTEST_ADDOPTS, so that --lf and --ff still work).
// In the project they are changes of the run like any other: out of a
// coding agent's scope, a tester changing what it judges, a .gitignore
// (pytest puts one in its cache) that only a person writes, a write where
// the frozen tests live, each refused and put back, for honest work. A
// project whose committed .gitignore names them never met this; a new one
// did, on the first pytest. What env already says stays: a
// PYTHONPYCACHEPREFIX of the user's is kept, PYTEST_ADDOPTS is extended.
func ByproductEnv(env []string, dir string) []string {
	if !filepath.IsAbs(dir) {
		return nil
	}
	get := lookup(env)
	var out []string
	if get("PYTHONPYCACHEPREFIX") == "" {
		out = append(out, "PYTHONPYCACHEPREFIX="+filepath.Join(dir, "pycache"))
	}
	// pytest splits PYTEST_ADDOPTS as a POSIX shell would (shlex).
	opt := "-o " + shellQuote("cache_dir="+filepath.Join(dir, "pytest-cache"))
	if prev := strings.TrimSpace(get("PYTEST_ADDOPTS")); prev != "" {
		opt = prev + " " + opt
	}
	return append(out, "PYTEST_ADDOPTS="+opt)
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// VerdictEnv returns the environment in which the daemon itself runs a
// feature's test: env (the daemon's environment, captured at start) with
// every PATH entry removed that is empty or relative, or inside projectDir
// or one of agentWritable (Policy.AllowWrite and TempDir).
//
// The daemon runs the test to judge what an agent did, so nothing an agent
// wrote may take part in the judging: an agent that can put a `go`, `sh` or
// `python3` of its own in a directory on PATH gets to print the verdict. An
// empty or relative entry names a directory relative to where the test
// runs, which is the project. Symlinks are resolved on both sides, so an
// entry that only leads into such a directory goes too. Entries are
// otherwise kept in order, and the other variables as they are: PATH is
// not the only way in (see CacheDirs on the caches), but it is the one
// that hands an agent the verdict outright.
func VerdictEnv(env []string, projectDir string, agentWritable []string) []string {
	var roots []string
	for _, d := range append([]string{projectDir}, agentWritable...) {
		if d == "" {
			continue
		}
		if a, err := filepath.Abs(d); err == nil {
			roots = append(roots, a)
			if r, err := filepath.EvalSymlinks(a); err == nil {
				roots = append(roots, r)
			}
		}
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		path, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			out = append(out, kv)
			continue
		}
		var kept []string
		for _, dir := range filepath.SplitList(path) {
			if filepath.IsAbs(dir) && !insideAny(dir, roots) {
				kept = append(kept, dir)
			}
		}
		out = append(out, "PATH="+strings.Join(kept, string(filepath.ListSeparator)))
	}
	return out
}

// insideAny reports whether dir, as written or with its symlinks resolved,
// is one of roots or below one.
func insideAny(dir string, roots []string) bool {
	forms := []string{filepath.Clean(dir)}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		forms = append(forms, r)
	}
	for _, f := range forms {
		for _, root := range roots {
			if rel, err := filepath.Rel(root, f); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}

// lookup returns a getter for env in which the last entry of a key wins.
func lookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

// join is filepath.Join that keeps a missing base missing: without a HOME
// there is no $HOME/.cache.
func join(base string, elem ...string) string {
	if base == "" {
		return ""
	}
	return filepath.Join(append([]string{base}, elem...)...)
}

func abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return ""
}

// absUnique keeps the absolute paths, cleaned, each once, in order.
func absUnique(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
