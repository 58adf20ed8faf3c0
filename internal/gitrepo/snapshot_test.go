package gitrepo

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSnapshot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		committed map[string]string // nil: no commit at all
		force     []string          // committed with git add -f although ignored
		work      map[string]string // then written to the work tree
		removed   []string          // then removed from it
		exclude   []string
		want      map[string]string // the snapshot: path → "<mode> <content>"
	}{
		{
			name:      "untracked files are taken, ignored ones are not",
			committed: map[string]string{".gitignore": "*.log\nbuild/\n", "a.txt": "a"},
			work:      map[string]string{"new.txt": "new", "x.log": "log", "build/out": "o", "sub/deep/n.txt": "n"},
			want: map[string]string{
				".gitignore": "100644 *.log\nbuild/\n", "a.txt": "100644 a",
				"new.txt": "100644 new", "sub/deep/n.txt": "100644 n",
			},
		},
		{
			name:      "a tracked file that matches .gitignore is still taken",
			committed: map[string]string{".gitignore": "*.log\n", "keep.log": "v1"},
			force:     []string{"keep.log"},
			work:      map[string]string{"keep.log": "v2", "other.log": "x"},
			want:      map[string]string{".gitignore": "100644 *.log\n", "keep.log": "100644 v2"},
		},
		{
			name:      "modified and deleted tracked files",
			committed: map[string]string{"a": "a", "b": "b", "d/c": "c"},
			work:      map[string]string{"a": "a2"},
			removed:   []string{"b", "d"},
			want:      map[string]string{"a": "100644 a2"},
		},
		{
			name:      "excluded paths keep HEAD's version",
			committed: map[string]string{".claude/progress/f.json": "v1", "a": "a"},
			work:      map[string]string{".claude/progress/f.json": "v2", ".claude/progress/new.json": "n", ".claude/other": "o", "a": "a2"},
			exclude:   []string{".claude/progress"},
			want:      map[string]string{".claude/progress/f.json": "100644 v1", ".claude/other": "100644 o", "a": "100644 a2"},
		},
		{
			name:      "an excluded path that is also ignored",
			committed: map[string]string{".gitignore": ".claude/progress/\n", "a": "a"},
			work:      map[string]string{".claude/progress/state.json": "s", "b": "b"},
			exclude:   []string{".claude/progress"},
			want:      map[string]string{".gitignore": "100644 .claude/progress/\n", "a": "100644 a", "b": "100644 b"},
		},
		{
			name:      "an excluded file that was deleted stays",
			committed: map[string]string{"frozen_test.go": "t", "a": "a"},
			removed:   []string{"frozen_test.go"},
			exclude:   []string{"frozen_test.go"},
			want:      map[string]string{"frozen_test.go": "100644 t", "a": "100644 a"},
		},
		{
			name:      "odd names",
			committed: map[string]string{"plain": "p"},
			work: map[string]string{
				"with space.txt": "1", "new\nline": "2", "ünïcödé/ß.txt": "3", "-dash": "4",
				"*": "5", "[ab]": "6", ":colon": "7", "a\\b": "8", "tab\there": "9",
			},
			want: map[string]string{
				"plain": "100644 p", "with space.txt": "100644 1", "new\nline": "100644 2", "ünïcödé/ß.txt": "100644 3",
				"-dash": "100644 4", "*": "100644 5", "[ab]": "100644 6", ":colon": "100644 7", "a\\b": "100644 8", "tab\there": "100644 9",
			},
		},
		{
			name:      "an excluded name with glob characters excludes only itself",
			committed: map[string]string{"a": "a"},
			work:      map[string]string{"[ab]": "x", "b": "b"},
			exclude:   []string{"[ab]"},
			want:      map[string]string{"a": "100644 a", "b": "100644 b"},
		},
		{
			name:      "executables and symlinks",
			committed: map[string]string{"run.sh": "#!/bin/sh\n", "link": "link:a"},
			work:      map[string]string{"run.sh": "exec:#!/bin/sh\n", "new-link": "link:../outside", "link": "link:b"},
			want: map[string]string{
				"run.sh": "100755 #!/bin/sh\n", "new-link": "120000 ../outside", "link": "120000 b",
			},
		},
		{
			// Ignore rules hold once committed: one written since hides nothing.
			name: "no commit yet",
			work: map[string]string{".gitignore": "b\n", "a": "a", "b": "b"},
			want: map[string]string{".gitignore": "100644 b\n", "a": "100644 a", "b": "100644 b"},
		},
		{
			name: "empty work tree, no commit",
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			if tt.committed != nil {
				write(t, dir, tt.committed)
				if len(tt.force) > 0 {
					gitT(t, dir, append([]string{"add", "-f", "--"}, tt.force...)...)
				}
				commitAll(t, dir)
			}
			write(t, dir, tt.work)
			remove(t, dir, tt.removed...)
			r := openRepo(t, dir, tt.exclude...)
			before := viewOf(t, dir)

			tree, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := treeFiles(t, dir, tree); !maps.Equal(got, tt.want) {
				t.Errorf("snapshot:\n got %q\nwant %q", got, tt.want)
			}
			// Warm: the same work tree gives the same tree.
			again, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if again != tree {
				t.Errorf("second snapshot %s, first %s", again, tree)
			}
			if after := viewOf(t, dir); after != before {
				t.Errorf("the user's view changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestSnapshotFollowsHead: a warm private index does not make a snapshot
// depend on what HEAD was when the index was seeded.
func TestSnapshotFollowsHead(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{".gitignore": "*.log\n", "a": "a", ".claude/progress/f.json": "v1"})
	commitAll(t, dir)
	r := openRepo(t, dir, ".claude/progress")
	write(t, dir, map[string]string{"keep.log": "k"})
	snap := func() map[string]string {
		t.Helper()
		tree, err := r.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return treeFiles(t, dir, tree)
	}
	steps := []struct {
		name string
		user func()
		want map[string]string
	}{
		{
			name: "seeded",
			user: func() {},
			want: map[string]string{".gitignore": "100644 *.log\n", "a": "100644 a", ".claude/progress/f.json": "100644 v1"},
		},
		{
			name: "the user force-adds an ignored file",
			user: func() {
				gitT(t, dir, "add", "-f", "keep.log")
				gitT(t, dir, "commit", "-q", "-m", "keep")
			},
			want: map[string]string{".gitignore": "100644 *.log\n", "a": "100644 a", ".claude/progress/f.json": "100644 v1", "keep.log": "100644 k"},
		},
		{
			name: "the user commits an excluded file",
			user: func() {
				write(t, dir, map[string]string{".claude/progress/f.json": "v2"})
				gitT(t, dir, "commit", "-q", "-am", "progress")
				write(t, dir, map[string]string{".claude/progress/f.json": "v3 (not committed)"})
			},
			want: map[string]string{".gitignore": "100644 *.log\n", "a": "100644 a", ".claude/progress/f.json": "100644 v2", "keep.log": "100644 k"},
		},
		{
			name: "the user untracks the ignored file",
			user: func() {
				gitT(t, dir, "rm", "-q", "--cached", "keep.log")
				gitT(t, dir, "commit", "-q", "-m", "untrack")
			},
			want: map[string]string{".gitignore": "100644 *.log\n", "a": "100644 a", ".claude/progress/f.json": "100644 v2"},
		},
	}
	for _, step := range steps {
		step.user()
		if got := snap(); !maps.Equal(got, step.want) {
			t.Errorf("%s:\n got %q\nwant %q", step.name, got, step.want)
		}
	}
}

// TestSnapshotRebuildsItsIndex: the private index is a cache; a broken one
// or a lock left by a crash costs a rebuild, not an error.
func TestSnapshotRebuildsItsIndex(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		spoil func(index string) error
	}{
		{"garbage", func(index string) error { return os.WriteFile(index, []byte("not an index"), 0o600) }},
		{"stale lock", func(index string) error { return os.WriteFile(index+".lock", nil, 0o600) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			write(t, dir, map[string]string{"a": "a"})
			commitAll(t, dir)
			index := filepath.Join(t.TempDir(), "index")
			r, err := Open(t.Context(), Options{Dir: dir, Index: index})
			if err != nil {
				t.Fatal(err)
			}
			want, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.spoil(index); err != nil {
				t.Fatal(err)
			}
			got, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("snapshot after rebuild %s, want %s", got, want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		committed map[string]string
		work      map[string]string
		removed   []string
		exclude   []string
		want      []Change
	}{
		{
			name:      "nothing changed",
			committed: map[string]string{"a": "a"},
			want:      []Change{},
		},
		{
			name:      "added, modified, deleted",
			committed: map[string]string{"m": "1", "d/x": "x", "same": "s"},
			work:      map[string]string{"m": "2", "new/n": "n"},
			removed:   []string{"d"},
			want: []Change{
				{Path: "d/x", Kind: Deleted, From: blobID("x"), FromMode: ModeFile},
				{Path: "m", Kind: Modified, From: blobID("1"), To: blobID("2"), FromMode: ModeFile, ToMode: ModeFile},
				{Path: "new/n", Kind: Added, To: blobID("n"), ToMode: ModeFile},
			},
		},
		{
			name:      "mode change only",
			committed: map[string]string{"run.sh": "x"},
			work:      map[string]string{"run.sh": "exec:x"},
			want:      []Change{{Path: "run.sh", Kind: Modified, From: blobID("x"), To: blobID("x"), FromMode: ModeFile, ToMode: ModeExecutable}},
		},
		{
			name:      "symlinks",
			committed: map[string]string{"f": "content", "l": "link:f"},
			work:      map[string]string{"f": "link:l", "l": "link:g", "n": "link:/etc/passwd"},
			want: []Change{
				{Path: "f", Kind: Modified, From: blobID("content"), To: blobID("l"), FromMode: ModeFile, ToMode: ModeSymlink},
				{Path: "l", Kind: Modified, From: blobID("f"), To: blobID("g"), FromMode: ModeSymlink, ToMode: ModeSymlink},
				{Path: "n", Kind: Added, To: blobID("/etc/passwd"), ToMode: ModeSymlink},
			},
		},
		{
			name:      "odd names, in path order",
			committed: map[string]string{"a.txt": "a"},
			work:      map[string]string{"new\nline": "1", "-dash": "2", "a/b": "3", "a-b": "4", "ü": "5"},
			want: []Change{
				{Path: "-dash", Kind: Added, To: blobID("2"), ToMode: ModeFile},
				{Path: "a-b", Kind: Added, To: blobID("4"), ToMode: ModeFile},
				{Path: "a/b", Kind: Added, To: blobID("3"), ToMode: ModeFile},
				{Path: "new\nline", Kind: Added, To: blobID("1"), ToMode: ModeFile},
				{Path: "ü", Kind: Added, To: blobID("5"), ToMode: ModeFile},
			},
		},
		{
			name:      "excluded paths are not reported",
			committed: map[string]string{".claude/progress/f": "1", "a": "a"},
			work:      map[string]string{".claude/progress/f": "2", ".claude/progress/g": "g", "a": "b"},
			exclude:   []string{".claude/progress"},
			want:      []Change{{Path: "a", Kind: Modified, From: blobID("a"), To: blobID("b"), FromMode: ModeFile, ToMode: ModeFile}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			write(t, dir, tt.committed)
			commitAll(t, dir)
			r := openRepo(t, dir, tt.exclude...)
			from, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, tt.work)
			remove(t, dir, tt.removed...)
			to, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Changes(t.Context(), from, to)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("changes:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	write(t, top, map[string]string{
		"top.txt": "t", "p/a": "a", "p/run.sh": "exec:r", "p/l": "link:a", "p/d/-x y": "x",
		"p/.claude/progress/f": "f", "p2/z": "z",
	})
	commitAll(t, top)
	tests := []struct {
		name    string
		dir     string
		exclude []string
		want    []Entry
	}{
		{
			name: "top", dir: top, exclude: []string{"p/.claude/progress"},
			want: []Entry{
				{"p/a", ModeFile, blobID("a")}, {"p/d/-x y", ModeFile, blobID("x")}, {"p/l", ModeSymlink, blobID("a")},
				{"p/run.sh", ModeExecutable, blobID("r")}, {"p2/z", ModeFile, blobID("z")}, {"top.txt", ModeFile, blobID("t")},
			},
		},
		{
			name: "subdirectory", dir: filepath.Join(top, "p"), exclude: []string{".claude/progress"},
			want: []Entry{
				{"a", ModeFile, blobID("a")}, {"d/-x y", ModeFile, blobID("x")}, {"l", ModeSymlink, blobID("a")},
				{"run.sh", ModeExecutable, blobID("r")},
			},
		},
	}
	for _, tt := range tests {
		r := openRepo(t, tt.dir, tt.exclude...)
		tree, err := r.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Files(t.Context(), tree)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Files:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestChangesOfAnEmptyRepository(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	write(t, dir, map[string]string{"a": "a"})
	to, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Changes(t.Context(), r.EmptyTree(), to)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{{Path: "a", Kind: Added, To: blobID("a"), ToMode: ModeFile}}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got, want)
	}
}

func TestChangesRefusesWhatIsNotATreeID(t *testing.T) {
	t.Parallel()
	r := openRepo(t, newRepo(t))
	for _, bad := range []Tree{"", "HEAD", "--output=/tmp/x", "4b825dc642cb6eb9a060e54bf8d69288fbee490", "4B825DC642CB6EB9A060E54BF8D69288FBEE4904"} {
		if _, err := r.Changes(t.Context(), bad, r.EmptyTree()); err == nil {
			t.Errorf("Changes(%q) succeeded", bad)
		}
	}
}

func TestChangeKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[ChangeKind]string{Added: "added", Modified: "modified", Deleted: "deleted", 0: "ChangeKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}

func FuzzParseRaw(f *testing.F) {
	f.Add([]byte(":100644 100644 5ea2ed416fbd4a4cbe227b75fe255dd7fa6bd4d6 61780798228d17af2d34fce4cfbdf35556832472 M\x00a b\x00"))
	f.Add([]byte(":000000 120000 0000000000000000000000000000000000000000 61780798228d17af2d34fce4cfbdf35556832472 A\x00l\x00"))
	f.Add([]byte(":1 2 3 4 \x00\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		diffs, err := parseRaw(out)
		if err != nil {
			return
		}
		for _, d := range diffs {
			if d.path == "" {
				t.Errorf("record with an empty path: %+v", d)
			}
			if (d.from == "") != (d.fromMode == "") || (d.to == "") != (d.toMode == "") {
				t.Errorf("absent side half set: %+v", d)
			}
		}
	})
}

// FuzzSplitPairs: what splitPairs accepts it reads whole, each pair's line
// and records put back together being its input.
func FuzzSplitPairs(f *testing.F) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	f.Add([]byte(a + " " + b + "\n:100644 100644 " + a + " " + b + " M\x00p\nq\x00" + b + " " + a + "\n"))
	f.Add([]byte(a + " " + b + "\n:\x00\x00:"))
	f.Fuzz(func(t *testing.T, out []byte) {
		pairs, err := splitPairs(out)
		if err != nil {
			return
		}
		var back []byte
		for _, p := range pairs {
			back = append(back, string(p.from)+" "+string(p.to)+"\n"...)
			back = append(back, p.raw...)
		}
		if !bytes.Equal(back, out) {
			t.Errorf("splitPairs(%q) = %+v, which is not its input", out, pairs)
		}
	})
}

// BenchmarkSnapshot measures the steady state: a warm private index, a
// repository of 2,000 files, one of them changed since the last snapshot.
func BenchmarkSnapshot(b *testing.B) {
	dir := newRepo(b)
	files := map[string]string{".gitignore": "*.log\n"}
	for i := range 2000 {
		files[filepath.Join("pkg"+strconv.Itoa(i%40), "file"+strconv.Itoa(i)+".go")] = "package p // " + strconv.Itoa(i) + "\n"
	}
	write(b, dir, files)
	commitAll(b, dir)
	r := openRepo(b, dir)
	if _, err := r.Snapshot(b.Context()); err != nil {
		b.Fatal(err)
	}
	changed := filepath.Join(dir, "pkg7", "file7.go")
	n := 0
	cpu := childCPU(b)
	for b.Loop() {
		n++
		if err := os.WriteFile(changed, []byte("package p // edit "+strconv.Itoa(n)+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Snapshot(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	reportChildCPU(b, cpu)
}

// childCPU is the CPU time used by the processes the benchmark has waited
// for so far. Wall time per operation swings with the machine's load; the
// CPU time git itself needs does not.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportChildCPU reports the git processes' CPU time per operation since
// start.
func reportChildCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(childCPU(b)-start)/float64(b.N)/1e6, "git-cpu-ms/op")
}

// BenchmarkGitProcess is the floor under every operation: one git process
// that does next to nothing (Snapshot runs three in the steady state).
func BenchmarkGitProcess(b *testing.B) {
	dir := newRepo(b)
	r := openRepo(b, dir)
	cpu := childCPU(b)
	for b.Loop() {
		if _, err := r.git(b.Context(), nil, nil, "rev-parse", "--git-dir"); err != nil {
			b.Fatal(err)
		}
	}
	reportChildCPU(b, cpu)
}

// parseRaw reads git's -z raw diff records, an absent side (mode 000000,
// id of zeros) as "", and refuses a record that is not one.
func TestParseRaw(t *testing.T) {
	t.Parallel()
	a := blobID("a")
	b := blobID("b")
	zero := strings.Repeat("0", 40)
	tests := []struct {
		name string
		out  string
		want []rawDiff // nil with wantErr
		err  bool
	}{
		{name: "nothing", out: ""},
		{name: "modified, added, deleted, type change",
			out: ":100644 100755 " + a + " " + b + " M\x00run sh\x00" +
				":000000 100644 " + zero + " " + b + " A\x00new\nline\x00" +
				":120000 000000 " + a + " " + zero + " D\x00link\x00" +
				":100644 120000 " + a + " " + b + " T\x00t\x00",
			want: []rawDiff{
				{fromMode: "100644", toMode: "100755", from: a, to: b, status: 'M', path: "run sh"},
				{toMode: "100644", to: b, status: 'A', path: "new\nline"},
				{fromMode: "120000", from: a, status: 'D', path: "link"},
				{fromMode: "100644", toMode: "120000", from: a, to: b, status: 'T', path: "t"},
			}},
		{name: "a status with a score", out: ":100644 100644 " + a + " " + b + " M100\x00p\x00",
			want: []rawDiff{{fromMode: "100644", toMode: "100644", from: a, to: b, status: 'M', path: "p"}}},
		{name: "no NUL after the record", out: ":100644 100644 " + a + " " + b + " M", err: true},
		{name: "no path", out: ":100644 100644 " + a + " " + b + " M\x00", err: true},
		{name: "an empty path", out: ":100644 100644 " + a + " " + b + " M\x00\x00", err: true},
		{name: "four fields", out: ":100644 100644 " + a + " M\x00p\x00", err: true},
		{name: "six fields", out: ":100644 100644 " + a + " " + b + " M x\x00p\x00", err: true},
		{name: "no colon", out: "100644 100644 " + a + " " + b + " M\x00p\x00", err: true},
		{name: "a good record, then a bad one", out: ":100644 100644 " + a + " " + b + " M\x00p\x00:bad\x00q\x00", err: true},
	}
	for _, tt := range tests {
		got, err := parseRaw([]byte(tt.out))
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("%s: parseRaw = %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}

// splitNUL splits NUL-terminated records; no output is no record.
func TestSplitNUL(t *testing.T) {
	t.Parallel()
	tests := map[string][]string{
		"":           nil,
		"\x00":       nil, // an empty record is no record
		"a\x00":      {"a"},
		"a\x00b\x00": {"a", "b"},
		"a\x00b":     {"a", "b"},
	}
	for in, want := range tests {
		if got := splitNUL([]byte(in)); !slices.Equal(got, want) {
			t.Errorf("splitNUL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A snapshot cancelled by its caller is not a broken index: the cache is
// kept for the next one.
func TestSnapshotCancelledKeepsItsIndex(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	index := filepath.Join(t.TempDir(), "index")
	r, err := Open(t.Context(), Options{Dir: dir, Index: index})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Snapshot(ctx); err == nil {
		t.Fatal("a cancelled snapshot succeeded")
	}
	if after, err := os.Stat(index); err != nil || !os.SameFile(before, after) {
		t.Errorf("the private index after a cancelled snapshot: %v, want it kept", err)
	}
}

// A private index that cannot be removed is not rebuilt: the snapshot
// fails with the error that made it try.
func TestSnapshotIndexThatCannotBeRemoved(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	index := filepath.Join(t.TempDir(), "index")
	write(t, index, map[string]string{"in-the-way": "x"}) // a directory, not empty
	r, err := Open(t.Context(), Options{Dir: dir, Index: index})
	if err != nil {
		t.Fatal(err)
	}
	if tree, err := r.Snapshot(t.Context()); err == nil || tree != "" {
		t.Errorf("Snapshot = %q, %v; want an error", tree, err)
	}
	if got := state(t, index, "in-the-way"); got != "100644 x" {
		t.Errorf("what was at the index path: %q", got)
	}
}

// A filter driver the repository's configuration reaches by an include is
// the repository's too, and does not run; a bare boolean key of the
// user's own driver keeps its meaning where the repository redefines it.
func TestFiltersReachedByIncludeDoNotRun(t *testing.T) {
	home := t.TempDir()
	marks := t.TempDir()
	global := "[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n" +
		"[filter \"upper\"]\n\tclean = tr a-z A-Z\n\tsmudge = cat\n\trequired\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	dir := newRepo(t)
	write(t, dir, map[string]string{"a.txt": "a", "b.up": "b"})
	commitAll(t, dir)
	hook := filepath.Join(marks, "evil.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch '"+filepath.Join(marks, "ran")+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The repository's configuration names no filter itself, only an
	// include; the included file redefines the user's driver as one that
	// fails and makes it not required.
	included := filepath.Join(dir, ".git", "more.cfg")
	if err := os.WriteFile(included, []byte("[filter \"evil\"]\n\tclean = "+hook+"\n\trequired = true\n[filter \"upper\"]\n\tclean = "+hook+"\n\trequired = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "config", "include.path", included)
	write(t, dir, map[string]string{".gitattributes": "*.txt filter=evil\n*.up filter=upper\n", "a.txt": "agent's", "b.up": "lower"})

	r := openRepo(t, dir)
	tree, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := treeFiles(t, dir, tree)
	// No filter runs at all, the user's own neither: a snapshot is the bytes
	// on disk.
	if files["a.txt"] != "100644 agent's" || files["b.up"] != "100644 lower" {
		t.Errorf("snapshot a.txt %q, b.up %q; want the content as is", files["a.txt"], files["b.up"])
	}
	if _, err := os.Stat(filepath.Join(marks, "ran")); err == nil {
		t.Error("the repository's filter ran")
	}
	env, err := r.filterEnv(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GIT_CONFIG_KEY_0=filter.evil.clean", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=filter.evil.required", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=filter.upper.clean", "GIT_CONFIG_VALUE_2=tr a-z A-Z",
		"GIT_CONFIG_KEY_3=filter.upper.required", "GIT_CONFIG_VALUE_3=true",
		"GIT_CONFIG_COUNT=4",
	}
	if !slices.Equal(env, want) {
		t.Errorf("filterEnv:\n got %q\nwant %q", env, want)
	}
}

// Only a repository configuration that mentions a filter or an include
// costs the git config that reads the drivers.
func TestMayDefineFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string // appended to .git/config; "dir" makes config.worktree a directory
		want   bool
	}{
		{name: "a plain configuration", config: "[core]\n\tautocrlf = false\n"},
		{name: "a filter", config: "[filter \"x\"]\n\tclean = cat\n", want: true},
		{name: "a FILTER, whatever its case", config: "[FILTER \"x\"]\n\tclean = cat\n", want: true},
		{name: "an include", config: "[include]\n\tpath = x.cfg\n", want: true},
		{name: "a conditional include", config: "[includeIf \"gitdir:/x/\"]\n\tpath = x.cfg\n", want: true},
		{name: "a file that cannot be read", config: "dir", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			r := openRepo(t, dir)
			if r.mayDefineFilters() {
				t.Fatal("a fresh repository may define filters")
			}
			if tt.config == "dir" {
				if err := os.Mkdir(filepath.Join(dir, ".git", "config.worktree"), 0o755); err != nil {
					t.Fatal(err)
				}
			} else {
				f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(tt.config)
				f.Close()
			}
			if got := r.mayDefineFilters(); got != tt.want {
				t.Errorf("mayDefineFilters = %v, want %v", got, tt.want)
			}
		})
	}
}
