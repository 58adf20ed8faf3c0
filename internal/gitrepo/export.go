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
