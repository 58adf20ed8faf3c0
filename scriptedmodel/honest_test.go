package scriptedmodel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHonestKindsPlayedThrough plays a feature of each kind of honest.go
// through the initializer, a failing and a working attempt, with the real
// toolchains, its tester running the test in forms models write: the
// tester reads the failure off the output where the exit status is not
// the test's, and lists the logs its forms wrote as evidence.
func TestHonestKindsPlayedThrough(t *testing.T) {
	ev := FormEvidence
	for _, c := range []struct {
		kind     Kind
		tool     string
		runs     []string
		evidence []string // "" is the log the tester writes itself
	}{
		{GoPackage, "go", []string{"go test -v ./" + FormPkg + "/ 2>&1 | tail -30"}, []string{""}},
		{Python, "pytest", []string{"pytest -xvs " + FormScript + " 2>&1 | head -100"}, []string{""}},
		{NPM, "npm", []string{"npm test 2>&1 | tail -40", "mkdir -p " + ev + " && " + FormTest + " > " + ev + "/npm.log 2>&1; cat " + ev + "/npm.log"}, []string{"npm.log"}},
		{Text, "sh", []string{"cd " + FormProject + " && mkdir -p " + ev + " && " + FormTest + " 2>&1", "FOO=1 timeout 60 bash " + FormScript + " > " + ev + "/out.log 2>&1; echo exit=$?"}, []string{"out.log"}},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			if _, err := exec.LookPath(c.tool); err != nil {
				t.Skipf("%s is not installed", c.tool)
			}
			sc := Scenario{Name: "kinds", Features: []FeatureScript{{ID: "F-001", Title: "A", Behavior: FailOnce, Kind: c.kind, TestRuns: c.runs}}}
			if err := sc.validate(); err != nil {
				t.Fatal(err)
			}
			f := &fakeCLI{t: t, s: New(sc, nil), dir: t.TempDir()}
			if got := f.run(f.newSession(initCmd())); !strings.HasPrefix(got, "Initialized 1 features") {
				t.Fatalf("initializer: %q", got)
			}
			files := sc.Features[0].Files()
			if f.feature("F-001")["test"] != files.Command {
				t.Fatalf("test %v, want %s", f.feature("F-001")["test"], files.Command)
			}
			if c.kind == NPM {
				if b, err := os.ReadFile(filepath.Join(f.dir, "package.json")); err != nil || string(b) != npmPackage {
					t.Fatalf("package.json = %q, %v", b, err)
				}
			}
			coder := f.newSession(codeCmd("F-001", 1))
			for attempt, want := range []string{"failed", "passed"} {
				if attempt > 0 {
					f.setStatus("F-001", "in_progress")
					coder.c.prompt(codeCmd("F-001", attempt+1))
				}
				f.run(coder)
				cmd := testCmd("F-001", attempt+1)
				cmd["success_criteria"] = map[string]any{"test": files.Command}
				got := f.run(f.newSession(cmd))
				if !strings.Contains(got, "F-001 "+want) {
					t.Fatalf("attempt %d: %q, want %s", attempt+1, got, want)
				}
			}
			var want []string
			for _, e := range c.evidence {
				if e == "" {
					e = "attempt-2.log"
				}
				want = append(want, evidenceDir+"/F-001/"+e)
			}
			if got := fmt.Sprint(f.feature("F-001")["evidence"]); got != fmt.Sprint(want) {
				t.Errorf("evidence %s, want %s", got, want)
			}
			for _, e := range want {
				if _, err := os.Stat(filepath.Join(f.dir, e)); err != nil {
					t.Errorf("evidence %s: %v", e, err)
				}
			}
			if tested, _ := f.feature("F-001")["tested"].(bool); !tested {
				t.Error("F-001 is not tested")
			}
		})
	}
}

func TestFailedOutput(t *testing.T) {
	for out, want := range map[string]bool{
		"--- FAIL: TestFeature (0.00s)\nFAIL\nFAIL\texample.com/scripted/f001\t0.002s": true,
		"ok  \texample.com/scripted/f001\t0.002s":                                      false,
		"=== RUN   TestFeature\n--- PASS: TestFeature (0.00s)\nPASS":                   false,
		"========== 1 failed in 0.03s ==========":                                      true,
		"========== 1 passed in 0.03s ==========":                                      false,
		"not ok 1 - F-001\n# tests 1\n# pass 0\n# fail 1":                              true,
		"ok 1 - F-001\n# tests 1\n# pass 1\n# fail 0":                                  false,
		"ℹ tests 1\nℹ pass 0\nℹ fail 1":                                                true,
		"exit=1":                                                                       true, "exit=0": false, "exit=127": true,
	} {
		if got := failedOutput.MatchString(out); got != want {
			t.Errorf("failedOutput(%q) = %v, want %v", out, got, want)
		}
	}
}

func TestLogsUnder(t *testing.T) {
	dir := evidenceDir + "/F-001"
	for cmd, want := range map[string][]string{
		"sh t.sh 2>&1": nil,
		"mkdir -p " + dir + " && sh t.sh > " + dir + "/run.log 2>&1; cat " + dir + "/run.log": {dir + "/run.log"},
		"set -o pipefail; go test ./p 2>&1 | tee " + dir + "/go.log":                          {dir + "/go.log"},
		"go test ./p 2>&1 | tee -a " + dir + "/go.log":                                        {dir + "/go.log"},
		"sh t.sh >" + dir + "/a.log 2>" + dir + "/b.log":                                      {dir + "/a.log", dir + "/b.log"},
		"sh t.sh > /tmp/x.log": nil,
	} {
		if got := logsUnder(cmd, dir); !slices.Equal(got, want) {
			t.Errorf("logsUnder(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestTestRunsAreAnHonestTesters(t *testing.T) {
	sc := Scenario{Name: "x", Features: []FeatureScript{{ID: "F-001", Title: "A", Behavior: Pass, Tester: MasksFailure, TestRuns: []string{FormTest + " 2>&1"}}}}
	if err := sc.validate(); err == nil || !strings.Contains(err.Error(), "test_runs are how an honest tester runs the test") {
		t.Errorf("validate: %v", err)
	}
	sc.Features[0].Tester = Honest
	if err := sc.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

// TestMixedDependencyKinds: a night of features of each dependency kind,
// two of each, as the end-to-end dependency night writes it. The
// initializer makes every directory, writes the go.mod once and each
// feature's test; no two features share a source or test file; each coder
// fetches its own kind's dependency, the Python one from the scenario's
// wheels.
func TestMixedDependencyKinds(t *testing.T) {
	var features []FeatureScript
	for i, k := range []Kind{NodeDep, NodeDep, GoDep, GoDep, PythonVenv, PythonVenv} {
		features = append(features, FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: "A", Behavior: Pass, Kind: k})
	}
	sc := Scenario{Name: "mixed", Features: features, FindLinks: "/wheels"}
	script := New(sc, nil).testScripts()
	if n := strings.Count(script, "cat > go.mod <<'EOF'\n"+goModule+"EOF\n"); n != 1 {
		t.Errorf("the go.mod is written %d times:\n%s", n, script)
	}
	if mkdir, _, _ := strings.Cut(script, "\n"); mkdir != "mkdir -p test lib f003 f004 tests src" {
		t.Errorf("%q, want the directories of every kind", mkdir)
	}
	seen := map[string]string{}
	for _, f := range features {
		files := f.Files()
		for _, p := range []string{files.Source, files.Test} {
			if other, ok := seen[p]; ok {
				t.Errorf("%s and %s both have %s", other, f.ID, p)
			}
			seen[p] = f.ID
		}
		if !strings.Contains(script, fmt.Sprintf("cat > %s <<'EOF'\n%sEOF", files.Test, testBody(f.ID, f.Kind))) {
			t.Errorf("%s's test %s is not written:\n%s", f.ID, files.Test, script)
		}
		install := sc.Install(f.Kind, "/p")
		if want := map[Kind]string{NodeDep: "npm install " + NodeDependency, GoDep: "go get " + GoDependency + "@" + GoDependencyAt,
			PythonVenv: ".venv/bin/pip install --no-index --find-links /wheels " + PythonDependency}[f.Kind]; !strings.Contains(install, want) {
			t.Errorf("%s's coder runs %q, want %q in it", f.ID, install, want)
		}
	}
}
