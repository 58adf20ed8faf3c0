package gitrepo

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Restore puts each path back as it is in tree: its content and mode
// (regular, executable, symlink) when tree has a file there; else a file or
// symlink at the path is removed, and so are the directories that removal
// leaves empty, up to the project directory. Paths are project-relative and
// name files: where tree has a directory, a directory in the work tree is
// left as it is (name the files in it), and a non-empty directory where tree
// has nothing is an error, not removed whole.
//
// A path that would leave the project directory (.., absolute), lies in
// git's own directory or below a symlink is refused, all paths before
// anything is written (ErrUnsafePath), and writes go through os.Root, so
// nothing is ever written or removed through a symlink. Blobs are written as
// stored: no smudge filter or end-of-line conversion runs. The user's index
// is not touched; `git status` compares content, so it shows the restored
// files as they now are.
func (r *Repo) Restore(ctx context.Context, tree Tree, paths []string) error {
	if err := checkID("tree", string(tree)); err != nil {
		return err
	}
	var clean []string
	seen := map[string]bool{}
	for _, p := range paths {
		c, err := cleanPath(p)
		if err != nil {
			return fmt.Errorf("gitrepo: restore: %w", err)
		}
		if !seen[c] {
			seen[c] = true
			clean = append(clean, c)
		}
	}
	sort.Strings(clean)
	entries, err := r.lsTree(ctx, tree, clean)
	if err != nil {
		return err
	}
	var writes, removals []string
	for _, p := range clean {
		switch e, ok := entries[p]; {
		case !ok || e.mode == ModeTree:
			removals = append(removals, p)
		case e.mode == ModeGitlink:
			return fmt.Errorf("gitrepo: restore %s: it is a submodule in tree %s, which Restore does not check out", p, tree)
		default:
			writes = append(writes, p)
		}
	}

	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return fmt.Errorf("gitrepo: restore: %w", err)
	}
	defer root.Close()
	// Check every path before changing anything; a file or symlink in the
	// way that is itself to be removed is no obstacle.
	removing := map[string]bool{}
	for _, p := range removals {
		removing[p] = true
	}
	for _, p := range clean {
		if _, err := checkParents(root, p, removing); err != nil {
			return fmt.Errorf("gitrepo: restore %s: %w", p, err)
		}
	}
	// Removals first: a file can be in the way of another's parent directory
	// (where the tree has a directory).
	for i := len(removals) - 1; i >= 0; i-- {
		p := removals[i]
		if err := removeFile(root, p, entries[p].mode == ModeTree); err != nil {
			return fmt.Errorf("gitrepo: restore %s: %w", p, err)
		}
	}
	if len(writes) == 0 {
		return nil
	}
	ids := make([]string, len(writes))
	for i, p := range writes {
		ids[i] = entries[p].id
	}
	return r.catBlobs(ctx, ids, func(i int, size int64, content io.Reader) error {
		p := writes[i]
		if err := writeFile(root, p, entries[p].mode, content, size); err != nil {
			return fmt.Errorf("gitrepo: restore %s: %w", p, err)
		}
		return nil
	})
}

// treeEntry is one entry of ls-tree.
type treeEntry struct{ mode, id string }

// lsTree looks the project-relative paths up in tree. With -r -t ls-tree
// shows a directory entry whether or not a path below it is asked for too
// (without, asking for "d" and "d/x" hides "d").
func (r *Repo) lsTree(ctx context.Context, tree Tree, paths []string) (map[string]treeEntry, error) {
	entries := make(map[string]treeEntry, len(paths))
	// Literal pathspecs: ls-tree does no globbing, but a name starting
	// with ":" would still be read as pathspec magic.
	env := []string{"GIT_LITERAL_PATHSPECS=1"}
	for len(paths) > 0 {
		// Batches keep the command line far below ARG_MAX.
		n, size := 0, 0
		for n < len(paths) && (n == 0 || size+len(r.prefix)+len(paths[n]) < 64<<10) {
			size += len(r.prefix) + len(paths[n]) + 1
			n++
		}
		args := []string{"ls-tree", "-r", "-t", "-z", string(tree), "--"}
		for _, p := range paths[:n] {
			args = append(args, r.prefix+p)
		}
		out, err := r.git(ctx, env, nil, args...)
		if err != nil {
			return nil, err
		}
		for _, rec := range splitNUL(out) {
			meta, p, ok := strings.Cut(rec, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				return nil, fmt.Errorf("gitrepo: ls-tree %s: record %q is not <mode> <type> <id>\\t<path>", tree, rec)
			}
			entries[strings.TrimPrefix(p, r.prefix)] = treeEntry{mode: f[0], id: f[2]}
		}
		paths = paths[n:]
	}
	return entries, nil
}

// catBlobs streams the blobs ids through one git cat-file --batch, calling
// each with every blob's content in turn.
func (r *Repo) catBlobs(ctx context.Context, ids []string, each func(i int, size int64, content io.Reader) error) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := []string{"cat-file", "--batch"}
	cmd, stderr := r.command(ctx, nil, strings.NewReader(strings.Join(ids, "\n")+"\n"), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("gitrepo: git cat-file: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return wrapRunError(r.top, args, err, "")
	}
	defer func() {
		if err != nil {
			cancel() // git may be blocked writing what we no longer read
		}
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = wrapRunError(r.top, args, werr, stderr.String())
		}
	}()
	br := bufio.NewReader(stdout)
	for i, id := range ids {
		header, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("gitrepo: git cat-file --batch: reading the header of %s: %w", id, err)
		}
		f := strings.Fields(header)
		if len(f) != 3 || f[1] != "blob" {
			return fmt.Errorf("gitrepo: git cat-file --batch: %s: got %q, want a blob", id, strings.TrimSpace(header))
		}
		size, perr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || size < 0 {
			return fmt.Errorf("gitrepo: git cat-file --batch: %s: bad size in %q", id, strings.TrimSpace(header))
		}
		content := io.LimitReader(br, size)
		if err := each(i, size, content); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, content); err != nil {
			return fmt.Errorf("gitrepo: git cat-file --batch: reading %s: %w", id, err)
		}
		if b, err := br.ReadByte(); err != nil || b != '\n' {
			return fmt.Errorf("gitrepo: git cat-file --batch: %s is not followed by a newline", id)
		}
	}
	return nil
}

// checkParents refuses a path below a symlink or a file in the work tree,
// unless that one is in removing; exists is false when a parent directory is
// missing (or will be).
func checkParents(root *os.Root, p string, removing map[string]bool) (exists bool, err error) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil
		case err == nil && !fi.IsDir() && removing[dir]:
			return false, nil
		case err != nil:
			return false, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return false, fmt.Errorf("%w: %s is a symlink in the work tree", ErrUnsafePath, dir)
		case !fi.IsDir():
			return false, fmt.Errorf("%s is a file in the work tree, not a directory", dir)
		}
	}
	return true, nil
}

// removeFile removes the file or symlink p, then its parent directories as
// long as they are empty. A directory at p is kept when keepDir (the tree
// has one there too), else removed only when empty.
func removeFile(root *os.Root, p string, keepDir bool) error {
	if exists, err := checkParents(root, p, nil); err != nil || !exists {
		return err
	}
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir() && keepDir {
		return nil
	}
	if err != nil {
		return err
	}
	if err := root.Remove(p); err != nil {
		if fi.IsDir() {
			return fmt.Errorf("it is a directory that is not empty in the work tree; Restore removes files, give the files in it")
		}
		return err
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if root.Remove(dir) != nil { // not empty: done
			break
		}
	}
	return nil
}

// writeFile replaces p with content of the given git mode. The new file is
// written aside and renamed over p, so that a symlink at p is replaced, never
// written through.
func writeFile(root *os.Root, p, mode string, content io.Reader, size int64) error {
	if _, err := checkParents(root, p, nil); err != nil {
		return err
	}
	dir := path.Dir(p)
	if err := root.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if fi, err := root.Lstat(p); err == nil && fi.IsDir() {
		if err := root.Remove(p); err != nil {
			return fmt.Errorf("it is a directory that is not empty in the work tree; remove the files in it first")
		}
	}
	tmp := path.Join(dir, ".ctxgraphd-restore-"+rand.Text())
	switch mode {
	case ModeSymlink:
		target, err := io.ReadAll(content)
		if err != nil {
			return err
		}
		if err := root.Symlink(string(target), tmp); err != nil {
			return err
		}
	case ModeFile, ModeExecutable:
		perm := fs.FileMode(0o666) // less the umask, as git checkout does
		if mode == ModeExecutable {
			perm = 0o777
		}
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, content, size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			root.Remove(tmp)
			return err
		}
	default:
		return fmt.Errorf("mode %s is not a file, an executable or a symlink", mode)
	}
	if err := root.Rename(tmp, p); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// HashFile writes the content of the project file p, as it is on disk
// (git hash-object -w --no-filters), to the object database and returns its
// blob id. A symlink is followed as long as it stays in the project.
func (r *Repo) HashFile(ctx context.Context, p string) (string, error) {
	c, err := cleanPath(p)
	if err != nil {
		return "", fmt.Errorf("gitrepo: hash: %w", err)
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return "", fmt.Errorf("gitrepo: hash %s: %w", p, err)
	}
	defer root.Close()
	f, err := root.Open(c)
	if err != nil {
		return "", fmt.Errorf("gitrepo: hash %s: %w", p, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", fmt.Errorf("gitrepo: hash %s: %w", p, err)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("gitrepo: hash %s: not a regular file (%s)", p, fi.Mode().Type())
	}
	out, err := r.git(ctx, nil, f, "hash-object", "-w", "--no-filters", "--stdin")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Blob returns the content of blob id.
func (r *Repo) Blob(ctx context.Context, id string) ([]byte, error) {
	if err := checkID("blob", id); err != nil {
		return nil, err
	}
	return r.git(ctx, nil, nil, "cat-file", "blob", id)
}

// Blobs returns the contents of the blobs ids, in their order, read by one
// git process.
func (r *Repo) Blobs(ctx context.Context, ids []string) ([][]byte, error) {
	for _, id := range ids {
		if err := checkID("blob", id); err != nil {
			return nil, err
		}
	}
	out := make([][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	err := r.catBlobs(ctx, ids, func(i int, size int64, content io.Reader) error {
		b, err := io.ReadAll(content)
		out[i] = b
		return err
	})
	return out, err
}
