package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestInit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		dir         func(t *testing.T) string
		wantCreated bool
		wantErr     bool
		wantGitDir  bool // dir/.git exists afterwards
	}{
		{name: "fresh directory", dir: func(t *testing.T) string { return t.TempDir() }, wantCreated: true, wantGitDir: true},
		{name: "top of a repository", dir: newRepoT, wantGitDir: true},
		{name: "subdirectory of a repository", dir: func(t *testing.T) string {
			sub := filepath.Join(newRepo(t), "project")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			return sub
		}},
		{name: "inside .git", dir: func(t *testing.T) string { return filepath.Join(newRepo(t), ".git") }, wantErr: true, wantGitDir: false},
		{name: "missing", dir: func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := tt.dir(t)
			created, err := Init(t.Context(), dir)
			if (err != nil) != tt.wantErr || created != tt.wantCreated {
				t.Fatalf("Init(%s) = %v, %v; want created %v, error %v", dir, created, err, tt.wantCreated, tt.wantErr)
			}
			if _, err := os.Stat(filepath.Join(dir, ".git")); (err == nil) != tt.wantGitDir {
				t.Errorf(".git exists: %v, want %v", err == nil, tt.wantGitDir)
			}
			if tt.wantErr {
				return
			}
			if _, err := Open(t.Context(), Options{Dir: dir, Index: filepath.Join(t.TempDir(), "index")}); err != nil {
				t.Errorf("Open after Init: %v", err)
			}
		})
	}
}

func newRepoT(t *testing.T) string { return newRepo(t) }

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitT(t, t.TempDir(), "init", "-q", "--bare", bare)
	stateDir := t.TempDir()
	tests := []struct {
		name    string
		opts    Options
		wantErr error // nil: any error
	}{
		{name: "not a repository", opts: Options{Dir: t.TempDir(), Index: filepath.Join(stateDir, "i")}, wantErr: ErrNotRepository},
		{name: "bare repository", opts: Options{Dir: bare, Index: filepath.Join(stateDir, "i")}, wantErr: ErrNotRepository},
		{name: "inside .git", opts: Options{Dir: filepath.Join(repo, ".git"), Index: filepath.Join(stateDir, "i")}, wantErr: ErrNotRepository},
		{name: "missing directory", opts: Options{Dir: filepath.Join(repo, "nope"), Index: filepath.Join(stateDir, "i")}},
		{name: "no Dir", opts: Options{Index: filepath.Join(stateDir, "i")}},
		{name: "no Index", opts: Options{Dir: repo}},
		{name: "the user's index", opts: Options{Dir: repo, Index: filepath.Join(repo, ".git", "index")}},
		{name: "an index in the work tree", opts: Options{Dir: repo, Index: filepath.Join(repo, "state", "index")}},
		{name: "an escaping exclude", opts: Options{Dir: repo, Index: filepath.Join(stateDir, "i"), Exclude: []string{"../x"}}, wantErr: ErrUnsafePath},
	}
	for _, tt := range tests {
		r, err := Open(t.Context(), tt.opts)
		if err == nil {
			t.Errorf("%s: Open(%+v) succeeded (%+v)", tt.name, tt.opts, r)
			continue
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		}
	}
	// An index in git's own directory is not in the work tree.
	if _, err := Open(t.Context(), Options{Dir: repo, Index: filepath.Join(repo, ".git", "ctxgraphd", "index")}); err != nil {
		t.Errorf("Open with the index under .git: %v", err)
	}
}

// TestSubdirectoryProject: a project that is a subdirectory of a larger
// repository sees, reports and restores only its own files, and its commits
// leave the rest as HEAD has it.
func TestSubdirectoryProject(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	write(t, top, map[string]string{
		"top.txt": "top", "other/c.txt": "c",
		"proj/a.txt": "a", "proj/sub/b.txt": "b", "proj/.claude/progress/f.json": "v1", "proj/[x]": "x",
	})
	head := commitAll(t, top)
	dir := filepath.Join(top, "proj")
	r := openRepo(t, dir, ".claude/progress")
	if r.Dir() != dir {
		t.Errorf("Dir() = %s, want %s", r.Dir(), dir)
	}
	before, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	write(t, top, map[string]string{
		"top.txt": "top changed", "other/c.txt": "c changed", "other/new": "n", "proj2/z": "z",
		"proj/a.txt": "a changed", "proj/new.txt": "new", "proj/.claude/progress/f.json": "v2",
	})
	remove(t, top, "proj/sub/b.txt")
	after, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	changes, err := r.Changes(t.Context(), before, after)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range changes {
		paths = append(paths, c.Path+" "+c.Kind.String())
	}
	if want := []string{"a.txt modified", "new.txt added", "sub/b.txt deleted"}; !slices.Equal(paths, want) {
		t.Errorf("changes %q, want %q", paths, want)
	}
	want := map[string]string{
		"top.txt": "100644 top", "other/c.txt": "100644 c", "proj/.claude/progress/f.json": "100644 v1", "proj/[x]": "100644 x",
		"proj/a.txt": "100644 a changed", "proj/new.txt": "100644 new",
	}
	if got := treeFiles(t, top, after); !maps.Equal(got, want) {
		t.Errorf("snapshot:\n got %q\nwant %q", got, want)
	}

	if err := r.Restore(t.Context(), before, []string{"a.txt", "sub/b.txt"}); err != nil {
		t.Fatal(err)
	}
	if got := state(t, dir, "a.txt") + "|" + state(t, dir, "sub/b.txt"); got != "100644 a|100644 b" {
		t.Errorf("restored: %q", got)
	}
	if err := r.Restore(t.Context(), before, []string{"../top.txt"}); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("Restore of ../top.txt: %v, want ErrUnsafePath", err)
	}
	if id, err := r.HashFile(t.Context(), "new.txt"); err != nil || id != blobID("new") {
		t.Errorf("HashFile(new.txt) = %s, %v", id, err)
	}

	// Committing the snapshot changes only the project's files.
	commit, err := r.Commit(t.Context(), after, []string{head}, "proj only", daemon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AdvanceBranch(t.Context(), head, commit); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, top, "diff-tree", "-r", "--name-only", "--no-commit-id", commit); got != "proj/a.txt\nproj/new.txt\nproj/sub/b.txt\n" {
		t.Errorf("the commit changed:\n%s", got)
	}
}

// TestCallerGitEnvironmentIgnored: GIT_* variables of whoever started the
// daemon do not redirect git.
func TestCallerGitEnvironmentIgnored(t *testing.T) {
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	elsewhere := newRepo(t)
	write(t, elsewhere, map[string]string{"other": "o"})
	commitAll(t, elsewhere)
	bogusIndex := filepath.Join(t.TempDir(), "bogus-index")
	t.Setenv("GIT_DIR", filepath.Join(elsewhere, ".git"))
	t.Setenv("GIT_WORK_TREE", elsewhere)
	t.Setenv("GIT_INDEX_FILE", bogusIndex)
	t.Setenv("GIT_OBJECT_DIRECTORY", t.TempDir())
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='"+t.TempDir()+"'")

	r := openRepo(t, dir)
	write(t, dir, map[string]string{"b": "b"})
	tree, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(treeFiles(t, dir, tree))), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("snapshot of %q, want %q", got, want)
	}
	if _, err := os.Stat(bogusIndex); err == nil {
		t.Error("git wrote the caller's GIT_INDEX_FILE")
	}
}

// TestNoCodeFromTheRepository: hooks, an fsmonitor and filter drivers named
// in the repository's own files never run; a filter from the user's global
// configuration does.
func TestNoCodeFromTheRepository(t *testing.T) {
	home := t.TempDir()
	marks := t.TempDir()
	global := "[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n" +
		"[filter \"upper\"]\n\tclean = tr a-z A-Z\n\tsmudge = cat\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)

	dir := newRepo(t)
	write(t, dir, map[string]string{"a.txt": "a", "b.up": "b"})
	head := commitAll(t, dir)
	script := func(name string) string {
		p := filepath.Join(marks, name+".sh")
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch '"+filepath.Join(marks, name)+"'\ncat\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, hook := range []string{"reference-transaction", "pre-commit", "post-commit", "post-index-change"} {
		write(t, dir, map[string]string{".git/hooks/" + hook: "exec:#!/bin/sh\ntouch '" + filepath.Join(marks, hook) + "'\n"})
	}
	gitT(t, dir, "config", "core.fsmonitor", script("fsmonitor"))
	gitT(t, dir, "config", "filter.evil.clean", script("filter-clean"))
	gitT(t, dir, "config", "filter.evil.process", script("filter-process"))
	gitT(t, dir, "config", "filter.evil.required", "true")
	gitT(t, dir, "config", "filter.upper.clean", script("upper-redefined"))
	write(t, dir, map[string]string{
		".gitattributes": "*.txt filter=evil\n*.up filter=upper\n",
		"a.txt":          "agent's content", "b.up": "lower",
	})

	r := openRepo(t, dir)
	tree, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := treeFiles(t, dir, tree)
	if got := files["a.txt"]; got != "100644 agent's content" {
		t.Errorf("a.txt in the snapshot: %q (the repository's filter ran?)", got)
	}
	if got := files["b.up"]; got != "100644 lower" {
		t.Errorf("b.up in the snapshot: %q, want its bytes (no filter runs, the user's neither)", got)
	}
	commit, err := r.Commit(t.Context(), tree, []string{head}, "m", daemon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AdvanceBranch(t.Context(), head, commit); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateRef(t.Context(), "refs/ctxgraphd/x", commit, ""); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sh") {
			t.Errorf("%s ran", e.Name())
		}
	}
}

// TestRepositoryConfigCannotRedirect: a core.worktree written into
// .git/config after Open does not make snapshots record another directory.
func TestRepositoryConfigCannotRedirect(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	r := openRepo(t, dir)
	decoy := t.TempDir()
	write(t, decoy, map[string]string{"a": "a"})
	write(t, dir, map[string]string{"a": "the agent's change"})
	gitT(t, dir, "config", "core.worktree", decoy)
	tree, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := treeFiles(t, dir, tree)["a"]; got != "100644 the agent's change" {
		t.Errorf("a in the snapshot: %q", got)
	}
}

// cleanPath takes a project-relative, slash-separated path and refuses
// what would leave the project or reach into git's own directory.
func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want "" when refused
	}{
		{"a", "a"},
		{"d/x.go", "d/x.go"},
		{"./d//x/../y", "d/y"},
		{"d/", "d"},
		{"..a", "..a"},
		{"a/..b/c", "a/..b/c"},
		{".gitignore", ".gitignore"},
		{"x.git/y", "x.git/y"},
		{"", ""},
		{"a\x00b", ""},
		{"/etc/passwd", ""},
		{".", ""},
		{"d/..", ""},
		{"..", ""},
		{"../x", ""},
		{"d/../../x", ""},
		{".git", ""},
		{".git/config", ""},
		{"sub/.Git/hooks/pre-commit", ""},
		{"sub/.GIT", ""},
	}
	for _, tt := range tests {
		got, err := cleanPath(tt.in)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrUnsafePath) {
				t.Errorf("cleanPath(%q) = %q, %v; want ErrUnsafePath", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// checkID takes full lowercase hexadecimal ids of either object format,
// and nothing else.
func TestCheckID(t *testing.T) {
	t.Parallel()
	sha1 := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		id string
		ok bool
	}{
		{sha1, true},
		{strings.Repeat("0", 40), true},
		{strings.Repeat("9", 40), true},
		{strings.Repeat("a", 40), true},
		{strings.Repeat("f", 40), true},
		{strings.Repeat("af09", 16), true}, // 64: sha256
		{"", false},
		{sha1[:39], false},
		{sha1 + "8", false},
		{strings.Repeat("a", 63), false},
		{strings.Repeat("a", 65), false},
		{strings.Repeat("/", 40), false}, // just below '0'
		{strings.Repeat(":", 40), false}, // just above '9'
		{strings.Repeat("`", 40), false}, // just below 'a'
		{strings.Repeat("g", 40), false}, // just above 'f'
		{strings.Repeat("A", 40), false},
		{"HEAD~1" + sha1[6:], false},
	}
	for _, tt := range tests {
		if err := checkID("tree", tt.id); (err == nil) != tt.ok {
			t.Errorf("checkID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}

// gitEnv is the daemon's environment without a GIT_* variable or its own
// LC_ALL, then the C locale, no prompts, no optional locks, then extraEnv
// and the command's own variables, in that order; an empty environment
// is no exception.
func TestGitEnv(t *testing.T) {
	// Not parallel: it empties the process environment for a moment.
	saved := os.Environ()
	savedExtra := extraEnv
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		extraEnv = savedExtra
	})
	os.Clearenv()
	ours := []string{"LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0"}
	five := []string{"A=1", "B=2", "C=3", "D=4", "E=5"}
	tests := []struct {
		name       string
		env        map[string]string
		extra, add []string
		want       []string
	}{
		{name: "empty", want: ours},
		{name: "empty, extraEnv only", extra: five, want: append(slices.Clone(ours), five...)},
		{name: "empty, the command's only", add: five, want: append(slices.Clone(ours), five...)},
		{name: "the caller's git and locale are dropped",
			env:   map[string]string{"GIT_DIR": "/elsewhere", "GIT_INDEX_FILE": "/x", "LC_ALL": "de_DE.UTF-8", "HOME": "/home/u", "LANG": "de_DE.UTF-8", "XGIT_Y": "kept"},
			extra: []string{"GIT_CONFIG_NOSYSTEM=1"}, add: []string{"GIT_DIR=/ours"},
			want: []string{"HOME=/home/u", "LANG=de_DE.UTF-8", "XGIT_Y=kept", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_DIR=/ours"}},
	}
	for _, tt := range tests {
		os.Clearenv()
		for k, v := range tt.env {
			os.Setenv(k, v)
		}
		extraEnv = tt.extra
		got := gitEnv(tt.add)
		// os.Environ's order is not specified: the caller's part is compared as a set.
		n := len(got) - len(ours) - len(tt.extra) - len(tt.add)
		if n < 0 || !slices.Equal(got[n:], tt.want[n:]) || !slices.Equal(slices.Sorted(slices.Values(got[:n])), tt.want[:n]) {
			t.Errorf("%s: gitEnv = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A git error names the command (quoting what needs it, cut after 300
// bytes of arguments), the directory, the failure and git's own words.
func TestGitErrorText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 296)
	tests := []struct {
		name string
		err  gitError
		want string
	}{
		{name: "plain", err: gitError{dir: "/p", args: []string{"rev-parse", "HEAD"}, err: errors.New("exit status 128"), stderr: "fatal: bad revision"},
			want: "gitrepo: git rev-parse HEAD (in /p): exit status 128: fatal: bad revision"},
		{name: "no stderr", err: gitError{dir: "/p", args: []string{"write-tree"}, err: errors.New("exit status 1")},
			want: "gitrepo: git write-tree (in /p): exit status 1"},
		{name: "arguments quoted where needed", err: gitError{dir: "/p", args: []string{"commit-tree", "", "a b", "t\tab", "n\nl", `q"`, "s'", `b\`, "plain"}, err: errors.New("e")},
			want: `gitrepo: git commit-tree "" "a b" "t\tab" "n\nl" "q\"" "s'" "b\\" plain (in /p): e`},
		{name: "300 bytes of arguments are kept", err: gitError{dir: "/p", args: []string{"add", long, "x"}, err: errors.New("e")},
			want: "gitrepo: git add " + long + " x (in /p): e"},
		{name: "past 300 bytes they are cut", err: gitError{dir: "/p", args: []string{"add", long, "xy", "z"}, err: errors.New("e")},
			want: "gitrepo: git add " + long + " … (in /p): e"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// exitCode is git's exit status from what runGit returned: 0 for none,
// -1 when git did not run to its end or the error is not git's.
func TestExitCode(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	_, err1 := runGit(t.Context(), dir, nil, nil, "rev-parse", "-q", "--verify", "refs/heads/nope")
	_, err128 := runGit(t.Context(), dir, nil, nil, "rev-parse", "--verify", "nope^{tree}")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, errCancelled := runGit(ctx, dir, nil, nil, "rev-parse", "HEAD")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"exit 1", err1, 1},
		{"exit 128", err128, 128},
		{"wrapped", fmt.Errorf("more: %w", err1), 1},
		{"not run to its end", errCancelled, -1},
		{"not git's", errors.New("other"), -1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

// Without git on PATH every operation says to install it.
func TestNoGit(t *testing.T) {
	dir := newRepo(t)
	t.Setenv("PATH", t.TempDir())
	if _, err := Open(t.Context(), Options{Dir: dir, Index: filepath.Join(t.TempDir(), "index")}); !errors.Is(err, ErrNoGit) {
		t.Errorf("Open without git = %v, want ErrNoGit", err)
	}
	if _, err := Init(t.Context(), t.TempDir()); !errors.Is(err, ErrNoGit) {
		t.Errorf("Init without git = %v, want ErrNoGit", err)
	}
}

// Open and Init take a directory, not a file.
func TestOpenAndInitRefuseAFile(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"f": "x"})
	file := filepath.Join(dir, "f")
	if _, err := Open(t.Context(), Options{Dir: file, Index: filepath.Join(t.TempDir(), "index")}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open of a file = %v, want not a directory", err)
	}
	if created, err := Init(t.Context(), file); err == nil || created || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Init of a file = %v, %v; want not a directory", created, err)
	}
}

// The private index is compared with the user's index and the work tree
// by real path: a symlink does not sneak it into either.
func TestOpenSeesThroughSymlinks(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	write(t, repo, map[string]string{"a": "a"})
	commitAll(t, repo) // the user's index exists
	links := t.TempDir()
	linkedRepo := filepath.Join(links, "repo")
	if err := os.Symlink(repo, linkedRepo); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  Options
		error bool
	}{
		{name: "the user's index, named through a link to the project",
			opts: Options{Dir: repo, Index: filepath.Join(linkedRepo, ".git", "index")}, error: true},
		{name: "the user's index, the project named through a link",
			opts: Options{Dir: linkedRepo, Index: filepath.Join(repo, ".git", "index")}, error: true},
		{name: "an index in the work tree, named through a link",
			opts: Options{Dir: repo, Index: filepath.Join(linkedRepo, "state", "index")}, error: true},
		{name: "an index under .git, the project named through a link",
			opts: Options{Dir: linkedRepo, Index: filepath.Join(linkedRepo, ".git", "ctxgraphd", "index")}},
	}
	for _, tt := range tests {
		_, err := Open(t.Context(), tt.opts)
		if (err != nil) != tt.error {
			t.Errorf("%s: Open = %v, want an error: %v", tt.name, err, tt.error)
		}
	}
}
