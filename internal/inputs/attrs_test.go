package inputs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkout writes files (path, then content) in the order given, as a
// checkout does (git writes the index's order): what the file system
// hands out as each is made (an inode number, a time) follows it.
func checkout(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for i := 0; i < len(files); i += 2 {
		full := filepath.Join(root, files[i])
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestWhatAViewSaysOfANameDependsOnItAlone: a run that looks at names
// only (stat, statfs, a failed rmdir), never listing where the change
// is, sees exactly the same on a tree with more entries around those
// names, and its record says the change cannot affect it. Each probe is
// one the file system below would have answered differently: a
// directory's link count and size (a subdirectory made in it), an inode
// number and times (files made before it by the checkout), a birth time
// (statx, and the generation in a file handle), an inode's generation (an
// ioctl), the free inodes and blocks (statfs), the inode numbers of a
// listing (d_ino) of a directory the change leaves as it was.
func TestWhatAViewSaysOfANameDependsOnItAlone(t *testing.T) {
	big := strings.Repeat("x", 4<<20) // long enough to write that a time would show it
	base := checkout(t, "a/first", "1", "b/known", "2", "conf/known", "3", "conf/sub/x", "4")
	// Names long enough that 200 of them take a directory past one block:
	// a's size and blocks grow with them on ext4.
	var more []string
	for i := range 200 {
		more = append(more, fmt.Sprintf("a/a-file-the-checkout-wrote-before-b-%03d", i), "")
	}
	changed := checkout(t, slices.Concat([]string{"a/first", "1", "a/zbig", big}, more,
		[]string{"b/known", "2", "conf/known", "3", "conf/newdir/f", "5", "conf/sub/x", "4"})...)
	changes := []Change{{Path: "a/zbig", Entry: true}, {Path: "conf/newdir", Entry: true}, {Path: "conf/newdir/f", Entry: true}}
	for i := 0; i < len(more); i += 2 {
		changes = append(changes, Change{Path: more[i], Entry: true})
	}

	probe := `stat -c '%n ino=%i links=%h size=%s blocks=%b atime=%X mtime=%Y ctime=%Z birth=%W' . a b conf conf/sub conf/known b/known a/first
		stat -f -c 'blocks=%b free=%f avail=%a inodes=%c ifree=%d' .
		rmdir conf/sub 2>&1 || true
		python3 -c 'import os; s = os.stat("b/known"); d = os.stat("."); print(s.st_ino, s.st_nlink, s.st_mtime_ns - d.st_mtime_ns, s.st_ctime_ns - d.st_ctime_ns)'
		python3 -c 'import os; print(sorted((e.name, e.inode()) for e in os.scandir("conf/sub")), os.stat("conf/sub/x").st_ino)'
		python3 -c "$handles" a/first b/known conf/known
		python3 -c "$ioctls" b/known conf/known`
	// ioctl(2): the inode's flags and generation.
	ioctls := `
import errno, fcntl, os, struct, sys
for name in sys.argv[1:]:
    for what, req in (("flags", 0x80086601), ("generation", 0x80087601)):
        buf = bytearray(8)
        try:
            fcntl.ioctl(os.open(name, os.O_RDONLY), req, buf, True)
            print(name, what, buf.hex())
        except OSError as e:
            print(name, "no", what, errno.errorcode[e.errno])
`
	// name_to_handle_at(2): a FUSE handle is the node's id and its
	// generation (fuse_encode_fh), and the generation is what tells.
	handles := `
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
for name in sys.argv[1:]:
    buf = ctypes.create_string_buffer(struct.pack("Ii", 128, 0) + bytes(128))
    mnt = ctypes.c_int()
    if libc.name_to_handle_at(-100, name.encode(), buf, ctypes.byref(mnt), 0) != 0:
        print(name, "no handle", ctypes.get_errno())
        continue
    n, kind = struct.unpack_from("Ii", buf.raw)
    words = struct.unpack_from("%dI" % (n // 4), buf.raw, 8)
    print(name, "handle type", kind, "generation", words[2:])
`
	var seen [2]string
	var recs [2]Record
	for i, root := range []string{base, changed} {
		v := mount(t, root)
		seen[i] = run(t, v.Dir, "handles='"+handles+"'\nioctls='"+ioctls+"'\n"+probe)
		r, err := v.Close()
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = r
	}
	// The times shown are the mount's, each view's own: the same for
	// every name of one view, which is what a run could compare.
	if a, b := strings.Fields(seen[0]), strings.Fields(seen[1]); len(a) != len(b) {
		t.Fatalf("the probes printed\n%s\nand\n%s", seen[0], seen[1])
	}
	if got, want := timesRelative(seen[1]), timesRelative(seen[0]); got != want {
		t.Errorf("a run that never looked where the trees differ saw\n%s\non one and\n%s\non the other", want, got)
	}
	if recs[0].Affects(changes) {
		t.Errorf("the record %+v says the change can affect the run: the probe is not one that should have seen it", recs[0])
	}
}

// timesRelative is the probe's output with each time replaced by its
// difference from the first time printed.
func timesRelative(out string) string {
	var first string
	fields := strings.Fields(out)
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !strings.HasSuffix(k, "time") {
			continue
		}
		if first == "" {
			first = v
		}
		if v == first {
			fields[i] = k + "=T"
		}
	}
	return strings.Join(fields, " ")
}

// TestRmdirIsAListing: whether rmdir removes a directory says whether it
// was empty, so the directory is in the record as listed, and a file made
// in it affects the run.
func TestRmdirIsAListing(t *testing.T) {
	v := mount(t, tree(t, map[string]string{"d/x": "x"}))
	if out := run(t, v.Dir, `rm d/x; rmdir d && echo gone`); out != "gone\n" {
		t.Fatalf("the run printed %q", out)
	}
	r, err := v.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Listed, "d") {
		t.Errorf("rmdir d: d is not listed in %+v", r)
	}
	if !r.Affects([]Change{{Path: "d/y", Entry: true}}) {
		t.Errorf("a file made in the directory the run removed does not affect it: %+v", r)
	}
}
