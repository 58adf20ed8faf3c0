package branch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// TestMain gives every test the same git configuration whatever the machine
// has: a HOME of our own whose .gitconfig sets no identity and forbids git
// to guess one, so that a commit of this package that works got its
// identity from the Signature it passes.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "branch-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	const config = "[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_CONFIG_HOME")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GIT_") {
			os.Unsetenv(k)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(home) }))
}

// fixture is a fresh project with a git repository, opened as the daemon
// opens it.
type fixture struct {
	t    testing.TB
	dir  string // the project's real path
	repo *gitrepo.Repo
}

// newFixture makes a project (git init, no commit) and opens its
// repository with the daemon's private index, the progress directory left
// out of its snapshots as the daemon leaves it.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	repo, err := gitrepo.Open(t.Context(), gitrepo.Options{Dir: dir, Index: filepath.Join(t.TempDir(), "snapshot.index"), Exclude: []string{".claude/progress"}})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: dir, repo: repo}
}

// write creates or replaces project files.
func (f *fixture) write(files map[string]string) {
	f.t.Helper()
	for p, content := range files {
		name := filepath.Join(f.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) remove(rel ...string) {
	f.t.Helper()
	for _, p := range rel {
		if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(p))); err != nil {
			f.t.Fatal(err)
		}
	}
}

// read returns a project file's content, or "<absent>".
func (f *fixture) read(rel string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

func (f *fixture) snapshot() gitrepo.Tree {
	f.t.Helper()
	tree, err := f.repo.Snapshot(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	return tree
}

// git runs git in the project as its user would, with an identity of the
// user's own (the daemon's commits must not need one).
func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("git %q: %v: %s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// commitAll commits the whole work tree as the user would and returns HEAD.
func (f *fixture) commitAll(msg string) string {
	f.t.Helper()
	f.git("add", "-A")
	f.git("commit", "-q", "-m", msg)
	return f.git("rev-parse", "HEAD")
}
