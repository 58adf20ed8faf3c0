package inputs

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mount serves tree through a view for the test, skipping where the
// system has no FUSE.
func mount(t testing.TB, tree string) *View {
	t.Helper()
	v, err := Mount(tree, t.TempDir())
	noFUSE(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// noFUSE skips the test where the system has no FUSE, but in CI, where
// make test installs it.
func noFUSE(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoFUSE) {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("FUSE is required in CI to test the recording of a run's inputs (make test installs fuse3): %v", err)
	}
	t.Skip(err)
}

// tree writes files (path: content; content "->x" is a link to x) under a
// new directory.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// in is a command that runs argv with its working directory dir, a view:
// the command changes there itself (see View).
func in(dir string, argv ...string) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", `cd "$0" && exec "$@"`, dir}, argv...)...)
}

func run(t testing.TB, dir, script string) string {
	t.Helper()
	cmd := in(dir, "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestAViewRecordsWhatARunDid: each way of using a path of the tree is
// in the record, and what the run did not touch is not.
func TestAViewRecordsWhatARunDid(t *testing.T) {
	root := tree(t, map[string]string{
		"data/in.txt":      "input",
		"data/unread.txt":  "never read",
		"listed/a":         "a",
		"deep/er/file":     "x",
		"link":             "->data/in.txt",
		"escape":           "->../../etc/hostname",
		"untouched/b.txt":  "b",
		"stat/only":        "s",
		"written/keep.txt": "k",
	})
	v := mount(t, root)
	out := run(t, v.Dir, `cat data/in.txt; ls listed >/dev/null; test -e missing/x || echo absent; cat link;
		test -f stat/only && echo found; (cd deep/er && cat file); echo new > written/out.txt`)
	if out != "inputabsent\ninputfound\nx" {
		t.Errorf("the run through the view printed %q", out)
	}
	r, err := v.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		set  string
		got  []string
		want []string
		not  []string
	}{
		{"opened", r.Opened, []string{"data/in.txt", "deep/er/file", "written/out.txt"}, []string{"data/unread.txt", "untouched/b.txt", "stat/only", "written/keep.txt"}},
		{"listed", r.Listed, []string{"listed"}, []string{"data", "untouched"}},
		{"found", r.Found, []string{"data", "data/in.txt", "listed", "link", "stat/only", "deep/er"}, []string{"untouched", "untouched/b.txt", "data/unread.txt"}},
		{"absent", r.Absent, []string{"missing", "written/out.txt"}, []string{"missing/x"}},
		{"links", r.Links, []string{"link"}, []string{"escape"}},
	} {
		for _, p := range tt.want {
			if !slices.Contains(tt.got, p) {
				t.Errorf("%s: %q is not in %q", tt.set, p, tt.got)
			}
		}
		for _, p := range tt.not {
			if slices.Contains(tt.got, p) {
				t.Errorf("%s: %q is in %q, which the run never touched so", tt.set, p, tt.got)
			}
		}
	}
	if r.Outside {
		t.Error("the record says the run left the tree; it did not")
	}
}

// TestALinkOutOfTheTreeIsSaid: a link read whose target leaves the tree
// (absolute, or above the root) makes the record say so.
func TestALinkOutOfTheTreeIsSaid(t *testing.T) {
	for _, target := range []string{"/etc/hostname", "../outside", "a/../../outside", "../" + "x/../.."} {
		t.Run(target, func(t *testing.T) {
			root := tree(t, map[string]string{"l": "->" + target, "a/keep": "k"})
			v := mount(t, root)
			run(t, v.Dir, `readlink l >/dev/null`)
			r, err := v.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !r.Outside {
				t.Errorf("a link to %s was read and the record does not say the run left the tree: %+v", target, r)
			}
		})
	}
	root := tree(t, map[string]string{"a/l": "->../b", "b": "b"})
	v := mount(t, root)
	run(t, v.Dir, `cat a/l >/dev/null`)
	if r, _ := v.Close(); r.Outside || !slices.Contains(r.Opened, "b") {
		t.Errorf("a link within the tree, followed: %+v; want b opened, nothing outside", r)
	}
}

// TestARenamedDirectoryIsAMove: a run that renames a directory of its
// tree, at any depth, and reads below the new name, leaves a record that
// any change affects (Record.Moved): its reads are recorded under names
// the tree does not have. A file renamed is no move, and its old name is
// in the record.
func TestARenamedDirectoryIsAMove(t *testing.T) {
	files := map[string]string{"a/b/c/v.txt": "ok", "a/b/w.txt": "w", "top.txt": "t"}
	for _, tc := range []struct {
		script string
		moved  bool
	}{
		{"mv a z && cat z/b/c/v.txt", true},
		{"mv a/b a/y && cat a/y/c/v.txt", true},
		{"mv a/b/c a/b/x && cat a/b/x/v.txt", true},
		{`python3 -c 'import os; os.rename("a/b", "b2"); open("b2/c/v.txt").read()'`, true},
		// Two names swapped (renameat2's RENAME_EXCHANGE), by a program.
		{`python3 -c 'import ctypes,sys; sys.exit(ctypes.CDLL(None, use_errno=True).renameat2(-100, b"a/b/w.txt", -100, b"top.txt", 2))'`, true},
		{"mv a/b/w.txt a/b/w2.txt && cat a/b/w2.txt", false},
		{"mv top.txt a/top.txt", false},
	} {
		t.Run(tc.script, func(t *testing.T) {
			v := mount(t, tree(t, files))
			run(t, v.Dir, tc.script)
			r, err := v.Close()
			if err != nil {
				t.Fatal(err)
			}
			if r.Moved != tc.moved {
				t.Errorf("Moved = %v, want %v: %+v", r.Moved, tc.moved, r)
			}
			if tc.moved && !r.Affects(contents("elsewhere/entirely")) {
				t.Error("a record of a run that moved a directory is not affected by every change")
			}
			if !tc.moved && !r.Affects(contents(strings.Fields(tc.script)[1])) {
				t.Errorf("the file renamed (%s) is not an input of the run: %+v", strings.Fields(tc.script)[1], r)
			}
		})
	}
}

// TestAViewThatAProcessOfTheRunHoldsDoesNotClose: a process left working
// in the view (the run is not over) makes Close an error, not a record,
// once it has tried for unmountWithin; the view is detached then, nothing
// is left mounted, and a Close once the process is gone ends its server
// (goleak) and still gives no record.
func TestAViewThatAProcessOfTheRunHoldsDoesNotClose(t *testing.T) {
	defer func(d time.Duration) { unmountWithin = d }(unmountWithin)
	unmountWithin = 300 * time.Millisecond
	root := tree(t, map[string]string{"f": "x"})
	v, err := Mount(root, t.TempDir())
	noFUSE(t, err)
	if err != nil {
		t.Fatal(err)
	}
	cmd := in(v.Dir, "sh", "-c", "echo in; exec sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // in the view by now
		t.Fatal(err)
	}
	if _, err := v.Close(); err == nil || !strings.Contains(err.Error(), v.Dir) {
		t.Errorf("Close with a process in the view: %v; want an error naming the view", err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), " "+v.Dir+" ") {
		t.Errorf("%s is still mounted after Close gave up", v.Dir)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if rec, err := v.Close(); err == nil || len(rec.Opened)+len(rec.Found) != 0 {
		t.Errorf("Close once the process is gone: %+v, %v; want no record from a view detached busy", rec, err)
	}
}

// TestAViewBusyForAMomentCloses: a process that leaves the view a moment
// after the run is said to be over (a jail being torn down) does not cost
// the record: Close tries again until it can unmount.
func TestAViewBusyForAMomentCloses(t *testing.T) {
	root := tree(t, map[string]string{"f": "x"})
	v, err := Mount(root, t.TempDir())
	noFUSE(t, err)
	if err != nil {
		t.Fatal(err)
	}
	cmd := in(v.Dir, "sh", "-c", "cat f >/dev/null; echo in; exec sleep 0.6")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	rec, err := v.Close()
	cmd.Wait()
	if err != nil || !slices.Contains(rec.Opened, "f") {
		t.Errorf("Close of a view busy for 0.6 s: %+v, %v; want the record, f opened", rec, err)
	}
}

// entries are changes that add, remove or retype each path; contents
// change only what is in them.
func entries(paths ...string) []Change {
	out := make([]Change, len(paths))
	for i, p := range paths {
		out[i] = Change{Path: p, Entry: true}
	}
	return out
}

func contents(paths ...string) []Change {
	out := make([]Change, len(paths))
	for i, p := range paths {
		out[i] = Change{Path: p}
	}
	return out
}

func TestAffects(t *testing.T) {
	r := Record{
		Opened: []string{"data/in.txt", "go.mod", "pkg/a.go"},
		Listed: []string{"fixtures", "pkg"},
		Found:  []string{"data", "data/in.txt", "fixtures", "pkg", "pkg/a.go", "stat/me"},
		Absent: []string{"config.local", "plugins"},
		Links:  []string{"current"},
	}
	for _, tt := range []struct {
		changed []Change
		want    bool
	}{
		{nil, false},
		{entries("data/in.txt"), true},              // a file it read, removed
		{contents("data/in.txt"), true},             // a file it read, changed
		{entries("data/in.txt.bak"), false},         // a near miss, in a directory it did not list
		{entries("data/in.tx"), false},              // a prefix
		{entries("dat/in.txt"), false},              // a sibling of a name it found
		{contents("go.mod"), true},                  // the manifest, read
		{entries("pkg/b.go"), true},                 // an entry added to a directory it listed
		{contents("pkg/b.go"), false},               // a file of it changed, one it never opened
		{contents("pkg/a.go"), true},                // one it opened
		{entries("pkg/sub/c.go"), false},            // below a listed directory, not in it
		{entries("fixtures/new.json"), true},        // the same, another directory
		{entries("config.local"), true},             // made where it looked and found nothing
		{entries("plugins/x/y.so"), true},           // made under a directory it missed
		{contents("plugins/x/y.so"), true},          // however the change is said
		{entries("plugins/y.so"), true},             // right in it
		{entries("config.local/x"), true},           // a directory made where it missed a file
		{entries("pluginsx/y.so"), false},           // a near miss of that name
		{contents("stat/me"), true},                 // a file it only stat'ed
		{contents("current"), true},                 // a link it read, swapped
		{entries("README.md"), false},               // elsewhere, in the root it did not list
		{entries("README.md", "data/in.txt"), true}, // one of several
		{contents("./data//in.txt"), true},          // a path not in its clean form
		{contents("data/in.txt/"), true},
	} {
		if got := r.Affects(tt.changed); got != tt.want {
			t.Errorf("Affects(%+v) = %v, want %v", tt.changed, got, tt.want)
		}
	}
	// Every order of several changes, one of which affects it.
	changes := entries("README.md", "docs/x", "pkg/new.go", "other/y")
	for i := range changes {
		rotated := append(slices.Clone(changes[i:]), changes[:i]...)
		if !r.Affects(rotated) {
			t.Errorf("Affects(%+v) = false; pkg/new.go is in a listed directory", rotated)
		}
	}
	if !(Record{Outside: true}).Affects(contents("anything")) {
		t.Error("a record of a run that left the tree is affected by nothing")
	}
	if !(Record{Moved: true}).Affects(contents("anything")) {
		t.Error("a record of a run that moved a directory is affected by nothing")
	}
	root := Record{Listed: []string{""}}
	if !root.Affects(entries("new-at-root")) || root.Affects(entries("sub/new")) || root.Affects(contents("changed-at-root")) {
		t.Error("a listing of the root: an entry added there affects it, one below does not, nor a content changed")
	}
}

// TestATestsCodeCannotHideAnInput: the test's own code (testdata/hider)
// uses files by a directory's descriptor, by /proc/self/cwd, and by a
// path another of its threads rewrites while the kernel reads it (a
// tracer reading the path would read the decoy): each name the kernel
// resolved is in the record.
func TestATestsCodeCannotHideAnInput(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hider")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/hider").CombinedOutput(); err != nil {
		t.Fatalf("building the hider: %v\n%s", err, out)
	}
	root := tree(t, map[string]string{"a/by-dirfd": "1", "by-proc": "2", "a/secrt": "3", "a/other": "4"})
	v := mount(t, root)
	cmd := in(v.Dir, bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hider: %v\n%s", err, out)
	}
	r, err := v.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/by-dirfd", "by-proc"} {
		if !slices.Contains(r.Opened, p) {
			t.Errorf("%s was opened and is not in the record: %+v", p, r)
		}
	}
	if strings.TrimSpace(string(out)) == "0" {
		t.Fatal("the hider's race never had the kernel resolve a/secrt: the test proves nothing")
	}
	if !slices.Contains(r.Found, "a/secrt") {
		t.Errorf("the hider found a/secrt %s times, and the record has it not: %+v", strings.TrimSpace(string(out)), r)
	}
	if slices.Contains(r.Found, "a/other") || slices.Contains(r.Opened, "a/other") {
		t.Errorf("a/other, never used, is in the record: %+v", r)
	}
	t.Logf("the hider resolved a/secrt %s times of 20000", strings.TrimSpace(string(out)))
}
