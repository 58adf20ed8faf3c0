package gitrepo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A clone of its own (AddClone) holds the commit's files, on its own
// branch, with a git directory of its own; opened with the repository's
// objects, what its snapshots write is the repository's too, and nothing
// of the repository's own work tree, index or refs changes.
func TestAddClone(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"a": "a", "d/b": "b"})
	_, base, _, err := r.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before := viewOf(t, dir)
	refsBefore := gitT(t, dir, "for-each-ref")
	cl := filepath.Join(stateDir(t), "F-1", "wt")
	if err := r.AddClone(t.Context(), cl, "ctxgraphd/F-1", commit); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(cl, ".git")); err != nil || !fi.IsDir() {
		t.Fatalf("the clone's git directory: %v %v, want a directory of its own", fi, err)
	}
	lr, err := Open(t.Context(), Options{Dir: cl, Index: filepath.Join(filepath.Dir(cl), "index"), Objects: r.ObjectsDir()})
	if err != nil {
		t.Fatal(err)
	}
	if head, tree, branch, err := lr.Head(t.Context()); err != nil || head != commit || tree != base || branch != "refs/heads/ctxgraphd/F-1" {
		t.Fatalf("Head in the clone: %s %s %s %v", head, tree, branch, err)
	}
	if got := state(t, cl, "d/b"); got != ModeFile+" b" {
		t.Errorf("the clone's d/b: %q", got)
	}
	if status := gitT(t, cl, "status", "--porcelain"); strings.TrimSpace(status) != "" {
		t.Errorf("a fresh clone is not clean:\n%s", status)
	}

	write(t, cl, map[string]string{"new.txt": "lane's work", "a": "a2"})
	tree, err := lr.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	changes, err := lr.Changes(t.Context(), base, tree)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Path+" "+c.Kind.String())
	}
	if want := []string{"a modified", "new.txt added"}; !slices.Equal(got, want) {
		t.Errorf("Changes in the clone: %v, want %v", got, want)
	}
	// The repository reads what the clone's snapshot wrote, and can
	// commit it.
	out := filepath.Join(stateDir(t), "export")
	if err := r.Export(t.Context(), tree, out); err != nil {
		t.Fatalf("the repository exporting the clone's snapshot: %v", err)
	}
	if got := state(t, out, "new.txt"); got != ModeFile+" lane's work" {
		t.Errorf("exported new.txt: %q", got)
	}
	if _, err := r.Commit(t.Context(), tree, []string{commit}, "lane", daemon); err != nil {
		t.Errorf("the repository committing the clone's snapshot: %v", err)
	}
	if after := viewOf(t, dir); after != before {
		t.Errorf("the repository's work tree changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if refs := gitT(t, dir, "for-each-ref"); refs != refsBefore {
		t.Errorf("the repository's refs changed:\nbefore %s\nafter  %s", refsBefore, refs)
	}

	// Refused: a directory that holds something, or lies in the project.
	if err := r.AddClone(t.Context(), cl, "ctxgraphd/F-1", commit); err == nil {
		t.Error("a clone over one that exists was made")
	}
	if err := r.AddClone(t.Context(), filepath.Join(dir, "inside"), "ctxgraphd/F-2", commit); err == nil {
		t.Error("a clone inside the project was made")
	}
}

// TestGitDirs: a repository's git directories are the ones that hold its
// objects, none below another: its .git alone, a linked work tree's own
// and its main one's, a clone's own and the objects it shares.
func TestGitDirs(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "first")
	if got, want := openRepo(t, dir).GitDirs(), []string{filepath.Join(dir, ".git")}; !slices.Equal(got, want) {
		t.Errorf("a repository's GitDirs = %q, want %q", got, want)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, dir, "worktree", "add", "-q", wt)
	if got, want := openRepo(t, wt).GitDirs(), []string{filepath.Join(dir, ".git")}; !slices.Equal(got, want) {
		t.Errorf("a linked work tree's GitDirs = %q, want %q (its own is below it)", got, want)
	}
	r, _, commit := lane(t, map[string]string{"a": "a"})
	clone := filepath.Join(stateDir(t), "F-1", "wt")
	if err := r.AddClone(t.Context(), clone, "ctxgraphd/F-1", commit); err != nil {
		t.Fatal(err)
	}
	lr, err := Open(t.Context(), Options{Dir: clone, Index: filepath.Join(filepath.Dir(clone), "index"), Objects: r.ObjectsDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lr.GitDirs(), []string{filepath.Join(clone, ".git"), r.ObjectsDir()}; !slices.Equal(got, want) {
		t.Errorf("a clone's GitDirs = %q, want %q", got, want)
	}
}
