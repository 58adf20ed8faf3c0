package treefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"testing/fstest"
)

// tree lays out a work tree as an agent could leave it, beside a place
// outside it that holds a file the daemon must never read or write.
type tree struct {
	top, outside, secret string
}

func newTree(t *testing.T) tree {
	t.Helper()
	base := t.TempDir()
	tr := tree{top: filepath.Join(base, "proj"), outside: filepath.Join(base, "home")}
	tr.secret = filepath.Join(tr.outside, ".bashrc")
	for _, d := range []string{tr.outside, filepath.Join(tr.top, "ev", "F-001"), filepath.Join(tr.top, "ev", "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(tr.secret, "secret\n")
	write(filepath.Join(tr.top, "ev", "F-001", "ok.log"), "ok\n")
	write(filepath.Join(tr.top, "list.json"), "{}\n")
	link := func(target, at string) {
		if err := os.Symlink(target, filepath.Join(tr.top, at)); err != nil {
			t.Fatal(err)
		}
	}
	link(tr.secret, "ev/F-001/test.log")       // a link to a file outside
	link(tr.outside, "ev/F-002")               // a link to a directory outside
	link("../../list.json", "ev/F-001/in.log") // a link inside the tree
	link("real", "ev/F-003")                   // a link to a directory inside
	link(filepath.Join(tr.outside, "new"), "ev/F-001/dangling.log")
	if err := syscall.Mkfifo(filepath.Join(tr.top, "ev", "F-001", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr tree) secretUntouched(t *testing.T) {
	t.Helper()
	if b, _ := os.ReadFile(tr.secret); string(b) != "secret\n" {
		t.Errorf("the file outside the tree was changed: %q", b)
	}
	if ents, _ := os.ReadDir(tr.outside); len(ents) != 1 {
		t.Errorf("files were created outside the tree: %v", ents)
	}
}

func TestReadFileFollowsNoLink(t *testing.T) {
	tr := newTree(t)
	tests := []struct {
		name    string
		notFile bool // a *NotFileError
		want    string
	}{
		{"ev/F-001/ok.log", false, "ok\n"},
		{"list.json", false, "{}\n"},
		{"ev/F-001/test.log", true, ""},
		{"ev/F-001/in.log", true, ""},
		{"ev/F-001/dangling.log", true, ""},
		{"ev/F-001/pipe", true, ""},
		{"ev/F-002/.bashrc", true, ""},
		{"ev/F-003/x", true, ""},
		{"ev/F-001/../F-001/ok.log", false, "ok\n"},
	}
	for _, tt := range tests {
		got, err := ReadFile(tr.top, tt.name)
		switch {
		case tt.notFile && !IsNotFile(err):
			t.Errorf("ReadFile(%s) = %q, %v; want a NotFileError", tt.name, got, err)
		case !tt.notFile && (err != nil || string(got) != tt.want):
			t.Errorf("ReadFile(%s) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", ".", "..", "../home/.bashrc", "/etc/passwd", "ev/../../home/.bashrc"} {
		if _, err := ReadFile(tr.top, bad); err == nil || IsNotFile(err) {
			t.Errorf("ReadFile(%q): %v, want an error about the name", bad, err)
		}
	}
}

func TestWriteFileFollowsNoLink(t *testing.T) {
	tests := []struct {
		name    string
		refused bool
	}{
		// A link at the name itself is replaced by the file.
		{"ev/F-001/test.log", false},
		{"ev/F-001/dangling.log", false},
		{"ev/F-001/in.log", false},
		// A link on the way is refused, whatever it leads to.
		{"ev/F-002/.bashrc", true},
		{"ev/F-002/new.txt", true},
		{"ev/F-003/x.log", true},
		{"ev/F-001/pipe/x", true},
		{"list.json/x", true},
		// New directories are made, as real ones.
		{"ev/F-009/a/b.log", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t)
			err := WriteFile(tr.top, tt.name, []byte("agent's bytes\n"), 0o644)
			if tt.refused != (err != nil) {
				t.Fatalf("WriteFile(%s): %v, refused want %v", tt.name, err, tt.refused)
			}
			tr.secretUntouched(t)
			if b, _ := os.ReadFile(filepath.Join(tr.top, "list.json")); string(b) != "{}\n" {
				t.Errorf("a file inside the tree that a link led to was written: %q", b)
			}
			if tt.refused {
				if !IsNotFile(err) {
					t.Errorf("the refusal is not a NotFileError: %v", err)
				}
				return
			}
			fi, err := os.Lstat(filepath.Join(tr.top, tt.name))
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Fatalf("after WriteFile(%s): %v, %v", tt.name, fi, err)
			}
			if got, err := ReadFile(tr.top, tt.name); err != nil || string(got) != "agent's bytes\n" {
				t.Errorf("read back %q, %v", got, err)
			}
			ents, _ := os.ReadDir(filepath.Dir(filepath.Join(tr.top, tt.name)))
			for _, e := range ents {
				if filepath.Ext(e.Name()) != ".log" && e.Name() != "pipe" {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

func TestNotFilesListsWhatIsNoFile(t *testing.T) {
	tr := newTree(t)
	got, unreadable, err := NotFiles(tr.top, "ev")
	if err != nil || unreadable != nil {
		t.Fatal(err, unreadable)
	}
	want := []string{"ev/F-001/dangling.log", "ev/F-001/in.log", "ev/F-001/pipe", "ev/F-001/test.log", "ev/F-002", "ev/F-003"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("NotFiles:\n got  %q\n want %q", got, want)
	}
	if got, _, err := NotFiles(tr.top, "ev/F-002"); err != nil || !slices.Equal(got, []string{"ev/F-002"}) {
		t.Errorf("NotFiles of a linked directory: %q, %v", got, err)
	}
	if got, _, err := NotFiles(tr.top, "ev/F-404"); err != nil || got != nil {
		t.Errorf("NotFiles of a missing directory: %q, %v", got, err)
	}
	if got, _, err := NotFiles(tr.top, "ev/real"); err != nil || got != nil {
		t.Errorf("NotFiles of a clean directory: %q, %v", got, err)
	}
	tr.secretUntouched(t)
}

// shut is a file system whose directories named in it cannot be read, as
// a chmod 000 makes them for their owner (root reads them anyway, so the
// walk is shown on this).
type shut struct {
	fs.FS
	dirs map[string]bool
}

func (s shut) ReadDir(name string) ([]fs.DirEntry, error) {
	if s.dirs[name] {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrPermission}
	}
	return fs.ReadDir(s.FS, name)
}

// A directory that cannot be read is listed apart, whatever it holds, and
// the walk goes on beside it; the top itself too.
func TestNotFilesListsWhatCannotBeRead(t *testing.T) {
	fsys := shut{FS: fstest.MapFS{
		"ev/F-001/ok.log":       {Data: []byte("ok")},
		"ev/F-001/a/test.log":   {Mode: fs.ModeSymlink},
		"ev/F-001/b/x.log":      {Data: []byte("x")},
		"ev/F-001/b/link":       {Mode: fs.ModeSymlink},
		"ev/F-001/c/d/deep.log": {Mode: fs.ModeSymlink},
	}, dirs: map[string]bool{"ev/F-001/a": true, "ev/F-001/c/d": true}}
	found, unreadable, err := notFiles(fsys, "ev/F-001")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{"ev/F-001/b/link"}) || !slices.Equal(unreadable, []string{"ev/F-001/a", "ev/F-001/c/d"}) {
		t.Errorf("found %q, unreadable %q", found, unreadable)
	}
	fsys.dirs["ev/F-001"] = true
	if found, unreadable, err := notFiles(fsys, "ev/F-001"); err != nil || found != nil || !slices.Equal(unreadable, []string{"ev/F-001"}) {
		t.Errorf("an unreadable top: found %q, unreadable %q, %v", found, unreadable, err)
	}
}

// Open makes a real directory its owner's to read, and nothing else.
func TestOpenOpensRealDirectoriesOnly(t *testing.T) {
	tr := newTree(t)
	d := filepath.Join(tr.top, "ev", "real")
	os.Chmod(d, 0)
	if err := Open(tr.top, "ev/real"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
	os.Chmod(tr.outside, 0o711)
	for _, name := range []string{"ev/F-002", "ev/F-003", "ev/F-001/test.log", "list.json"} {
		if err := Open(tr.top, name); !IsNotFile(err) {
			t.Errorf("Open(%s): %v, want a NotFileError", name, err)
		}
	}
	if fi, _ := os.Stat(tr.outside); fi.Mode().Perm() != 0o711 {
		t.Errorf("the directory outside changed mode: %v", fi.Mode().Perm())
	}
}

func TestMkdirAllMakesRealDirectoriesOnly(t *testing.T) {
	tr := newTree(t)
	if err := MkdirAll(tr.top, "ev/F-001/a/b"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(tr.top, "ev/F-001/a/b")); err != nil || !fi.IsDir() {
		t.Errorf("ev/F-001/a/b: %v, %v", fi, err)
	}
	if err := MkdirAll(tr.top, "ev/F-001/a/b"); err != nil {
		t.Errorf("again: %v", err)
	}
	for _, name := range []string{"ev/F-002/x", "ev/F-002", "ev/F-003/y", "list.json/z", "ev/F-001/test.log"} {
		if err := MkdirAll(tr.top, name); !IsNotFile(err) {
			t.Errorf("MkdirAll(%s): %v, want a NotFileError", name, err)
		}
	}
	tr.secretUntouched(t)
}
