package gitrepo

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain gives every test the same git configuration whatever the machine
// has: a HOME of our own whose .gitconfig sets no identity and forbids git
// to guess one (so a commit that works got its identity from a Signature),
// and no system configuration.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "gitrepo-home-")
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
	extraEnv = []string{"GIT_CONFIG_NOSYSTEM=1"}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(home) }))
}

// userEnv is the identity of the person whose repository it is; the tests'
// own commits use it.
var userEnv = []string{
	"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
	"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com",
}

// gitT runs git in dir as the user would and returns its output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gitIn(t, dir, nil, args...)
}

// gitIn is gitT with standard input.
func gitIn(t testing.TB, dir string, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(userEnv)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %q in %s: %v: %s", args, dir, err, stderr.String())
	}
	return string(out)
}

// newRepo returns the real path of a fresh repository with no commit.
func newRepo(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q")
	return dir
}

// openRepo opens dir with a private index in its own temporary directory.
func openRepo(t testing.TB, dir string, exclude ...string) *Repo {
	t.Helper()
	r, err := Open(t.Context(), Options{Dir: dir, Index: filepath.Join(t.TempDir(), "index"), Exclude: exclude})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// write creates or replaces files: a value "link:<target>" makes a symlink,
// "exec:<content>" an executable file.
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(name); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(content, "link:"):
			err = os.Symlink(strings.TrimPrefix(content, "link:"), name)
		case strings.HasPrefix(content, "exec:"):
			err = os.WriteFile(name, []byte(strings.TrimPrefix(content, "exec:")), 0o755)
		default:
			err = os.WriteFile(name, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// remove deletes files or directories.
func remove(t testing.TB, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
}

// commitAll commits the whole work tree as the user would.
func commitAll(t testing.TB, dir string) string {
	t.Helper()
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "user commit")
	return strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
}

// treeFiles returns every file of tree as path → "<mode> <content>", the
// form state returns for the work tree.
func treeFiles(t testing.TB, dir string, tree Tree) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, rec := range splitNUL([]byte(gitT(t, dir, "ls-tree", "-r", "-z", string(tree)))) {
		meta, p, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		files[p] = f[0] + " " + gitT(t, dir, "cat-file", "blob", f[2])
	}
	return files
}

// state describes path in the work tree as treeFiles describes a tree
// entry: "100644 <content>", "100755 <content>", "120000 <target>"; "" for
// a missing path and "dir" for a directory.
func state(t testing.TB, dir, p string) string {
	t.Helper()
	name := filepath.Join(dir, filepath.FromSlash(p))
	fi, err := os.Lstat(name)
	switch {
	case err != nil:
		return ""
	case fi.IsDir():
		return "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(name)
		if err != nil {
			t.Fatal(err)
		}
		return ModeSymlink + " " + target
	}
	content, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o100 != 0 {
		return ModeExecutable + " " + string(content)
	}
	return ModeFile + " " + string(content)
}

// blobID is the SHA-1 blob id of content.
func blobID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(content), content)
	return hex.EncodeToString(h.Sum(nil))
}

// userView is what the user sees of their repository: status (read without
// refreshing the index), HEAD and the index file's bytes.
type userView struct{ status, head, index string }

func viewOf(t testing.TB, dir string) userView {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// An unborn HEAD is an empty answer and exit status 1.
	cmd := exec.Command("git", "rev-parse", "-q", "--verify", "HEAD")
	cmd.Dir, cmd.Env = dir, gitEnv(nil)
	head, _ := cmd.Output()
	return userView{
		// gitEnv sets GIT_OPTIONAL_LOCKS=0: status does not write the index.
		status: gitT(t, dir, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignored"),
		head:   string(head),
		index:  string(index),
	}
}
