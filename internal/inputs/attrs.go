package inputs

// What a view tells of a name beyond the name: its attributes. A record
// holds the names a run used, so what the view answers about a name must
// depend on nothing but that name's own entry and content, or a run
// could learn of a change it never looked at, and pass on a tree whose
// change its record says it cannot see. The underlying file system's
// attributes do not keep to that:
//
//   - a directory's link count and size grow with its entries (ext4
//     counts its subdirectories, tmpfs and btrfs their names);
//   - inode numbers are handed out in the order the checkout made its
//     files, so a file's number counts the files made before it, anywhere;
//   - times, birth time included, tell how long the checkout took to
//     write what came before (and go-fuse's loopback makes a name's
//     generation, which name_to_handle_at(2) gives out, of its birth time);
//   - the file system's free blocks and inodes (statfs) count every file,
//     and an inode's generation (an ioctl) may count those made before it.
//
// The view therefore answers, above go-fuse's loopback: inode numbers in
// the order the run first met them (mapped); a directory's link count as
// 1 (as btrfs and most FUSE file systems give it: "not counted", which
// find and fts take as such) and its size as one block; no time earlier
// than the view's mount (what the run itself changes keeps its own time,
// so that Python's import cache still sees a directory it wrote to);
// no generation; fixed statfs figures; no ioctl; and no statx, whose birth time the kernel then
// does not ask for (it falls back to getattr).

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// attrs rewrites the attributes a view's file system answers with.
type attrs struct {
	fuse.RawFileSystem

	since time.Time // the mount: the earliest time shown

	mu   sync.Mutex
	inos map[uint64]uint64 // the underlying inode's number: the one shown
}

func newAttrs(raw fuse.RawFileSystem, since time.Time) *attrs {
	return &attrs{RawFileSystem: raw, since: since, inos: map[uint64]uint64{}}
}

// ino is the number shown for the underlying inode real: the next one
// free when the run first meets it. 1 is FUSE's root's, and the root is
// the first a run meets (its getattr before any lookup).
func (a *attrs) ino(real uint64) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.inos[real]
	if !ok {
		n = uint64(len(a.inos)) + 1
		a.inos[real] = n
	}
	return n
}

// dirBlock is the size shown for every directory.
const dirBlock = 4096

func (a *attrs) mask(at *fuse.Attr) {
	at.Ino = a.ino(at.Ino)
	if at.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		at.Nlink, at.Size, at.Blocks = 1, dirBlock, dirBlock/512
	}
	sec, nsec := uint64(a.since.Unix()), uint32(a.since.Nanosecond())
	for _, t := range []struct {
		sec  *uint64
		nsec *uint32
	}{{&at.Atime, &at.Atimensec}, {&at.Mtime, &at.Mtimensec}, {&at.Ctime, &at.Ctimensec}} {
		if *t.sec < sec || *t.sec == sec && *t.nsec < nsec {
			*t.sec, *t.nsec = sec, nsec
		}
	}
}

// entry rewrites what the view answers of a name it looked up or made:
// its attributes, and its generation, which go-fuse's loopback takes
// from the file's birth time and name_to_handle_at(2) hands to the run.
func (a *attrs) entry(out *fuse.EntryOut) {
	a.mask(&out.Attr)
	out.Generation = 0
}

func (a *attrs) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := a.RawFileSystem.Lookup(cancel, h, name, out)
	if st.Ok() {
		a.entry(out)
	}
	return st
}

func (a *attrs) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := a.RawFileSystem.GetAttr(cancel, in, out)
	if st.Ok() {
		a.mask(&out.Attr)
	}
	return st
}

func (a *attrs) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := a.RawFileSystem.SetAttr(cancel, in, out)
	if st.Ok() {
		a.mask(&out.Attr)
	}
	return st
}

func (a *attrs) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	st := a.RawFileSystem.Mknod(cancel, in, name, out)
	if st.Ok() {
		a.entry(out)
	}
	return st
}

func (a *attrs) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	st := a.RawFileSystem.Mkdir(cancel, in, name, out)
	if st.Ok() {
		a.entry(out)
	}
	return st
}

func (a *attrs) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	st := a.RawFileSystem.Link(cancel, in, name, out)
	if st.Ok() {
		a.entry(out)
	}
	return st
}

func (a *attrs) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	st := a.RawFileSystem.Symlink(cancel, h, target, name, out)
	if st.Ok() {
		a.entry(out)
	}
	return st
}

func (a *attrs) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := a.RawFileSystem.Create(cancel, in, name, out)
	if st.Ok() {
		a.entry(&out.EntryOut)
	}
	return st
}

func (a *attrs) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	st := a.RawFileSystem.Tmpfile(cancel, in, out)
	if st.Ok() {
		a.entry(&out.EntryOut)
	}
	return st
}

// Statx is not served: the kernel then answers statx(2) from getattr,
// with no birth time.
func (a *attrs) Statx(<-chan struct{}, *fuse.StatxIn, *fuse.StatxOut) fuse.Status {
	return fuse.ENOSYS
}

// Ioctl is refused, as tmpfs refuses what it does not know. The loopback
// would pass it to the file below with the view server's privileges (as
// root, FS_IOC_SETFLAGS makes a file of the checkout immutable), and its
// answers tell of more than the file's name and content: the inode's
// generation (FS_IOC_GETVERSION) is btrfs's transaction of the file's
// making, which counts what the checkout wrote before it.
func (a *attrs) Ioctl(<-chan struct{}, *fuse.IoctlIn, []byte, *fuse.IoctlOut, []byte) fuse.Status {
	return fuse.Status(syscall.ENOTTY)
}

// StatFs gives fixed figures: a terabyte, half of it free, and inodes to
// match. A run that fills the disk still meets ENOSPC from the file
// system below.
func (a *attrs) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	*out = fuse.StatfsOut{Blocks: 1 << 28, Bfree: 1 << 27, Bavail: 1 << 27, Files: 1 << 26, Ffree: 1 << 25,
		Bsize: 4096, NameLen: 255, Frsize: 4096}
	return fuse.OK
}

// dirHandle is a directory's handle whose entries carry the numbers the
// view shows (attrs.ino), not the underlying file system's.
type dirHandle struct {
	fs.FileHandle // the loopback's directory stream
	attrs         *attrs
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	de, errno := d.FileHandle.(fs.FileReaddirenter).Readdirent(ctx)
	if de != nil {
		de.Ino = d.attrs.ino(de.Ino)
	}
	return de, errno
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.FileHandle.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.FileHandle.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if f, ok := d.FileHandle.(fs.FileFsyncdirer); ok {
		return f.Fsyncdir(ctx, flags)
	}
	return syscall.ENOTSUP
}
