package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// The daemon's test runs may write what a person named in
// sandbox.allow_write, as agents may: that is the fix the daemon gives for
// a test its jail kept from a directory it needs. Nothing else outside the
// checkout and /tmp is writable there.
func TestTestJailWritesWhatAllowWriteNames(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are confined on Linux only")
	}
	allowed, other, proj := t.TempDir(), t.TempDir(), t.TempDir()
	// The daemon's state and socket directories are hidden in the jail, and
	// so are the directories that hold them: give them their own.
	p := paths.Project{Dir: proj, ID: "p-test", StateDir: filepath.Join(t.TempDir(), "state", "p-test"), Socket: filepath.Join(t.TempDir(), "run", "ctl.sock")}
	cfg := config.Default()
	cfg.Sandbox.AllowWrite = []string{allowed}
	jail := testJail(os.Environ(), p, cfg, nil)
	jail.Checkout, jail.Mount = proj, proj
	// The second touch fails: the exit status says nothing here.
	runInJail(t, jail, "touch "+filepath.Join(allowed, "cache-entry")+"; touch "+filepath.Join(other, "elsewhere"))
	if _, err := os.Stat(filepath.Join(allowed, "cache-entry")); err != nil {
		t.Errorf("a test run could not write in sandbox.allow_write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "elsewhere")); err == nil {
		t.Error("a test run wrote outside its checkout, /tmp and sandbox.allow_write")
	}
}

// The verdict's Go caches (GOCACHE and GOMODCACHE in the test runs'
// environment) are its own, read-only to a test, whose code could
// otherwise file a build of code that passes under code that fails, and
// writable to the warm-up that fills them, which takes the modules from
// the agents' module cache (checked against go.sum), never from the
// network.
func TestTestJailKeepsTheVerdictsCachesReadOnly(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are confined on Linux only")
	}
	proj, home := t.TempDir(), t.TempDir()
	p := paths.Project{Dir: proj, ID: "p-test", StateDir: filepath.Join(t.TempDir(), "state", "p-test"), Socket: filepath.Join(t.TempDir(), "run", "ctl.sock")}
	agentMods := filepath.Join(home, "go", "pkg", "mod")
	jail := testJail([]string{"HOME=" + home, "PATH=/usr/bin:/bin", "GOMODCACHE=" + agentMods}, p, config.Default(), nil)
	jail.Checkout, jail.Mount = proj, proj
	env := map[string]string{}
	for _, kv := range jail.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v // the last wins, as in exec
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE"} {
		if !strings.HasPrefix(env[k], p.StateDir) {
			t.Errorf("the test runs' %s is %q, want the verdict's own, in the state directory", k, env[k])
		}
	}
	if want := "GOPROXY=file://" + agentMods + "/cache/download"; !slices.Contains(jail.WarmEnv, want) {
		t.Errorf("the warm-up's environment %q lacks %s", jail.WarmEnv, want)
	}
	if env["GOPROXY"] != "off" {
		t.Errorf("the test runs' GOPROXY is %q, want off", env["GOPROXY"])
	}
	touch := func(j sandbox.TestJail, dir, name string) bool {
		_, err := runInJail(t, j, "touch "+filepath.Join(dir, name))
		_, serr := os.Stat(filepath.Join(dir, name))
		return err == nil && serr == nil
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE"} {
		if touch(jail, env[k], "by-a-test") {
			t.Errorf("a test run wrote the verdict's %s", k)
		}
		if !touch(jail.Warming(), env[k], "by-the-warm-up") {
			t.Errorf("the warm-up could not write the verdict's %s", k)
		}
	}
	// The agents' module cache, below /tmp here as in demo, CI and the
	// tests (the jail's /tmp is a fresh one), is where the warm-up
	// extracts the verdict's modules from: both see it, read-only.
	zip := filepath.Join(agentMods, "cache", "download", "example.com", "dep", "@v", "v1.0.0.zip")
	if err := os.MkdirAll(filepath.Dir(zip), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zip, []byte("a module's zip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, j := range map[string]sandbox.TestJail{"a test run": jail, "the warm-up": jail.Warming()} {
		if out, err := runInJail(t, j, "cat "+zip); err != nil || !strings.Contains(out, "a module's zip") {
			t.Errorf("%s cannot read the agents' module cache: %v\n%s", name, err, out)
		}
		if touch(j, filepath.Dir(zip), strings.ReplaceAll(name, " ", "-")) {
			t.Errorf("%s wrote the agents' module cache", name)
		}
	}
}

// Go runs with the verdict's caches read-only, from the very first test
// run: a package pattern (which Go would index into its cache) and a
// build into an empty cache (which Go would lay out) work there.
func TestGoRunsWithTheVerdictsReadOnlyCaches(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are confined on Linux only")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	proj := t.TempDir()
	for name, content := range map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.21\n",
		"a/a.go": "package a\n\n// One is a package with no imports: it builds in no time.\nfunc One() int { return 1 }\n",
	} {
		os.MkdirAll(filepath.Join(proj, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(proj, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := paths.Project{Dir: proj, ID: "p-test", StateDir: filepath.Join(t.TempDir(), "state", "p-test"), Socket: filepath.Join(t.TempDir(), "run", "ctl.sock")}
	// -mod=mod, as many set it. (Go's index of a pattern's module, which
	// it would write to its cache in some set-ups, is off in test runs:
	// TestVerdictRoutePoisonedBuildCache meets one.)
	jail := testJail(append(os.Environ(), "GOFLAGS=-mod=mod"), p, config.Default(), nil)
	jail.Checkout, jail.Mount = proj, proj
	out, err := runInJail(t, jail, "go list ./a/... && go build ./a/...")
	if err != nil {
		t.Errorf("go list and go build of a package pattern, the caches read-only and empty: %v\n%s", err, out)
	}
}

// What agents may write is hidden from the daemon's test runs, but for the
// caches a test reads its dependencies from, which it sees read-only: code
// that reads its answer from a cache or a temp directory an agent filled
// would pass only on this machine.
func TestTestJailHidesWhatAgentsWrite(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are confined on Linux only")
	}
	// Outside /tmp, which every jail sees fresh and empty anyway.
	base, err := os.MkdirTemp("/var/tmp", "ctxgraphd-jail-")
	if err != nil {
		t.Skip("no /var/tmp to try it in")
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	npm, mod, proj := filepath.Join(base, "npm"), filepath.Join(base, "gomod"), t.TempDir()
	for _, d := range []string{npm, mod} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "planted"), []byte("42\n"), 0o644)
	}
	p := paths.Project{Dir: proj, ID: "p-test", StateDir: filepath.Join(t.TempDir(), "state", "p-test"), Socket: filepath.Join(t.TempDir(), "run", "ctl.sock")}
	env := append(os.Environ(), "GOMODCACHE="+mod, "npm_config_cache="+npm)
	jail := testJail(env, p, config.Default(), []string{npm, mod})
	jail.Checkout, jail.Mount = proj, proj
	script := "test ! -e " + filepath.Join(npm, "planted") + " && echo npm-hidden; " +
		"cat " + filepath.Join(mod, "planted") + "; " +
		"(echo x > " + filepath.Join(mod, "planted") + ") 2>/dev/null || echo mod-read-only"
	jc, err := jail.Command(t.Context(), script)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jc.Cmd.Output()
	jc.Gone(5 * time.Second)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := string(out), "npm-hidden\n42\nmod-read-only\n"; got != want {
		t.Errorf("the jail showed %q, want %q", got, want)
	}
}

// runInJail runs script in jail, its output kept, and returns when every
// process of it is gone.
func runInJail(t *testing.T, jail sandbox.TestJail, script string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	_, err := jail.Run(t.Context(), script, &out)
	return out.String(), err
}

// An agent's WebFetch reads the hosts its programs may reach and the
// documentation of sandbox.fetch_domains, and no other; unconfined, any.
func TestAgentNetwork(t *testing.T) {
	cfg := config.Default()
	n := agentNetwork(cfg)
	for host, want := range map[string]bool{"proxy.golang.org": true, "pkg.go.dev": true, "docs.python.org": true, "evil.test": false} {
		if got := n.Allows(host); got != want {
			t.Errorf("by default, WebFetch of %s allowed = %v, want %v", host, got, want)
		}
	}
	cfg.Sandbox.AllowedDomains, cfg.Sandbox.FetchDomains = []string{"registry.npmjs.org"}, []string{"*.example.com"}
	n = agentNetwork(cfg)
	for host, want := range map[string]bool{"registry.npmjs.org": true, "docs.example.com": true, "pkg.go.dev": false, "proxy.golang.org": false} {
		if got := n.Allows(host); got != want {
			t.Errorf("narrowed, WebFetch of %s allowed = %v, want %v", host, got, want)
		}
	}
	cfg.Sandbox.Enabled = false
	if n := agentNetwork(cfg); !n.Unconfined || !n.Allows("evil.test") {
		t.Errorf("unconfined: %+v", n)
	}
}

// A lane's file tools write where its sandbox lets its programs write, and
// nowhere else: with the project, the lanes' clones, the state and a
// verify checkout all under the system's temp directory (demo's, CI's and
// the tests' layout), a Write from one lane into another lane's clone, the
// project's tree or verify's checkout is refused, whether or not the
// daemon's environment names the temp directory (TMPDIR) or a person put
// it in sandbox.allow_write; Claude Code's temp directory and the caches
// stay writable.
func TestALanesFileToolsWriteOnlyWhereItsSandboxDoes(t *testing.T) {
	tmp := t.TempDir()
	if !strings.HasPrefix(tmp, os.TempDir()) {
		t.Skipf("t.TempDir() %s is not under the system's temp directory %s", tmp, os.TempDir())
	}
	home := filepath.Join(tmp, "home")
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(tmp, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(tmp, "run")}
	proj := filepath.Join(tmp, "proj")
	os.MkdirAll(proj, 0o755)
	p, err := paths.ForProjectEnv(proj, func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	lanes := filepath.Join(filepath.Dir(p.StateDir), "lanes", p.ID)
	laneA, laneB := filepath.Join(lanes, "F-001"), filepath.Join(lanes, "F-002")
	verifyDir, err := os.MkdirTemp("", "ctxgraphd-verify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(verifyDir) })
	for _, d := range []string{laneA, laneB, filepath.Join(verifyDir, "checkouts", "t-1", "tree")} {
		os.MkdirAll(d, 0o755)
	}
	coder := gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-000002"}
	refused := []string{
		filepath.Join(laneB, "src", "F-002.go"),
		filepath.Join(proj, "src", "F-001.go"),
		filepath.Join(verifyDir, "checkouts", "t-1", "tree", "main.go"),
		filepath.Join(tmp, "elsewhere.txt"),
	}
	for _, c := range []struct {
		name  string
		env   []string
		allow []string
	}{
		{"the daemon's environment as it is", env, nil},
		{"TMPDIR names the system's temp directory", append(slices.Clone(env), "TMPDIR="+os.TempDir()), nil},
		{"sandbox.allow_write names it, and the state's parent", env, []string{os.TempDir(), filepath.Dir(filepath.Dir(p.StateDir))}},
		{"a cache is the system's temp directory", append(slices.Clone(env), "GOCACHE="+os.TempDir(), "PIP_CACHE_DIR="+tmp), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Sandbox.AllowWrite = c.allow
			writable := agentWritable(c.env, p, cfg)
			s := gates.State{ProjectDir: laneA, Writable: writable, Protected: []string{p.StateDir, p.Socket}}
			write := func(path string) *control.HookDecision {
				payload, err := gates.ParsePayload("pre-tool-use", []byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":`+jsonString(path)+`,"content":"x"}}`))
				if err != nil {
					t.Fatal(err)
				}
				return gates.PreToolUse(nil, coder, s, payload)
			}
			for _, path := range refused {
				if d := write(path); d == nil || d.Code != "outside_project" {
					t.Errorf("a Write from lane F-001 to %s: %+v, want outside_project (writable: %q)", path, d, writable)
				}
			}
			// A project, state and home outside the temp directory, where
			// only verify's checkouts are in it.
			far := paths.Project{Dir: "/srv/p/proj", ID: p.ID, StateDir: "/srv/p/state/ctxgraphd/" + p.ID, Socket: "/srv/p/run/ctxgraphd/" + p.ID + ".sock"}
			farEnv := append(slices.Clone(c.env), "HOME=/srv/p/home")
			farWritable := agentWritable(farEnv, far, cfg)
			fs := gates.State{ProjectDir: "/srv/p/state/ctxgraphd/lanes/" + p.ID + "/F-001", Writable: farWritable, Protected: []string{far.StateDir, far.Socket}}
			payload, _ := gates.ParsePayload("pre-tool-use", []byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":`+jsonString(refused[2])+`,"content":"x"}}`))
			if d := gates.PreToolUse(nil, coder, fs, payload); d == nil || d.Code != "outside_project" {
				t.Errorf("with the project outside the temp directory, a Write from a lane to verify's checkout %s: %+v, want outside_project (writable: %q)", refused[2], d, farWritable)
			}
			claudeTmp := sandbox.TempDir(append(slices.Clone(c.env), "CLAUDE_CODE_TMPDIR="+agentTempDir(p)))
			for _, path := range []string{filepath.Join(laneA, "src", "F-001.go"), filepath.Join(claudeTmp, "scratch.py"), filepath.Join(home, ".cache", "go-build", "x")} {
				if c.name == "a cache is the system's temp directory" && strings.Contains(path, "go-build") {
					continue
				}
				if d := write(path); d != nil {
					t.Errorf("a Write from lane F-001 to %s was refused: %+v", path, d)
				}
			}
		})
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }
