package judge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// RunTest runs a feature's test with /bin/sh in the project, in exactly the
// environment the judge was given, and tells a failing test from one that
// cannot run.
func TestRunTest(t *testing.T) {
	t.Setenv("CG_NOT_GIVEN", "leaked")
	f := newFixture(t, func(o *Options) { o.Jail.Env = append(slices.Clone(testEnv), "CG_GIVEN=yes") })
	f.write(map[string]string{
		"tests/pass.sh": "echo all good\nexit 0\n",
		"tests/fail.sh": "echo first line\necho 'FAILED: 2 of 5' >&2\nexit 3\n",
		"notexec.sh":    "exit 0\n", // not executable
	})
	marker := filepath.Join(t.TempDir(), "ran")

	tests := []struct {
		name      string
		test      string
		passed    bool
		exit      int
		cannotRun string // a substring; "" when it ran
		output    string // a substring of the output
	}{
		{name: "passes", test: "sh tests/pass.sh", passed: true, exit: 0, output: "all good"},
		{name: "fails, exit code and output kept", test: "sh tests/fail.sh", exit: 3, output: "FAILED: 2 of 5"},
		{name: "a named file is missing", test: "touch " + marker + " && sh tests/missing.sh", exit: -1, cannotRun: "tests/missing.sh does not exist"},
		{name: "a program is not found (127)", test: "no-such-program-ctxgraphd", exit: 127, cannotRun: "exit 127"},
		{name: "the script is not executable (126)", test: "./notexec.sh", exit: 126, cannotRun: "exit 126"},
		{name: "no test command", test: " \t", exit: -1, cannotRun: "no test command"},
		{name: "the environment is exactly Options.Env", test: `echo "given=$CG_GIVEN not-given=${CG_NOT_GIVEN-absent}"`, passed: true, output: "given=yes not-given=absent"},
		{name: "it runs in the project", test: "pwd", passed: true, output: f.dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.runTest(t.Context(), tt.test)
			if r.Command != tt.test || r.Passed() != tt.passed || r.ExitCode != tt.exit || r.Interrupted || r.TimedOut {
				t.Errorf("result %+v, want passed=%v exit %d", r, tt.passed, tt.exit)
			}
			if (tt.cannotRun == "") != (r.CannotRun == "") || !strings.Contains(r.CannotRun, tt.cannotRun) {
				t.Errorf("CannotRun = %q, want %q", r.CannotRun, tt.cannotRun)
			}
			if !strings.Contains(r.Output, tt.output) {
				t.Errorf("output %q does not hold %q", r.Output, tt.output)
			}
			if r.Summary() == "" {
				t.Error("no summary")
			}
		})
	}
	// The command of the "missing file" case never ran.
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a test whose file is missing was run all the same (%s exists)", marker)
	}
}

// A test's output is kept by its end, where the verdict of a runner is.
func TestRunTestKeepsTheEndOfItsOutput(t *testing.T) {
	f := newFixture(t, nil)
	r := f.runTest(t.Context(), "head -c 400000 /dev/zero | tr '\\0' x; echo; echo THE END; exit 1")
	if r.ExitCode != 1 {
		t.Fatalf("result %+v", r.ExitCode)
	}
	if !strings.HasSuffix(r.Output, "THE END\n") || !strings.HasPrefix(r.Output, "[…earlier output cut…]") {
		t.Errorf("output starts %q and ends %q, want the cut marked and the end kept", r.Output[:30], r.Output[len(r.Output)-20:])
	}
	if len(r.Output) > maxTestOutput+64 {
		t.Errorf("output is %d bytes, more than the %d kept", len(r.Output), maxTestOutput)
	}
	if s := r.Summary(); !strings.Contains(s, "failed (exit 1)") || !strings.Contains(s, "THE END") || len(s) > 600 {
		t.Errorf("summary %q", s)
	}
}

// What a failing test said reaches people and agents without the lines a
// user's shell tools print at a shell's start (the test's own shell, or
// one its script starts with a profile).
func TestSummaryLeavesOutShellNoise(t *testing.T) {
	const noise = "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\n"
	for _, r := range []TestResult{
		{Command: "sh t.sh", ExitCode: 1, Output: noise + "want 2, got 1\n" + noise},
		{Command: "sh t.sh", ExitCode: 127, Output: noise + "t.sh: 1: nosuch: not found\n", CannotRun: "a program it runs was not found (exit 127): t.sh: 1: nosuch: not found"},
	} {
		if s := r.Summary(); strings.Contains(s, "pyenv") {
			t.Errorf("summary %q holds the shell's noise", s)
		}
	}
	f := newFixture(t, nil)
	r := f.runTest(t.Context(), "echo \"pyenv: cannot rehash: /root/.pyenv/shims isn't writable\" >&2; no-such-program-ctxgraphd")
	if r.ExitCode != 127 || strings.Contains(r.CannotRun, "pyenv") || !strings.Contains(r.CannotRun, "no-such-program-ctxgraphd") {
		t.Errorf("exit %d, CannotRun %q: want 127 and the missing program, without the shell's noise", r.ExitCode, r.CannotRun)
	}
}

// A test that does not finish within TestTimeout is killed, with every
// process it started.
func TestRunTestTimesOut(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.TestTimeout = time.Second })
	token := uniqueSleep()
	r := f.runTest(t.Context(), "sleep "+token+" & sleep "+token)
	if !r.TimedOut || r.Interrupted || r.Passed() || r.ExitCode != -1 || r.CannotRun != "" {
		t.Fatalf("result %+v, want timed out", r)
	}
	if !strings.Contains(r.Summary(), "did not finish") {
		t.Errorf("summary %q", r.Summary())
	}
	if left := processesRunning(token); len(left) > 0 {
		t.Errorf("processes %v of the timed-out test are still running", left)
	}
}

// Cancelling ctx (ctl stop, a shutdown) ends the test at once, with every
// process it started, and says so.
func TestRunTestCancelledKillsEveryProcess(t *testing.T) {
	f := newFixture(t, nil)
	token := uniqueSleep()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan TestResult, 1)
	go func() { done <- f.runTest(ctx, "sleep "+token+" & setsid sleep "+token+" & sleep "+token) }()
	eventually.True(t, 10*time.Second, func() bool { return len(processesRunning(token)) >= 5 }, "the test's processes started")
	cancel()
	var r TestResult
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunTest did not return within 10s of its context's cancellation")
	}
	if !r.Interrupted || r.Passed() || r.TimedOut || r.CannotRun != "" {
		t.Errorf("result %+v, want interrupted", r)
	}
	if !strings.Contains(r.Summary(), "interrupted") {
		t.Errorf("summary %q", r.Summary())
	}
	if left := processesRunning(token); len(left) > 0 {
		t.Errorf("processes %v of the cancelled test are still running", left)
	}
}

// A test that leaves a process behind (a server it started and did not
// stop, a helper detached with setsid) is judged by its exit status; what
// it left is gone when RunTest returns: the test's pid namespace ends with
// its shell; unconfined, the daemon kills the test's process group (a
// helper detached with setsid leaves the group: only the jail holds it).
func TestRunTestLeftoverProcessIsKilledAndTheResultKept(t *testing.T) {
	for _, unconfined := range []bool{false, true} {
		f := newFixture(t, func(o *Options) { o.Jail.Off = unconfined })
		token := uniqueSleep()
		detached := "setsid sh -c 'sleep " + token + "' & "
		if unconfined {
			detached = ""
		}
		r := f.runTest(t.Context(), "sleep "+token+" & "+detached+"nohup sleep "+token+" >/dev/null 2>&1 & echo served")
		if !r.Passed() || r.CannotRun != "" || !strings.Contains(r.Output, "served") {
			t.Errorf("unconfined %v: result %+v, want passed (exit 0)", unconfined, r)
		}
		if left := processesRunning(token); len(left) > 0 {
			t.Errorf("unconfined %v: processes %v the test left behind are still running", unconfined, left)
		}
	}
}

// Words of a test command that are not files of the project (a directory
// the command changes into first, a file its output is redirected to, the
// script of sh -c) must not make the test "cannot run".
func TestRunTestRunsCommandsWhoseWordsAreNotProjectFiles(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"sub/t.sh": "exit 0\n", "tests/pass.sh": "exit 0\n"})
	for _, test := range []string{
		"cd sub && sh t.sh",
		"sh tests/pass.sh > test-output.log 2>&1",
		"sh tests/pass.sh 2>&1 | tee test-run.log",
		`sh -c "sh tests/pass.sh"`,
	} {
		if r := f.runTest(t.Context(), test); !r.Passed() {
			t.Errorf("RunTest(%q) = %s; want it run, and passed", test, r.Summary())
		}
	}
}

// judgeFixture is a project with a committed base: a frozen test, two
// features' source and a README, and the judge's record of the frozen test.
type judgeFixture struct {
	*fixture
	list *progress.List
	base gitrepo.Tree
}

var judgeBase = map[string]string{
	"tests/a.sh":  "grep -qx ok src/a/x.go\n",
	"src/a/x.go":  "broken\n",
	"src/b/y.go":  "package b\n",
	"README.md":   "readme\n",
	"Makefile":    "all:\n",
	".gitignore":  "/out/\n",
	"src/a/doc.c": "/* a */\n",
}

func newJudgeFixture(t *testing.T, modes gates.Modes) *judgeFixture {
	t.Helper()
	f := newFixture(t, func(o *Options) { o.Modes = modes })
	f.write(judgeBase)
	f.commitAll("base")
	l := list(
		progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: "sh tests/a.sh"},
		progress.Feature{ID: "F-002", Scope: []string{"src/b/**"}, Test: "sh tests/b.sh"},
	)
	base := f.snapshot()
	fz, err := f.j.Freeze(t.Context(), l, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.j.SetFrozen(fz); err != nil {
		t.Fatal(err)
	}
	if got := fz.Sorted(); !slices.Equal(got, []string{"tests/a.sh"}) {
		t.Fatalf("frozen %q, want tests/a.sh", got)
	}
	return &judgeFixture{fixture: f, list: l, base: base}
}

func (f *judgeFixture) judge(role string, rerun bool) Judgement {
	f.t.Helper()
	return f.j.JudgeRun(f.t.Context(), RunEnd{
		Actor: gates.Actor{Role: role, Feature: "F-001", Run: "run-7"}, Attempt: 1, Base: f.base, List: f.list, Rerun: rerun,
	})
}

// changedPaths renders a change set as "kind path", in path order.
func changedPaths(cs []gitrepo.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Kind.String()+" "+c.Path)
	}
	return out
}

// A run is judged by its change set: what an enforced gate refuses is put
// back as it was at the run's start (or removed, when the run added it),
// and only that; the rest of the run's work stays.
func TestJudgeRunRestoresWhatAGateRefuses(t *testing.T) {
	const honest = "src/a/x.go"
	tests := []struct {
		name   string
		role   string
		misdo  func(f *fixture)
		path   string // the refused change
		gate   string
		code   string
		honest bool // the run also made an honest change of its feature
	}{
		{name: "a coder changes a frozen test", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.write(map[string]string{"tests/a.sh": "exit 0\n"}) },
			path:  "tests/a.sh", gate: gates.FrozenTests, code: "frozen_test"},
		{name: "a coder deletes a frozen test", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.remove("tests/a.sh") },
			path:  "tests/a.sh", gate: gates.FrozenTests, code: "frozen_test"},
		{name: "a coder makes a frozen test executable", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { os.Chmod(filepath.Join(f.dir, "tests/a.sh"), 0o755) },
			path:  "tests/a.sh", gate: gates.FrozenTests, code: "frozen_test"},
		{name: "a coder adds a test where tests live", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.write(map[string]string{"tests/extra.sh": "exit 0\n"}) },
			path:  "tests/extra.sh", gate: gates.FrozenTests, code: "protected_test"},
		{name: "a coder adds a Go test", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.write(map[string]string{"src/a/x_test.go": "package a\n"}) },
			path:  "src/a/x_test.go", gate: gates.FrozenTests, code: "protected_test"},
		{name: "a coder changes another feature's file", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.write(map[string]string{"src/b/y.go": "package b // mine now\n"}) },
			path:  "src/b/y.go", gate: gates.Scope, code: "out_of_scope"},
		{name: "a coder deletes a file outside its scope", role: gates.Coder, honest: true,
			misdo: func(f *fixture) { f.remove("README.md") },
			path:  "README.md", gate: gates.Scope, code: "out_of_scope"},
		{name: "a coder writes Claude Code's local settings", role: gates.Coder, honest: true,
			misdo: func(f *fixture) {
				f.write(map[string]string{".claude/settings.local.json": `{"disableAllHooks": true}`})
			},
			path: ".claude/settings.local.json", gate: gates.RoleWritePolicy, code: "daemon_files"},
		{name: "a tester changes source", role: gates.Tester,
			misdo: func(f *fixture) { f.write(map[string]string{"src/a/x.go": "ok\n"}) },
			path:  "src/a/x.go", gate: gates.RoleWritePolicy, code: "tester_edits_source"},
		{name: "a tester adds a file", role: gates.Tester,
			misdo: func(f *fixture) { f.write(map[string]string{"notes.txt": "x\n"}) },
			path:  "notes.txt", gate: gates.RoleWritePolicy, code: "tester_edits_source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJudgeFixture(t, nil)
			before := f.read(tt.path)
			beforeState := fileMode(t, f.dir, tt.path)
			if tt.honest {
				f.write(map[string]string{honest: "ok\n", "src/a/new.go": "package a\n"})
			}
			tt.misdo(f.fixture)
			jd := f.judge(tt.role, false)
			if jd.Err != nil {
				t.Fatal(jd.Err)
			}
			want := []string{tt.gate + "/" + tt.code + " " + tt.path + " enforce"}
			if got := findings(jd.Findings); !slices.Equal(got, want) {
				t.Fatalf("findings %q, want %q (changes %q)", got, want, changedPaths(jd.Changes))
			}
			if !jd.Blocks() || !slices.Equal(jd.Restored, []string{tt.path}) {
				t.Errorf("Blocks %v, Restored %q; want %s restored", jd.Blocks(), jd.Restored, tt.path)
			}
			if jd.Test != nil {
				t.Error("the test ran without being asked")
			}
			if got := f.read(tt.path); got != before || fileMode(t, f.dir, tt.path) != beforeState {
				t.Errorf("%s is %q (%s) after judging, want it back as %q (%s)", tt.path, got, fileMode(t, f.dir, tt.path), before, beforeState)
			}
			// The tree the verdict stands on is the restored one, and it
			// holds the run's honest work.
			changes, err := f.repo.Changes(t.Context(), f.base, jd.Tree)
			if err != nil {
				t.Fatal(err)
			}
			var wantLeft []string
			if tt.honest {
				wantLeft = []string{"added src/a/new.go", "modified src/a/x.go"}
				if f.read(honest) != "ok\n" || f.read("src/a/new.go") != "package a\n" {
					t.Error("the run's honest change was not left in place")
				}
			}
			if got := changedPaths(changes); !slices.Equal(got, wantLeft) {
				t.Errorf("changes left in jd.Tree = %q, want %q", got, wantLeft)
			}
			if now := f.snapshot(); now != jd.Tree {
				t.Errorf("jd.Tree %s is not the work tree after restoring (%s)", jd.Tree, now)
			}
			// Everything the run changed is reported, refused or not.
			if !slices.ContainsFunc(jd.Changes, func(c gitrepo.Change) bool { return c.Path == tt.path }) {
				t.Errorf("changes %q do not hold %s", changedPaths(jd.Changes), tt.path)
			}
		})
	}
}

// A coder that adds a dependency changes the project's manifest and lock,
// which no feature's scope names: the verdict's change set lets them stand
// (progress.SharedManifest), beside the feature's own work, while a file
// that only looks like one is still out of its scope.
func TestJudgeRunLeavesSharedManifests(t *testing.T) {
	f := newJudgeFixture(t, nil)
	f.write(map[string]string{
		"src/a/x.go":        "ok\n",
		"package.json":      `{"dependencies":{"is-number":"^7.0.0"}}` + "\n",
		"package-lock.json": `{"lockfileVersion":3}` + "\n",
		"src/b/go.mod":      "module b\n",
		"src/b/go.mod.bak":  "module b\n",
	})
	jd := f.judge(gates.Coder, false)
	if jd.Err != nil {
		t.Fatal(jd.Err)
	}
	want := []string{"scope/out_of_scope src/b/go.mod.bak enforce"}
	if got := findings(jd.Findings); !slices.Equal(got, want) {
		t.Fatalf("findings %q, want %q (changes %q)", got, want, changedPaths(jd.Changes))
	}
	if !slices.Equal(jd.Restored, []string{"src/b/go.mod.bak"}) {
		t.Errorf("restored %q, want only the copy", jd.Restored)
	}
	changes, err := f.repo.Changes(t.Context(), f.base, jd.Tree)
	if err != nil {
		t.Fatal(err)
	}
	wantLeft := []string{"added package-lock.json", "added package.json", "modified src/a/x.go", "added src/b/go.mod"} // in path order
	if got := changedPaths(changes); !slices.Equal(got, wantLeft) {
		t.Errorf("changes left in jd.Tree = %q, want %q", got, wantLeft)
	}
}

// fileMode is "file", "exec" or "absent".
func fileMode(t *testing.T, dir, rel string) string {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
	switch {
	case os.IsNotExist(err):
		return "absent"
	case err != nil:
		t.Fatal(err)
	case fi.Mode()&0o100 != 0:
		return "exec"
	}
	return "file"
}

// An honest run's change set meets no gate, and the tree is left alone.
func TestJudgeRunHonestRun(t *testing.T) {
	f := newJudgeFixture(t, nil)
	f.write(map[string]string{"src/a/x.go": "ok\n", "src/a/sub/new.go": "package sub\n", "out/build.bin": "ignored\n"})
	f.remove("src/a/doc.c")
	jd := f.judge(gates.Coder, false)
	if jd.Err != nil || len(jd.Findings) != 0 || len(jd.Restored) != 0 || jd.Blocks() {
		t.Fatalf("judgement %+v, want no findings", jd)
	}
	if got, want := changedPaths(jd.Changes), []string{"deleted src/a/doc.c", "added src/a/sub/new.go", "modified src/a/x.go"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	if jd.Tree == f.base || jd.Tree != f.snapshot() {
		t.Errorf("tree %s, want the work tree after the run", jd.Tree)
	}
	if f.read("src/a/x.go") != "ok\n" {
		t.Error("an honest change was undone")
	}
	// A tester that only ran the test changed nothing.
	f2 := newJudgeFixture(t, nil)
	if jd := f2.judge(gates.Tester, false); jd.Err != nil || len(jd.Changes) != 0 || len(jd.Findings) != 0 || jd.Tree != f2.base {
		t.Errorf("an idle tester's judgement %+v", jd)
	}
}

// In warn mode a gate's finding is reported and nothing is put back.
func TestJudgeRunWarnModeRestoresNothing(t *testing.T) {
	f := newJudgeFixture(t, gates.Modes{gates.FrozenTests: gates.Warn, gates.Scope: gates.Off})
	f.write(map[string]string{"tests/a.sh": "exit 0\n", "src/b/y.go": "package b // off-gate\n"})
	jd := f.judge(gates.Coder, true)
	if jd.Err != nil {
		t.Fatal(jd.Err)
	}
	if got, want := findings(jd.Findings), []string{"frozen-tests/frozen_test tests/a.sh warn"}; !slices.Equal(got, want) {
		t.Fatalf("findings %q, want %q", got, want)
	}
	if jd.Blocks() || len(jd.Restored) != 0 {
		t.Errorf("Blocks %v, Restored %q; want nothing put back", jd.Blocks(), jd.Restored)
	}
	if f.read("tests/a.sh") != "exit 0\n" || f.read("src/b/y.go") != "package b // off-gate\n" {
		t.Error("warn mode put a file back")
	}
	// Nothing blocks, so the test ran, on the tree as the run left it.
	if jd.Test == nil || !jd.Test.Passed() {
		t.Errorf("test %+v, want the changed test run (and pass)", jd.Test)
	}
}

// Rerun is the daemon's own run of the feature's test, on the tree as
// judged; a run an enforced gate refused is not tested at all.
func TestJudgeRunRerun(t *testing.T) {
	t.Run("the code passes", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		f.write(map[string]string{"src/a/x.go": "ok\n"}) // as the coder left it
		f.base = f.snapshot()                            // when the tester started
		jd := f.judge(gates.Tester, true)
		if jd.Err != nil || jd.Test == nil || !jd.Test.Passed() || jd.Test.Command != "sh tests/a.sh" {
			t.Fatalf("judgement %+v test %+v, want the feature's test run and passed", jd, jd.Test)
		}
	})
	t.Run("the code fails", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		jd := f.judge(gates.Tester, true)
		if jd.Err != nil || jd.Test == nil || jd.Test.Passed() || jd.Test.ExitCode != 1 {
			t.Fatalf("test %+v, want the feature's test run and failed", jd.Test)
		}
	})
	t.Run("a tester that makes the test pass by changing it", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		f.write(map[string]string{"tests/a.sh": "exit 0\n"})
		jd := f.judge(gates.Tester, true)
		if jd.Err != nil || !jd.Blocks() || jd.Test != nil {
			t.Fatalf("judgement %+v, want blocked and no test run", jd)
		}
		if f.read("tests/a.sh") != judgeBase["tests/a.sh"] {
			t.Error("the test was not put back")
		}
		// On the restored tree the test fails, as it should.
		if r := f.runTest(t.Context(), "sh tests/a.sh"); r.Passed() {
			t.Errorf("the restored test passes: %s", r.Summary())
		}
	})
	t.Run("a feature without a test", func(t *testing.T) {
		f := newJudgeFixture(t, nil)
		f.list.Features[0].Test = ""
		jd := f.judge(gates.Tester, true)
		if jd.Test == nil || jd.Test.CannotRun == "" || jd.Test.Passed() {
			t.Errorf("test %+v, want cannot run", jd.Test)
		}
	})
}

// A run that cannot be judged says so: its claims are not taken.
func TestJudgeRunBogusBase(t *testing.T) {
	f := newJudgeFixture(t, nil)
	f.write(map[string]string{"tests/a.sh": "exit 0\n"})
	for _, base := range []gitrepo.Tree{"0123456789abcdef0123456789abcdef01234567", "not-a-tree"} {
		jd := f.j.JudgeRun(t.Context(), RunEnd{Actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-7"}, Base: base, List: f.list, Rerun: true})
		if jd.Err == nil || !strings.Contains(jd.Err.Error(), "run-7") {
			t.Errorf("base %s: Err = %v, want an error naming the run", base, jd.Err)
		}
		if jd.Test != nil || len(jd.Restored) != 0 {
			t.Errorf("base %s: a run that could not be judged was acted on: %+v", base, jd)
		}
	}
	if f.read("tests/a.sh") != "exit 0\n" {
		t.Error("the tree was changed though the run could not be judged")
	}
}

// Passed is a test that ran to exit 0 and nothing else; Summary says the
// first of what went wrong (interrupted, cannot run, timed out) before the
// exit status, with the end of a failing test's output on one line.
func TestTestResultPassedAndSummary(t *testing.T) {
	out400 := strings.Repeat("a", 399) + "Z"
	tests := []struct {
		name    string
		r       TestResult
		passed  bool
		summary string
	}{
		{name: "passed", r: TestResult{Command: "sh t.sh", ExitCode: 0, Took: 1500*time.Millisecond + 400*time.Microsecond},
			passed: true, summary: "`sh t.sh` passed (exit 0, 1.5s)"},
		{name: "failed", r: TestResult{Command: "sh t.sh", ExitCode: 3, Output: "ok 1\n  not ok 2\tlogin\n"},
			summary: "`sh t.sh` failed (exit 3): ok 1 not ok 2 login"},
		{name: "failed, the output's end kept whole at the bound", r: TestResult{Command: "x", ExitCode: 1, Output: out400},
			summary: "`x` failed (exit 1): " + out400},
		{name: "failed, the output cut to its end past the bound", r: TestResult{Command: "x", ExitCode: 1, Output: "B" + out400},
			summary: "`x` failed (exit 1): …" + out400[len("…"):]}, // the mark within the bound
		{name: "exit 0 but cannot run", r: TestResult{Command: "x", ExitCode: 0, CannotRun: "tests/a.sh does not exist"},
			summary: "`x` cannot run: tests/a.sh does not exist"},
		{name: "exit 0 but interrupted", r: TestResult{Command: "x", ExitCode: 0, Interrupted: true},
			summary: "`x` was interrupted"},
		{name: "exit 0 but timed out", r: TestResult{Command: "x", ExitCode: 0, TimedOut: true, Took: 30*time.Minute + 400*time.Millisecond},
			summary: "`x` did not finish within 30m0s"},
		{name: "interrupted says so before anything else", r: TestResult{Command: "x", ExitCode: -1, Interrupted: true, CannotRun: "c", TimedOut: true},
			summary: "`x` was interrupted"},
		{name: "cannot run says so before a time-out", r: TestResult{Command: "x", ExitCode: -1, CannotRun: "c", TimedOut: true},
			summary: "`x` cannot run: c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Passed(); got != tt.passed {
				t.Errorf("Passed() = %v, want %v", got, tt.passed)
			}
			if got := tt.r.Summary(); got != tt.summary {
				t.Errorf("Summary() = %q, want %q", got, tt.summary)
			}
		})
	}
}

// The output of a test is kept as it came, whole up to maxTestOutput bytes
// and unmarked; past that its end is kept, marked as cut.
func TestRunTestOutputBound(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		n    int // bytes of output: n-1 x's and a newline
		cut  bool
	}{
		{"a line", 3, false},
		{"exactly the bound", maxTestOutput, false},
		{"one byte past the bound", maxTestOutput + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.runTest(t.Context(), fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo", tt.n-1))
			if !r.Passed() {
				t.Fatalf("result %s", r.Summary())
			}
			want := strings.Repeat("x", tt.n-1) + "\n"
			if tt.cut {
				want = "[…earlier output cut…]\n" + want[len(want)-maxTestOutput:]
			}
			if r.Output != want {
				t.Errorf("output is %d bytes starting %.30q, want %d bytes starting %.30q", len(r.Output), r.Output, len(want), want)
			}
		})
	}
}

// What keeps a test from running at all is said, and nothing runs: a
// command that is not shell, a project directory that is gone.
func TestRunTestCannotStart(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	f := newFixture(t, nil)
	r := f.runTest(t.Context(), "touch "+marker+"; echo 'unterminated")
	if r.Passed() || r.ExitCode != -1 || !strings.HasPrefix(r.CannotRun, "it is not a valid shell command: ") {
		t.Errorf("a command that is not shell: %+v, want cannot run, saying so", r)
	}
	gone := newFixture(t, nil)
	r = gone.j.RunTest(t.Context(), gitrepo.Tree(strings.Repeat("0", 40)), "touch "+marker)
	if r.Passed() || r.ExitCode != -1 || r.Interrupted || r.TimedOut || !strings.Contains(r.CannotRun, "no checkout of the tree") {
		t.Errorf("a tree that cannot be checked out: %+v, want cannot run, saying why", r)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a test that could not start ran all the same (%s exists)", marker)
	}
}

// A TestTimeout of zero or less is the default bound, not no time at all.
func TestRunTestDefaultTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{0, -time.Second} {
		f := newFixture(t, func(o *Options) { o.TestTimeout = timeout })
		if r := f.runTest(t.Context(), "sleep 0.05"); !r.Passed() {
			t.Errorf("TestTimeout %v: %s, want the test run to its end", timeout, r.Summary())
		}
	}
}

// WriteEvidence keeps the daemon's run of a test in the feature's evidence
// directory: the command, its output as it came (ended by a newline), and
// the summary.
func TestWriteEvidence(t *testing.T) {
	tests := []struct {
		name   string
		output string
		want   string // between the command line and the summary line
	}{
		{"output ending in a newline", "ok 1\nok 2\n", "ok 1\nok 2\n"},
		{"output without a final newline", "ok 1\nok 2", "ok 1\nok 2\n"},
		{"no output", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			r := TestResult{Command: "sh tests/a.sh", ExitCode: 0, Output: tt.output, Took: 2 * time.Second}
			rel, err := f.j.WriteEvidence("F-001", 2, "rerun", r)
			if err != nil {
				t.Fatal(err)
			}
			if want := ".claude/progress/evidence/F-001/daemon-rerun-attempt-2.log"; rel != want {
				t.Errorf("path %q, want %q", rel, want)
			}
			want := "# ctxgraphd ran the test of F-001 itself (rerun, attempt 2)\n$ sh tests/a.sh\n" + tt.want + "# `sh tests/a.sh` passed (exit 0, 2s)\n"
			if got := f.read(rel); got != want {
				t.Errorf("evidence:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	// Where the evidence directory cannot be made, it says so.
	f := newFixture(t, nil)
	f.write(map[string]string{".claude/progress": "a file in the way\n"})
	if rel, err := f.j.WriteEvidence("F-001", 1, "rerun", TestResult{Command: "true"}); err == nil || rel != "" {
		t.Errorf("WriteEvidence with a file in the way = %q, %v; want an error", rel, err)
	}
}

// A file past sandbox.max_file_mb in a run's change set is never committed:
// whatever wrote it (here, nothing under the run's limits), it is a finding,
// and it goes.
func TestJudgeRunRemovesAFilePastTheSizeBound(t *testing.T) {
	f := newJudgeFixture(t, nil)
	f.j.opts.Jail.Limits.FileSize = 1 << 20
	f.write(map[string]string{"src/a/big.bin": strings.Repeat("x", 1<<20+1), "src/a/small.txt": "ok\n"})
	jd := f.judge(gates.Coder, false)
	if jd.Err != nil {
		t.Fatal(jd.Err)
	}
	if len(jd.Findings) != 1 || jd.Findings[0].Code != "file_too_large" || jd.Findings[0].Path != "src/a/big.bin" || !jd.Blocks() {
		t.Fatalf("findings %+v, want src/a/big.bin too large", jd.Findings)
	}
	if got := f.read("src/a/big.bin"); got != "<absent>" {
		t.Errorf("the big file is still there (%d bytes)", len(got))
	}
	if f.read("src/a/small.txt") != "ok\n" {
		t.Error("the run's other work was not kept")
	}
}

// A link or a special file a run left in its feature's evidence directory
// (which is in no change set) is a finding against the run: it goes, and
// what it leads to is neither read nor changed. Regular evidence stays.
func TestJudgeRunFindsWhatInTheEvidenceIsNoFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(outside, 0o755)
	secret := filepath.Join(outside, ".bashrc")
	os.WriteFile(secret, []byte("secret\n"), 0o644)
	tests := []struct {
		name  string
		plant func(ev string) error
		found string // relative to the evidence directory
	}{
		{"a link to a file outside", func(ev string) error { return os.Symlink(secret, filepath.Join(ev, "test.log")) }, "test.log"},
		{"a link to a directory outside", func(ev string) error { return os.Symlink(outside, filepath.Join(ev, "logs")) }, "logs"},
		{"a link inside the project", func(ev string) error { return os.Symlink("../../feature-list.json", filepath.Join(ev, "list.log")) }, "list.log"},
		{"a named pipe", func(ev string) error { return syscall.Mkfifo(filepath.Join(ev, "pipe"), 0o644) }, "pipe"},
		{"a link deeper down", func(ev string) error {
			os.MkdirAll(filepath.Join(ev, "a", "b"), 0o755)
			return os.Symlink(secret, filepath.Join(ev, "a", "b", "c.log"))
		}, "a/b/c.log"},
		{"a link in a directory its owner may not read", func(ev string) error {
			os.MkdirAll(filepath.Join(ev, "shut"), 0o755)
			if err := os.Symlink(secret, filepath.Join(ev, "shut", "test.log")); err != nil {
				return err
			}
			return os.Chmod(filepath.Join(ev, "shut"), 0)
		}, "shut/test.log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJudgeFixture(t, nil)
			ev := filepath.Join(f.dir, ".claude", "progress", "evidence", "F-001")
			os.MkdirAll(ev, 0o755)
			os.WriteFile(filepath.Join(ev, "honest.log"), []byte("PASS\n"), 0o644)
			if err := tt.plant(ev); err != nil {
				t.Fatal(err)
			}
			jd := f.judge(gates.Tester, false)
			if jd.Err != nil {
				t.Fatal(jd.Err)
			}
			want := ".claude/progress/evidence/F-001/" + tt.found
			if len(jd.Findings) != 1 || jd.Findings[0].Code != "evidence_not_a_file" || jd.Findings[0].Path != want || !jd.Blocks() {
				t.Fatalf("findings %+v, want %s as evidence_not_a_file", jd.Findings, want)
			}
			if _, err := os.Lstat(filepath.Join(f.dir, filepath.FromSlash(want))); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s is still there: %v", want, err)
			}
			if b, _ := os.ReadFile(filepath.Join(ev, "honest.log")); string(b) != "PASS\n" {
				t.Errorf("the regular evidence went: %q", b)
			}
			if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
				t.Errorf("what the link led to changed: %q", b)
			}
		})
	}
	// Another feature's evidence is not this run's doing.
	f := newJudgeFixture(t, nil)
	other := filepath.Join(f.dir, ".claude", "progress", "evidence", "F-002")
	os.MkdirAll(other, 0o755)
	os.Symlink(secret, filepath.Join(other, "x.log"))
	if jd := f.judge(gates.Tester, false); len(jd.Findings) != 0 {
		t.Errorf("a link in F-002's evidence was charged to F-001's run: %+v", jd.Findings)
	}
}

// The daemon writes its own evidence unconfined into a directory agents
// write: a link on the way is an error, never followed, and a link in the
// log's own place is replaced by the log.
func TestWriteEvidenceFollowsNoLink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(outside, 0o755)
	secret := filepath.Join(outside, ".bashrc")
	os.WriteFile(secret, []byte("secret\n"), 0o644)
	r := TestResult{Command: "true", Output: "agent's text\n"}

	f := newFixture(t, nil)
	os.MkdirAll(filepath.Join(f.dir, ".claude", "progress", "evidence"), 0o755)
	os.Symlink(outside, filepath.Join(f.dir, ".claude", "progress", "evidence", "F-001"))
	if rel, err := f.j.WriteEvidence("F-001", 1, "rerun", r); err == nil || rel != "" {
		t.Errorf("WriteEvidence through a linked directory = %q, %v; want an error", rel, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("a file was made outside the project: %v", ents)
	}

	f = newFixture(t, nil)
	ev := filepath.Join(f.dir, ".claude", "progress", "evidence", "F-001")
	os.MkdirAll(ev, 0o755)
	os.Symlink(secret, filepath.Join(ev, "daemon-rerun-attempt-1.log"))
	rel, err := f.j.WriteEvidence("F-001", 1, "rerun", r)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(f.dir, filepath.FromSlash(rel))); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the log is not a regular file in the project: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
		t.Errorf("the file the link led to was written: %q", b)
	}
}
