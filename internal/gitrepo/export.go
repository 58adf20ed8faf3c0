package gitrepo

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Export writes the project's files of tree into dir, which must be empty
// or absent: a checkout of exactly that tree that shares nothing with the
// work tree, the index or the repository's refs. The daemon runs a
// feature's test there, so that what the test's code does (rewrite its own
// test, move a ref, leave a file behind) touches a copy that is thrown away.
//
// Blobs are written as git stores them, the bytes a snapshot hashed: no
// smudge filter, end-of-line conversion or ident expansion runs, whatever
// .gitattributes says. Paths are relative to the project directory (not
// the repository's top level), and every write goes through os.Root, so
// that no path of the tree, however it is spelled, lands outside dir. A
// submodule (gitlink) has no content here to write and becomes an empty
// directory, as in a checkout that did not initialise it.
func (r *Repo) Export(ctx context.Context, tree Tree, dir string) error {
	files, err := r.Files(ctx, tree)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gitrepo: export %s: %w", tree, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("gitrepo: export %s: %w", tree, err)
	}
	defer root.Close()
	var blobs []Entry
	for _, f := range files {
		if f.Mode == ModeGitlink {
			if err := root.MkdirAll(f.Path, 0o755); err != nil {
				return fmt.Errorf("gitrepo: export %s: %s: %w", tree, f.Path, err)
			}
			continue
		}
		blobs = append(blobs, f)
	}
	if len(blobs) == 0 {
		return nil
	}
	ids := make([]string, len(blobs))
	for i, f := range blobs {
		ids[i] = f.ID
	}
	return r.catBlobs(ctx, ids, func(i int, size int64, content io.Reader) error {
		f := blobs[i]
		if err := writeFile(root, f.Path, f.Mode, content, size); err != nil {
			return fmt.Errorf("gitrepo: export %s: %s: %w", tree, f.Path, err)
		}
		return nil
	})
}

// Resolve names the commit that rev (a revision expression: HEAD, a
// branch, an abbreviated id…) stands for, and its tree.
func (r *Repo) Resolve(ctx context.Context, rev string) (commit string, tree Tree, err error) {
	id, ok, err := r.revParse(ctx, rev+"^{commit}")
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", fmt.Errorf("gitrepo: %q names no commit of %s", rev, r.dir)
	}
	t, ok, err := r.revParse(ctx, id+"^{tree}")
	if err != nil || !ok {
		return "", "", fmt.Errorf("gitrepo: the tree of %s: %v", id, err)
	}
	return id, Tree(t), nil
}

// IsAncestor reports whether commit a is b or in b's history.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := r.git(ctx, nil, nil, "merge-base", "--is-ancestor", a, b)
	switch exitCode(err) {
	case 0:
		return err == nil, err
	case 1:
		return false, nil
	}
	return false, err
}

// Short is an object id as people read it: its first 12 characters.
func Short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
