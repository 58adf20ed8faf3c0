package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// AddClone makes at dir a repository of its own that shares this one's
// objects (git clone --shared: its object directory borrows this one's),
// with commit's files checked out and HEAD on branch, made at commit. It
// has a git directory of its own, unlike a linked work tree, whose git
// directory is the repository's: Claude Code's sandbox guards a work
// tree's git directory with files it makes and removes around each
// command (a config.lock where there is none), and the sandboxes of runs
// in two work trees of one repository then race over the same files.
//
// Open the clone with Options.Objects set to ObjectsDir, so that what its
// snapshots write is this repository's too: a tree snapshotted in the
// clone can be committed, merged and checked out here. The clone is
// removed by removing dir.
func (r *Repo) AddClone(ctx context.Context, dir, branch, commit string) error {
	if err := checkID("commit", commit); err != nil {
		return err
	}
	if err := r.checkBranch(ctx, branch); err != nil {
		return err
	}
	abs, err := realPathLenient(dir)
	if err != nil {
		return fmt.Errorf("gitrepo: clone %s: %w", dir, err)
	}
	if err := r.checkOutside(ctx, abs); err != nil {
		return fmt.Errorf("gitrepo: clone %s: %w", abs, err)
	}
	if err := newCloneDir(abs); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fmt.Errorf("gitrepo: clone %s: %w", abs, err)
	}
	fail := func(what string, err error) error {
		os.RemoveAll(abs)
		return fmt.Errorf("gitrepo: clone %s at %s: %s: %w (the half-made clone was removed)", abs, Short(commit), what, err)
	}
	// --no-checkout: git would check out through the repository's
	// attributes and the filter drivers of whatever configuration.
	if _, err := runGit(ctx, filepath.Dir(abs), nil, nil, "clone", "--quiet", "--shared", "--no-checkout", "--", r.top, abs); err != nil {
		return fail("git clone", err)
	}
	gitDir := filepath.Join(abs, ".git")
	if _, err := runGit(ctx, abs, []string{"GIT_DIR=" + gitDir}, nil, "update-ref", "refs/heads/"+branch, commit); err != nil {
		return fail("making its branch", err)
	}
	if _, err := runGit(ctx, abs, []string{"GIT_DIR=" + gitDir}, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return fail("putting HEAD on its branch", err)
	}
	// Checked out in the private common directory: its configuration is
	// not the repository's and its info/attributes switch every
	// conversion off (see ondisk.go), so the files are the commit's bytes.
	env := []string{
		"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + abs, "GIT_COMMON_DIR=" + r.common,
		"GIT_OBJECT_DIRECTORY=" + r.objects, "GIT_INDEX_FILE=" + filepath.Join(gitDir, "index"),
	}
	if _, err := runGit(ctx, abs, env, nil, "read-tree", "--reset", "-u", commit); err != nil {
		return fail("checking out", err)
	}
	return nil
}

// newCloneDir refuses a clone's directory that holds anything: a clone
// goes into a new or empty directory, never over another's files.
func newCloneDir(abs string) error {
	switch entries, err := os.ReadDir(abs); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("gitrepo: clone %s: %w", abs, err)
	case len(entries) > 0:
		return fmt.Errorf("gitrepo: clone %s: the directory is not empty; give a new directory, or remove the old clone first", abs)
	}
	return nil
}
