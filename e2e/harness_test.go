package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// binary is the ctxgraphd built once for the whole test run.
var binary string

// releaseBuild are the flags of `make build` (with CGO_ENABLED=0): a
// static, stripped binary starts measurably faster, and a hook is started
// on every tool call.
var releaseBuild = []string{"-trimpath", "-ldflags=-s -w"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctxgraphd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ctxgraphd")
	// The daemon's runs call the lean hook beside it, as `make build`
	// installs it.
	for _, b := range []struct {
		out, pkg string
		race     bool
	}{{binary, "../cmd/ctxgraphd", raceEnabled}, {filepath.Join(dir, "ctxgraphd-hook"), "../cmd/ctxgraphd-hook", false}} {
		// Build exactly as `make build` does (releaseBuild), so that the
		// tests and benchmarks run the binaries users run. Under -race the
		// daemon is race-enabled: its goroutines (the loop, the runs'
		// streams, the socket, the watcher) are where a race would be. The
		// hook is not: it is one short request on every tool call, its
		// package's tests run under -race, and a race-enabled hook costs
		// four times the CPU of the shipped one (33 ms a call against
		// 8 ms, some 100 CPU-seconds over the suite).
		args := append([]string{"build", "-o", b.out}, releaseBuild...)
		env := append(os.Environ(), "CGO_ENABLED=0")
		if b.race {
			args, env = []string{"build", "-o", b.out, "-race"}, os.Environ()
		}
		build := exec.Command("go", append(args, b.pkg)...)
		build.Env = env
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", b.pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// project is a sample project with its own scripted model, state directory
// and Claude Code configuration.
type project struct {
	t     *testing.T
	dir   string
	env   []string
	sc    scriptedmodel.Scenario
	model *scriptedmodel.Server
	// modelURL is the scripted model's address (ANTHROPIC_BASE_URL).
	modelURL string
	paths    paths.Project
}

func newProject(t *testing.T, sc scriptedmodel.Scenario) *project {
	t.Helper()
	claude := claudetest.Binary(t)
	model := scriptedmodel.New(sc, nil)
	url, err := model.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		model.Close()
		// The suite's time is its number of agent runs (docs/DEVELOPING.md):
		// each test's count is in its log (make test keeps them all in
		// .testrun/tests.json).
		st := model.Stats()
		n := 0
		for _, c := range st.Runs {
			n += c
		}
		t.Logf("agent runs of %s: %d %v", sc.Name, n, st.Runs)
	})

	dir := t.TempDir()
	runtime, err := os.MkdirTemp("", "cgrt") // short: socket paths have a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runtime) })
	state := t.TempDir()
	env := append(claudetest.Env(t, url),
		"PATH="+filepath.Dir(claude)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_STATE_HOME="+state,
		"XDG_RUNTIME_DIR="+runtime,
		"XDG_CONFIG_HOME="+t.TempDir(),
		"CTXGRAPHD_LIMITS_DEBOUNCE=10ms",
		// The tests run side by side (doc.go): a CLI that starts a run
		// can take longer than the default 10 s from its first tool call
		// to that call's hook on a busy 2-core machine, and the daemon would kill the run
		// for it. That a run whose hooks never check in is not trusted is
		// TestRunsWithoutHooksAreNotTrusted's, with a short timeout of its
		// own.
		"CTXGRAPHD_AGENT_HOOKS_LIVE_TIMEOUT=2m",
		// Under -race the daemon is a race-enabled build, which sleeps a
		// second at exit by default; every ctl command runs it too.
		"GORACE=atexit_sleep_ms=0",
	)
	p := &project{t: t, dir: dir, env: env, sc: sc, model: model, modelURL: url}
	p.mustRun("init", "--project", dir, "--goal", "the "+sc.Name+" scenario")
	// Resolve the project's paths the way the binary does, under the same
	// environment: the project's, not the process's, which the tests
	// running beside this one share (t.Setenv would panic in a parallel
	// test).
	if p.paths, err = paths.ForProjectEnv(dir, getenvIn(env)); err != nil {
		t.Fatal(err)
	}
	return p
}

// goCachesOnce warms the machine's Go caches once per test run, for
// goCaches.
var goCachesOnce = sync.OnceValues(warmGoCaches)

// goCaches returns the environment that hands a project's daemon and
// agents the machine's Go build and module caches (HOME is the test's
// own), offline and warm. The first test to ask builds what a Go feature's
// `go test` needs (the standard library's test dependencies: about 25 s of
// CPU on a cold cache); the tests that ask while it does wait for it,
// rather than each build the same beside it.
func goCaches(t *testing.T) []string {
	t.Helper()
	env, err := goCachesOnce()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func warmGoCaches() ([]string, error) {
	env := []string{"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
	for _, key := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := execOutput("go", "env", key)
		if err != nil || out == "" {
			return nil, fmt.Errorf("go env %s: %q, %v", key, out, err)
		}
		env = append(env, key+"="+out)
	}
	dir, err := os.MkdirTemp("", "ctxgraphd-e2e-gowarm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := writeWarmModule(dir); err != nil {
		return nil, err
	}
	// As an agent or the daemon runs a Go feature's test: not race-enabled,
	// vetted, with the test binary linked.
	warm := exec.Command("go", "test", "-count=1", "./...")
	warm.Dir, warm.Env = dir, append(os.Environ(), env...)
	if out, err := warm.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("warming the Go caches: go test: %v\n%s", err, out)
	}
	return env, nil
}

// sideBySide runs a subtest of t for each case, all at once, within t's
// own turn of go test -parallel, and returns when all have ended; each case
// is a project and a daemon of its own. A subtest that called t.Parallel()
// would wait for a turn behind every test already waiting, and run in the
// run's tail (doc.go).
func sideBySide[C any](t *testing.T, cases []C, name func(C) string, run func(*testing.T, C)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			t.Run(name(c), func(t *testing.T) { run(t, c) })
		})
	}
	wg.Wait()
}

// verdictCacheOnce builds, once per test run, what a Go project's verdict
// build cache holds after its first warm-up, for warmVerdictCache.
var verdictCacheOnce = sync.OnceValues(warmVerdictCacheTemplate)

// withGoCaches hands the project's daemon and agents the machine's Go
// caches (goCaches), and lays in its verdict's own build cache what that
// cache's first warm-up would compile whatever the project
// (warmVerdictCache). The honest nights on a fresh home keep their module
// caches empty: they show what fetching costs (warmGoBuildCache).
func (p *project) withGoCaches() {
	p.t.Helper()
	p.env = append(p.env, goCaches(p.t)...)
	p.warmVerdictCache()
}

// warmVerdictCache lays in the project's verdict build cache what its
// first warm-up would compile whatever the project: the standard library
// and the testing package's dependencies (about 35 CPU-seconds on a cold
// cache, repeated by every Go project). The daemon's warm-up still runs
// before each tree's first test, for the project's own packages; the cache
// stays the verdict's, read-only to the tests.
func (p *project) warmVerdictCache() {
	p.t.Helper()
	template, err := verdictCacheOnce()
	if err != nil {
		p.t.Fatal(err)
	}
	// Where cmd/ctxgraphd's testJail keeps the verdict's build cache.
	copyTree(p.t, template, filepath.Join(p.paths.StateDir, "verdict-cache", "go-build"))
}

// warmGoBuildCache, on a fresh home (freshHome), lays in the home's Go
// build cache, where go keeps it by default, what the verdict's first
// warm-up compiles whatever the project (the same standard library and
// testing dependencies an agent's first go test compiles: the keys match),
// and as much in the verdict's own (warmVerdictCache): about 80
// CPU-seconds that every Go night on a fresh home would repeat. The module
// cache, npm's and pip's stay empty, and the agents still write the build
// cache below the home, through their sandbox: only the first night of a
// machine, which TestHonestNightWithThirdPartyDependencies runs at
// parallel 1, starts with it cold.
func (p *project) warmGoBuildCache() {
	p.t.Helper()
	template, err := verdictCacheOnce()
	if err != nil {
		p.t.Fatal(err)
	}
	copyTree(p.t, template, filepath.Join(getenvIn(p.env)("HOME"), ".cache", "go-build"))
	p.warmVerdictCache()
}

// copyTree copies the directory src to dst, which it makes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-R", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the build cache %s to %s: %v\n%s", src, dst, err, out)
	}
}

// writeWarmModule writes a module of one package with its test in dir.
func writeWarmModule(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, text := range map[string]string{
		"go.mod":       "module warm\n\ngo 1.21\n",
		"warm.go":      "package warm\n\nfunc Warm() string { return \"warm\" }\n",
		"warm_test.go": "package warm\n\nimport \"testing\"\n\nfunc TestWarm(t *testing.T) {\n\tif Warm() != \"warm\" {\n\t\tt.Fatal(Warm())\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// warmVerdictCacheTemplate runs the Go toolchain's warm-up (toolchain.Go's Warm, as
// the daemon runs it) on a project of one package with its test, into a
// build cache of its own, and returns that cache's directory: beside the
// binaries, which TestMain removes at the end of the run.
func warmVerdictCacheTemplate() (string, error) {
	dir, err := os.MkdirTemp(filepath.Dir(binary), "verdictwarm-")
	if err != nil {
		return "", err
	}
	cache, module := filepath.Join(dir, "go-build"), filepath.Join(dir, "m")
	if err := writeWarmModule(module); err != nil {
		return "", err
	}
	warm := ""
	for _, tc := range toolchain.All {
		if tc.Name == "Go" {
			warm = strings.ReplaceAll(tc.Warm, "/tmp/", dir+"/")
		}
	}
	cmd := exec.Command("sh", "-c", warm)
	// The variables of the daemon's test jail that enter a build's keys.
	cmd.Dir, cmd.Env = module, append(os.Environ(), "GOCACHE="+cache, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GODEBUG=goindex=0", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("warming a verdict's build cache: %s: %v\n%s", warm, err, out)
	}
	return cache, nil
}

// getenvIn looks a variable up in env as exec.Cmd passes it on: the last
// value of a key wins.
func getenvIn(env []string) func(string) string {
	return func(key string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], key+"="); ok {
				return v
			}
		}
		return ""
	}
}

// agentsWait bounds a wait that spans agents' runs: far more than they
// take, even with the tests beside it sharing a busy 2-core machine (a run
// takes 5 to 60 s there). Only a hang reaches it; a passing test never
// waits it out.
const agentsWait = 15 * time.Minute

// startWait bounds the wait for a daemon to answer, which first asks the
// real CLI whether it can start; as agentsWait, only a hang reaches it.
const startWait = 2 * time.Minute

// leftoverDelay bounds how long the binary's output is read once it has
// exited: a process it left behind that holds its stdout would otherwise
// hang the test instead of failing it (exec.ErrWaitDelay).
const leftoverDelay = 10 * time.Second

// ctxgraphd runs the binary to its end.
func (p *project) ctxgraphd(args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = leftoverDelay
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("ctxgraphd %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func (p *project) mustRun(args ...string) string {
	p.t.Helper()
	out, errOut, code := p.ctxgraphd(args...)
	if code != 0 {
		p.t.Fatalf("ctxgraphd %v exited %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// runToEnd runs the daemon with --exit-when-done and returns its log.
func (p *project) runToEnd(extra ...string) string {
	p.t.Helper()
	out, errOut, code := p.ctxgraphd(append([]string{"run", "--exit-when-done"}, extra...)...)
	if code != 0 {
		p.t.Fatalf("daemon exited %d\nstdout:\n%s\nlog:\n%s", code, out, errOut)
	}
	return errOut
}

// waitForExit waits, within agentsWait, for a daemon started by start to
// exit by itself (--exit-when-done), and fails the test with its log when
// it exits with an error or does not exit.
func (p *project) waitForExit(daemon *exec.Cmd, log *bytes.Buffer) {
	p.t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- daemon.Wait() }()
	select {
	case err := <-ended:
		if err != nil {
			p.t.Fatalf("daemon: %v\n%s", err, log)
		}
	case <-time.After(agentsWait):
		p.t.Fatalf("the night did not end\n%s", log)
	}
}

// start starts the daemon in the background; the caller waits or kills it.
func (p *project) start(extra ...string) (*exec.Cmd, *bytes.Buffer) {
	p.t.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, extra...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.WaitDelay = leftoverDelay
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			// Stopped as a person stops it: the daemon ends its runs and
			// their process groups. A kill alone left a run's CLI and its
			// sandbox writing below the test's directories while they were
			// removed ("directory not empty").
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(leftoverDelay):
				cmd.Process.Kill()
				<-done
			}
		}
		p.killLeftovers()
	})
	return cmd, &log
}

// killLeftovers kills what still carries the project's socket (a run's
// processes that a daemon killed with -9 left), and returns once they are
// gone, so that nothing writes below the test's directories as they go.
// One that outlives its SIGKILL fails the test by name, rather than the
// removal of its directories.
func (p *project) killLeftovers() {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		return
	}
	var left []int
	if !eventually.Within(leftoverDelay, func() bool {
		left = p.leftovers()
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0
	}) {
		p.t.Errorf("processes of the project's runs outlived a SIGKILL for %s: %v", leftoverDelay, left)
	}
}

func (p *project) featureList() *progress.List {
	p.t.Helper()
	l, _, err := progress.ReadFeatureList(p.paths.Progress())
	if err != nil {
		p.t.Fatal(err)
	}
	return l
}

// featureListIfAny reads feature-list.json as the daemon would take it:
// nil when there is none, or when what is there is no valid list (a run
// killed half-way through writing it).
func (p *project) featureListIfAny() (*progress.List, error) {
	p.t.Helper()
	data, err := os.ReadFile(p.paths.Progress(progress.FeatureListFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := progress.Parse(data)
	if err != nil {
		return nil, nil
	}
	return l, nil
}

// canonicalList reads the daemon's canonical feature list from the state
// of record, nil before one was accepted; the daemon must be down.
func (p *project) canonicalList() *progress.List {
	p.t.Helper()
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		p.t.Fatal(err)
	}
	defer st.Close()
	state, err := st.Load()
	if err != nil {
		p.t.Fatal(err)
	}
	if state.FeatureList == nil {
		return nil
	}
	l, err := progress.Parse(state.FeatureList)
	if err != nil {
		p.t.Fatalf("the store's canonical list: %v", err)
	}
	return l
}

// states is "F-001=tested F-002=blocked …", the comparable outcome of a run.
func states(l *progress.List) string {
	var parts []string
	for _, f := range l.Features {
		s := string(f.Status)
		if f.Tested {
			s = "tested"
		}
		parts = append(parts, f.ID+"="+s)
	}
	return strings.Join(parts, " ")
}

// runs reads the runs from the state of record; the daemon must be down.
func (p *project) runs() []store.Run {
	p.t.Helper()
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		p.t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs()
	if err != nil {
		p.t.Fatal(err)
	}
	return runs
}

func (p *project) transitions() []store.Transition {
	p.t.Helper()
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		p.t.Fatal(err)
	}
	defer st.Close()
	ts, err := st.Transitions()
	if err != nil {
		p.t.Fatal(err)
	}
	return ts
}

// status asks the daemon for its status, as `ctl status --json` prints it
// (the same JSON, read as a map); ok is false when none runs. It asks the
// socket itself rather than through `ctxgraphd ctl` (whose answers are
// tested in cmd/ctxgraphd, and against a real daemon once in
// TestAPersonsCommitDuringTheNightStaysUnderTheFeatures): tests ask it
// while they wait for a moment of a night, and an ask that costs a
// millisecond instead of a race-enabled binary's start (0.2 CPU-s) is
// asked often enough not to miss a moment that lasts a few hundred
// milliseconds, such as the daemon's verdict on a claim, and leaves the
// cores to the night.
func (p *project) status() (map[string]any, bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := control.NewClient(p.paths.Socket).Status(ctx)
	if errors.Is(err, control.ErrNoDaemon) {
		return nil, false
	}
	if err != nil {
		p.t.Fatalf("the daemon's status: %v", err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		p.t.Fatal(err)
	}
	return m, true
}

// waitFor polls cond until it holds or the deadline passes. It waits for a
// condition of the system, never for an amount of time.
func (p *project) waitFor(what string, deadline time.Duration, cond func() bool) {
	p.t.Helper()
	eventually.True(p.t, deadline, cond, "waiting for %s", what)
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// codingRuns lists the coding runs of a feature that ended by themselves.
func codingRuns(runs []store.Run, feature string) []store.Run {
	var out []store.Run
	for _, r := range runs {
		if r.Role == "coding-agent" && r.Feature == feature && r.Outcome != "interrupted" {
			out = append(out, r)
		}
	}
	return out
}

// checkNoLeftovers fails the test if a process of the project's runs is
// still alive. It first plants a stray of its own, so that a check that sees
// nothing cannot pass for one that finds nothing. Processes' environments
// are read from /proc: without it (macOS) the check cannot be made, and the
// test says so in its log.
func (p *project) checkNoLeftovers() {
	p.t.Helper()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		p.t.Log("no /proc here: the check for leftover processes is Linux only")
		return
	}
	if left := p.leftovers(); len(left) > 0 {
		var which []string
		for _, pid := range left {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			run := ""
			if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
				for _, kv := range strings.Split(string(env), "\x00") {
					if strings.HasPrefix(kv, "CTXGRAPH_RUN=") {
						run = kv
					}
				}
			}
			which = append(which, fmt.Sprintf("%d %s (%s)", pid, textcut.Line(strings.ReplaceAll(string(cmd), "\x00", " "), 200), run))
		}
		p.t.Fatalf("processes of the project's runs outlived the daemons:\n%s", strings.Join(which, "\n"))
	}
	stray := exec.Command("sleep", "30")
	stray.Env = append(os.Environ(), "CTXGRAPH_SOCKET="+p.paths.Socket)
	if err := stray.Start(); err != nil {
		p.t.Fatal(err)
	}
	defer func() {
		stray.Process.Kill()
		stray.Wait()
	}()
	// Start returns once the exec began, and the kernel sets the new
	// environment up a moment later: until then /proc shows none. Wait
	// for the stray to show rather than take its absence for a blind check.
	p.waitFor("the leftover check to see a process that carries the project's socket", 10*time.Second, func() bool {
		return slices.Contains(p.leftovers(), stray.Process.Pid)
	})
}

// leftovers lists the live processes that still carry this project's
// CTXGRAPH_SOCKET: agents, or what they started, that outlived their run.
func (p *project) leftovers() []int { return carrying(p.paths.Socket) }

// carrying lists the live processes whose CTXGRAPH_SOCKET is socket.
func carrying(socket string) []int {
	want := []byte("CTXGRAPH_SOCKET=" + socket + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue // dead, waiting to be reaped
			}
		}
		out = append(out, pid)
	}
	return out
}

// git runs git in the project and returns its output; a failure ends the
// test.
func (p *project) git(args ...string) string {
	p.t.Helper()
	out, err := p.gitTry(args...)
	if err != nil {
		p.t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// gitTry runs git in the project; the error holds what it printed on
// stderr.
func (p *project) gitTry(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", p.dir}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(e.String()))
	}
	return o.String(), nil
}

// files says where a feature's code and test live, as the scenario's
// initializer lays them out.
func (p *project) files(id string) scriptedmodel.Files {
	for _, f := range p.sc.Features {
		if f.ID == id {
			return f.Files()
		}
	}
	return scriptedmodel.FeatureScript{ID: id}.Files()
}
