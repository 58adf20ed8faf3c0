package judge

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"go.uber.org/zap"
)

// lane makes a second work tree holding files, committed, as a lane's
// linked work tree would hold the project's: a repository of its own here
// (what the judge does in a work tree does not depend on how git links
// it), opened as the judge opens the project's, with a private index of
// its own outside it. It lies outside the project and the state directory.
func (f *fixture) lane(files map[string]string) Root {
	f.t.Helper()
	dir, err := filepath.EvalSymlinks(f.t.TempDir())
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := gitrepo.Init(f.t.Context(), dir); err != nil {
		f.t.Fatal(err)
	}
	(&fixture{t: f.t, dir: dir}).write(files)
	gitIn(f.t, dir, "add", "-A")
	gitIn(f.t, dir, "commit", "-q", "-m", "lane base")
	repo, err := gitrepo.Open(f.t.Context(), gitrepo.Options{Dir: dir, Index: filepath.Join(f.t.TempDir(), "lane.index"), Exclude: []string{".claude/progress"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return Root{Dir: dir, Repo: repo}
}

// readIn returns the content of a file of a work tree, or "<absent>".
func readIn(t *testing.T, dir, rel string) string {
	t.Helper()
	return (&fixture{t: t, dir: dir}).read(rel)
}

// A run's hooks judge its paths in its own work tree: a run in a lane
// writes in the lane's tree, and the project's own directory is outside it
// like any other (as the lane's is for a run in the project); the daemon's
// files are refused to every run. Register alone is a run in the project.
func TestHookJudgesPathsInTheRunsWorkTree(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	lane := f.lane(map[string]string{"README.md": "lane\n"})
	coder := gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}
	inLane := f.j.RegisterIn(coder, lane)
	inLaneRepoOnly := f.j.RegisterIn(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-2"}, Root{Repo: lane.Repo})
	inProject := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-3"})

	const src = "src/a/x.go"
	tests := []struct {
		name  string
		token string
		path  string
		code  string // "" when the write is let through
	}{
		{"a lane's run writes its feature's file in its tree", inLane, filepath.Join(lane.Dir, src), ""},
		{"a lane's run writes the project's file", inLane, filepath.Join(f.dir, src), "outside_project"},
		{"a lane's run writes the state directory", inLane, filepath.Join(f.proj.StateDir, "x"), "daemon_files"},
		{"a lane's run writes the socket", inLane, f.proj.Socket, "daemon_files"},
		{"a lane's run is still held to its scope there", inLane, filepath.Join(lane.Dir, "src/b/y.go"), "out_of_scope"},
		{"a root of a repository alone is in its directory", inLaneRepoOnly, filepath.Join(lane.Dir, src), ""},
		{"a root of a repository alone keeps the project out", inLaneRepoOnly, filepath.Join(f.dir, src), "outside_project"},
		{"a project's run writes the project's file", inProject, filepath.Join(f.dir, src), ""},
		{"a project's run writes a lane's file", inProject, filepath.Join(lane.Dir, src), "outside_project"},
		{"a project's run writes the state directory", inProject, filepath.Join(f.proj.StateDir, "x"), "daemon_files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := f.mustHook(tt.token, "pre-tool-use", writePayload(tt.path))
			switch {
			case tt.code == "" && d != nil:
				t.Errorf("Write %s refused: %+v", tt.path, d)
			case tt.code != "" && (d == nil || d.Code != tt.code):
				t.Errorf("Write %s: decision %+v, want %s", tt.path, d, tt.code)
			}
		})
	}
}

// The commands a run ran are read in its own work tree: in a lane, the
// feature's test run there is the test run, and a run of the project's
// copy of it is not (it tests another tree); a tester's tested: true, held
// to its run's commands, is taken only after the former.
func TestHookRecordsTestRunsInTheRunsWorkTree(t *testing.T) {
	f := newFixture(t, nil)
	// A test no runner's name gives away: only the feature's own rule,
	// read in the run's tree, says a command ran it.
	const test = "sh check/a.sh"
	canonical := list(progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: test})
	f.j.SetList(canonical)
	files := map[string]string{"check/a.sh": "exit 0\n"}
	f.write(files)
	lane := f.lane(files)
	claim := canonical.Clone()
	claim.Features[0].Tested = true
	claim.Features[0].Evidence = []string{".claude/progress/evidence/F-001/out.log"}

	tests := []struct {
		name string
		root Root
		cmd  string
		test bool // recorded as the feature's test run, and so the claim taken
	}{
		{"a lane's run, cd into its tree", lane, "cd " + lane.Dir + " && " + test, true},
		{"a lane's run, the script by its path in its tree", lane, "sh " + filepath.Join(lane.Dir, "check/a.sh"), true},
		{"a lane's run, cd into the project", lane, "cd " + f.dir + " && " + test, false},
		{"a lane's run, the project's script", lane, "sh " + filepath.Join(f.dir, "check/a.sh"), false},
		{"a project's run, cd into the project", Root{}, "cd " + f.dir + " && " + test, true},
		{"a project's run, cd into a lane", Root{}, "cd " + lane.Dir + " && " + test, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := gates.Actor{Role: gates.Tester, Feature: "F-001", Run: fmt.Sprintf("run-%d", i)}
			token := f.j.RegisterIn(a, tt.root)
			dir := f.j.root(tt.root).Dir
			p := bashPayload(tt.cmd)
			p["cwd"] = dir
			if d := f.mustHook(token, "post-tool-use", p); d != nil {
				t.Errorf("decision %+v, want none", d)
			}
			got := f.j.Commands(a.Run)
			if len(got) != 1 || got[0].Command != tt.cmd || got[0].IsTest != tt.test {
				t.Errorf("Commands = %+v, want %q recorded with IsTest %v", got, tt.cmd, tt.test)
			}
			write := writePayload(filepath.Join(dir, ".claude/progress", progress.FeatureListFile))
			write["tool_input"].(map[string]any)["content"] = string(claim.Marshal())
			d := f.mustHook(token, "pre-tool-use", write)
			switch {
			case tt.test && d != nil:
				t.Errorf("tested: true after the test ran in the run's tree refused: %+v", d)
			case !tt.test && (d == nil || d.Code != "no_test_run"):
				t.Errorf("tested: true after a test of another tree: decision %+v, want no_test_run", d)
			}
		})
	}
}

// A run in a lane is judged by its lane's change set, and what an enforced
// gate refuses is put back in the lane's tree; the project's own tree, and
// what changed there meanwhile, is none of its business.
func TestJudgeRunInALanesWorkTree(t *testing.T) {
	f := newJudgeFixture(t, nil)
	lane := f.lane(judgeBase)
	base, err := lane.Repo.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.j.opts.Jail.Limits.FileSize = 1 << 10 // sandbox.max_file_mb, smaller
	inLane := &fixture{t: t, dir: lane.Dir}
	inLane.write(map[string]string{"src/a/x.go": "ok\n", "src/a/new.go": "package a\n", "tests/a.sh": "exit 0\n",
		"src/a/big.bin": strings.Repeat("x", 4<<10)})
	// Meanwhile in the project: another run's work, or a person's.
	f.write(map[string]string{"src/a/elsewhere.go": "package a\n", "tests/a.sh": "exit 0 # the project's\n"})

	jd := f.j.JudgeRun(t.Context(), RunEnd{
		Actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-7"}, Attempt: 1,
		Root: lane, Base: base, List: f.list,
	})
	if jd.Err != nil {
		t.Fatal(jd.Err)
	}
	wantChanges := []string{"added src/a/big.bin", "added src/a/new.go", "modified src/a/x.go", "modified tests/a.sh"}
	if got := changedPaths(jd.Changes); !slices.Equal(got, wantChanges) {
		t.Errorf("changes %q, want the lane's %q", got, wantChanges)
	}
	// The size of a file is its size in the lane's tree.
	wantFindings := []string{"frozen-tests/frozen_test tests/a.sh enforce", "role-write-policy/file_too_large src/a/big.bin enforce"}
	if got := findings(jd.Findings); !slices.Equal(got, wantFindings) {
		t.Errorf("findings %q, want %q", got, wantFindings)
	}
	if got := readIn(t, lane.Dir, "tests/a.sh"); got != judgeBase["tests/a.sh"] {
		t.Errorf("the lane's tests/a.sh is %q, want it put back", got)
	}
	if got := readIn(t, lane.Dir, "src/a/big.bin"); got != "<absent>" {
		t.Errorf("the lane's src/a/big.bin is still there (%d bytes), want it removed", len(got))
	}
	if got := readIn(t, lane.Dir, "src/a/x.go"); got != "ok\n" {
		t.Errorf("the lane's honest work is %q, want it kept", got)
	}
	if got := f.read("tests/a.sh"); got != "exit 0 # the project's\n" {
		t.Errorf("the project's tests/a.sh is %q: a lane's judgement restored it", got)
	}
	if got := f.read("src/a/elsewhere.go"); got != "package a\n" {
		t.Errorf("the project's src/a/elsewhere.go is %q", got)
	}
	if now, err := lane.Repo.Snapshot(t.Context()); err != nil || now != jd.Tree {
		t.Errorf("judged tree %s, the lane's tree now %s (%v)", jd.Tree, now, err)
	}
}

// The daemon's own runs of tests for a run in a lane, the feature's and
// the regression sweep's, are lent the lane's dependencies, at the
// project's path where the test runs: a green run must never have verified
// another tree's dependencies.
func TestJudgeRunLendsTheLanesDependencies(t *testing.T) {
	f := newFixture(t, nil)
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined: no dependencies are lent")
	}
	// The test also says where it runs: at the project's path, whichever
	// tree it tests.
	test := "grep -qx B node_modules/x && test \"$(pwd)\" = " + f.dir
	tracked := map[string]string{".gitignore": "node_modules/\n", "src/a/x.go": "ok\n"}
	f.write(tracked)
	f.write(map[string]string{"node_modules/x": "A\n"})
	f.commitAll("base")
	lane := f.lane(tracked)
	// The lane's tree is not the project's (its objects are the lane's
	// repository's here), and its node_modules is its own.
	(&fixture{t: t, dir: lane.Dir}).write(map[string]string{"node_modules/x": "B\n", "src/a/lane.go": "package a\n"})
	l := list(
		progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: test},
		progress.Feature{ID: "F-000", Test: test, Tested: true, Status: progress.Completed},
	)
	base, err := lane.Repo.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	jd := f.j.JudgeRun(t.Context(), RunEnd{
		Actor: gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-7"}, Attempt: 1,
		Root: lane, Base: base, List: l, Rerun: true, Sweep: true,
	})
	if jd.Err != nil || jd.Test == nil {
		t.Fatalf("judgement %+v, want the test run", jd)
	}
	if !jd.Test.Passed() {
		t.Errorf("the feature's test in the lane: %s\n%s", jd.Test.Summary(), jd.Test.Output)
	}
	for _, r := range jd.Regressions {
		t.Errorf("the sweep in the lane found %s broken: %s\n%s", r.Feature, r.Test.Summary(), r.Test.Output)
	}
	// The same files tested as the project's are lent the project's.
	if r := f.runTest(t.Context(), test); r.CannotRun != "" || r.ExitCode != 1 {
		t.Errorf("a test of the project's work tree: %s, want it run and failed on the project's node_modules/x", r.Summary())
	}
	if got := readIn(t, lane.Dir, "node_modules/x"); got != "B\n" {
		t.Errorf("the lane's node_modules/x is %q", got)
	}
}

// A directory a lane's test command could not write is the agent's
// business when it is in the run's own tree (the gates keep agents off
// some of it), and the environment's when it is elsewhere, the project's
// own directory included.
func TestHookReadsTheMachinesFailuresInTheRunsWorkTree(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	lane := f.lane(map[string]string{"README.md": "lane\n"})
	for i, tc := range []struct {
		name string
		dir  string
		env  bool
	}{
		{"in the lane's tree", lane.Dir, false},
		{"in the project's directory", f.dir, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := fmt.Sprintf("run-%d", i)
			token := f.j.RegisterIn(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: run}, lane)
			out := "Exit code 1\nmkdir " + filepath.Join(tc.dir, "out") + ": read-only file system"
			f.mustHook(token, "post-tool-use-failure", bashFailurePayload("sh tests/a.sh", out))
			if got := f.j.Environment(run); (got != nil) != tc.env {
				t.Errorf("Environment = %+v, want one: %v", got, tc.env)
			}
		})
	}
}

// A work tree inside the daemon's own files cannot be worked in (they stay
// protected for every run): registering a run there says so.
func TestRegisterInTheDaemonsFilesWarns(t *testing.T) {
	log, logs := observed()
	f := newFixture(t, func(o *Options) { o.Log = log })
	lane := f.lane(map[string]string{"README.md": "lane\n"})
	f.j.RegisterIn(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}, lane)
	f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-2"})
	if n := logs.Len(); n != 0 {
		t.Fatalf("%d warnings for work trees outside the daemon's files: %v", n, logs.All())
	}
	inState := filepath.Join(f.proj.StateDir, "lanes", "F-001")
	d := f.j.RegisterIn(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-3"}, Root{Dir: inState, Repo: lane.Repo})
	if logs.FilterField(zap.String("dir", inState)).Len() != 1 {
		t.Errorf("no warning for a work tree in the state directory: %v", logs.All())
	}
	// And it is so: the run may not write its own tree.
	if dec := f.mustHook(d, "pre-tool-use", writePayload(filepath.Join(inState, "src/a/x.go"))); dec == nil || dec.Code != "daemon_files" {
		t.Errorf("decision %+v, want daemon_files", dec)
	}
}
