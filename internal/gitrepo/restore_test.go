package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRestore(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"mod.txt": "original", "gone/deep/del.txt": "deleted later", "run.sh": "exec:#!/bin/sh\n",
		"plain.sh": "#!/bin/sh\n", "link": "link:mod.txt", "link-to-file": "link:mod.txt", "f": "was a file",
		"d/x": "was in a directory", "keep/other": "stays", "odd\nname -x": "odd", "untouched": "u", "empty": "",
	}
	tests := []struct {
		name    string
		work    map[string]string // written after the snapshot
		removed []string          // removed after the snapshot
		paths   []string
		gone    []string // directories Restore removes because they became empty
	}{
		{name: "modified file", work: map[string]string{"mod.txt": "changed"}, paths: []string{"mod.txt"}},
		{name: "an empty file", work: map[string]string{"empty": "filled"}, paths: []string{"empty"}},
		{name: "several files, named twice", work: map[string]string{"mod.txt": "changed", "empty": "filled", "new": "n"},
			removed: []string{"gone"}, paths: []string{"new", "mod.txt", "empty", "gone/deep/del.txt", "mod.txt", "new"}},
		{name: "deleted file and its directories", removed: []string{"gone"}, paths: []string{"gone/deep/del.txt"}},
		{
			name:  "added file, and the directories it leaves empty",
			work:  map[string]string{"new/sub/n.txt": "n", "keep/added": "a"},
			paths: []string{"new/sub/n.txt", "keep/added"},
			gone:  []string{"new"},
		},
		{name: "executable bit taken away", work: map[string]string{"run.sh": "#!/bin/sh\n"}, paths: []string{"run.sh"}},
		{name: "executable bit added", work: map[string]string{"plain.sh": "exec:#!/bin/sh\n"}, paths: []string{"plain.sh"}},
		{name: "symlink retargeted", work: map[string]string{"link": "link:/etc/passwd"}, paths: []string{"link"}},
		{name: "symlink replaced by a file", work: map[string]string{"link-to-file": "a file now"}, paths: []string{"link-to-file"}},
		{name: "file replaced by a symlink", work: map[string]string{"mod.txt": "link:untouched"}, paths: []string{"mod.txt"}},
		{
			name:    "file replaced by a directory",
			removed: []string{"f"},
			work:    map[string]string{"f/inner": "i"},
			paths:   []string{"f", "f/inner"},
		},
		{
			name:    "directory replaced by a file",
			removed: []string{"d"},
			work:    map[string]string{"d": "a file"},
			paths:   []string{"d", "d/x"},
		},
		{
			name:    "directory replaced by a symlink",
			removed: []string{"d"},
			work:    map[string]string{"d": "link:keep"},
			paths:   []string{"d/x", "d"},
		},
		{name: "odd name", work: map[string]string{"odd\nname -x": "changed"}, paths: []string{"odd\nname -x"}},
		{name: "unclean path", work: map[string]string{"mod.txt": "changed"}, paths: []string{"./keep/../mod.txt"}},
		{name: "nothing to do", paths: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			write(t, dir, base)
			commitAll(t, dir)
			r := openRepo(t, dir)
			snap, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			remove(t, dir, tt.removed...)
			write(t, dir, tt.work)
			wantUntouched := state(t, dir, "untouched")
			head := viewOf(t, dir).head

			if err := r.Restore(t.Context(), snap, tt.paths); err != nil {
				t.Fatal(err)
			}
			files := treeFiles(t, dir, snap)
			for _, p := range tt.paths {
				p = filepath.ToSlash(filepath.Clean(p))
				want := files[p]
				if p == "d" { // a directory in the tree
					want = "dir"
				}
				if got := state(t, dir, p); got != want {
					t.Errorf("%q after restore: %q, want %q", p, got, want)
				}
			}
			for _, d := range tt.gone {
				if got := state(t, dir, d); got != "" {
					t.Errorf("%s is still there (%s), want it removed", d, got)
				}
			}
			if got := state(t, dir, "keep/other"); got != "100644 stays" {
				t.Errorf("keep/other: %q, want it untouched", got)
			}
			if got := state(t, dir, "untouched"); got != wantUntouched {
				t.Errorf("untouched: %q, want %q", got, wantUntouched)
			}
			if got := state(t, dir, "."); got != "dir" {
				t.Errorf("the project directory: %q", got)
			}
			if v := viewOf(t, dir); v.head != head {
				t.Errorf("HEAD moved from %s to %s", head, v.head)
			}
		})
	}
}

func TestRestoreRefusesUnsafePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, outside string) // after the snapshot
		paths []string
	}{
		{name: "parent directory", paths: []string{"mod.txt", "../x"}},
		{name: "parent directory after cleaning", paths: []string{"mod.txt", "a/../../x"}},
		{name: "absolute", paths: []string{"mod.txt", "/etc/passwd"}},
		{name: "empty", paths: []string{"mod.txt", ""}},
		{name: "the project directory itself", paths: []string{"mod.txt", "."}},
		{name: "git's directory", paths: []string{"mod.txt", ".git/config"}},
		{name: "a nested git directory", paths: []string{"mod.txt", "sub/.GIT/hooks/pre-commit"}},
		{
			name: "write through a symlink leading outside",
			setup: func(t *testing.T, dir, outside string) {
				remove(t, dir, "out")
				if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
					t.Fatal(err)
				}
			},
			paths: []string{"out/f"},
		},
		{
			name: "remove through a symlink leading outside",
			setup: func(t *testing.T, dir, outside string) {
				remove(t, dir, "out")
				if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
					t.Fatal(err)
				}
			},
			paths: []string{"out/victim"},
		},
		{
			name: "write through a symlink inside the project",
			setup: func(t *testing.T, dir, outside string) {
				remove(t, dir, "out")
				write(t, dir, map[string]string{"out": "link:in"})
			},
			paths: []string{"out/f"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			outside := t.TempDir()
			write(t, outside, map[string]string{"f": "outside", "victim": "outside"})
			write(t, dir, map[string]string{"mod.txt": "original", "out/f": "inside", "in/f": "in"})
			commitAll(t, dir)
			r := openRepo(t, dir)
			snap, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, map[string]string{"mod.txt": "changed"})
			if tt.setup != nil {
				tt.setup(t, dir, outside)
			}

			err = r.Restore(t.Context(), snap, tt.paths)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("Restore(%q) = %v, want ErrUnsafePath", tt.paths, err)
			}
			if got := state(t, dir, "mod.txt"); got != "100644 changed" {
				t.Errorf("mod.txt was restored (%q) although the call was refused", got)
			}
			for _, p := range []string{"f", "victim"} {
				if got := state(t, outside, p); got != "100644 outside" {
					t.Errorf("outside/%s: %q", p, got)
				}
			}
			if got := state(t, dir, "in/f"); got != "100644 in" {
				t.Errorf("in/f: %q", got)
			}
		})
	}
}

func TestRestoreDirectoriesAndSubmodules(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"d/x": "x"})
	commitAll(t, dir)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, sub, "init", "-q")
	write(t, sub, map[string]string{"s": "s"})
	commitAll(t, sub)
	commitAll(t, dir) // the user's commit records sub as a submodule (a gitlink)
	r := openRepo(t, dir)
	snap, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(t.Context(), snap, []string{"sub"}); err == nil {
		t.Error(`Restore("sub") of a submodule succeeded`)
	}
	// A directory in the tree and in the work tree is left alone.
	write(t, dir, map[string]string{"d/x": "changed"})
	if err := r.Restore(t.Context(), snap, []string{"d"}); err != nil {
		t.Errorf(`Restore("d"): %v`, err)
	}
	if got := state(t, dir, "d/x"); got != "100644 changed" {
		t.Errorf("d/x: %q", got)
	}
	// And a directory where the tree has nothing is not removed whole.
	write(t, dir, map[string]string{"newdir/a": "a"})
	if err := r.Restore(t.Context(), snap, []string{"newdir"}); err == nil {
		t.Error(`Restore("newdir") succeeded`)
	}
	if got := state(t, dir, "newdir/a"); got != "100644 a" {
		t.Errorf("newdir/a: %q", got)
	}
}

func TestHashFileAndBlob(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	outside := t.TempDir()
	write(t, outside, map[string]string{"secret": "s"})
	// No filter may change the content: .gitattributes asks for LF endings.
	write(t, dir, map[string]string{
		".gitattributes": "* text eol=lf\n", "crlf.txt": "a\r\nb\r\n", "-dash": "d", "in-link": "link:crlf.txt",
		"out-link": "link:" + filepath.Join(outside, "secret"), "d/x": "x",
	})
	r := openRepo(t, dir)
	tests := []struct {
		path   string
		want   string // "" when HashFile fails
		unsafe bool
	}{
		{path: "crlf.txt", want: "a\r\nb\r\n"},
		{path: "-dash", want: "d"},
		{path: "in-link", want: "a\r\nb\r\n"},
		{path: "out-link"},
		{path: "d"},
		{path: "missing"},
		{path: "../secret", unsafe: true},
	}
	for _, tt := range tests {
		id, err := r.HashFile(t.Context(), tt.path)
		if tt.want == "" {
			if err == nil {
				t.Errorf("HashFile(%q) = %s, want an error", tt.path, id)
			}
			if tt.unsafe && !errors.Is(err, ErrUnsafePath) {
				t.Errorf("HashFile(%q) = %v, want ErrUnsafePath", tt.path, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("HashFile(%q): %v", tt.path, err)
			continue
		}
		if id != blobID(tt.want) {
			t.Errorf("HashFile(%q) = %s, want %s", tt.path, id, blobID(tt.want))
		}
		content, err := r.Blob(t.Context(), id)
		if err != nil || string(content) != tt.want {
			t.Errorf("Blob(%s) = %q, %v; want %q", id, content, err, tt.want)
		}
	}
	if _, err := r.Blob(t.Context(), "HEAD"); err == nil {
		t.Error(`Blob("HEAD") succeeded`)
	}
}

// TestUserStateUntouched: what the user has staged, modified, left
// untracked or ignored, and their HEAD, are as they were after every
// operation except AdvanceBranch; Restore changes only the work tree.
func TestUserStateUntouched(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{".gitignore": "*.log\n", "staged": "s", "modified": "m", "deleted": "d", "same": "x"})
	head := commitAll(t, dir)
	write(t, dir, map[string]string{"staged": "s2", "modified": "m2", "untracked": "u", "ignored.log": "i"})
	gitT(t, dir, "add", "staged")
	remove(t, dir, "deleted")
	// Settle the index's stat data, as the user's own git status would.
	gitT(t, dir, "update-index", "-q", "--refresh")
	before := viewOf(t, dir)

	r := openRepo(t, dir)
	ctx := t.Context()
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"Snapshot", func() error { _, err := r.Snapshot(ctx); return err }},
		{"Changes", func() error { _, err := r.Changes(ctx, r.EmptyTree(), snap); return err }},
		{"Files", func() error { _, err := r.Files(ctx, snap); return err }},
		{"Restore to the same content", func() error {
			return r.Restore(ctx, snap, []string{"staged", "modified", "deleted", "untracked", "same"})
		}},
		{"HashFile", func() error { _, err := r.HashFile(ctx, "modified"); return err }},
		{"Head", func() error { _, _, _, err := r.Head(ctx); return err }},
		{"IndexMatchesHead", func() error { _, err := r.IndexMatchesHead(ctx); return err }},
		{"Commit", func() error { _, err := r.Commit(ctx, snap, []string{head}, "m", daemon); return err }},
	}
	for _, o := range ops {
		if err := o.op(); err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if after := viewOf(t, dir); after != before {
			t.Fatalf("%s changed the user's view:\nbefore %+v\nafter  %+v", o.name, before, after)
		}
	}

	// A Restore that changes the work tree leaves index and HEAD alone.
	base, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"modified": "m3", "staged": "s3"})
	if err := r.Restore(ctx, base, []string{"modified", "staged"}); err != nil {
		t.Fatal(err)
	}
	if after := viewOf(t, dir); after.index != before.index || after.head != before.head {
		t.Error("Restore changed the user's index or HEAD")
	}
}

// A blob the repository lost is an error, not an empty file: nothing is
// written.
func TestRestoreMissingBlob(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	id := strings.TrimSpace(gitIn(t, dir, []byte("lost content"), "hash-object", "-w", "--stdin"))
	tree := Tree(strings.TrimSpace(gitIn(t, dir, []byte("100644 blob "+id+"\tf\n"), "mktree")))
	if err := os.Remove(filepath.Join(dir, ".git", "objects", id[:2], id[2:])); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"f": "mine"})
	err := r.Restore(t.Context(), tree, []string{"f"})
	if err == nil || !strings.Contains(err.Error(), "want a blob") {
		t.Errorf("Restore of a lost blob = %v, want an error saying so", err)
	}
	if got := state(t, dir, "f"); got != "100644 mine" {
		t.Errorf("f: %q, want it untouched", got)
	}
}

// Restore takes any number of paths: they are looked up in batches that
// keep each git command far below the system's limit on arguments (2 MiB
// on Linux by default; here 2.4 MiB of paths are named).
func TestRestoreManyPaths(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a.txt": "a", "m/m.txt": "m", "z.txt": "z"})
	commitAll(t, dir)
	r := openRepo(t, dir)
	snap, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a.txt": "a2", "m/m.txt": "m2", "z.txt": "z2"})
	paths := []string{"z.txt", "a.txt", "m/m.txt"}
	long := strings.Repeat("n", 90)
	for i := range 24000 {
		paths = append(paths, fmt.Sprintf("gone/%s%06d", long, i))
	}
	if err := r.Restore(t.Context(), snap, paths); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "100644 a", "m/m.txt": "100644 m", "z.txt": "100644 z", "gone": ""} {
		if got := state(t, dir, p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}
