package toolchain

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// A run's dependencies (node_modules, a venv: DependencyDirs)
// are what a build installs and git does not carry, so neither its base
// nor its result bundle holds them. A local lane's runs find them in its
// work tree, and the daemon's test run is lent them from there. A run on
// a worker gets them beside its base, as a gzipped tar (the lane's own,
// or the project's where the lane has none, as the judge lends them), and
// sends its own back beside its result, which the daemon unpacks into
// the lane's work tree, where the next run and the test run find them.
// When a lane's work lands on the branch, the dependencies it was judged
// with go with it into the project's work tree (LandDeps).

// PackDeps writes to w the dependency directories (directories, not
// links) of the first of dirs that has each, and returns their names; it
// fails past limit bytes of files.
func PackDeps(w io.Writer, limit int64, dirs ...string) ([]string, error) {
	var names []string
	from := map[string]string{}
	for _, d := range DependencyDirs {
		for _, dir := range dirs {
			if fi, err := os.Lstat(filepath.Join(dir, d)); dir != "" && err == nil && fi.IsDir() {
				names, from[d] = append(names, d), dir
				break
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := pack(w, limit, names, from); err != nil {
		return nil, err
	}
	return names, nil
}

// pack writes to w, as a gzipped tar, each of names from the directory
// from names it by; it fails past limit bytes of files.
func pack(w io.Writer, limit int64, names []string, from map[string]string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	var total int64
	for _, name := range names {
		dir := from[name]
		err := filepath.WalkDir(filepath.Join(dir, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fi, err := d.Info()
			if err != nil {
				return err
			}
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			} else if !fi.Mode().IsRegular() && !fi.IsDir() {
				return nil // sockets, devices: nothing a test reads
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			h.Name = filepath.ToSlash(rel)
			h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
			if total += fi.Size(); total > limit {
				return fmt.Errorf("the run's dependencies (%s) are over %d bytes", strings.Join(names, ", "), limit)
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// UnpackDeps replaces dir's dependency directories named by names with
// those of the archive r (PackDeps's). Nothing is written outside them:
// every write goes through an os.Root of dir, which follows no link out
// of it, and an entry outside names, or not a plain relative path, is
// refused. At most limit bytes of files are written.
func UnpackDeps(dir string, r io.Reader, names []string, limit int64) error {
	for _, n := range names {
		if !slices.Contains(DependencyDirs, n) {
			return fmt.Errorf("%q is not a dependency directory (%s)", n, strings.Join(DependencyDirs, ", "))
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, n := range names {
		if err := root.RemoveAll(n); err != nil {
			return err
		}
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("the run's dependencies: %w", err)
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the run's dependencies: %w", err)
		}
		name := h.Name
		top, _, _ := strings.Cut(name, "/")
		if !fs.ValidPath(name) || path.Clean(name) != name || !slices.Contains(names, top) {
			return fmt.Errorf("the run's dependencies: %q is not a path in %s", name, strings.Join(names, ", "))
		}
		if err := noLinkOnTheWay(root, name); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, 0o755)
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
		case tar.TypeReg:
			if total += h.Size; total > limit {
				return fmt.Errorf("the run's dependencies are over %d bytes", limit)
			}
			var f *os.File
			if f, err = root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(h.Mode)&0o755|0o600); err == nil {
				_, err = io.CopyN(f, tr, h.Size)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err != nil {
			return fmt.Errorf("the run's dependencies: %s: %w", name, err)
		}
	}
}

// noLinkOnTheWay refuses name when a directory on its way in root is a
// symbolic link: os.Root follows a link that stays inside root, and one
// into the project's own files would let an entry of node_modules write
// the project's code.
func noLinkOnTheWay(root *os.Root, name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(p)
		if err != nil {
			return fmt.Errorf("the run's dependencies: %s: %w", name, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("the run's dependencies: %s is under %s, a symbolic link; nothing is written through one", name, p)
		}
	}
	return nil
}

// LandDeps moves the dependency directories of the work tree from (a
// lane's, whose work just landed on the branch) into the work tree to (the
// project's, brought forward to that commit), each replacing to's, and
// returns their names. Only real directories move, never a link; a
// dependency directory from lacks is left as to has it.
//
// It keeps one invariant: the project's dependency directories are those
// the branch's last tree was judged with. A lane's claim is judged, its
// feature's test and every tested feature's, with the lane's own
// directories where it has them and the project's where it has none
// (judge: lent), so after it lands the project holds exactly what that
// sweep ran with. Without it a later lane that installs nothing would be
// lent the person's tree as it was before the night, and find the features
// that needed what earlier lanes installed broken; and the person would
// wake to a branch whose tests need an install first.
//
// Where both trees are on one file system the directory is renamed (the
// project's old one first set aside in from, so that no moment has half
// of one), else copied through PackDeps and UnpackDeps, which write
// nothing outside it.
func LandDeps(from, to string) ([]string, error) {
	var landed []string
	for _, d := range DependencyDirs {
		if fi, err := os.Lstat(filepath.Join(from, d)); err != nil || !fi.IsDir() {
			continue
		}
		if err := landDep(from, to, d); err != nil {
			return landed, fmt.Errorf("landing %s: %w", d, err)
		}
		if err := relocateScripts(to, d, filepath.Join(from, d)); err != nil {
			return landed, fmt.Errorf("landing %s: %w", d, err)
		}
		landed = append(landed, d)
	}
	return landed, nil
}

// rename is os.Rename; tests make it fail as across file systems.
var rename = os.Rename

func landDep(from, to, d string) error {
	src, dst, old := filepath.Join(from, d), filepath.Join(to, d), filepath.Join(from, d+".replaced")
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	err := rename(dst, old)
	switch {
	case err == nil || errors.Is(err, fs.ErrNotExist):
		set := err == nil
		if err = rename(src, dst); err == nil {
			return os.RemoveAll(old)
		}
		if set {
			// The project's is put back: its tree was judged with it
			// until now.
			if rerr := rename(old, dst); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		if !errors.Is(err, syscall.EXDEV) {
			return err
		}
	case !errors.Is(err, syscall.EXDEV):
		return err
	}
	// Another file system: a copy, through an archive, in place of the
	// project's.
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := pack(pw, math.MaxInt64, []string{d}, map[string]string{d: from})
		pw.CloseWithError(err)
		packed <- err
	}()
	err = UnpackDeps(to, pr, []string{d}, math.MaxInt64)
	pr.CloseWithError(err)
	if perr := <-packed; err == nil {
		err = perr
	}
	return err
}

// relocateScripts makes the scripts of the dependency directory d of the
// work tree to, just landed from was, name it where it now is. A
// virtualenv is not relocatable: its console scripts (pip, pytest) start
// with #!<where it was made>/bin/python and its activate scripts set
// VIRTUAL_ENV to that path, which is gone with the lane; its python is a
// link to the system's, and finds its packages from where it is, so the
// scripts are all that name the old place. Each regular file of d/bin up
// to a MiB that names was is written anew (a new file renamed over the
// old: a hard link an agent made to a file elsewhere is left as it was),
// through an os.Root of to; nothing else is touched. node_modules/.bin
// holds relative links, which need nothing.
func relocateScripts(to, d, was string) error {
	root, err := os.OpenRoot(to)
	if err != nil {
		return err
	}
	defer root.Close()
	bin := path.Join(d, "bin")
	if fi, err := root.Lstat(bin); err != nil || !fi.IsDir() {
		return nil
	}
	dir, err := root.Open(bin)
	if err != nil {
		return err
	}
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return err
	}
	old, now := []byte(was), []byte(filepath.Join(to, d))
	for _, e := range ents {
		name := path.Join(bin, e.Name())
		fi, err := root.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
			continue
		}
		body, err := root.ReadFile(name)
		if err != nil || !bytes.Contains(body, old) {
			continue
		}
		// The new file is made, never opened: a link of that name, which
		// the lane's agents could have left, would be followed.
		tmp := name + ".relocating"
		if err := root.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		_, err = f.Write(bytes.ReplaceAll(body, old, now))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Rename(tmp, name)
		}
		if err != nil {
			root.Remove(tmp)
			return err
		}
	}
	return nil
}
