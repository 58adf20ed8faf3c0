// Package treefile reads and writes files in a work tree that agents write
// (the project's own, a lane's clone) without following a symbolic link.
//
// The daemon runs unconfined. An agent's sandbox lets it make links where it
// may write (a tester's evidence directory, a lane's whole clone), and a
// write of the daemon's that followed one would put bytes into a file of the
// agent's choosing anywhere the daemon may write (evidence/F-001/test.log →
// ~/.bashrc), or create files in a directory of its choosing (evidence/F-001
// → ~/.ssh); a read that followed one would copy a file of the agent's
// choosing into the project, where agents read. So every name is taken
// below a directory the daemon trusts (the tree's top, which it made or
// was given) and each component below it must be a real directory, the
// last a regular file: a link or a special file anywhere is an error
// (*NotFileError), never followed.
//
// The components are checked with Lstat before the file is opened through
// an os.Root of the top, which keeps whatever a link swapped in meanwhile
// from reaching outside the tree: the kernel, not a check, bounds it. A
// write goes to a new file beside the target and is renamed over it, so a
// link put in the target's place in the meantime is replaced, not
// followed.
package treefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// NotFileError is a name that crosses, or is, something other than a
// directory or a regular file: a symbolic link, a named pipe, a socket, a
// device.
type NotFileError struct {
	// Path is the component found, as the top's path joined with the
	// name's components up to it.
	Path string
	// Mode is what it is.
	Mode fs.FileMode
}

func (e *NotFileError) Error() string {
	what := "not a regular file or a directory"
	if e.Mode&fs.ModeSymlink != 0 {
		what = "a symbolic link"
	}
	return fmt.Sprintf("%s is %s: ctxgraphd does not follow it in a tree that agents write", e.Path, what)
}

// IsNotFile reports whether err is, or wraps, a *NotFileError.
func IsNotFile(err error) bool {
	var nf *NotFileError
	return errors.As(err, &nf)
}

// clean checks name (slash-separated, relative, within the top) and
// returns its components.
func clean(name string) ([]string, error) {
	name = filepath.ToSlash(name)
	c := path.Clean(name)
	if name == "" || path.IsAbs(name) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return nil, fmt.Errorf("%q is not a path inside the tree", name)
	}
	return strings.Split(c, "/"), nil
}

// checkDirs makes sure every component of parts but the last, below top,
// is a real directory; with create, missing ones are made (mode 0o755).
// It returns how far it got: a missing directory without create is
// fs.ErrNotExist.
func checkDirs(root *os.Root, top string, parts []string, create bool) error {
	for i := range len(parts) - 1 {
		rel := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err := root.Mkdir(rel, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			fi, err = root.Lstat(rel)
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &NotFileError{Path: filepath.Join(top, filepath.FromSlash(rel)), Mode: fi.Mode()}
		}
	}
	return nil
}

// below opens top as a root and checks name's directories on the way
// (checkDirs, making missing ones with create): the prelude of every
// access. The caller closes the root.
func below(top string, parts []string, create bool) (*os.Root, error) {
	root, err := os.OpenRoot(top)
	if err != nil {
		return nil, err
	}
	if err := checkDirs(root, top, parts, create); err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// MkdirAll makes top/name and the directories on the way that are
// missing, each a real directory (mode 0o755): one that is a link, or
// anything but a directory, is an error.
func MkdirAll(top, name string) error {
	parts, err := clean(name)
	if err != nil {
		return err
	}
	// checkDirs checks all but the last component: give it one more.
	root, err := below(top, append(parts, "."), true)
	if err != nil {
		return err
	}
	return root.Close()
}

// ReadFile reads top/name, a regular file reached through real
// directories only.
func ReadFile(top, name string) ([]byte, error) {
	parts, err := clean(name)
	if err != nil {
		return nil, err
	}
	root, err := below(top, parts, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := strings.Join(parts, "/")
	// The file opened must be the one checked. A file replaced whole
	// between the two (an atomic write, the daemon's or an agent's) is
	// looked at again; a link or a pipe put in its place is refused, never
	// read.
	for range 8 {
		data, again, err := readChecked(root, top, rel)
		if !again {
			return data, err
		}
	}
	return nil, fmt.Errorf("%s kept changing while it was read", filepath.Join(top, filepath.FromSlash(rel)))
}

// readChecked reads rel if it is a regular file and is still the one
// opened; again is true when it was replaced meanwhile.
func readChecked(root *os.Root, top, rel string) (data []byte, again bool, err error) {
	before, err := root.Lstat(rel)
	if err != nil {
		return nil, false, err
	}
	if !before.Mode().IsRegular() {
		return nil, false, &NotFileError{Path: filepath.Join(top, filepath.FromSlash(rel)), Mode: before.Mode()}
	}
	// Non-blocking: a named pipe swapped in after the check must not hold
	// the daemon waiting for a writer. A regular file reads as ever.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if now, err := f.Stat(); err != nil || !os.SameFile(before, now) {
		return nil, true, nil
	}
	data, err = io.ReadAll(f)
	return data, false, err
}

// Lstat describes top/name without following a link, after checking that
// every directory on the way is a real one.
func Lstat(top, name string) (fs.FileInfo, error) {
	parts, err := clean(name)
	if err != nil {
		return nil, err
	}
	root, err := below(top, parts, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Lstat(strings.Join(parts, "/"))
}

// WriteFile replaces top/name with data (mode perm), creating the
// directories on the way that are missing. A reader sees the old content
// or the new, never a torn write: the data goes to a new file in the same
// directory, which is synced and renamed over name. A link at name is
// replaced by the file, not followed; a link, or anything but a directory,
// on the way is an error and nothing is written.
func WriteFile(top, name string, data []byte, perm fs.FileMode) error {
	parts, err := clean(name)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := checkDirs(root, top, parts, true); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(top, filepath.FromSlash(name)), err)
	}
	rel := strings.Join(parts, "/")
	dir := path.Dir(rel)
	if err := write(root, dir, rel, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(top, filepath.FromSlash(rel)), err)
	}
	if d, err := root.Open(dir); err == nil {
		d.Sync() // the rename itself survives a power loss
		d.Close()
	}
	return nil
}

// write puts data into a new file in dir and renames it over rel.
func write(root *os.Root, dir, rel string, data []byte, perm fs.FileMode) error {
	var tmp string
	var f *os.File
	for i := 0; ; i++ {
		tmp = path.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", path.Base(rel), os.Getpid(), i))
		var err error
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return err
		}
	}
	defer root.Remove(tmp) // nothing to remove after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return root.Rename(tmp, rel)
}

// NotFiles lists what below top/dir is neither a directory nor a regular
// file (links, pipes, sockets, devices), as paths relative to top with
// forward slashes, without following any of them. A dir that is itself
// one of them is listed alone; a dir that does not exist lists nothing.
// The directories that cannot be read (dir itself among them) are listed
// apart, in unreadable: what they hold cannot be vouched for (a chmod 000
// would hide a link), and their owner may open them (Open) and look again.
func NotFiles(top, dir string) (found, unreadable []string, err error) {
	fi, err := Lstat(top, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if IsNotFile(err) {
		var nf *NotFileError
		errors.As(err, &nf)
		rel, _ := filepath.Rel(top, nf.Path)
		return []string{filepath.ToSlash(rel)}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	dir = path.Clean(filepath.ToSlash(dir))
	if !fi.IsDir() {
		if fi.Mode().IsRegular() {
			return nil, nil, nil
		}
		return []string{dir}, nil, nil
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	return notFiles(root.FS(), dir)
}

// notFiles is NotFiles' walk of fsys from dir, which is a directory.
func notFiles(fsys fs.FS, dir string) (found, unreadable []string, err error) {
	err = fs.WalkDir(fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && errors.Is(err, fs.ErrPermission) {
				unreadable = append(unreadable, name)
				return fs.SkipDir
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			found = append(found, name)
		}
		return nil
	})
	return found, unreadable, err
}

// Open gives top/name, a real directory reached through real directories
// only, the mode 0o700 added to what it has: its owner may then read it,
// search it and remove what it holds.
func Open(top, name string) error {
	fi, err := Lstat(top, name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &NotFileError{Path: filepath.Join(top, filepath.FromSlash(name)), Mode: fi.Mode()}
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.Chmod(name, fi.Mode().Perm()|0o700)
}
