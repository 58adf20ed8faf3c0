package gitrepo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Controls see what of the repository's own directory makes git run a
// program: a hook added, changed or removed, and a change of its
// configuration (core.hooksPath, a filter, an alias); git's samples do
// not count. A held hook no longer runs, and can be put back.
func TestControls(t *testing.T) {
	dir := newRepo(t)
	r := openRepo(t, dir)
	gitDir := filepath.Join(dir, ".git")
	hook := filepath.Join(gitDir, "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := r.Controls()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before["hooks/pre-commit"]; !ok || before["config"] == "" {
		t.Fatalf("controls %v, want the hook and the configuration", before)
	}
	// What a run must not leave: a new hook, a changed one, a removed
	// one, a configuration that runs something, a link as a hook.
	os.WriteFile(filepath.Join(gitDir, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755)
	os.WriteFile(hook, []byte("#!/bin/sh\nexit 1\n"), 0o755)
	os.Symlink("/bin/true", filepath.Join(gitDir, "hooks", "pre-push"))
	gitT(t, dir, "config", "core.hooksPath", "src/hooks")
	os.WriteFile(filepath.Join(gitDir, "hooks", "pre-rebase.sample"), []byte("changed sample\n"), 0o755)
	// Claude Code's sandbox leaves an empty file where a path it denies
	// did not exist: no configuration, no hook.
	os.WriteFile(filepath.Join(gitDir, "config.worktree"), nil, 0o644)
	os.WriteFile(filepath.Join(gitDir, "hooks", "pre-merge-commit"), nil, 0o755)
	after, err := r.Controls()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := before.Changed(after), []string{"config", "hooks/post-checkout", "hooks/pre-commit", "hooks/pre-push"}; !slices.Equal(got, want) {
		t.Errorf("changed %v, want %v", got, want)
	}
	os.Remove(hook)
	if got := before.Changed(mustControls(t, r)); !slices.Contains(got, "hooks/pre-commit") {
		t.Errorf("a removed hook is not among the changes: %v", got)
	}

	for _, name := range []string{"hooks/post-checkout", "hooks/pre-push"} {
		held, err := r.HoldHook(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(gitDir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still there after it was held: %v", name, err)
		}
		if fi, err := os.Lstat(held); err != nil || (fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0) {
			t.Errorf("held as %s: %v %v, want a file that does not run", held, fi, err)
		}
	}
	if _, ok := mustControls(t, r)["hooks/post-checkout"+HeldSuffix]; ok {
		t.Error("a held hook is counted among the controls")
	}
	for _, bad := range []string{"config", "hooks/../config", "hooks/", "hooks/a/b"} {
		if _, err := r.HoldHook(bad); err == nil {
			t.Errorf("HoldHook(%q) held something", bad)
		}
	}
}

func mustControls(t *testing.T, r *Repo) Controls {
	t.Helper()
	c, err := r.Controls()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
