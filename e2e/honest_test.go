package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// machineCaches are the variables that would hand the daemon and its
// agents the machine's caches, or keep Python from writing its own: an
// honest night on a fresh home has none of them.
var machineCaches = []string{
	"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTMPDIR", "XDG_CACHE_HOME",
	"npm_config_cache", "NPM_CONFIG_CACHE", "YARN_CACHE_FOLDER", "PIP_CACHE_DIR", "UV_CACHE_DIR",
	"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTEST_ADDOPTS",
}

// TestHonestNight: an honest team over Go, Node, Python and shell
// features, on a fresh home with no cache of any toolchain, its testers
// running the test in the forms models really write (redirections, pipes
// into tail and head, cd and mkdir before it, timeout, bash for sh, an
// evidence log written with > and tee). Three coding agents get their
// feature wrong once. The night ends with every feature tested, retried
// exactly where the code was wrong, with no refusal, no denial and no
// violation, no attempt charged to the environment, and each verdict's
// evidence carrying its runner's report.
func TestHonestNight(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"go", "node", "npm", "pytest"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI (`make viewers` installs pytest: python3-pytest)", tool)
			}
			t.Skipf("skipping: %s is not installed", tool)
		}
	}
	in := func(f scriptedmodel.FeatureScript, k scriptedmodel.Kind, runs ...string) scriptedmodel.FeatureScript {
		f.Kind, f.TestRuns = k, runs
		return f
	}
	const (
		test, project, ev, pkg, script = scriptedmodel.FormTest, scriptedmodel.FormProject, scriptedmodel.FormEvidence, scriptedmodel.FormPkg, scriptedmodel.FormScript
	)
	sc := scenario("honest night",
		in(feature("F-001", scriptedmodel.Pass), scriptedmodel.Text,
			test+" 2>&1",
			test+" 2>&1 | tail -20"),
		// The exit status tells the tester of attempt 1 that the code is
		// wrong; attempt 2's keeps its log the natural way.
		in(feature("F-002", scriptedmodel.FailOnce), scriptedmodel.Text,
			"cd "+project+" && "+test+" 2>&1",
			"mkdir -p "+ev+" && "+test+" > "+ev+"/run.log 2>&1; cat "+ev+"/run.log"),
		in(feature("F-003", scriptedmodel.Pass), scriptedmodel.Text,
			"timeout 120 "+test,
			"bash ./"+script),
		in(feature("F-004", scriptedmodel.Pass), scriptedmodel.GoPackage,
			"go test -v ./"+pkg+"/ 2>&1 | tail -30",
			"set -o pipefail; go test ./"+pkg+" 2>&1 | tee "+ev+"/go-test.log"),
		// go test's FAIL, through tail, tells the tester of attempt 1.
		in(feature("F-005", scriptedmodel.FailOnce), scriptedmodel.Go,
			"cd "+project+" && go test ./"+pkg+"/... 2>&1 | tail -40"),
		in(feature("F-006", scriptedmodel.Pass), scriptedmodel.Node,
			"node --test --test-reporter=spec test/"),
		// npm test is node --test over the whole project: after F-006.
		in(feature("F-007", scriptedmodel.Pass, "F-006"), scriptedmodel.NPM,
			"npm test 2>&1 | tail -40"),
		// pytest's "1 failed", through head, tells the tester of attempt 1.
		in(feature("F-008", scriptedmodel.FailOnce), scriptedmodel.Python,
			"pytest -xvs "+script+" 2>&1 | head -100"),
		in(feature("F-009", scriptedmodel.Pass), scriptedmodel.Text,
			"FOO=1 timeout 60 bash "+script+" > "+ev+"/out.log 2>&1; echo exit=$?"),
	)
	retried := map[string]bool{"F-002": true, "F-005": true, "F-008": true}
	// What the daemon's own run of each test must say of its runner.
	report := map[scriptedmodel.Kind]string{
		scriptedmodel.Text:      "unknown runner: judged by exit status alone",
		scriptedmodel.Go:        "go test reported 1 passed, 0 failed",
		scriptedmodel.GoPackage: "go test reported 1 passed, 0 failed",
		scriptedmodel.Node:      "node --test reported 1 passed, 0 failed",
		scriptedmodel.NPM:       "node --test reported 2 passed, 0 failed",
		scriptedmodel.Python:    "pytest reported 1 passed, 0 failed",
	}

	p := newProject(t, sc)
	p.env = slices.DeleteFunc(p.env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(machineCaches, k)
	})
	home := ""
	for _, kv := range p.env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	for _, cache := range []string{".cache/go-build", "go/pkg/mod", ".npm", ".cache/pip"} {
		if _, err := os.Stat(filepath.Join(home, cache)); err == nil {
			t.Fatalf("the home %s is not fresh: it has %s", home, cache)
		}
	}

	o := p.runMisbehaving()
	want := make([]string, len(sc.Features))
	for i, f := range sc.Features {
		want[i] = f.ID + "=tested"
	}
	if got := states(o.list); got != strings.Join(want, " ") {
		t.Fatalf("final states %q, want %q", got, strings.Join(want, " "))
	}
	if len(o.denials) != 0 || len(o.refusals) != 0 || len(o.violations) != 0 {
		t.Errorf("honest agents met %d denials, %d sandbox refusals and %d violations", len(o.denials), len(o.refusals), len(o.violations))
	}
	for _, r := range o.runs {
		if r.Failure != "" || (r.Outcome != "ok" && r.Outcome != "failed") {
			t.Errorf("run %s (%s %s attempt %d) ended %s, %s: %s", r.ID, r.Role, r.Feature, r.Attempt, r.Outcome, r.Failure, r.Summary)
		}
	}
	for _, f := range sc.Features {
		t.Run(f.ID, func(t *testing.T) {
			n := 1
			if retried[f.ID] {
				n = 2
			}
			if c := o.runsOf("coding-agent", f.ID); len(c) != n {
				t.Errorf("%d coding runs, want %d", len(c), n)
			}
			if c := o.runsOf("tester-agent", f.ID); len(c) != n {
				t.Errorf("%d tester runs, want %d", len(c), n)
			}
			o.testedBy(t, f.ID, n)
			if n == 2 {
				if r := o.runOf(t, "tester-agent", f.ID, 1); r.Outcome != "failed" || !strings.Contains(r.Summary, f.ID+" failed") {
					t.Errorf("the tester of attempt 1 ended %s: %q, want a report of the failure", r.Outcome, r.Summary)
				}
			}
			// The tester ran the test in each of its forms, and its hooks
			// recorded each as a run of the test.
			tester := o.runOf(t, "tester-agent", f.ID, n)
			ran := map[string]bool{}
			for _, c := range p.commands(tester.ID) {
				if shellcmd.RunOf(c.Command, f.Files().Command, p.dir, c.ExitCode).Ran() {
					ran[c.Command] = true
				}
			}
			for _, form := range f.TestRuns {
				cmd := strings.NewReplacer(test, f.Files().Command, project, p.dir, ev, ".claude/progress/evidence/"+f.ID,
					pkg, pkgOf(f), script, f.Files().Test).Replace(form)
				// Claude Code runs `cd <its working directory> && X` as X
				// (2.1.330): the hooks, like the model, see X.
				if !ran[cmd] && !ran[strings.TrimPrefix(cmd, "cd "+p.dir+" && ")] {
					t.Errorf("the tester's hooks recorded no run of the test as `%s` (recorded: %v)", cmd, ran)
				}
			}
			// The daemon's own run of the test read its runner's report.
			var why string
			for _, a := range o.approvals {
				if a.Context.Feature == f.ID {
					why = a.Event.Why
				}
			}
			if !strings.Contains(why, report[kindOf(f)]) {
				t.Errorf("the verdict says %q, want the runner's report %q", why, report[kindOf(f)])
			}
			log := filepath.Join(p.dir, ".claude/progress/evidence", f.ID, fmt.Sprintf("daemon-verdict-attempt-%d.log", n))
			if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), report[kindOf(f)]) {
				t.Errorf("the daemon's evidence %s (%v) does not show %q:\n%s", log, err, report[kindOf(f)], b)
			}
		})
	}
	// Judged by guard's own reading too: what the daemon accepted is what
	// the testers' hooks recorded.
	for _, f := range o.list.Features {
		o.testedOnlyAfterPassingTest(t, f.ID, true)
	}
	o.agree(t)
}

// kindOf is a feature's kind, Text when unset.
func kindOf(f scriptedmodel.FeatureScript) scriptedmodel.Kind {
	if f.Kind == "" {
		return scriptedmodel.Text
	}
	return f.Kind
}

// pkgOf is the Go package (and file) name the scripted model gives a
// feature: the directory of its Go source.
func pkgOf(f scriptedmodel.FeatureScript) string {
	return filepath.Base(filepath.Dir(scriptedmodel.FeatureScript{ID: f.ID, Kind: scriptedmodel.Go}.Files().Source))
}
