package fleet

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
)

// A run's dependencies (node_modules, a venv: toolchain.DependencyDirs)
// are what a build installs and git does not carry, so neither its base
// nor its result bundle holds them. A local lane's runs find them in its
// work tree, and the daemon's test run is lent them from there. A run on
// a worker gets them beside its base, as a gzipped tar (the lane's own,
// or the project's where the lane has none, as the judge lends them), and
// sends its own back beside its result, which the daemon unpacks into
// the lane's work tree, where the next run and the test run find them.

// packDeps writes to w the dependency directories (directories, not
// links) of the first of dirs that has each, and returns their names; it
// fails past limit bytes of files.
func packDeps(w io.Writer, limit int64, dirs ...string) ([]string, error) {
	var names []string
	from := map[string]string{}
	for _, d := range toolchain.DependencyDirs {
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
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return names, gz.Close()
}

// unpackDeps replaces dir's dependency directories named by names with
// those of the archive r (packDeps's). Nothing is written outside them:
// every write goes through an os.Root of dir, which follows no link out
// of it, and an entry outside names, or not a plain relative path, is
// refused. At most limit bytes of files are written.
func unpackDeps(dir string, r io.Reader, names []string, limit int64) error {
	for _, n := range names {
		if !slices.Contains(toolchain.DependencyDirs, n) {
			return fmt.Errorf("%q is not a dependency directory (%s)", n, strings.Join(toolchain.DependencyDirs, ", "))
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
