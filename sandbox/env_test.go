package sandbox

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCacheDirs(t *testing.T) {
	tests := []struct {
		name string
		goos string
		env  []string
		want []string
	}{
		{
			name: "linux defaults come from HOME",
			goos: "linux",
			env:  []string{"HOME=/home/u", "PATH=/usr/bin"},
			want: []string{
				"/home/u/.cache/go-build", "/home/u/go/pkg/mod", "/home/u/go/pkg/sumdb",
				"/home/u/.npm", "/home/u/.cache/yarn", "/home/u/.yarn/berry", "/home/u/.local/share/pnpm/store",
				"/home/u/.cache/pnpm", "/home/u/.cache/node-gyp",
				"/home/u/.cache/pip", "/home/u/.cache/uv",
			},
		},
		{
			name: "XDG directories move the defaults",
			goos: "linux",
			env:  []string{"HOME=/home/u", "XDG_CACHE_HOME=/xdg/cache", "XDG_DATA_HOME=/xdg/data"},
			want: []string{
				"/xdg/cache/go-build", "/home/u/go/pkg/mod", "/home/u/go/pkg/sumdb",
				"/home/u/.npm", "/xdg/cache/yarn", "/home/u/.yarn/berry", "/xdg/data/pnpm/store",
				"/xdg/cache/pnpm", "/xdg/cache/node-gyp",
				"/xdg/cache/pip", "/xdg/cache/uv",
			},
		},
		{
			name: "each tool's own variable wins; the checksum database's state follows GOPATH, not GOMODCACHE; GOTMPDIR counts, TMPDIR does not (Claude Code gives runs a temp of its own)",
			goos: "linux",
			env: []string{
				"HOME=/home/u", "XDG_CACHE_HOME=/xdg",
				"GOCACHE=/c/go", "GOMODCACHE=/c/mod", "GOPATH=/gopath", "GOTMPDIR=/c/gotmp",
				"npm_config_cache=/c/npm", "YARN_CACHE_FOLDER=/c/yarn", "YARN_GLOBAL_FOLDER=/c/berry",
				"npm_config_store_dir=/c/pnpm-store", "npm_config_devdir=/c/gyp",
				"PIP_CACHE_DIR=/c/pip/", "TMPDIR=/var/tmp/u",
			},
			want: []string{
				"/c/go", "/c/mod", "/gopath/pkg/sumdb", "/c/gotmp",
				"/c/npm", "/c/yarn", "/c/berry", "/c/pnpm-store", "/xdg/pnpm", "/c/gyp",
				"/c/pip", "/xdg/uv",
			},
		},
		{
			name: "the module cache and the checksum database's state are in the first GOPATH entry; upper-case npm variables work",
			goos: "linux",
			env:  []string{"HOME=/home/u", "GOPATH=/gp1:/gp2", "NPM_CONFIG_CACHE=/npm", "NPM_CONFIG_STORE_DIR=/store", "NPM_CONFIG_DEVDIR=/gyp"},
			want: []string{
				"/home/u/.cache/go-build", "/gp1/pkg/mod", "/gp1/pkg/sumdb",
				"/npm", "/home/u/.cache/yarn", "/home/u/.yarn/berry", "/store",
				"/home/u/.cache/pnpm", "/gyp",
				"/home/u/.cache/pip", "/home/u/.cache/uv",
			},
		},
		{
			name: "darwin keeps caches in Library, but uv follows XDG there too",
			goos: "darwin",
			env:  []string{"HOME=/Users/u", "XDG_CACHE_HOME=/ignored", "TMPDIR=/var/folders/xy/T/"},
			want: []string{
				"/Users/u/Library/Caches/go-build", "/Users/u/go/pkg/mod", "/Users/u/go/pkg/sumdb",
				"/Users/u/.npm", "/Users/u/Library/Caches/Yarn", "/Users/u/.yarn/berry", "/Users/u/Library/pnpm/store",
				"/Users/u/Library/Caches/pnpm", "/Users/u/Library/Caches/node-gyp",
				"/Users/u/Library/Caches/pip", "/ignored/uv",
			},
		},
		{
			name: "GOCACHE=off has no cache; relative paths are dropped; the last entry of a key wins",
			goos: "linux",
			env:  []string{"HOME=/home/u", "GOCACHE=off", "GOMODCACHE=rel/mod", "XDG_CACHE_HOME=rel", "PIP_CACHE_DIR=/first", "PIP_CACHE_DIR=/second", "TMPDIR=tmp"},
			want: []string{
				"/home/u/go/pkg/sumdb",
				"/home/u/.npm", "/home/u/.cache/yarn", "/home/u/.yarn/berry", "/home/u/.local/share/pnpm/store",
				"/home/u/.cache/pnpm", "/home/u/.cache/node-gyp",
				"/second", "/home/u/.cache/uv",
			},
		},
		{
			name: "without HOME only what the variables say",
			goos: "linux",
			env:  []string{"GOCACHE=/c/go", "TMPDIR=/tmp"},
			want: []string{"/c/go"},
		},
		{
			name: "duplicates appear once",
			goos: "linux",
			env:  []string{"HOME=/h", "GOCACHE=/c", "GOMODCACHE=/c/", "PIP_CACHE_DIR=/c", "TMPDIR=/c"},
			want: []string{
				"/c", "/h/go/pkg/sumdb",
				"/h/.npm", "/h/.cache/yarn", "/h/.yarn/berry", "/h/.local/share/pnpm/store",
				"/h/.cache/pnpm", "/h/.cache/node-gyp", "/h/.cache/uv",
			},
		},
		{
			name: "uv's own variable wins",
			goos: "linux",
			env:  []string{"GOCACHE=off", "UV_CACHE_DIR=/c/uv"},
			want: []string{"/c/uv"},
		},
		{
			name: "CARGO_HOME: only its registry and git, never itself (config.toml, credentials, bin on PATH)",
			goos: "linux",
			env:  []string{"GOCACHE=off", "CARGO_HOME=/opt/cargo"},
			want: []string{"/opt/cargo/registry", "/opt/cargo/git"},
		},
		{
			name: "rustup without CARGO_HOME: the default ~/.cargo",
			goos: "darwin",
			env:  []string{"HOME=/Users/u", "GOCACHE=off", "GOMODCACHE=/m", "npm_config_cache=/m", "YARN_CACHE_FOLDER=/m", "YARN_GLOBAL_FOLDER=/m", "npm_config_store_dir=/m", "npm_config_devdir=/m", "PIP_CACHE_DIR=/m", "UV_CACHE_DIR=/m", "RUSTUP_HOME=/Users/u/.rustup"},
			want: []string{"/m", "/Users/u/go/pkg/sumdb", "/Users/u/Library/Caches/pnpm", "/Users/u/.cargo/registry", "/Users/u/.cargo/git"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cacheDirs(tt.env, tt.goos)
			if !slices.Equal(got, tt.want) {
				t.Errorf("cacheDirs:\n got  %q\n want %q", got, tt.want)
			}
			for _, d := range got {
				if strings.HasPrefix(d, "/home/u/.config") || strings.HasSuffix(d, "rc") || strings.HasSuffix(d, "cargo") || strings.HasSuffix(d, "bin") {
					t.Errorf("%s is configuration, not a cache", d)
				}
			}
		})
	}
}

func TestTempDir(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	tests := []struct {
		env  []string
		want string
	}{
		{nil, "/tmp/claude-" + uid},
		{[]string{"CLAUDE_CODE_TMPDIR=/run/ctx/p1/"}, "/run/ctx/p1/claude-" + uid},
		{[]string{"CLAUDE_CODE_TMPDIR=relative"}, "/tmp/claude-" + uid},
	}
	for _, tt := range tests {
		if got := TempDir(tt.env); got != tt.want {
			t.Errorf("TempDir(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestAgentWritable holds the one list of where a run may write outside
// its tree: caches, allow_write and Claude Code's temp, in that order, and
// never a directory that holds a place kept out, however it is named.
func TestAgentWritable(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	claudeTmp := "/tmp/cgt-p1/claude-" + uid
	base := []string{"GOCACHE=/h/.cache/go-build", "GOMODCACHE=/h/go/pkg/mod", "npm_config_cache=/h/.npm",
		"YARN_CACHE_FOLDER=/h/.cache/yarn", "YARN_GLOBAL_FOLDER=/h/.yarn/berry", "npm_config_store_dir=/h/pnpm",
		"npm_config_devdir=/h/gyp", "PIP_CACHE_DIR=/h/.cache/pip", "UV_CACHE_DIR=/h/.cache/uv", "CLAUDE_CODE_TMPDIR=/tmp/cgt-p1"}
	caches := []string{"/h/.cache/go-build", "/h/go/pkg/mod", "/h/.npm", "/h/.cache/yarn", "/h/.yarn/berry", "/h/pnpm", "/h/gyp", "/h/.cache/pip", "/h/.cache/uv"}
	// Where demo, CI and the tests lay things out: all under /tmp.
	keepOut := []string{"/tmp/proj", "/tmp/state/ctxgraphd", "/tmp/run", "/tmp", "/h"}
	tests := []struct {
		name          string
		env, allow    []string
		want, dropped []string
	}{
		{"caches, then allow_write, then Claude Code's temp", base, []string{"/data/scratch"},
			slices.Concat(caches, []string{"/data/scratch", claudeTmp}), nil},
		{"TMPDIR is not a cache, whatever it names", append(slices.Clone(base), "TMPDIR=/tmp"), nil,
			slices.Concat(caches, []string{claudeTmp}), nil},
		{"allow_write of the system temp, the root, a parent of the project or the home is dropped", base,
			[]string{"/tmp", "/", "/tmp/", "/h", "/tmp/state", "/tmp/proj", "/tmp/proj/..", "/tmp/proj/sub"},
			slices.Concat(caches, []string{"/tmp/proj/sub", claudeTmp}),
			[]string{"/tmp", "/", "/h", "/tmp/state", "/tmp/proj"}},
		{"near misses of a kept-out place stay: /tmp/projx is not /tmp/proj", base,
			[]string{"/tmp/projx", "/tmp/pro", "/tmp/state/ctxgraphd-other", "/tmpx"},
			slices.Concat(caches, []string{"/tmp/projx", "/tmp/pro", "/tmp/state/ctxgraphd-other", "/tmpx", claudeTmp}), nil},
		{"a cache set to the system temp is dropped, and so is one above the project", append(slices.Clone(base), "GOCACHE=/tmp", "PIP_CACHE_DIR=/"), nil,
			slices.Concat([]string{"/h/go/pkg/mod", "/h/.npm", "/h/.cache/yarn", "/h/.yarn/berry", "/h/pnpm", "/h/gyp", "/h/.cache/uv", claudeTmp}),
			[]string{"/tmp", "/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := AgentWritable(tt.env, tt.allow, keepOut...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("AgentWritable:\n got  %q\n want %q", got, tt.want)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped:\n got  %q\n want %q", dropped, tt.dropped)
			}
			for _, d := range got {
				for _, k := range keepOut {
					if within(k, []string{d}) {
						t.Errorf("%s is writable and holds %s, which is kept out", d, k)
					}
				}
			}
		})
	}
}

// A cache or allow_write entry that is a link to a directory holding a
// kept-out place holds it too, as the hooks, which resolve links, see it;
// a link to somewhere else stays.
func TestAgentWritableResolvesLinks(t *testing.T) {
	base := t.TempDir()
	proj, elsewhere := filepath.Join(base, "work", "proj"), filepath.Join(base, "caches")
	os.MkdirAll(proj, 0o755)
	os.MkdirAll(elsewhere, 0o755)
	toParent, toCaches := filepath.Join(base, "cache-link"), filepath.Join(base, "ok-link")
	if err := os.Symlink(filepath.Dir(proj), toParent); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, toCaches); err != nil {
		t.Fatal(err)
	}
	got, dropped := AgentWritable([]string{"GOCACHE=" + toParent, "PIP_CACHE_DIR=" + toCaches}, nil, proj)
	if !slices.Equal(dropped, []string{toParent}) || slices.Contains(got, toParent) || !slices.Contains(got, toCaches) {
		t.Errorf("writable %q, dropped %q: want the link to the project's parent dropped and the other kept", got, dropped)
	}
}

func TestVerdictEnv(t *testing.T) {
	// Real directories, for the symlinks: a system bin, the project, a
	// cache the agents may write, and links into them from outside.
	root := t.TempDir()
	dir := func(parts ...string) string {
		d := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	sys, proj, cache, elsewhere := dir("usr", "bin"), dir("proj"), dir("cache"), dir("opt")
	projBin, cacheBin := dir("proj", "node_modules", ".bin"), dir("cache", "bin")
	link := filepath.Join(elsewhere, "tools")
	if err := os.Symlink(projBin, link); err != nil {
		t.Fatal(err)
	}
	cacheLink := filepath.Join(root, "cache-link")
	if err := os.Symlink(cache, cacheLink); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		path     string
		writable []string
		want     string
	}{
		{"system directories stay, in order", sys + ":/bin", []string{cache}, sys + ":/bin"},
		{"empty and relative entries go", ":" + sys + "::.:bin:./node_modules/.bin", nil, sys},
		{"the project and what is below it go", proj + ":" + projBin + ":" + sys, nil, sys},
		{"agent-writable directories go", cacheBin + ":" + sys + ":" + cache, []string{cache}, sys},
		{"a symlink into the project goes", link + ":" + sys, nil, sys},
		// An empty agent-writable entry is passed over; the ones after it
		// still count.
		{"agent-writable directories after an empty one go", cacheBin + ":" + sys, []string{"", cache}, sys},
		{"an agent-writable directory named through a symlink still counts", cacheBin + ":" + sys, []string{cacheLink}, sys},
		{"a sibling with a common prefix stays", root + "/project-tools:" + root + "/cache2", []string{cache}, root + "/project-tools:" + root + "/cache2"},
		{"a parent of the project stays", root, []string{cache}, root},
		{"nothing left is an empty PATH", proj + ":", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"HOME=/home/u", "PATH=" + tt.path, "GOFLAGS=-mod=mod"}
			got := VerdictEnv(env, proj, tt.writable)
			want := []string{"HOME=/home/u", "PATH=" + tt.want, "GOFLAGS=-mod=mod"}
			if !slices.Equal(got, want) {
				t.Errorf("VerdictEnv:\n got  %q\n want %q", got, want)
			}
		})
	}

	t.Run("an environment without PATH is left alone", func(t *testing.T) {
		env := []string{"HOME=/home/u", "MYPATH=" + proj}
		if got := VerdictEnv(env, proj, nil); !slices.Equal(got, env) {
			t.Errorf("VerdictEnv = %q, want %q", got, env)
		}
	})
}

func TestByproductEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		dir  string
		want []string
	}{
		{"fresh", nil, "/tmp/cgt-1/claude-0",
			[]string{"PYTHONPYCACHEPREFIX=/tmp/cgt-1/claude-0/pycache", "PYTEST_ADDOPTS=-o 'cache_dir=/tmp/cgt-1/claude-0/pytest-cache'"}},
		{"the user's prefix kept, their options extended", []string{"PYTHONPYCACHEPREFIX=/var/pyc", "PYTEST_ADDOPTS=-ra --strict-markers "}, "/t",
			[]string{"PYTEST_ADDOPTS=-ra --strict-markers -o 'cache_dir=/t/pytest-cache'"}},
		{"quoted for shlex", nil, "/t/it's here",
			[]string{"PYTHONPYCACHEPREFIX=/t/it's here/pycache", `PYTEST_ADDOPTS=-o 'cache_dir=/t/it'"'"'s here/pytest-cache'`}},
		{"no directory, nothing", nil, "", nil},
		{"a relative directory, nothing", nil, "tmp", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ByproductEnv(c.env, c.dir); !slices.Equal(got, c.want) {
				t.Errorf("ByproductEnv = %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestByproductEnvKeepsPytestOutOfTheProject runs pytest as an agent
// would, with ByproductEnv: the project holds afterwards what it held
// before, and --lf still works.
func TestByproductEnvKeepsPytestOutOfTheProject(t *testing.T) {
	pytest, err := exec.LookPath("pytest")
	if err != nil {
		t.Skip("pytest is not installed")
	}
	project, out := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{
		"src/feature.py":        "def feature():\n    return 1\n",
		"tests/test_feature.py": "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'src'))\nfrom feature import feature\n\ndef test_feature():\n    assert feature() == 1\n",
	} {
		if err := os.MkdirAll(filepath.Join(project, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(project, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONDONTWRITEBYTECODE=") && !strings.HasPrefix(kv, "PYTHONPYCACHEPREFIX=") && !strings.HasPrefix(kv, "PYTEST_ADDOPTS=") {
			env = append(env, kv)
		}
	}
	env = append(env, ByproductEnv(env, out)...)
	for _, args := range [][]string{{"-q", "tests/test_feature.py"}, {"-q", "--lf", "tests/test_feature.py"}} {
		cmd := exec.Command(pytest, args...)
		cmd.Dir, cmd.Env = project, env
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pytest %v: %v\n%s", args, err, b)
		}
	}
	var files []string
	filepath.WalkDir(project, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(project, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if want := []string{"src/feature.py", "tests/test_feature.py"}; !slices.Equal(files, want) {
		t.Errorf("the project holds %q after pytest, want only %q", files, want)
	}
	for _, d := range []string{"pycache", "pytest-cache"} {
		if _, err := os.Stat(filepath.Join(out, d)); err != nil {
			t.Errorf("nothing went to %s: %v", d, err)
		}
	}
}
