package gitrepo

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestSnapshotIsTheDisk: every way git could hide a file or alter its bytes
// (a nested repository, attributes, a .gitignore nobody committed, a path
// git refuses) leaves the snapshot what is on disk, and never fails it.
func TestSnapshotIsTheDisk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		committed map[string]string
		setup     func(t *testing.T, dir string) // after the commit
		work      map[string]string
		want      map[string]string // the snapshot's files
		refused   []string
	}{
		{
			name:      "an unborn nested repository: its files are the project's",
			committed: map[string]string{"a": "a"},
			setup:     func(t *testing.T, dir string) { gitT(t, dir, "init", "-q", "src/sub") },
			work:      map[string]string{"src/sub/code.go": "package sub", "src/sub/run.sh": "exec:#!/bin/sh\n"},
			want:      map[string]string{"a": "100644 a", "src/sub/code.go": "100644 package sub", "src/sub/run.sh": "100755 #!/bin/sh\n"},
			refused:   []string{"src/sub/.git"},
		},
		{
			name:      "a nested repository with commits: no gitlink",
			committed: map[string]string{"a": "a"},
			setup: func(t *testing.T, dir string) {
				gitT(t, dir, "init", "-q", "src/sub")
				write(t, dir, map[string]string{"src/sub/code.go": "v1", "src/sub/l": "link:code.go"})
				commitAll(t, filepath.Join(dir, "src/sub"))
				write(t, dir, map[string]string{"src/sub/code.go": "v2"})
			},
			want:    map[string]string{"a": "100644 a", "src/sub/code.go": "100644 v2", "src/sub/l": "120000 code.go"},
			refused: []string{"src/sub/.git"},
		},
		{
			name:      "a repository made in a tracked directory: a change there is seen",
			committed: map[string]string{"src/a.go": "v1", "src/gone.go": "g"},
			setup: func(t *testing.T, dir string) {
				gitT(t, dir, "init", "-q", "src")
				remove(t, dir, "src/gone.go")
			},
			work:    map[string]string{"src/a.go": "v2", "src/new.go": "n"},
			want:    map[string]string{"src/a.go": "100644 v2", "src/new.go": "100644 n"},
			refused: []string{"src/.git"},
		},
		{
			name:      "a bare repository is files",
			committed: map[string]string{"a": "a"},
			setup:     func(t *testing.T, dir string) { gitT(t, dir, "init", "-q", "--bare", "b.git") },
			want:      nil, // checked below: b.git/HEAD is taken
		},
		{
			name:      "ident, eol, text, working-tree-encoding and an unknown filter: raw bytes",
			committed: map[string]string{"a.c": "$Id$\n", "b.txt": "b\n"},
			work: map[string]string{
				".gitattributes": "*.c ident\n*.txt text eol=crlf\n*.u16 working-tree-encoding=UTF-16\n*.f filter=nothere\n",
				"a.c":            "$Id: the tester's edit $\n", "b.txt": "b\r\n", "c.u16": "\xff not utf-16", "d.f": "d",
			},
			want: map[string]string{
				".gitattributes": "100644 *.c ident\n*.txt text eol=crlf\n*.u16 working-tree-encoding=UTF-16\n*.f filter=nothere\n",
				"a.c":            "100644 $Id: the tester's edit $\n", "b.txt": "100644 b\r\n", "c.u16": "100644 \xff not utf-16", "d.f": "100644 d",
			},
		},
		{
			name:      "a committed .gitattributes changes no byte either",
			committed: map[string]string{".gitattributes": "* text=auto\n*.c ident\n", "a.c": "x"},
			work:      map[string]string{"a.c": "$Id: x $\r\n"},
			want:      map[string]string{".gitattributes": "100644 * text=auto\n*.c ident\n", "a.c": "100644 $Id: x $\r\n"},
		},
		{
			name:      "a .gitignore nobody committed hides nothing",
			committed: map[string]string{"a": "a"},
			work:      map[string]string{".gitignore": "src/\n", "src/.gitignore": "*\n", "src/code.go": "c"},
			want:      map[string]string{"a": "100644 a", ".gitignore": "100644 src/\n", "src/.gitignore": "100644 *\n", "src/code.go": "100644 c"},
		},
		{
			name:      "a person's committed rules hold, at every depth, and a change of them since does not",
			committed: map[string]string{".gitignore": "node_modules/\n/target/\n", "lib/.gitignore": "*.o\n!keep.o\n  \n!\n# c\n", "lib/a.c": "a"},
			work: map[string]string{
				".gitignore":        "node_modules/\n", // an uncommitted change: target/ stays ignored
				"node_modules/x.js": "x", "target/out": "o", "lib/x.o": "o", "lib/deep/y.o": "o", "lib/keep.o": "k", "z.o": "z",
				"lib/sub/node_modules/m.js": "m",
			},
			want: map[string]string{
				".gitignore": "100644 node_modules/\n", "lib/.gitignore": "100644 *.o\n!keep.o\n  \n!\n# c\n", "lib/a.c": "100644 a",
				"lib/keep.o": "100644 k", "z.o": "100644 z",
			},
		},
		{
			name:      "info/exclude is a person's",
			committed: map[string]string{"a": "a"},
			setup: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{".git/info/exclude": "*.log\n"})
			},
			work: map[string]string{"x.log": "l", "b": "b"},
			want: map[string]string{"a": "100644 a", "b": "100644 b"},
		},
		{
			name:      "names git refuses: left out, reported, no failure",
			committed: map[string]string{"a": "a"},
			work:      map[string]string{"src/.GIT/x": "x", "src/.Git": "y", ".git ": "z", "d/git~1": "w", "src/ok": "ok"},
			want:      map[string]string{"a": "100644 a", "src/ok": "100644 ok"},
			refused:   []string{".git ", "d/git~1", "src/.GIT", "src/.Git"},
		},
		{
			name:      "a named pipe",
			committed: map[string]string{"a": "a"},
			setup: func(t *testing.T, dir string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
					t.Skip(err)
				}
			},
			want:    map[string]string{"a": "100644 a"},
			refused: []string{"pipe"},
		},
		{
			name:      "a submodule of HEAD stays a gitlink",
			committed: nil, // set up below
			setup: func(t *testing.T, dir string) {
				gitT(t, dir, "init", "-q", "sub")
				write(t, dir, map[string]string{"sub/s": "s", "a": "a"})
				commitAll(t, filepath.Join(dir, "sub"))
				commitAll(t, dir)
				write(t, dir, map[string]string{"sub/s": "changed, not committed in sub"})
			},
			want: nil, // checked below
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			if tt.committed != nil {
				write(t, dir, tt.committed)
				commitAll(t, dir)
			}
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			write(t, dir, tt.work)
			r := openRepo(t, dir)
			tree, refused, err := r.SnapshotRefused(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			switch tt.name {
			case "a bare repository is files":
				got := treeFiles(t, dir, tree)
				if !strings.HasPrefix(got["b.git/HEAD"], "100644 ref: ") || len(refused) != 0 {
					t.Errorf("b.git/HEAD %q, refused %v", got["b.git/HEAD"], refused)
				}
				return
			case "a submodule of HEAD stays a gitlink":
				ls := gitT(t, dir, "ls-tree", string(tree), "sub")
				if !strings.HasPrefix(ls, ModeGitlink+" commit ") || len(refused) != 0 {
					t.Errorf("sub: %q, refused %v", ls, refused)
				}
				return
			}
			got := treeFiles(t, dir, tree)
			if !maps.Equal(got, tt.want) {
				t.Errorf("snapshot:\n got %q\nwant %q", got, tt.want)
			}
			var paths []string
			for _, f := range refused {
				paths = append(paths, f.Path)
				if f.Why == "" {
					t.Errorf("%s refused without a reason", f.Path)
				}
			}
			if !slices.Equal(paths, tt.refused) {
				t.Errorf("refused %q, want %q", paths, tt.refused)
			}
			again, _, err := r.SnapshotRefused(t.Context())
			if err != nil || again != tree {
				t.Errorf("second snapshot %s, %v; first %s", again, err, tree)
			}
			if rec, known := r.RefusedAt(tree); !known || len(rec) != len(refused) {
				t.Errorf("RefusedAt: %v, %v; want %v", rec, known, refused)
			}
		})
	}
}

// The refused paths of a tree are those of its first snapshot: a run that
// adds only a path git refuses leaves the same tree, and must not hide the
// path in the record of the run's base.
func TestRefusedAtIsTheFirstSnapshots(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	r := openRepo(t, dir)
	base, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"src/.GIT/hooks/x": "x"})
	after, refused, err := r.SnapshotRefused(t.Context())
	if err != nil || after != base || len(refused) != 1 {
		t.Fatalf("after %s (base %s), refused %v, %v", after, base, refused, err)
	}
	if rec, known := r.RefusedAt(base); !known || len(rec) != 0 {
		t.Errorf("RefusedAt(base) = %v, %v; want the base's: none", rec, known)
	}
	if err := r.RemoveRefused([]string{"src/.GIT"}); err != nil {
		t.Fatal(err)
	}
	if got := state(t, dir, "src/.GIT"); got != "" {
		t.Errorf("src/.GIT after RemoveRefused: %q", got)
	}
	for _, bad := range []string{".git", "../x", "/etc", ""} {
		if err := r.RemoveRefused([]string{bad}); err == nil {
			t.Errorf("RemoveRefused(%q) succeeded", bad)
		}
	}
}

// TestACommitIsTheBytesOnDisk: a project with every blind spot at once is
// snapshotted and committed; a fresh clone of the commit holds, file for
// file, the bytes on disk (but for what a person's committed rules ignore
// and what git cannot record at all).
func TestACommitIsTheBytesOnDisk(t *testing.T) {
	t.Parallel()
	for _, withAttributes := range []bool{false, true} {
		dir := newRepo(t)
		write(t, dir, map[string]string{".gitignore": "node_modules/\n", "src/a.c": "$Id$\n"})
		commitAll(t, dir)
		gitT(t, dir, "init", "-q", "src/sub")
		write(t, dir, map[string]string{
			"src/sub/code.go": "package sub\n", "src/.gitignore": "*\n", "src/hidden.go": "hidden\n",
			"src/a.c": "$Id: edited $\r\n", "crlf.txt": "x\r\n", "node_modules/m.js": "m", "src/.GIT/x": "x",
		})
		if withAttributes {
			// A checkout of the clone applies these; the comparison below
			// then reads the clone without them, as a machine with no
			// conversions would.
			write(t, dir, map[string]string{".gitattributes": "*.c ident\n*.txt text eol=lf\n"})
		}
		r := openRepo(t, dir)
		tree, refused, err := r.SnapshotRefused(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		head := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
		commit, err := r.Commit(t.Context(), tree, []string{head}, "tested", Signature{Name: "d", Email: "d@x"})
		if err != nil {
			t.Fatal(err)
		}
		clone := filepath.Join(t.TempDir(), "clone")
		gitT(t, filepath.Dir(clone), "init", "-q", clone)
		if withAttributes {
			write(t, clone, map[string]string{".git/info/attributes": conversionsOff})
		}
		gitT(t, clone, "fetch", "-q", dir, commit)
		gitT(t, clone, "checkout", "-q", "FETCH_HEAD")

		skip := map[string]bool{"node_modules/m.js": true}
		for _, f := range refused {
			skip[f.Path] = true
		}
		onDisk := files(t, dir, skip)
		inClone := files(t, clone, nil)
		if !maps.EqualFunc(onDisk, inClone, bytes.Equal) {
			t.Errorf("attributes %v: the clone differs from the disk:\n disk  %q\n clone %q", withAttributes, onDisk, inClone)
		}
		for _, p := range []string{"src/sub/code.go", "src/hidden.go", "crlf.txt"} {
			if _, ok := inClone[p]; !ok {
				t.Errorf("attributes %v: %s is not in the commit", withAttributes, p)
			}
		}
	}
}

// files reads every file under dir but .git (and what a refused path
// holds), path → bytes (a symlink's target).
func files(t *testing.T, dir string, skip map[string]bool) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ".git" || skip[rel] || skip[filepath.ToSlash(filepath.Dir(rel))] || strings.HasSuffix(rel, "/.git") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = []byte("link:" + target)
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			out[rel] = b
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The patterns of a .gitignore below the top hold below its directory only,
// as git reads them there.
func TestWriteRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir, content, want string
	}{
		{".", "\xef\xbb\xbf*.log\r\n/build/\n!keep.log\n# c\n\n", "*.log\n/build/\n!keep.log\n"},
		{"a/b", "foo\n/foo\nx/y\nfoo/\n!bar\n**/z\n   \n!\n", "a/b/**/foo\na/b/foo\na/b/x/y\na/b/**/foo/\n!a/b/**/bar\na/b/**/z\n"},
		{"w[x]*", "o\n", "w\\[x\\]\\*/**/o\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		writeRules(&b, tt.dir, []byte(tt.content))
		if b.String() != tt.want {
			t.Errorf("writeRules(%q, %q) = %q, want %q", tt.dir, tt.content, b.String(), tt.want)
		}
	}
}
