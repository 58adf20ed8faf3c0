// Package inputs records what a run of a test reads of a tree, from
// outside the test's processes: the tree is served to the run through a
// view of it (a FUSE loopback mount, go-fuse), which notes every name the
// kernel looks up in it, found or absent, every file opened, every
// directory listed and every link read. The kernel resolves each path a
// process gives, one name at a time, and asks the view for each name it
// has not resolved in this mount before, so no process of the run can
// hide a name it used from the record (its own code never sees the
// record, nor the view's process), however it builds the path: a
// relative path, a directory's descriptor, a link, a buffer another
// thread rewrites while the call is made.
//
// A Record is the set of what was seen, not how often: a view is mounted
// for one run and unmounted after it, so that the kernel's caches, which
// spare the view repeated questions, never outlive the run.
//
// What the run reads outside the tree (its toolchain, the system, the
// directories lent to it) the view does not see; Record.Outside says when
// a link of the tree leads there, and the caller judges the rest.
package inputs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Record is what one run saw of its tree, each a set of paths relative to
// the tree's root, slash-separated, sorted ("" is the root itself).
type Record struct {
	// Opened are the files the run opened (to read, or to write: a file it
	// wrote and read back is an input too, as far as the record can say).
	Opened []string `json:"opened,omitempty"`
	// Listed are the directories it read.
	Listed []string `json:"listed,omitempty"`
	// Found are the names it looked up and found (a stat, a path's
	// component, an open's target).
	Found []string `json:"found,omitempty"`
	// Absent are the names it looked up and found not there: a file made
	// there later is a change of its input.
	Absent []string `json:"absent,omitempty"`
	// Links are the symbolic links it read.
	Links []string `json:"links,omitempty"`
	// Outside says that a link of the tree it read leads out of the tree
	// (an absolute target, or one above the root): what it read there the
	// record does not hold.
	Outside bool `json:"outside,omitempty"`
	// Moved says that the run renamed a directory of the tree (or swapped
	// two names): what it then did below the new name is recorded under
	// that name, not the tree's, and the record cannot say which of the
	// tree's paths it read.
	Moved bool `json:"moved,omitempty"`
}

// A Change is one path of a tree that differs between two trees
// (relative to the tree, slash-separated). Entry says that the change
// adds the path, removes it or changes its type (a file made a link):
// what a listing of its directory shows. A change of content or mode
// only is not.
type Change struct {
	Path  string
	Entry bool
}

// Affects says whether changes can change what the run of r saw, and so
// its outcome: a path it opened, found, missed or read as a link, an
// entry added to, gone from, or retyped in a directory it listed, or a
// name made under a directory it looked for and missed. Anything the
// record cannot rule out affects it.
func (r Record) Affects(changes []Change) bool {
	if r.Outside || r.Moved {
		return true
	}
	for _, c := range changes {
		p := strings.Trim(path.Clean("/"+c.Path), "/")
		if has(r.Opened, p) || has(r.Found, p) || has(r.Absent, p) || has(r.Links, p) {
			return true
		}
		if c.Entry && has(r.Listed, parent(p)) {
			return true
		}
		// A path made under a name it missed (its ancestor, then, is new).
		for dir := p; dir != ""; {
			dir = parent(dir)
			if has(r.Absent, dir) {
				return true
			}
		}
	}
	return false
}

// parent is p's directory, "" for a name of the root.
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func has(sorted []string, p string) bool {
	_, ok := slices.BinarySearch(sorted, p)
	return ok
}

// View is a tree served through a recording mount, by the process that
// mounted it. That process must not start a process in the view (os/exec's
// Dir there, or a program of the view): between its fork and its exec the
// child's chdir or execve waits for the view, while the parent's forking
// thread holds its scheduler's slot (a raw vfork), and a collection of
// the parent's garbage, which stops the view's goroutines, waits for that
// slot: both wait for ever. Start the run elsewhere and let it change to
// the view itself (a shell's cd, bwrap's --chdir).
type View struct {
	// Dir is where the tree is served: the run works there.
	Dir string

	tree     string
	server   *fuse.Server
	rec      *recorder
	detached bool // Close gave up and unmounted it lazily
}

// ErrNoFUSE says that the system cannot mount a view: FUSE is missing
// (no /dev/fuse, or, as a user other than root, no fusermount3).
var ErrNoFUSE = errors.New("inputs: this system cannot mount FUSE file systems")

// Mount serves tree at dir (an empty directory) and records what is done
// there until Close. As root it mounts itself; as another user it needs
// fusermount3 (Debian's fuse3).
func Mount(tree, dir string) (*View, error) {
	tree, err := filepath.Abs(tree)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w (/dev/fuse: %v): install fuse3, or run the tests without recording", ErrNoFUSE, err)
	}
	rec := newRecorder(tree)
	root, err := fs.NewLoopbackRoot(tree)
	if err != nil {
		return nil, fmt.Errorf("inputs: serving %s: %w", tree, err)
	}
	lb, ok := root.(*fs.LoopbackNode)
	if !ok {
		return nil, fmt.Errorf("inputs: serving %s: go-fuse's loopback root is a %T", tree, root)
	}
	// The kernel asks once per name and mount: the record is a set, and
	// the view lives for one run, so long timeouts cost the record
	// nothing and spare the run the round trips.
	forever := time.Hour
	opts := &fs.Options{
		EntryTimeout: &forever, AttrTimeout: &forever, NegativeTimeout: &forever,
		MountOptions: fuse.MountOptions{
			FsName: tree, Name: "ctxgraphd-inputs", DirectMount: os.Geteuid() == 0,
			// The run's own user only, and no device files.
			Options: []string{"nodev", "nosuid"},
			// A listing's entries come without their attributes, which
			// go-fuse would fill past the view's (attrs.go): each
			// is then looked up, through the view.
			DisableReadDirPlus: true,
		},
	}
	// What the view answers of a name says nothing of other names
	// (attrs.go): its attributes are rewritten above the loopback's.
	at := newAttrs(fs.NewNodeFS(&node{LoopbackNode: lb, rec: rec}, opts), time.Now())
	rec.attrs = at
	server, err := fuse.NewServer(at, dir, &opts.MountOptions)
	if err == nil {
		go server.Serve()
		err = server.WaitMount()
	}
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), "fusermount") {
			return nil, fmt.Errorf("%w: %v: install fuse3 (fusermount3), or run the tests without recording", ErrNoFUSE, err)
		}
		return nil, fmt.Errorf("inputs: mounting a view of %s at %s: %w", tree, dir, err)
	}
	return &View{Dir: dir, tree: tree, server: server, rec: rec}, nil
}

// Close unmounts the view and returns its record. A view that cannot be
// unmounted (a process of the run still works in it) is an error, and
// its record is not to be trusted: the run is not over.
//
// A run's jail (a mount namespace that holds a bind of the view) can
// outlive its last process by a moment while the kernel tears it down,
// and the view is busy until it has: Close tries for up to unmountWithin.
// A view still busy then is detached (unmounted lazily, so that nothing
// stays mounted) and its record refused.
//
// Once detached, the view is served until the last process in it is
// gone; a later Close waits for that, and its record is refused still.
func (v *View) Close() (Record, error) {
	if v.detached {
		v.server.Wait()
		return Record{}, fmt.Errorf("inputs: the view of %s at %s was detached busy: its record is not to be trusted", v.tree, v.Dir)
	}
	deadline := time.Now().Add(unmountWithin)
	for {
		err := v.server.Unmount()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			if derr := Detach(v.Dir); derr == nil {
				v.detached = true
			} else {
				err = fmt.Errorf("%w; %v", err, derr)
			}
			return Record{}, fmt.Errorf("inputs: unmounting the view of %s at %s (is a process of the run still in it?): %w", v.tree, v.Dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	v.server.Wait()
	return v.rec.record(), nil
}

// Detach unmounts the view at dir lazily: at once for new paths, and
// for good once no process is in it. It is how Close lets go of a busy
// view, and how a daemon removes the views an earlier one left mounted
// when it was killed (their server gone, each says "transport endpoint
// is not connected" to whatever touches it, removal included).
func Detach(dir string) error {
	out, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput()
	if err == nil {
		return nil
	}
	// As root, without fuse3's helper installed, the kernel's own call.
	if uerr := syscall.Unmount(dir, syscall.MNT_DETACH); uerr == nil {
		return nil
	}
	return fmt.Errorf("inputs: detaching the view at %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
}

// unmountWithin is how long Close tries to unmount a busy view.
var unmountWithin = 5 * time.Second

// recorder holds the sets of a view, as its nodes report them.
type recorder struct {
	tree  string
	attrs *attrs // what the view shows of inode numbers (attrs.go)

	mu                                   sync.Mutex
	opened, listed, found, absent, links map[string]bool
	outside, moved                       bool
}

func newRecorder(tree string) *recorder {
	return &recorder{tree: tree, opened: map[string]bool{}, listed: map[string]bool{}, found: map[string]bool{},
		absent: map[string]bool{}, links: map[string]bool{}}
}

func (r *recorder) note(set map[string]bool, p string) {
	r.mu.Lock()
	set[p] = true
	r.mu.Unlock()
}

func (r *recorder) record() Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	sorted := func(set map[string]bool) []string {
		out := make([]string, 0, len(set))
		for p := range set {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
	return Record{Opened: sorted(r.opened), Listed: sorted(r.listed), Found: sorted(r.found),
		Absent: sorted(r.absent), Links: sorted(r.links), Outside: r.outside, Moved: r.moved}
}

// node is go-fuse's loopback node, noting what the kernel asks of it.
type node struct {
	*fs.LoopbackNode
	rec *recorder
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
)

func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), rec: n.rec}
}

// rel is the node's path in the tree, with name below it if given.
func (n *node) rel(name string) string {
	p := n.Path(nil)
	if name != "" {
		p = path.Join(p, name)
	}
	return p
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == syscall.ENOENT {
		n.rec.note(n.rec.absent, n.rel(name))
	} else {
		// Found, or not to be told (EACCES): either way the name matters.
		n.rec.note(n.rec.found, n.rel(name))
	}
	return ch, errno
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.rec.note(n.rec.opened, n.rel(""))
	return n.LoopbackNode.Open(ctx, flags)
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.rec.note(n.rec.opened, n.rel(name))
	return n.LoopbackNode.Create(ctx, name, flags, mode, out)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.rec.note(n.rec.listed, n.rel(""))
	fh, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return fh, fuseFlags, errno
	}
	return &dirHandle{FileHandle: fh, attrs: n.rec.attrs}, fuseFlags, 0
}

// Rmdir notes the directory as listed: whether it goes tells whether it
// was empty.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.rec.note(n.rec.listed, n.rel(name))
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	target, errno := n.LoopbackNode.Readlink(ctx)
	n.rec.note(n.rec.links, n.rel(""))
	if errno == 0 {
		t := string(target)
		if filepath.IsAbs(t) || !filepath.IsLocal(filepath.Join(filepath.Dir(n.rel("")), t)) {
			n.rec.mu.Lock()
			n.rec.outside = true
			n.rec.mu.Unlock()
		}
	}
	return target, errno
}

// renameExchange is RENAME_EXCHANGE of a FUSE rename's flags (Linux's
// value, which FUSE carries): the two names swap.
const renameExchange = 0x2

// Rename notes a directory renamed, or two names swapped, as a move
// (Record.Moved). A file renamed is no move: the run looked its old name
// up, which is in the record, and its new one.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var st syscall.Stat_t
	err := syscall.Lstat(filepath.Join(n.rec.tree, filepath.FromSlash(n.rel(name))), &st)
	if flags&renameExchange != 0 || err != nil || st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		n.rec.mu.Lock()
		n.rec.moved = true
		n.rec.mu.Unlock()
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}
