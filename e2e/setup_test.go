package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// The go.sum lines of the Go dependency of scriptedmodel.GoDep: what a
// person who ran `go mod tidy` on their own machine commits.
const goDepSum = scriptedmodel.GoDependency + " " + scriptedmodel.GoDependencyAt + " h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\n" +
	scriptedmodel.GoDependency + " " + scriptedmodel.GoDependencyAt + "/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n"

// TestANightOnThePersonsCommittedGoModule: the person committed go.mod,
// requiring a module no cache of this machine holds, and its go.sum, and
// never ran `go mod download` here (a fresh home). Before the first check
// of a test in each tree (the project's, each lane), the daemon fetches
// what go.mod names, verified by go.sum, confined as an agent, so that the
// check finds the test failing for want of the feature, not for want of
// the module; every feature ends tested at its first attempt, nothing is
// charged, no refusal, and in the morning each test passes in the
// person's own tree. At parallel 1; at 2, in lanes, ...InLanes.
func TestANightOnThePersonsCommittedGoModule(t *testing.T) {
	night(t, core)
	needDependencyTools(t, scriptedmodel.GoDep)
	committedGoModuleNight(t, 1)
}

// TestANightOnThePersonsCommittedGoModuleInLanes is that night at parallel
// 2, each lane's tree set up as the person's own.
func TestANightOnThePersonsCommittedGoModuleInLanes(t *testing.T) {
	night(t, extended)
	needDependencyTools(t, scriptedmodel.GoDep)
	committedGoModuleNight(t, 2)
}

func committedGoModuleNight(t *testing.T, parallel int) {
	var features []scriptedmodel.FeatureScript
	for i := range parallel + 1 {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = scriptedmodel.GoDep
		features = append(features, f)
	}
	sc := scenario(fmt.Sprintf("the person's go.mod at parallel %d", parallel), features...)
	sc.PersonsManifests = true
	p := newProject(t, sc)
	p.freshHome()
	p.warmGoBuildCache()
	p.env = append(p.env, fmt.Sprintf("CTXGRAPHD_LIMITS_PARALLEL=%d", parallel))
	person := map[string]string{
		".gitignore": "node_modules/\n.venv/\n",
		"go.mod":     "module example.com/scripted\n\ngo 1.21\n\nrequire " + scriptedmodel.GoDependency + " " + scriptedmodel.GoDependencyAt + "\n",
		"go.sum":     goDepSum,
	}
	p.personCommits(person, slices.Collect(maps.Keys(person))...)
	home := getenvIn(p.env)("HOME")

	log := p.runToEnd()
	o := p.outcome(log, nil)
	o.allTestedHonestly(t, sc)
	// The setup ran before the checks (at least once a tree), and fetched
	// into the agents' module cache of the fresh home.
	if n := strings.Count(log, "the setup step ran"); n < 1 || !strings.Contains(log, "go mod download") {
		t.Errorf("the setup step ran %d times", n)
	}
	if _, err := os.Stat(filepath.Join(home, "go", "pkg", "mod", "cache", "download", "github.com", "google", "uuid", "@v", scriptedmodel.GoDependencyAt+".zip")); err != nil {
		t.Errorf("the module was not fetched into the agents' cache: %v", err)
	}
	if strings.Contains(log, "read-only file system") && strings.Contains(log, "mod/cache/download") {
		t.Errorf("a check met the module cache read-only")
	}
	p.greenForThePerson(o)
	o.agree(t)
}

// TestLanesGetThePersonsEnvAndTheirServersDoNotCollide: the person keeps
// .env untracked (lanes.copy), and every feature's test reads it, starts
// a server on the same port and talks to it. At parallel 2, two lanes at
// once: each lane's clone and each test run of the daemon's has the .env,
// the lanes' servers do not collide (each Bash call of an agent, and each
// test run, has a network of its own), every feature ends tested at its
// first attempt with no refusal, and the .env is in no commit, no trace
// and no run's change set; in the morning each test passes in the
// person's own tree.
func TestLanesGetThePersonsEnvAndTheirServersDoNotCollide(t *testing.T) {
	night(t, core)
	needDependencyTools(t, scriptedmodel.NodeDep)
	var features []scriptedmodel.FeatureScript
	for i := range 3 {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = scriptedmodel.NodeServer
		features = append(features, f)
	}
	sc := scenario(".env and servers in two lanes", features...)
	p := newProject(t, sc)
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2", "CTXGRAPHD_LANES_COPY=.env")
	const env = "GREETING=" + scriptedmodel.EnvGreeting + "\n"
	p.personCommits(map[string]string{".gitignore": ".env\nnode_modules/\n", ".env": env}, ".gitignore")

	log := p.runToEnd()
	o := p.outcome(log, nil)
	o.allTestedHonestly(t, sc)
	p.workedAtOnce(o)
	p.envStaysThePersons(env)
	p.greenForThePerson(o)
	o.agree(t)
}

// TestANightWhoseSetupMakesTheVenv: the person committed requirements.txt
// and a setup that makes .venv from it (from a directory of wheels: no
// package index is reached), and the initializer's tests run from
// .venv/bin/python, which no tree has before any code. The daemon runs the
// setup in each tree before its first check, so that the check finds each
// test failing for want of the feature, never "cannot run"; every feature
// ends tested at its first attempt, nothing charged, no refusal, at
// parallel 1 (and at 2, in lanes: ...InLanes), and in the morning each
// test passes in the person's own tree.
func TestANightWhoseSetupMakesTheVenv(t *testing.T) {
	night(t, core)
	needDependencyTools(t, scriptedmodel.PythonVenv)
	venvNight(t, 1)
}

// TestANightWhoseSetupMakesTheVenvInLanes is that night at parallel 2:
// each lane's setup makes the lane's own .venv.
func TestANightWhoseSetupMakesTheVenvInLanes(t *testing.T) {
	night(t, extended)
	needDependencyTools(t, scriptedmodel.PythonVenv)
	venvNight(t, 2)
}

func venvNight(t *testing.T, parallel int) {
	var features []scriptedmodel.FeatureScript
	for i := range parallel + 1 {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = scriptedmodel.PythonVenv
		features = append(features, f)
	}
	sc := scenario(fmt.Sprintf("a setup that makes .venv at parallel %d", parallel), features...)
	sc.FindLinks = pythonWheel(t)
	p := newProject(t, sc)
	p.freshHome()
	p.env = append(p.env, fmt.Sprintf("CTXGRAPHD_LIMITS_PARALLEL=%d", parallel),
		"PATH=/usr/bin:"+getenvIn(p.env)("PATH"),
		// The system's python3 has pytest: a venv that sees its
		// packages runs the tests.
		"CTXGRAPHD_SETUP=python3 -m venv --system-site-packages .venv && .venv/bin/pip install --no-index --find-links "+sc.FindLinks+" -r requirements.txt")
	p.personCommits(map[string]string{".gitignore": ".venv/\n", "requirements.txt": scriptedmodel.PythonDependency + "\n"}, ".gitignore", "requirements.txt")

	log := p.runToEnd()
	o := p.outcome(log, nil)
	o.allTestedHonestly(t, sc)
	if strings.Contains(log, "cannot run") || !strings.Contains(log, "the setup step ran") {
		t.Errorf("a check could not run the test, or no setup ran")
	}
	p.greenForThePerson(o)
	if parallel > 1 {
		p.workedAtOnce(o)
	}
	o.agree(t)
}

// allTestedHonestly checks an honest night's outcome: every feature of sc
// tested, each by one tester's run at its first attempt, no denial,
// refusal or violation met, and every run ended ok, none charged to
// anything.
func (o *outcome) allTestedHonestly(t *testing.T, sc scriptedmodel.Scenario) {
	t.Helper()
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
		if r.Failure != "" || r.Outcome != "ok" {
			t.Errorf("run %s (%s %s attempt %d) ended %s, %s: %s", r.ID, r.Role, r.Feature, r.Attempt, r.Outcome, r.Failure, r.Summary)
		}
	}
	for _, f := range sc.Features {
		o.testedBy(t, f.ID, 1)
	}
}

// The person's package.json naming scriptedmodel.NodeDependency, and the
// package-lock.json npm 11 wrote for it: what a person who ran `npm
// install is-number` on their own machine commits.
const (
	nodePackage = `{
  "name": "scripted",
  "version": "1.0.0",
  "private": true,
  "scripts": {
    "test": "node --test"
  },
  "dependencies": {
    "is-number": "^7.0.0"
  }
}
`
	nodeLock = `{
  "name": "scripted",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "scripted",
      "version": "1.0.0",
      "dependencies": {
        "is-number": "^7.0.0"
      }
    },
    "node_modules/is-number": {
      "version": "7.0.0",
      "integrity": "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
      "license": "MIT",
      "engines": {
        "node": ">=0.12.0"
      }
    }
  }
}
`
)

// noLockSetup is the setup the initializer proposes for a package.json
// without a lock: an install that writes no lock into every tree.
const noLockSetup = "npm install --no-audit --no-fund --no-package-lock"

// TestANightOnThePersonsNodeProject: the person committed package.json,
// naming is-number, with its lock or without one, on a fresh home (no npm
// cache); the coders trust the project to be set up and install nothing.
// With the lock, the daemon's own `npm ci --ignore-scripts` sets up each
// tree; without one, the daemon fetches nothing by itself, and the
// initializer proposes a setup in the feature list, which runs in each
// tree as a person's would. At parallel 1 (and at 2, in lanes:
// ...InLanes) every feature ends tested at its first attempt, nothing
// charged, no refusal, and in the morning each test passes in the
// person's own tree.
func TestANightOnThePersonsNodeProject(t *testing.T) {
	night(t, core)
	needDependencyTools(t, scriptedmodel.NodeDep)
	personsNodeNights(t, 1)
}

// TestANightOnThePersonsNodeProjectInLanes is those nights at parallel 2.
func TestANightOnThePersonsNodeProjectInLanes(t *testing.T) {
	night(t, extended)
	needDependencyTools(t, scriptedmodel.NodeDep)
	personsNodeNights(t, 2)
}

// personsNodeNights runs the person's Node night with a lock and without,
// side by side, at parallel.
func personsNodeNights(t *testing.T, parallel int) {
	for _, lock := range []bool{true, false} {
		name := fmt.Sprintf("with a lock at parallel %d", parallel)
		if !lock {
			name = fmt.Sprintf("without a lock at parallel %d", parallel)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			personsNodeNight(t, lock, parallel)
		})
	}
}

func personsNodeNight(t *testing.T, lock bool, parallel int) {
	var features []scriptedmodel.FeatureScript
	for i := range parallel + 1 {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = scriptedmodel.NodeDep
		features = append(features, f)
	}
	sc := scenario(fmt.Sprintf("the person's package.json (lock %v) at parallel %d", lock, parallel), features...)
	sc.PersonsManifests, sc.SetUp = true, true
	person := map[string]string{".gitignore": "node_modules/\n", "package.json": nodePackage}
	if lock {
		person["package-lock.json"] = nodeLock
	} else {
		sc.ListSetup = noLockSetup
	}
	p := newProject(t, sc)
	p.freshHome()
	p.env = append(p.env, fmt.Sprintf("CTXGRAPHD_LIMITS_PARALLEL=%d", parallel))
	p.personCommits(person, slices.Collect(maps.Keys(person))...)

	log := p.runToEnd()
	o := p.outcome(log, nil)
	o.allTestedHonestly(t, sc)
	want := "npm ci --ignore-scripts"
	if !lock {
		want = noLockSetup
	}
	if n := strings.Count(log, "the setup step ran"); n < 1 || !strings.Contains(log, want) {
		t.Errorf("the setup step ran %d times, and the log does not name %q", n, want)
	}
	for _, tr := range p.traces(store.TraceFilter{}) {
		if tr.Code == "setup_needed" || tr.Code == "setup_failed" {
			t.Errorf("a trace says the setup was missing or failed: %+v", tr)
		}
	}
	if got := p.featureList().Setup; got != sc.ListSetup {
		t.Errorf("the list's setup is %q in the morning, want the initializer's %q", got, sc.ListSetup)
	}
	if lock {
		if b, _ := os.ReadFile(filepath.Join(p.dir, "package-lock.json")); string(b) != nodeLock {
			t.Errorf("the person's lock changed:\n%s", b)
		}
	} else if _, err := os.Stat(filepath.Join(p.dir, "package-lock.json")); !os.IsNotExist(err) {
		t.Errorf("the setup left a lock the person never had: %v", err)
	}
	p.greenForThePerson(o)
	o.agree(t)
}

// TestANightOnWorkersWithThePersonsSetupAndEnv: the person's Node project
// without a lock, whose setup the initializer proposes, and a .env kept
// untracked (lanes.copy), run on a `ctxgraphd worker` with two slots
// (executor nats, parallel 2). Each worker's clone is set up by the worker
// before its agent and gets the person's .env, which one feature's test
// reads while its server talks on a port; every feature ends tested at its
// first attempt, no refusal, the .env is in no commit, and in the morning
// each test passes in the person's own tree.
func TestANightOnWorkersWithThePersonsSetupAndEnv(t *testing.T) {
	night(t, core)
	needDependencyTools(t, scriptedmodel.NodeDep)
	var features []scriptedmodel.FeatureScript
	for i, k := range []scriptedmodel.Kind{scriptedmodel.NodeDep, scriptedmodel.NodeServer, scriptedmodel.NodeDep} {
		f := feature(fmt.Sprintf("F-%03d", i+1), scriptedmodel.Pass)
		f.Kind = k
		features = append(features, f)
	}
	sc := scenario("the person's project on workers", features...)
	sc.PersonsManifests, sc.SetUp, sc.ListSetup = true, true, noLockSetup
	p := newProject(t, sc)
	p.freshHome()
	p.env = append(p.env, "CTXGRAPHD_EXECUTOR=nats", "CTXGRAPHD_LIMITS_PARALLEL=2", "CTXGRAPHD_LANES_COPY=.env")
	const env = "GREETING=" + scriptedmodel.EnvGreeting + "\n"
	// The person keeps .env untracked, and has not told git to ignore it:
	// no base bundle and no result carries it all the same.
	p.personCommits(map[string]string{".gitignore": "node_modules/\n", "package.json": nodePackage, ".env": env}, ".gitignore", "package.json")

	daemon, log := p.start("--exit-when-done")
	p.waitFor("the daemon to answer", startWait, func() bool { _, ok := p.status(); return ok })
	url, creds := p.addWorker("w1")
	w := p.startWorker("w1", url, creds, filepath.Join(t.TempDir(), "w1"), 2)
	p.waitForExit(daemon, log)

	o := p.outcome(log.String(), nil)
	o.allTestedHonestly(t, sc)
	if took := strings.Count(log.String(), "a worker took the run"); took < len(o.runs) {
		t.Errorf("the worker took %d runs of the night's %d", took, len(o.runs))
	}
	if n := strings.Count(w.log.String(), "the setup step ran"); n < len(features) || !strings.Contains(w.log.String(), noLockSetup) {
		t.Errorf("the worker ran the setup %d times, want before each of its agents:\n%s", n, w.log)
	}
	p.envStaysThePersons(env)
	p.greenForThePerson(o)
	o.agree(t)
}

// envStaysThePersons checks that the person's .env (lanes.copy) is
// theirs in the morning: untouched, in no commit, in no trace.
func (p *project) envStaysThePersons(env string) {
	p.t.Helper()
	if b, _ := os.ReadFile(filepath.Join(p.dir, ".env")); string(b) != env {
		p.t.Errorf("the person's .env holds %q", b)
	}
	if got := p.git("log", "--all", "--name-only", "--format="); strings.Contains(got, ".env\n") || strings.HasSuffix(got, ".env") {
		p.t.Errorf("a commit holds .env:\n%s", got)
	}
	for _, tr := range p.traces(store.TraceFilter{}) {
		if strings.Contains(tr.Event.WhatHappened, scriptedmodel.EnvGreeting) || tr.Path == ".env" {
			p.t.Errorf("a trace holds the .env: %+v", tr)
		}
	}
}

// personCommits writes files into the project as the person keeps them
// and commits those of track, as the person's own commit.
func (p *project) personCommits(files map[string]string, track ...string) {
	p.t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(text), 0o600); err != nil {
			p.t.Fatal(err)
		}
	}
	p.git(append([]string{"add"}, track...)...)
	p.git("-c", "user.name=A Person", "-c", "user.email=person@example.com", "commit", "-q", "-m", "the person's project")
}
