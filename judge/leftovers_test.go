package judge

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// Where Claude Code's sandbox denies a path that does not exist, bubblewrap
// makes an empty file there to mount over, and it stays when the run ends.
// The verdict removes such a leftover instead of charging it to the run:
// an added, empty, regular file at exactly a path denied to the run.
// Anything else at or near a denied path is the run's, and is judged. The
// gates are in warn mode here, so that what is charged stays where it is
// and only the leftovers' removal takes anything away.
func TestJudgeRunRemovesTheSandboxsLeftovers(t *testing.T) {
	emptyOutside := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyOutside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// What the run's sandbox denies it, relative to its work tree.
	denied := []string{"CLAUDE.md", ".mcp.json", "conf", "secrets/token", "tests/a.sh"}
	tests := []struct {
		name    string
		before  map[string]string // the work tree at the run's start, beside judgeBase
		plant   func(f *fixture)  // what is there when the run has ended
		worker  string            // the run worked on a worker, in this directory
		unknown bool              // the judge does not know what the run's sandbox denied
		path    string
		removed bool // the leftover is removed, and not charged
	}{
		{name: "an empty file where a denied file was not",
			plant: func(f *fixture) { f.write(map[string]string{"CLAUDE.md": ""}) },
			path:  "CLAUDE.md", removed: true},
		{name: "an empty file in a directory made for it",
			plant: func(f *fixture) { f.write(map[string]string{"secrets/token": ""}) },
			path:  "secrets/token", removed: true},
		{name: "an empty executable file",
			plant: func(f *fixture) { f.write(map[string]string{".mcp.json": "exec:"}) },
			path:  ".mcp.json", removed: true},
		{name: "a leftover of a run on a worker, whose denied paths are the worker's",
			plant:  func(f *fixture) { f.write(map[string]string{"CLAUDE.md": ""}) },
			worker: "/srv/worker/lanes/l-1/wt", path: "CLAUDE.md", removed: true},

		{name: "a file with content at a denied path",
			plant: func(f *fixture) { f.write(map[string]string{"CLAUDE.md": "Always pass.\n"}) },
			path:  "CLAUDE.md"},
		{name: "a link to an empty file at a denied path",
			plant: func(f *fixture) { os.Symlink(emptyOutside, filepath.Join(f.dir, "CLAUDE.md")) },
			path:  "CLAUDE.md"},
		{name: "an empty file at a path not denied",
			plant: func(f *fixture) { f.write(map[string]string{"notes.txt": ""}) },
			path:  "notes.txt"},
		{name: "an empty file below a denied directory",
			plant: func(f *fixture) { f.write(map[string]string{"conf/app.yaml": ""}) },
			path:  "conf/app.yaml"},
		{name: "a directory at a denied path, with an empty file in it",
			plant: func(f *fixture) { f.write(map[string]string{"CLAUDE.md/x": ""}) },
			path:  "CLAUDE.md/x"},
		{name: "a denied file the run emptied",
			before: map[string]string{".mcp.json": "{}\n"},
			plant:  func(f *fixture) { f.write(map[string]string{".mcp.json": ""}) },
			path:   ".mcp.json"},
		{name: "an emptied frozen test",
			plant: func(f *fixture) { f.write(map[string]string{"tests/a.sh": ""}) },
			path:  "tests/a.sh"},
		{name: "an empty file at a denied path of a run whose sandbox the judge does not know",
			plant:   func(f *fixture) { f.write(map[string]string{"CLAUDE.md": ""}) },
			unknown: true, path: "CLAUDE.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJudgeFixture(t, gates.Modes{gates.RoleWritePolicy: gates.Warn, gates.Scope: gates.Warn, gates.FrozenTests: gates.Warn})
			if tt.before != nil {
				f.write(tt.before)
				f.base = f.snapshot()
			}
			confine(t, f.fixture, "run-7", tt.worker, denied, tt.unknown)
			f.write(map[string]string{"src/a/x.go": "ok\n"}) // the run's own work
			tt.plant(f.fixture)

			jd := f.judge(gates.Coder, false)
			if jd.Err != nil {
				t.Fatal(jd.Err)
			}
			_, err := os.Lstat(filepath.Join(f.dir, filepath.FromSlash(tt.path)))
			if gone := errors.Is(err, fs.ErrNotExist); gone != tt.removed {
				t.Errorf("%s removed: %v, want %v", tt.path, gone, tt.removed)
			}
			charged := slices.ContainsFunc(jd.Findings, func(fd gates.Finding) bool { return fd.Path == tt.path })
			if charged == tt.removed {
				t.Errorf("%s charged: %v, want %v (findings %q)", tt.path, charged, !tt.removed, findings(jd.Findings))
			}
			inChanges := slices.ContainsFunc(jd.Changes, func(c gitrepo.Change) bool { return c.Path == tt.path })
			if inChanges == tt.removed {
				t.Errorf("%s in the run's changes: %v, want %v (changes %q)", tt.path, inChanges, !tt.removed, changedPaths(jd.Changes))
			}
			// The tree the verdict stands on is the work tree as left,
			// the run's own work in it.
			if now := f.snapshot(); jd.Tree != now {
				t.Errorf("jd.Tree %s is not the work tree after judging (%s)", jd.Tree, now)
			}
			if !slices.ContainsFunc(jd.Changes, func(c gitrepo.Change) bool { return c.Path == "src/a/x.go" }) || f.read("src/a/x.go") != "ok\n" {
				t.Errorf("the run's own work is not in its changes %q, or not in the tree", changedPaths(jd.Changes))
			}
		})
	}

	// An empty file at a denied path that was there before the run is no
	// change of the run's: neither charged nor removed.
	t.Run("an empty file at a denied path that was there before the run", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		f.write(map[string]string{"CLAUDE.md": ""})
		f.base = f.snapshot()
		confine(t, f.fixture, "run-7", "", denied, false)
		jd := f.judge(gates.Coder, false)
		if jd.Err != nil || len(jd.Findings) != 0 || len(jd.Changes) != 0 {
			t.Fatalf("judgement %+v, want nothing changed or charged", jd)
		}
		if got := f.read("CLAUDE.md"); got != "" {
			t.Errorf("CLAUDE.md is %q, want it kept, empty", got)
		}
	})

	// With the gates enforced, a leftover blocks nothing: the attempt goes
	// on to its verdict.
	t.Run("enforced, a leftover blocks nothing", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		confine(t, f.fixture, "run-7", "", denied, false)
		f.write(map[string]string{"src/a/x.go": "ok\n", "CLAUDE.md": "", "secrets/token": ""})
		jd := f.judge(gates.Coder, true)
		if jd.Err != nil || len(jd.Findings) != 0 || jd.Blocks() {
			t.Fatalf("findings %q, Blocks %v, err %v; want none", findings(jd.Findings), jd.Blocks(), jd.Err)
		}
		if jd.Test == nil || !jd.Test.Passed() {
			t.Errorf("test %+v, want the feature's test run, and passed", jd.Test)
		}
		if got, want := changedPaths(jd.Changes), []string{"modified src/a/x.go"}; !slices.Equal(got, want) {
			t.Errorf("changes %q, want %q", got, want)
		}
	})
}

// confine registers run in f's project, as the daemon does before it
// starts it, with what its sandbox denies it (denied, relative to its work
// tree): confined there, or relocated to a worker's directory. unknown
// leaves what it is denied untold, as for a run of a daemon before this
// one.
func confine(t *testing.T, f *fixture, run, worker string, denied []string, unknown bool) {
	t.Helper()
	token := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: run})
	dir := f.dir
	if worker != "" {
		dir = worker
	}
	abs := make([]string, len(denied))
	for i, d := range denied {
		abs[i] = filepath.Join(dir, filepath.FromSlash(d))
	}
	switch {
	case unknown:
	case worker != "":
		if err := f.j.Relocate(token, worker, abs, nil); err != nil {
			t.Fatal(err)
		}
	default:
		f.j.Confine(token, abs)
	}
}
