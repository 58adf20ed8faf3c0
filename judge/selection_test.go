package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// selecting has the sweeps select, a full one every 20 (the default, said
// all the same).
func selecting(o *Options) { o.FullSweepEvery = 20 }

// selectionFixture is a project whose feature F-000 is tested, by test,
// on the files of base; its first run by the daemon, which passes, leaves
// the record a sweep selects by (none, on a tree that uses cgo).
func selectionFixture(t *testing.T, f *fixture, base map[string]string, test string) (*progress.List, gitrepo.Tree) {
	t.Helper()
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are recorded in its jail, bubblewrap's, on Linux")
	}
	f.write(base)
	tree := f.snapshot()
	if r := f.j.RunTest(t.Context(), tree, test); !r.Passed() {
		t.Fatalf("F-000's test on its own tree: %s\n%s", r.Summary(), r.Output)
	}
	f.j.mu.Lock()
	_, recorded := f.j.seen[test]
	f.j.mu.Unlock()
	switch cgo := toolchain.UsesCgo(f.dir); {
	case cgo && recorded:
		t.Fatal("a passing run on a tree that uses cgo left a record of its inputs: it must leave none")
	case !cgo && !recorded:
		t.Fatal("a passing run left no record of its inputs (is FUSE missing? install fuse3)")
	}
	return list(progress.Feature{ID: "F-000", Test: test, Tested: true, Status: progress.Completed},
		progress.Feature{ID: "F-001", Test: "true"}), tree
}

// swept is the sweep of l on the project's tree as it is now, for F-001's
// claim.
func swept(t *testing.T, f *fixture, l *progress.List) ([]Regression, Swept) {
	t.Helper()
	return f.j.sweep(t.Context(), Root{}, l, "F-001", f.snapshot())
}

// Every route by which a claim can change what an earlier feature's test
// read, each breaking that test: the sweep runs it and finds it broken,
// before the branch moves. Each route's twin that touches nothing the
// test read (a near-miss name, a file beside it) is skipped.
func TestASweepRunsEveryTestAChangeCanAffect(t *testing.T) {
	tests := []struct {
		name   string
		base   map[string]string
		test   string
		breaks func(f *fixture) // changes what the test read: it now fails
		misses func(f *fixture) // changes something else only
		// stillRuns: the record cannot say what the test read, so a
		// change of something else runs it too (and it passes).
		stillRuns bool
	}{
		{
			name:   "a data file it reads",
			base:   map[string]string{"data/v.txt": "ok\n", "data/w.txt": "w\n"},
			test:   "grep -qx ok data/v.txt",
			breaks: func(f *fixture) { f.write(map[string]string{"data/v.txt": "no\n"}) },
			misses: func(f *fixture) {
				f.write(map[string]string{"data/w.txt": "changed\n", "data/v.txt.bak": "no\n", "data/v": "no\n"})
			},
		},
		{
			name:   "a file deleted that it read",
			base:   map[string]string{"data/v.txt": "ok\n", "data/w.txt": "w\n"},
			test:   "grep -qx ok data/v.txt",
			breaks: func(f *fixture) { f.remove("data/v.txt") },
			misses: func(f *fixture) { f.remove("data/w.txt") },
		},
		{
			name:   "a directory it lists",
			base:   map[string]string{"conf/a.conf": "a\n", "other/a.conf": "a\n"},
			test:   `test "$(ls conf)" = a.conf`,
			breaks: func(f *fixture) { f.write(map[string]string{"conf/b.conf": "b\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"other/b.conf": "b\n", "conf.d/b.conf": "b\n"}) },
		},
		{
			// git names files only: the directory comes with its first.
			name:   "a directory made in a directory it lists",
			base:   map[string]string{"conf/a.conf": "a\n", "other/a.conf": "a\n"},
			test:   `test "$(ls conf)" = a.conf`,
			breaks: func(f *fixture) { f.write(map[string]string{"conf/sub/deeper/b.conf": "b\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"other/sub/b.conf": "b\n", "conf.d/sub/b.conf": "b\n"}) },
		},
		{
			// ... and goes with its last.
			name:   "a directory emptied in a directory it lists",
			base:   map[string]string{"plugins/on/x": "x\n", "plugins/off/y": "y\n", "other/z/w": "w\n", "other/keep": "k\n"},
			test:   `test "$(ls plugins | tr '\n' ' ')" = "off on "`,
			breaks: func(f *fixture) { f.remove("plugins/on/x") },
			misses: func(f *fixture) { f.remove("other/z/w") },
		},
		{
			// What it reads below the new name is recorded under it.
			name:      "a directory it renames while it runs",
			base:      map[string]string{"data/v.txt": "ok\n", "other.txt": "o\n"},
			test:      "mv data d2 && grep -qx ok d2/v.txt",
			breaks:    func(f *fixture) { f.write(map[string]string{"data/v.txt": "no\n"}) },
			misses:    func(f *fixture) { f.write(map[string]string{"other.txt": "changed\n"}) },
			stillRuns: true,
		},
		{
			name:   "a file made where it looked and found none",
			base:   map[string]string{"src/a/x.go": "package a\n"},
			test:   "! test -e src/a/breaks",
			breaks: func(f *fixture) { f.write(map[string]string{"src/a/breaks": "x\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"src/a/breaks2": "x\n", "src/b/breaks": "x\n"}) },
		},
		{
			name:   "a file made below a directory it found absent",
			base:   map[string]string{"src/a/x.go": "package a\n"},
			test:   "! test -e plugins/extra/on",
			breaks: func(f *fixture) { f.write(map[string]string{"plugins/extra/on": "x\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"plugin/extra/on": "x\n"}) },
		},
		{
			name:   "a symlink swapped",
			base:   map[string]string{"v1/val": "ok\n", "v2/val": "no\n", "cur": "link:v1", "old": "link:v2"},
			test:   "grep -qx ok cur/val",
			breaks: func(f *fixture) { f.write(map[string]string{"cur": "link:v2"}) },
			misses: func(f *fixture) { f.write(map[string]string{"old": "link:v1"}) },
		},
		{
			name:   "a script it runs",
			base:   map[string]string{"tests/e.sh": "exit 0\n", "tests/f.sh": "exit 0\n"},
			test:   "sh tests/e.sh",
			breaks: func(f *fixture) { f.write(map[string]string{"tests/e.sh": "exit 1\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"tests/f.sh": "exit 1\n"}) },
		},
		{
			name:   "a file its script sources, found by a name it builds",
			base:   map[string]string{"tests/e.sh": `. "./lib/$(printf 'co%s' nf).sh"` + "\n", "lib/conf.sh": "exit 0\n", "lib/other.sh": "exit 0\n"},
			test:   "sh tests/e.sh",
			breaks: func(f *fixture) { f.write(map[string]string{"lib/conf.sh": "exit 1\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"lib/other.sh": "exit 1\n"}) },
		},
		{
			// The test's own code hides where it reads: through a link it
			// makes in its /tmp, by a program it writes, in a process in
			// the background. The kernel still asks the view.
			name:   "a file its own code reads by a route it hides",
			base:   map[string]string{"data/v.txt": "ok\n", "data/w.txt": "w\n"},
			test:   `ln -s "$PWD/data" /tmp/d && printf '#!/bin/sh\nexec grep -qx ok /tmp/d/v.txt\n' > /tmp/check && chmod +x /tmp/check && (/tmp/check &) ; sleep 0.2; /tmp/check`,
			breaks: func(f *fixture) { f.write(map[string]string{"data/v.txt": "no\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"data/w.txt": "changed\n"}) },
		},
		{
			// A tree that uses cgo is given its own cgo flags (toolchain.CgoTreeEnv):
			// a Go file gaining `import "C"` anywhere changes the run's environment.
			name: "a Go file it never reads gaining cgo",
			base: map[string]string{"data/v.txt": "ok\n", "other/o.go": "package other\n"},
			test: `test -z "$CGO_CPPFLAGS" && grep -qx ok data/v.txt`,
			breaks: func(f *fixture) {
				f.write(map[string]string{"other/o.go": "package other\n\n// #include <stdio.h>\nimport \"C\"\n"})
			},
			misses: func(f *fixture) {
				f.write(map[string]string{"other/o.go": "package other\n\nimport C \"fmt\"\n\nvar _ = C.Sprint\n", "other/c.go.txt": "import \"C\"\n"})
			},
		},
		{
			name: "an executable Go file it never reads gaining cgo",
			base: map[string]string{"data/v.txt": "ok\n", "other/o.go": "exec:package other\n"},
			test: `test -z "$CGO_CPPFLAGS" && grep -qx ok data/v.txt`,
			breaks: func(f *fixture) {
				f.write(map[string]string{"other/o.go": "exec:package other\n\n// #include <stdio.h>\nimport \"C\"\n"})
			},
			misses: func(f *fixture) { f.write(map[string]string{"other/o.go": "exec:package other\n\n// no cgo\n"}) },
		},
		{
			// Go builds x.go from x.impl: a change of x.impl alone can make
			// the tree use cgo, and give the run the tree's cgo flags, so a
			// tree with a Go file that is a link counts as cgo's from the
			// start (toolchain.CgoLink), and is never recorded. Its test
			// runs at every sweep, even when the change is one no record
			// would hold: x.impl, which the test never reads.
			name:   "the target of a Go file that is a link gaining cgo",
			base:   map[string]string{"data/v.txt": "ok\n", "other/x.go": "link:x.impl", "other/x.impl": "package other\n"},
			test:   `grep -qx ok data/v.txt`,
			breaks: func(f *fixture) { f.write(map[string]string{"data/v.txt": "no\n"}) },
			misses: func(f *fixture) {
				f.write(map[string]string{"other/x.impl": "package other\n\n// #include <stdio.h>\nimport \"C\"\n"})
			},
			stillRuns: true,
		},
		{
			name:   "a file read by a program in python, by a directory's descriptor",
			base:   map[string]string{"data/v.txt": "ok\n", "data/w.txt": "w\n"},
			test:   `python3 -c 'import os,sys; d=os.open("data", os.O_RDONLY); sys.exit(0 if os.read(os.open("v.txt", os.O_RDONLY, dir_fd=d), 9) == b"ok\n" else 1)'`,
			breaks: func(f *fixture) { f.write(map[string]string{"data/v.txt": "no\n"}) },
			misses: func(f *fixture) { f.write(map[string]string{"data/w.txt": "changed\n"}) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, breaking := range []bool{true, false} {
				f := newFixture(t, selecting)
				l, _ := selectionFixture(t, f, tc.base, tc.test)
				if breaking {
					tc.breaks(f)
				} else {
					tc.misses(f)
				}
				broken, s := swept(t, f, l)
				switch {
				case breaking && (s.Ran != 1 || len(broken) != 1 || broken[0].Feature != "F-000"):
					t.Errorf("a change of what F-000's test read: the sweep ran %d, skipped %d, found %q broken; want F-000 run and broken", s.Ran, s.Skipped, features(broken))
				case !breaking && tc.stillRuns && (s.Ran != 1 || len(broken) != 0):
					t.Errorf("a change elsewhere, of a test whose record cannot say what it read: the sweep ran %d, skipped %d, found %q broken; want it run, and passing", s.Ran, s.Skipped, features(broken))
				case !breaking && !tc.stillRuns && (s.Ran != 0 || s.Skipped != 1):
					t.Errorf("a change of nothing F-000's test read: the sweep ran %d, skipped %d; want it skipped", s.Ran, s.Skipped)
				}
			}
		})
	}
}

// A file of a package that a Go test imports is read by the compiler in
// the test's run: a claim that changes it runs the test, and one that
// changes a package it does not import does not.
func TestASweepRunsAGoTestWhoseImportChanged(t *testing.T) {
	f := goFixture(t)
	f.j.opts.FullSweepEvery = 20
	base := map[string]string{
		"go.mod":      "module m\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nimport \"m/b\"\n\nfunc Answer() int { return b.Half() * 2 }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(Answer())\n\t}\n}\n",
		"b/b.go":      "package b\n\nfunc Half() int { return 21 }\n",
		"c/c.go":      "package c\n\nfunc Other() int { return 1 }\n",
	}
	l, _ := selectionFixture(t, f, base, "go test ./a/")
	f.write(map[string]string{"c/c.go": "package c\n\nfunc Other() int { return 2 }\n"})
	if broken, s := swept(t, f, l); s.Ran != 0 || s.Skipped != 1 || len(broken) != 0 {
		t.Errorf("a change of a package it does not import: ran %d, skipped %d, broken %q; want it skipped", s.Ran, s.Skipped, features(broken))
	}
	f.write(map[string]string{"b/b.go": "package b\n\nfunc Half() int { return 20 }\n"})
	if broken, s := swept(t, f, l); s.Ran != 1 || len(broken) != 1 {
		t.Errorf("a change of the package it imports: ran %d, skipped %d, broken %q; want it run and broken", s.Ran, s.Skipped, features(broken))
	}
}

// What a test is given from outside its tree: a change of it runs the
// test, whatever the tree's change. The dependency directory is lent (the
// person's ignore rules keep it out of the tree, as they do).
func TestASweepRunsATestWhoseSettingChanged(t *testing.T) {
	base := map[string]string{"data/v.txt": "ok\n", "other.txt": "o\n", "go.mod": "module m\n\ngo 1.22\n"}
	depFile := func(f *fixture) string { return filepath.Join(f.dir, "node_modules/x/v") }
	tests := []struct {
		name   string
		test   string
		change func(t *testing.T, f *fixture)
		broken bool // the change breaks the test
	}{
		{
			name: "an environment variable it is given",
			test: `test "$MODE" = ok && grep -qx ok data/v.txt`,
			change: func(t *testing.T, f *fixture) {
				f.j.opts.Jail.Env = slices.Concat(f.j.opts.Jail.Env[:len(f.j.opts.Jail.Env)-1], []string{"MODE=no"})
			},
			broken: true,
		},
		{
			name: "a dependency directory lent to it, a file changed in place",
			test: "grep -qx ok node_modules/x/v",
			change: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(depFile(f), []byte("no\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			broken: true,
		},
		{
			// The same size, and its modification time set back as it
			// was: its change time and inode say it changed.
			name: "a dependency directory lent to it, a file changed with its time set back",
			test: "grep -qx ok node_modules/x/v",
			change: func(t *testing.T, f *fixture) {
				fi, err := os.Stat(depFile(f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(depFile(f), []byte("no\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(depFile(f), fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			broken: true,
		},
		{
			name: "a dependency directory lent to it, a file added",
			test: "test ! -e node_modules/x/evil",
			change: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.dir, "node_modules/x/evil"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			broken: true,
		},
		{
			// Outside the tree, what agents can write and the run sees:
			// a directory of sandbox.allow_write (writable to it too) ...
			name: "a directory of allow_write it reads",
			test: `grep -qx ok "$OUT_W/v"`,
			change: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.j.opts.Jail.Writable[0], "v"), []byte("no\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			broken: true,
		},
		{
			// ... and the caches it reads dependencies from, read-only
			// (the agents' module cache, Cargo's).
			name: "a cache it reads dependencies from",
			test: `grep -qx ok "$OUT_RO/mod/v"`,
			change: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.j.opts.Jail.ReadOnly[0], "mod", "v"), []byte("no\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			broken: true,
		},
		{
			// A manifest decides what the dependencies are: its change
			// runs every test, though this one never read it.
			name:   "a manifest",
			test:   "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) { f.write(map[string]string{"go.mod": "module m\n\ngo 1.23\n"}) },
		},
		{
			name:   "the frozen record",
			test:   "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) { f.j.frozen.At = f.j.frozen.At.Add(1) },
		},
		{
			name:   "its timeout",
			test:   "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) { f.j.opts.TestTimeout *= 2 },
		},
		{
			name:   "its bounds",
			test:   "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) { f.j.opts.Jail.Limits.FileSize = 1 << 30 },
		},
		{
			name: "the list's setup",
			test: "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) {
				f.j.SetList(&progress.List{Version: 1, Setup: "npm ci"})
			},
		},
		{
			name: "a toolchain's program on its PATH",
			test: "grep -qx ok data/v.txt",
			change: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.tools, "python3"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tools := t.TempDir() // a toolchain's program, on the test's PATH
			if err := os.WriteFile(filepath.Join(tools, "python3"), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			w, ro := outsideDirs(t)
			f := newFixture(t, func(o *Options) {
				selecting(o)
				o.Jail.Env = []string{"PATH=" + tools + ":/usr/bin:/bin", "LC_ALL=C", "OUT_W=" + w, "OUT_RO=" + ro, "MODE=ok"}
				o.Jail.Writable, o.Jail.ReadOnly = []string{w}, []string{ro}
			})
			f.tools = tools
			f.write(map[string]string{".gitignore": "/node_modules/\n"})
			f.commitAll("ignore node_modules")
			if err := os.MkdirAll(filepath.Join(f.dir, "node_modules/x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(depFile(f), []byte("ok\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			l, _ := selectionFixture(t, f, base, tc.test)
			if files, err := f.repo.Files(t.Context(), f.snapshot()); err != nil || slices.ContainsFunc(files, func(e gitrepo.Entry) bool { return strings.HasPrefix(e.Path, "node_modules") }) {
				t.Fatalf("node_modules is in the tree (%v): it is to be lent", err)
			}
			// Unchanged, it is skipped, though the tree moved.
			f.write(map[string]string{"other.txt": "moved\n"})
			if _, s := swept(t, f, l); s.Ran != 0 || s.Skipped != 1 {
				t.Fatalf("nothing it was given changed: ran %d, skipped %d; want it skipped", s.Ran, s.Skipped)
			}
			tc.change(t, f)
			broken, s := swept(t, f, l)
			if s.Ran != 1 || (len(broken) == 1) != tc.broken {
				t.Errorf("ran %d, skipped %d, broken %q; want it run, broken: %v", s.Ran, s.Skipped, features(broken), tc.broken)
			}
		})
	}
}

// outsideDirs are a directory of allow_write and a cache of
// dependencies, each holding a file v that says ok.
func outsideDirs(t *testing.T) (w, ro string) {
	t.Helper()
	w, ro = t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(w, "v"), filepath.Join(ro, "mod", "v")} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("ok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return w, ro
}

// Directories outside the tree too big to fingerprint within the bound
// make every sweep run every test: the setting of each run is its own.
func TestASettingTooBigToFingerprintRunsEveryTest(t *testing.T) {
	w, ro := outsideDirs(t)
	for i := range 10 {
		os.WriteFile(filepath.Join(ro, "mod", fmt.Sprint(i)), nil, 0o644)
	}
	defer func(b int) { fingerprintBound = b }(fingerprintBound)
	for _, bound := range []int{100, 5} {
		fingerprintBound = bound
		core, logs := observer.New(zap.WarnLevel)
		f := newFixture(t, func(o *Options) {
			selecting(o)
			o.Jail.Writable, o.Jail.ReadOnly = []string{w}, []string{ro}
			o.Log = zap.New(core)
		})
		l, _ := selectionFixture(t, f, map[string]string{"data/v.txt": "ok\n", "other.txt": "o\n"}, "grep -qx ok data/v.txt")
		for i := range 3 {
			f.write(map[string]string{"other.txt": fmt.Sprintf("moved %d\n", i)})
			if _, s := swept(t, f, l); (s.Ran == 1) != (bound == 5) {
				t.Errorf("%d entries outside, a bound of %d: sweep %d ran %d, skipped %d", 14, bound, i+1, s.Ran, s.Skipped)
			}
		}
		if said, want := logs.FilterMessageSnippet("too many files to fingerprint").Len(), map[bool]int{true: 1}[bound == 5]; said != want {
			t.Errorf("a bound of %d: the log said %d times that the directories are too big; want %d", bound, said, want)
		}
	}
}

// A test whose last run failed, was cut short or was never made has no
// record: the sweep runs it. A full sweep comes every FullSweepEvery
// sweeps and when asked, and runs every test.
func TestASweepRunsWhatItHasNoRecordOf(t *testing.T) {
	base := map[string]string{"data/v.txt": "ok\n", "other.txt": "o\n"}
	t.Run("a run that failed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, selecting)
		l, _ := selectionFixture(t, f, base, "grep -qx ok data/v.txt")
		f.write(map[string]string{"data/v.txt": "no\n"})
		if r := f.j.RunTest(t.Context(), f.snapshot(), "grep -qx ok data/v.txt"); r.Passed() {
			t.Fatal("the broken tree passed")
		}
		// Still broken, and nothing it reads changed since the failing
		// run: no record of that run may skip it.
		f.write(map[string]string{"other.txt": "moved\n"})
		if broken, s := swept(t, f, l); s.Ran != 1 || len(broken) != 1 {
			t.Errorf("after a failed run: ran %d, skipped %d, broken %q; want it run and broken", s.Ran, s.Skipped, features(broken))
		}
		// Back on a tree the record of the passing run would skip it on.
		f.write(map[string]string{"data/v.txt": "ok\n", "other.txt": "moved again\n"})
		if _, s := swept(t, f, l); s.Ran != 1 {
			t.Errorf("after a failed run: ran %d, skipped %d; want it run", s.Ran, s.Skipped)
		}
	})
	t.Run("a run cut short", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, selecting)
		l, tree := selectionFixture(t, f, base, "grep -qx ok data/v.txt")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if r := f.j.RunTest(ctx, tree, "grep -qx ok data/v.txt"); !r.Interrupted {
			t.Fatalf("a cancelled run: %+v", r)
		}
		if _, s := swept(t, f, l); s.Ran != 1 {
			t.Errorf("after a run cut short: ran %d, skipped %d; want it run", s.Ran, s.Skipped)
		}
	})
	t.Run("a tree that uses cgo", func(t *testing.T) {
		// Its environment names its tree (CgoTreeEnv), and headers it
		// includes are read by the warm-up's build: nothing is recorded.
		t.Parallel()
		if !sandbox.Confines {
			t.Skip("the daemon's test runs are recorded in its jail, bubblewrap's, on Linux")
		}
		for _, cgo := range []bool{false, true} {
			f := newFixture(t, selecting)
			files := map[string]string{"data/v.txt": "ok\n", "c/c.go": "package c\n\nimport \"fmt\"\n\nvar _ = fmt.Sprint\n"}
			if cgo {
				files["c/c.go"] = "package c\n\n// #include \"../inc/v.h\"\nimport \"C\"\n"
			}
			f.write(files)
			tree := f.snapshot()
			// The tree tested decides, not the project's work tree as it
			// is now (a lane's candidate brings cgo, or takes it away).
			if cgo {
				f.remove("c/c.go")
			} else {
				f.write(map[string]string{"c/c.go": "package c\n\n// #include \"../inc/v.h\"\nimport \"C\"\n"})
			}
			f.j.RunTest(t.Context(), tree, "grep -qx ok data/v.txt")
			f.j.mu.Lock()
			_, recorded := f.j.seen["grep -qx ok data/v.txt"]
			f.j.mu.Unlock()
			if recorded == cgo {
				t.Errorf("a tree with cgo %v: recorded %v", cgo, recorded)
			}
		}
	})
	t.Run("never run", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, selecting)
		l, _ := selectionFixture(t, f, base, "grep -qx ok data/v.txt")
		l.Features = append(l.Features, progress.Feature{ID: "F-002", Test: "grep -qx o other.txt", Tested: true})
		if _, s := swept(t, f, l); s.Ran != 1 || s.Skipped != 1 {
			t.Errorf("one test recorded, one never run: ran %d, skipped %d; want 1 and 1", s.Ran, s.Skipped)
		}
	})
	t.Run("every FullSweepEvery sweeps, and when asked", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, func(o *Options) { o.FullSweepEvery = 3 })
		l, _ := selectionFixture(t, f, base, "grep -qx ok data/v.txt")
		var full []bool
		for i := range 7 {
			if i == 4 {
				f.j.FullSweep()
			}
			// A tree of its own each time, which no run passed on yet (a
			// full sweep does not run again what passed on its very tree).
			f.write(map[string]string{"other.txt": fmt.Sprintf("o%d\n", i)})
			_, s := swept(t, f, l)
			full = append(full, s.Full)
			if s.Full != (s.Ran == 1) {
				t.Errorf("sweep %d: full %v, ran %d", i+1, s.Full, s.Ran)
			}
		}
		// The third, then one asked for (the fifth), and three after it.
		if want := []bool{false, false, true, false, true, false, false}; !slices.Equal(full, want) {
			t.Errorf("full sweeps %v, want %v", full, want)
		}
	})
	t.Run("every sweep, at 1", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, func(o *Options) { o.FullSweepEvery = 1 })
		f.write(base)
		tree := f.snapshot()
		f.j.RunTest(t.Context(), tree, "grep -qx ok data/v.txt")
		l := list(progress.Feature{ID: "F-000", Test: "grep -qx ok data/v.txt", Tested: true})
		for range 2 {
			if _, s := swept(t, f, l); !s.Full || s.Ran != 1 {
				t.Errorf("at 1: %+v, want every sweep full", s)
			}
		}
		if len(f.j.seen) != 0 {
			t.Errorf("at 1 the runs were recorded: %v", f.j.seen)
		}
	})
}

// TestMakesCgoTakesWhatItCannotReadAsCgo: a Go file whose blob cannot be
// read (a change naming an object the repository lacks) is taken as one
// that imports "C", among other changes and in every place of the list;
// the same changes with the blob there and pure Go are not. The blobs of
// every tree's changes are read at once, and one tree's cgo file makes no
// other tree cgo's.
func TestMakesCgoTakesWhatItCannotReadAsCgo(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"a/pure.go": "package a\n", "a/cgo.go": "package a\n\nimport \"C\"\n"})
	f.snapshot()
	pure := f.blobID("package a\n") // in the repository: the snapshot wrote it
	withC := f.blobID("package a\n\nimport \"C\"\n")
	missing := strings.Repeat("1", len(pure))
	root := Root{Repo: f.repo}
	others := []gitrepo.Change{
		{Path: "a/b.go", Kind: gitrepo.Modified, To: pure, ToMode: gitrepo.ModeFile},
		{Path: "data/v.txt", Kind: gitrepo.Added, To: missing, ToMode: gitrepo.ModeFile},
	}
	const one, other = gitrepo.Tree("tree-one"), gitrepo.Tree("tree-other")
	if cgo := makesCgo(t.Context(), root, map[gitrepo.Tree][]gitrepo.Change{one: others}); cgo[one] {
		t.Fatalf("pure Go and a file not Go's (its blob missing) make the tree cgo's")
	}
	for i := range len(others) + 1 {
		cs := slices.Insert(slices.Clone(others), i, gitrepo.Change{Path: "a/c.go", Kind: gitrepo.Added, To: missing, ToMode: gitrepo.ModeFile})
		if cgo := makesCgo(t.Context(), root, map[gitrepo.Tree][]gitrepo.Change{one: cs}); !cgo[one] {
			t.Errorf("a Go file whose blob cannot be read, at %d of %d changes, is taken as pure Go", i, len(cs))
		}
	}
	cgo := makesCgo(t.Context(), root, map[gitrepo.Tree][]gitrepo.Change{
		one:   others,
		other: append(slices.Clone(others), gitrepo.Change{Path: "a/c.go", Kind: gitrepo.Added, To: withC, ToMode: gitrepo.ModeFile}),
	})
	if cgo[one] || !cgo[other] {
		t.Errorf("two trees' changes read at once, one of them adding a file that imports \"C\": cgo %v, want the other's alone", cgo)
	}
}
