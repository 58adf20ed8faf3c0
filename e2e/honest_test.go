package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
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
// features, on a fresh home with no module, npm or pip cache (Go's build
// cache holds what any first go test compiles: warmGoBuildCache), its testers
// running the test in the forms models really write (redirections, pipes
// into tail and head, cd and mkdir before it, timeout, bash for sh, an
// evidence log written with > and tee). Three coding agents get their
// feature wrong once. The night ends with every feature tested, retried
// exactly where the code was wrong, with no refusal, no denial and no
// violation, no attempt charged to the environment, each verdict's
// evidence carrying its runner's report, one commit a feature on the
// branch (oneCommitEach), and every test passing in the person's work tree
// in the morning (greenForThePerson).
func TestHonestNight(t *testing.T) {
	night(t, core)
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
			test+" 2>&1 | tail -20",
			"timeout 120 "+test,
			"bash ./"+script,
			"FOO=1 timeout 60 bash "+script+" > "+ev+"/out.log 2>&1; echo exit=$?"),
		// The exit status tells the tester of attempt 1 that the code is
		// wrong; attempt 2's keeps its log the natural way.
		in(feature("F-002", scriptedmodel.FailOnce), scriptedmodel.Text,
			"cd "+project+" && "+test+" 2>&1",
			"mkdir -p "+ev+" && "+test+" > "+ev+"/run.log 2>&1; cat "+ev+"/run.log"),
		in(feature("F-003", scriptedmodel.Pass), scriptedmodel.GoPackage,
			"go test -v ./"+pkg+"/ 2>&1 | tail -30",
			"set -o pipefail; go test ./"+pkg+" 2>&1 | tee "+ev+"/go-test.log"),
		// go test's FAIL, through tail, tells the tester of attempt 1.
		in(feature("F-004", scriptedmodel.FailOnce), scriptedmodel.Go,
			"cd "+project+" && go test ./"+pkg+"/... 2>&1 | tail -40"),
		in(feature("F-005", scriptedmodel.Pass), scriptedmodel.Node,
			"node --test --test-reporter=spec test/"),
		// npm test is node --test over the whole project: after F-005.
		in(feature("F-006", scriptedmodel.Pass, "F-005"), scriptedmodel.NPM,
			"npm test 2>&1 | tail -40"),
		// pytest's "1 failed", through head, tells the tester of attempt 1.
		in(feature("F-007", scriptedmodel.FailOnce), scriptedmodel.Python,
			"pytest -xvs "+script+" 2>&1 | head -100"),
	)
	retried := map[string]bool{"F-002": true, "F-004": true, "F-007": true}
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
	p.freshHome()
	p.warmGoBuildCache()

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
	p.oneCommitEach(o)
	p.greenForThePerson(o)
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

// freshHome takes from the project's environment every variable that would
// hand it the machine's caches, and checks that its home has none: an
// honest night starts with empty caches.
func (p *project) freshHome() {
	p.t.Helper()
	p.env = slices.DeleteFunc(p.env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(machineCaches, k)
	})
	home := getenvIn(p.env)("HOME")
	for _, cache := range []string{".cache/go-build", "go/pkg/mod", "go/pkg/sumdb", ".npm", ".cache/pip"} {
		if _, err := os.Stat(filepath.Join(home, cache)); err == nil {
			p.t.Fatalf("the home %s is not fresh: it has %s", home, cache)
		}
	}
}

// TestHonestNightWithThirdPartyDependencies: an honest team whose
// features each need a real third-party dependency (Node's is-number, Go's
// github.com/google/uuid, Python's greeting), on a fresh home with empty
// module, npm and pip caches, at parallel 2: two features of each kind, Go's
// build cache warm (warmGoBuildCache), two lanes of a kind adding the same
// dependency to the same manifests and locks, and lanes of one kind
// landing between those of another: a lane's node_modules and .venv go
// into the project's work tree when it lands, so a later lane, which
// installed none of them, is lent them and its regression sweep finds the
// earlier features passing. The person commits what docs/operations.md
// asks of them (a .gitignore, the package.json, a .venv; the initializer
// writes the go.mod); each coding agent writes its code, then fetches its
// dependency as a model writes it, `cd <project> && npm install is-number
// && node --test 2>&1 | tail -40`, through the sandbox's proxy from the
// registry this machine reaches (npm's, the Go module proxy; for Python,
// whose index it cannot reach, a wheel offered through pip's --find-links,
// installed into .venv). The manifests and locks it changes lie outside
// every feature's scope, and are shared. The night ends with every
// feature tested at its first attempt, with no refusal, denial or
// violation, nothing charged to the environment, the branch holding the
// dependencies in its manifests, every feature's test passing in the
// person's own work tree as it is in the morning, with nothing installed
// first and no network (greenForThePerson), two coders at work at once,
// each feature with one commit on the branch, its verdict's, and no lane
// left (workedAtOnce).
func TestHonestNightWithThirdPartyDependencies(t *testing.T) {
	night(t, core)
	node, gomod, venv := scriptedmodel.NodeDep, scriptedmodel.GoDep, scriptedmodel.PythonVenv
	needDependencyTools(t, node, gomod, venv)
	dependencyNightOn(t, 2, false, node, node, gomod, gomod, venv, venv)
}

// TestHonestNightWithThirdPartyDependenciesOnAColdMachine: the night of
// TestHonestNightWithThirdPartyDependencies as a machine's first, at
// parallel 1, with a feature of each kind and every cache cold, Go's build
// cache too: what the first `go test` of a person's first night compiles
// and fetches is no failure of anyone's, and charges no one.
func TestHonestNightWithThirdPartyDependenciesOnAColdMachine(t *testing.T) {
	night(t, extended)
	node, gomod, venv := scriptedmodel.NodeDep, scriptedmodel.GoDep, scriptedmodel.PythonVenv
	needDependencyTools(t, node, gomod, venv)
	dependencyNightOn(t, 1, false, node, gomod, venv)
}

// TestHonestNightWithANodeDependencyOnWorkers: the Node night at
// parallel 2 with executor nats, on two workers of one slot each, each
// with its own fresh home: every coder's `npm install` runs on a worker,
// and what it installed comes back with its result, so that the daemon's
// own test run of the feature finds the dependency as a local lane's
// does. Everything else is the local night's: tested at the first attempt,
// no refusal, nothing charged.
func TestHonestNightWithANodeDependencyOnWorkers(t *testing.T) {
	night(t, extended)
	needDependencyTools(t, scriptedmodel.NodeDep)
	dependencyNightOn(t, 2, true, scriptedmodel.NodeDep, scriptedmodel.NodeDep)
}

// needDependencyTools skips t, or fails it in CI, when a tool the features
// of kinds need is missing.
func needDependencyTools(t *testing.T, kinds ...scriptedmodel.Kind) {
	t.Helper()
	tools := map[scriptedmodel.Kind][]string{
		scriptedmodel.NodeDep: {"node", "npm"}, scriptedmodel.GoDep: {"go"}, scriptedmodel.PythonVenv: {"/usr/bin/python3"},
	}
	for _, k := range kinds {
		for _, tool := range tools[k] {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is required in CI", tool)
				}
				t.Skipf("skipping: %s is not installed", tool)
			}
		}
	}
	if slices.Contains(kinds, scriptedmodel.PythonVenv) {
		if out, err := exec.Command("/usr/bin/python3", "-c", "import pytest, venv, ensurepip").CombinedOutput(); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("/usr/bin/python3 needs pytest and venv in CI (python3-pytest, python3-venv): %v\n%s", err, out)
			}
			t.Skipf("skipping: /usr/bin/python3 lacks pytest or venv: %s", out)
		}
	}
}

// dependencyNightOn is the night at parallel of a feature of each of
// kinds, in order (F-001, F-002, …), its lanes run on two workers
// (executor nats) when onWorkers. The person's project is what every kind
// of the night asks of them.
func dependencyNightOn(t *testing.T, parallel int, onWorkers bool, kinds ...scriptedmodel.Kind) {
	var features []scriptedmodel.FeatureScript
	var distinct []string
	for i, k := range kinds {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = k
		features = append(features, f)
		if !slices.Contains(distinct, string(k)) {
			distinct = append(distinct, string(k))
		}
	}
	has := func(k scriptedmodel.Kind) bool { return slices.Contains(kinds, k) }
	sc := scenario(fmt.Sprintf("%s night at parallel %d", strings.Join(distinct, "+"), parallel), features...)
	if has(scriptedmodel.PythonVenv) {
		sc.FindLinks = pythonWheel(t)
	}
	p := newProject(t, sc)
	p.freshHome()
	if has(scriptedmodel.GoDep) && parallel > 1 {
		// The first night of a machine, its Go build caches cold, is
		// parallel 1's; this one fetches into an empty module cache.
		p.warmGoBuildCache()
	}
	p.env = append(p.env, fmt.Sprintf("CTXGRAPHD_LIMITS_PARALLEL=%d", parallel))
	// What the person commits before the night (docs/operations.md).
	person := map[string]string{".gitignore": "node_modules/\n.venv/\n"}
	if has(scriptedmodel.NodeDep) {
		person["package.json"] = `{
  "name": "scripted",
  "version": "1.0.0",
  "private": true,
  "scripts": {
    "test": "node --test"
  }
}
`
	}
	if has(scriptedmodel.PythonVenv) {
		// The system's python3, which has pytest: a venv that sees its
		// packages runs the tests, and the agents' python3 is the same.
		p.env = append(p.env, "PATH=/usr/bin:"+getenvIn(p.env)("PATH"))
		venv := exec.Command("/usr/bin/python3", "-m", "venv", "--system-site-packages", filepath.Join(p.dir, ".venv"))
		if out, err := venv.CombinedOutput(); err != nil {
			t.Fatalf("making the project's .venv: %v\n%s", err, out)
		}
	}
	for name, text := range person {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		p.git("add", name)
	}
	p.git("-c", "user.name=A Person", "-c", "user.email=person@example.com", "commit", "-q", "-m", "the person's project")

	var o *outcome
	if onWorkers {
		p.env = append(p.env, "CTXGRAPHD_EXECUTOR=nats")
		daemon, log := p.start("--exit-when-done")
		p.waitFor("the daemon to answer", startWait, func() bool { _, ok := p.status(); return ok })
		for _, name := range []string{"w1", "w2"} {
			url, creds := p.addWorker(name)
			p.startWorker(name, url, creds, filepath.Join(t.TempDir(), name), 1)
		}
		p.waitForExit(daemon, log)
		o = p.outcome(log.String(), nil)
	} else {
		o = p.runMisbehaving()
	}
	o.allTestedHonestly(t, sc)
	for _, f := range sc.Features {
		// The coder fetched the dependency, and its hooks saw it succeed.
		coder := o.runOf(t, "coding-agent", f.ID, 1)
		fetched := false
		for _, c := range p.commands(coder.ID) {
			// (Claude Code records `cd <its working directory> && X` as X.)
			if strings.Contains(c.Command, map[scriptedmodel.Kind]string{
				scriptedmodel.NodeDep: "npm install", scriptedmodel.GoDep: "go get", scriptedmodel.PythonVenv: ".venv/bin/pip install",
			}[f.Kind]) && c.ExitCode == 0 {
				fetched = true
			}
		}
		if !fetched {
			t.Errorf("%s's coder did not fetch its dependency (commands: %v)", f.ID, p.commands(coder.ID))
		}
	}
	// The branch holds the dependencies where the person's next clone
	// reads them.
	for k, w := range map[scriptedmodel.Kind][2]string{
		scriptedmodel.NodeDep: {"package-lock.json", `"node_modules/` + scriptedmodel.NodeDependency + `"`},
		scriptedmodel.GoDep:   {"go.sum", scriptedmodel.GoDependency + " " + scriptedmodel.GoDependencyAt + " h1:"},
	} {
		if !has(k) {
			continue
		}
		if got := p.git("show", "HEAD:"+w[0]); !strings.Contains(got, w[1]) {
			t.Errorf("the branch's %s lacks %s:\n%s", w[0], w[1], got)
		}
	}
	p.greenForThePerson(o)
	if parallel > 1 && !onWorkers {
		p.workedAtOnce(o)
	}
	o.agree(t)
}

// greenForThePerson checks the promise of the morning: every tested
// feature's test, as written, passes in the person's own work tree as the
// night left it, run by the person (the project's home, its caches), with
// nothing installed first and no network.
func (p *project) greenForThePerson(o *outcome) {
	p.t.Helper()
	for _, f := range o.list.Features {
		if !f.Tested {
			continue
		}
		cmd := exec.Command("sh", "-c", f.Test)
		cmd.Dir = p.dir
		cmd.Env = append(slices.Clone(p.env), "GOPROXY=off", "GOFLAGS=-mod=readonly", "npm_config_offline=true", "PIP_NO_INDEX=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			p.t.Errorf("%s is tested, but its test fails in the person's work tree in the morning (`%s`: %v):\n%s", f.ID, f.Test, err, out)
		}
	}
}

// pythonWheel builds the wheel of greeting 1.0.0 (pure Python, one module,
// say(s) returns s) in a directory of its own, as a team's private index
// would offer it, and returns the directory.
func pythonWheel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	const name, version = scriptedmodel.PythonDependency, "1.0.0"
	info := name + "-" + version + ".dist-info"
	files := []struct{ path, text string }{
		{name + ".py", "def say(s):\n    return s\n"},
		{info + "/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: ctxgraphd-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.text))
		sum := sha256.Sum256([]byte(f.text))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.text))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	w, err := zw.Create(info + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
