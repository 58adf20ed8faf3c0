package judge

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// TestFiles names what a test command may run from the project; which of
// the candidates are files is the tree's to say (Freeze keeps only those
// that are, RunTest checks only those that look like paths).
func TestTestFiles(t *testing.T) {
	makefiles := []string{"Makefile", "makefile", "GNUmakefile"}
	tests := []struct {
		test string
		want []string
	}{
		{"sh tests/a.sh", []string{"tests/a.sh"}},
		{"bash ./tests/a.sh", []string{"tests/a.sh"}},
		{"./run.sh", []string{"run.sh"}},
		{"tests/run.sh --fast", []string{"tests/run.sh"}},
		{"python -m pytest tests/test_a.py -q", []string{"pytest", "tests/test_a.py"}},
		{"python3 -m pytest -x -k 'login and not slow' tests/test_a.py", []string{"pytest", "login and not slow", "tests/test_a.py"}},
		{"node --test test/a.test.js", []string{"test/a.test.js"}},
		{"npm test", []string{"package.json", "test"}},
		{"yarn test", []string{"package.json", "test"}},
		{"pnpm run test:unit", []string{"package.json", "run", "test:unit"}},
		{"make check", append(slices.Clone(makefiles), "check")},
		{"gmake -C . test", append(slices.Clone(makefiles), "test")},
		// A package pattern is not a file: the tests in it are
		// gates.protected's.
		{"go test ./pkg/...", []string{"test"}},
		{"go test ./...", []string{"test"}},
		{`sh "tests/my test.sh"`, []string{"tests/my test.sh"}},
		{`sh 'tests/a.sh'`, []string{"tests/a.sh"}},
		// A cd moves what follows it; a subshell's does not leak.
		{"cd e2e && sh run.sh", []string{"e2e/run.sh"}},
		{"(cd e2e && sh run.sh) && sh run.sh", []string{"e2e/run.sh", "run.sh"}},
		// Redirection targets are outputs, not what the test runs.
		{"sh tests/pass.sh > test-output.log 2>&1", []string{"tests/pass.sh"}},
		{"sh tests/pass.sh | tee test-run.log", []string{"tests/pass.sh", "test-run.log"}},
		// A shell's -c program is read as shell.
		{`sh -c "sh tests/pass.sh"`, []string{"tests/pass.sh"}},
		// Environment assignments, variables, globs, absolute and parent
		// paths are never project files.
		{"FOO=1 BAR=x/y sh tests/a.sh", []string{"tests/a.sh"}},
		{"pytest --rootdir=tests -q tests/test_b.py", []string{"tests/test_b.py"}},
		{"sh $HOME/t.sh tests/*.sh ~/x.sh {a,b}.sh", nil},
		{"sh /usr/local/bin/t.sh ../other/t.sh", nil},
		{"sh . ./", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := TestFiles(tt.test); !slices.Equal(got, tt.want) {
			t.Errorf("TestFiles(%q) = %q, want %q", tt.test, got, tt.want)
		}
	}
}

// Freeze records, with their blob ids, the files the features' tests name
// and the files gates.protected matches, as the tree holds them; a file a
// person's committed rules ignore is not in the tree, so not in the record.
func TestFreeze(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{".gitignore": "/tests/tmp/\n/build/\n"})
	f.commitAll("ignore rules")
	files := map[string]string{
		"tests/a.sh":          "exit 1\n",      // named, and protected
		"check.sh":            "exit 1\n",      // named only
		"pkg/x_test.go":       "package pkg\n", // protected only
		"src/main.go":         "package main\n",
		"Makefile":            "check:\n\tfalse\n",
		".gitignore":          "/tests/tmp/\n/build/\n",
		"tests/tmp/out.log":   "ignored\n", // ignored, though tests/** matches
		"build/gen_test.go":   "package build\n",
		"docs/tests-guide.md": "no\n",
		"scripts/init.sh":     "npm ci\n", // the list's setup runs it
		"scripts/other.sh":    "exit 0\n",
	}
	f.write(files)
	l := list(
		progress.Feature{ID: "F-001", Test: "sh tests/a.sh"},
		progress.Feature{ID: "F-002", Test: "./check.sh && sh tests/missing.sh"},
		progress.Feature{ID: "F-003", Test: "make check"},
	)
	l.Setup = "cd . && sh scripts/init.sh > setup.log 2>&1"
	fz, err := f.j.Freeze(t.Context(), l, f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range []string{"tests/a.sh", "check.sh", "pkg/x_test.go", "Makefile", "scripts/init.sh"} {
		want[p] = f.blobID(files[p])
	}
	if !maps.Equal(fz.Files, want) {
		t.Errorf("frozen = %v, want %v", fz.Files, want)
	}
	if fz.At.IsZero() {
		t.Error("the record has no time")
	}
	if got, wantSorted := fz.Sorted(), []string{"Makefile", "check.sh", "pkg/x_test.go", "scripts/init.sh", "tests/a.sh"}; !slices.Equal(got, wantSorted) {
		t.Errorf("Sorted = %q, want %q", got, wantSorted)
	}
	// Freeze only reads: the judge's record is SetFrozen's.
	if len(f.j.Frozen().Files) != 0 {
		t.Error("Freeze changed the judge's record")
	}

	// Without a list, only gates.protected freezes.
	fz, err = f.j.Freeze(t.Context(), nil, f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got := fz.Sorted(); !slices.Equal(got, []string{"pkg/x_test.go", "tests/a.sh"}) {
		t.Errorf("frozen without a list = %q", got)
	}
}

// Drift names the frozen files a tree holds otherwise: changed or gone.
func TestDrift(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"tests/a.sh": "exit 1\n", "tests/b.sh": "exit 2\n", "pkg/x_test.go": "package pkg\n", "src/a.go": "package a\n"})
	l := list(progress.Feature{ID: "F-001", Test: "sh tests/a.sh"})
	if drift, err := f.j.Drift(t.Context(), f.snapshot()); err != nil || drift != nil {
		t.Fatalf("Drift without a record = %q, %v; want nothing", drift, err)
	}
	fz, err := f.j.Freeze(t.Context(), l, f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.j.SetFrozen(fz); err != nil {
		t.Fatal(err)
	}
	if drift, err := f.j.Drift(t.Context(), f.snapshot()); err != nil || len(drift) != 0 {
		t.Fatalf("Drift of the frozen tree = %q, %v; want nothing", drift, err)
	}
	// What is not frozen may change freely.
	f.write(map[string]string{"src/a.go": "package a // changed\n", "src/new.go": "package a\n"})
	if drift, err := f.j.Drift(t.Context(), f.snapshot()); err != nil || len(drift) != 0 {
		t.Fatalf("Drift after changing source = %q, %v; want nothing", drift, err)
	}
	f.write(map[string]string{"tests/a.sh": "exit 0\n"})
	f.remove("pkg/x_test.go")
	drift, err := f.j.Drift(t.Context(), f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"pkg/x_test.go", "tests/a.sh"}; !slices.Equal(drift, want) {
		t.Errorf("Drift = %q, want %q", drift, want)
	}
	// Changed back, it is in order again.
	f.write(map[string]string{"tests/a.sh": "exit 1\n", "pkg/x_test.go": "package pkg\n"})
	if drift, err := f.j.Drift(t.Context(), f.snapshot()); err != nil || len(drift) != 0 {
		t.Errorf("Drift after restoring = %q, %v; want nothing", drift, err)
	}
}

// SetFrozen is the record the gates hold agents to, and leaves it where a
// hook deciding alone finds it.
func TestSetFrozenWritesTheOfflineRecord(t *testing.T) {
	f := newFixture(t, nil)
	fz := Frozen{Files: map[string]string{"tests/b.sh": "bb", "tests/a.sh": "aa", "Makefile": "mm"}}
	if err := f.j.SetFrozen(fz); err != nil {
		t.Fatal(err)
	}
	off, err := gates.LoadOffline(f.proj.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Makefile", "tests/a.sh", "tests/b.sh"}; !slices.Equal(off.Frozen, want) {
		t.Errorf("offline frozen = %q, want %q", off.Frozen, want)
	}
	if want := []string{"tests/**", "**/*_test.go"}; !slices.Equal(off.ProtectedGlobs, want) {
		t.Errorf("offline protected = %q, want %q", off.ProtectedGlobs, want)
	}
	if len(off.Writable) != 1 {
		t.Errorf("offline writable = %q", off.Writable)
	}
	if got := f.j.Frozen(); !maps.Equal(got.Files, fz.Files) {
		t.Errorf("Frozen() = %v", got.Files)
	}
	// A new record replaces the old one in both places.
	if err := f.j.SetFrozen(Frozen{Files: map[string]string{"tests/c.sh": "cc"}}); err != nil {
		t.Fatal(err)
	}
	if off, _ := gates.LoadOffline(f.proj.StateDir); !slices.Equal(off.Frozen, []string{"tests/c.sh"}) {
		t.Errorf("offline frozen after a new record = %q", off.Frozen)
	}
}

// A test command that changes directory first runs the script of that
// directory: that script is the acceptance test, and must be frozen like
// one named from the project's top.
func TestFreezeFollowsTheTestIntoItsDirectory(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"e2e/run.sh": "exit 1\n", "run.sh": "exit 0\n"})
	l := list(progress.Feature{ID: "F-001", Test: "cd e2e && sh run.sh"})
	fz, err := f.j.Freeze(t.Context(), l, f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fz.Files["e2e/run.sh"]; !ok {
		t.Errorf("frozen %q: the script `cd e2e && sh run.sh` runs (e2e/run.sh) is not frozen", fz.Sorted())
	}
	if _, ok := fz.Files["run.sh"]; ok {
		t.Errorf("frozen %q: run.sh at the top is not what the test runs", fz.Sorted())
	}
}

// Adopt takes the named paths' content in tree into the record (a person
// changed them), drops the named paths tree lacks, and leaves every other
// path of the record as it was, changed in tree or not. The new record is
// the judge's, and the offline one, from then on.
func TestAdopt(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.FixedZone("CET", 3600))
	f := newFixture(t, func(o *Options) { o.Now = func() time.Time { return now } })
	f.write(map[string]string{"tests/a.sh": "exit 1\n", "tests/gone.sh": "exit 2\n", "Makefile": "check:\n"})
	old, err := f.j.Freeze(t.Context(), list(progress.Feature{ID: "F-001", Test: "make check"}), f.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.j.SetFrozen(old); err != nil {
		t.Fatal(err)
	}
	// A person changes a test, removes one, adds one, and changes the
	// Makefile too (not adopted: it stays as it was frozen).
	f.write(map[string]string{"tests/a.sh": "exit 0 # fixed\n", "tests/new.sh": "exit 3\n", "Makefile": "check: all\n"})
	f.remove("tests/gone.sh")
	fz, err := f.j.Adopt(t.Context(), f.snapshot(), []string{"tests/a.sh", "tests/gone.sh", "tests/new.sh", "tests/never.sh"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"tests/a.sh":   f.blobID("exit 0 # fixed\n"),
		"tests/new.sh": f.blobID("exit 3\n"),
		"Makefile":     f.blobID("check:\n"),
	}
	if !maps.Equal(fz.Files, want) || !fz.At.Equal(now) || fz.At.Location() != time.UTC {
		t.Errorf("Adopt = %v at %v, want %v at %v (UTC)", fz.Files, fz.At, want, now)
	}
	if got := f.j.Frozen(); !maps.Equal(got.Files, want) {
		t.Errorf("the judge's record is %v, want the adopted one", got.Files)
	}
	if off, err := gates.LoadOffline(f.proj.StateDir); err != nil || !slices.Equal(off.Frozen, []string{"Makefile", "tests/a.sh", "tests/new.sh"}) {
		t.Errorf("offline frozen = %q, %v", off.Frozen, err)
	}
	// The record it started from is not changed under its holder.
	if !maps.Equal(old.Files, map[string]string{"tests/a.sh": f.blobID("exit 1\n"), "tests/gone.sh": f.blobID("exit 2\n"), "Makefile": f.blobID("check:\n")}) {
		t.Errorf("the old record changed: %v", old.Files)
	}

	// A tree that cannot be read changes nothing.
	if _, err := f.j.Adopt(t.Context(), "not-a-tree", []string{"Makefile"}); err == nil {
		t.Error("Adopt of a bogus tree succeeded")
	}
	if got := f.j.Frozen(); !maps.Equal(got.Files, want) {
		t.Errorf("a failed Adopt changed the record to %v", got.Files)
	}
}

// A submodule a person committed (a gitlink) is no file of the project's
// tests, even where gates.protected matches its path.
func TestFreezeSkipsNestedRepositories(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"tests/a.sh": "exit 1\n", "tests/vendor/x.sh": "exit 0\n"})
	gitIn(t, filepath.Join(f.dir, "tests/vendor"), "init", "-q")
	gitIn(t, filepath.Join(f.dir, "tests/vendor"), "add", "-A")
	gitIn(t, filepath.Join(f.dir, "tests/vendor"), "commit", "-q", "-m", "vendored")
	f.commitAll("the person's submodule")
	tree := f.snapshot()
	entries, err := f.repo.Files(t.Context(), tree)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries, func(e gitrepo.Entry) bool { return e.Path == "tests/vendor" && e.Mode == gitrepo.ModeGitlink }) {
		t.Fatalf("entries %+v: the nested repository is not a gitlink in the tree", entries)
	}
	fz, err := f.j.Freeze(t.Context(), list(progress.Feature{ID: "F-001", Test: "sh tests/vendor"}), tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := fz.Sorted(); !slices.Equal(got, []string{"tests/a.sh"}) {
		t.Errorf("frozen %q, want tests/a.sh only", got)
	}
}
