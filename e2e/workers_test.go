package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// workerProc is a `ctxgraphd worker` process of a test, with a home and
// a directory of its own and no path of the project's.
type workerProc struct {
	name, dir string
	cmd       *exec.Cmd
	log       *lockedBuffer // read while the worker writes it
}

// addWorker issues credentials to a worker of p's daemon, returning the
// daemon's NATS URL and the credentials file.
func (p *project) addWorker(name string) (url, creds string) {
	p.t.Helper()
	return addWorker(p.t, p, name)
}

// startWorker starts a worker of slots slots with its own home (its own
// Claude Code login: the scripted model's key) and directories.
func (p *project) startWorker(name, url, creds, dir string, slots int) *workerProc {
	p.t.Helper()
	return startWorker(p.t, p.modelURL, name, url, creds, dir, slots)
}

// lockedBuffer is a process's output that a test reads while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// addWorker runs `ctl workers add name` in p, a test's or a benchmark's
// project whose daemon is up, and reads the worker command it prints.
func addWorker(tb testing.TB, p interface{ mustRun(...string) string }, name string) (url, creds string) {
	tb.Helper()
	out := p.mustRun("ctl", "workers", "add", name)
	m := regexp.MustCompile(`ctxgraphd worker --nats (\S+) --creds (\S+)`).FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("ctl workers add %s said no worker command:\n%s", name, out)
	}
	return m[1], m[2]
}

// startWorker starts `ctxgraphd worker` with slots slots, its own home
// and Claude Code login for the scripted model at modelURL, and dir; it
// is stopped at the end of tb, its log shown if tb failed.
func startWorker(tb testing.TB, modelURL, name, url, creds, dir string, slots int) *workerProc {
	tb.Helper()
	home := tb.TempDir()
	// Claude Code's directory first, as the daemon's: the sandbox runtime
	// the Makefile pins is beside it.
	env := append(claudetest.Env(tb, modelURL),
		"PATH="+filepath.Dir(claudetest.Binary(tb))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home,
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"XDG_RUNTIME_DIR="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GORACE=atexit_sleep_ms=0",
	)
	cmd := exec.Command(binary, "worker", "--nats", url, "--creds", creds, "--slots", strconv.Itoa(slots), "--dir", dir, "--claude", claudetest.Binary(tb))
	cmd.Dir, cmd.Env = home, env
	log := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = leftoverDelay
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w := &workerProc{name: name, dir: dir, cmd: cmd, log: log}
	tb.Cleanup(func() {
		w.stop()
		if tb.Failed() {
			tb.Logf("worker %s's log:\n%s", name, log.String())
		}
	})
	return w
}

// stop stops the worker as systemd does (SIGTERM), if it still runs.
func (w *workerProc) stop() {
	if w.cmd.ProcessState != nil {
		return
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(leftoverDelay):
		w.cmd.Process.Kill()
		<-done
	}
}

// TestWorkersNightWithAWorkerKilled: with executor nats, the daemon's
// lanes run on two `ctxgraphd worker` processes of this machine, each with
// its own home and directory. One is killed with -9 while it codes a
// lane: its run is given to the other worker, uncharged, and the night
// ends as a local one does. Every feature is tested on the branch, no
// process of the killed worker's runs is left once it is gone (before it
// starts again), and a restarted worker clears the clone the kill left.
func TestWorkersNightWithAWorkerKilled(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("workers",
		feature("F-001", scriptedmodel.Pass),
		feature("F-002", scriptedmodel.Pass),
		feature("F-003", scriptedmodel.Pass),
		// A coder that makes its test pass by rewriting it, with a
		// redirection, sed, python3 and a script, on its worker.
		feature("F-004", scriptedmodel.RewritesTest),
	))
	p.env = append(p.env, "CTXGRAPHD_EXECUTOR=nats", "CTXGRAPHD_LIMITS_PARALLEL=2")
	daemon, log := p.start("--exit-when-done")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", log)
		}
	})
	p.waitFor("the daemon to answer", startWait, func() bool { _, ok := p.status(); return ok })

	url, c1 := p.addWorker("w1")
	_, c2 := p.addWorker("w2")
	d1, d2 := filepath.Join(p.t.TempDir(), "w1"), filepath.Join(p.t.TempDir(), "w2")
	w1 := p.startWorker("w1", url, c1, d1, 1)

	// w1 alone takes the first lane; once it codes there, w2 comes, and
	// w1 is killed mid-lane.
	var victim string
	p.waitFor("w1 to code a lane", 4*time.Minute, func() bool {
		st, ok := p.status()
		if !ok {
			return false
		}
		for _, l := range append(asList(st["lanes"]), st["current"]) {
			m, _ := l.(map[string]any)
			// Mid-lane: the agent works in w1's clone (a tool call seen).
			if calls, _ := m["tool_calls"].(float64); m["worker"] == "w1" && m["role"] == "coding-agent" && calls > 0 {
				victim, _ = m["feature"].(string)
				return true
			}
		}
		return false
	})
	w2 := p.startWorker("w2", url, c2, d2, 1)
	relay1 := fleet.RelaySocket(d1)
	if len(carrying(relay1)) == 0 {
		t.Fatal("no process of w1's run was found running before the kill")
	}
	w1.cmd.Process.Signal(syscall.SIGKILL)
	w1.cmd.Wait()
	// Nothing of w1's runs outlives it (each ran under a keeper), before
	// any worker starts again in its directory.
	p.waitFor("the killed worker's runs to end with it", 10*time.Second, func() bool { return len(carrying(relay1)) == 0 })
	// The kill left w1's clone; w1 started again (as systemd restarts it)
	// clears it before it takes a lane.
	left, _ := os.ReadDir(filepath.Join(d1, "lanes"))
	if len(left) == 0 {
		t.Fatal("the kill mid-lane left no clone on w1")
	}
	again := p.startWorker("w1", url, c1, d1, 1)
	p.waitFor("w1 started again", startWait, func() bool { return strings.Contains(again.log.String(), "worker ready") })
	for _, e := range left {
		if _, err := os.Stat(filepath.Join(d1, "lanes", e.Name())); !os.IsNotExist(err) {
			t.Errorf("the clone %s the kill left is still there after w1's restart (%v)", e.Name(), err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon: %v\n%s\nw2:\n%s", err, log, w2.log)
		}
	case <-time.After(agentsWait):
		t.Fatalf("the night did not end\n%s\nw2:\n%s", log, w2.log)
	}
	if got, want := states(p.featureList()), "F-001=tested F-002=tested F-003=tested F-004=tested"; got != want {
		t.Fatalf("final states %q, want %q\ndaemon:\n%s\nw2:\n%s", got, want, log, w2.log)
	}
	// The killed attempt is no attempt of the feature's: one coder and
	// one tester run each, all ok.
	for _, id := range []string{"F-001", "F-002", "F-003"} {
		var roles []string
		for _, r := range p.runs() {
			if r.Feature == id {
				roles = append(roles, r.Role)
				if r.Outcome != "ok" {
					t.Errorf("run %s (%s %s) outcome %q: %s", r.ID, r.Role, r.Feature, r.Outcome, r.Summary)
				}
			}
		}
		if strings.Join(roles, " ") != "coding-agent tester-agent" {
			t.Errorf("%s's runs: %v; want one coder and one tester (a lost worker is not charged)", id, roles)
		}
		got := strings.TrimSpace(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: "+id+"$", "HEAD"))
		if got == "" || got != strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/"+id)) {
			t.Errorf("%s's commit on the branch: %q", id, got)
		}
	}
	// F-004's rewrite of its test never reached the branch: the worker's
	// sandbox and hooks refused it, and attempt 1's tester found the test
	// failing on the broken code; attempt 2, honest, was tested.
	added := strings.TrimSpace(p.git("log", "--format=%H", "--diff-filter=A", "--", "tests/F-004.sh"))
	if diff := p.git("diff", added, "HEAD", "--", "tests/F-004.sh"); added == "" || diff != "" {
		t.Errorf("F-004's test changed on the branch since it was written (%s):\n%s", added, diff)
	}
	for _, r := range p.runs() {
		if r.Feature == "F-004" && r.Role == "tester-agent" && r.Attempt == 1 && r.Outcome != "failed" {
			t.Errorf("F-004's first tester %s ended %s: %s; want its test failing on the broken code", r.ID, r.Outcome, r.Summary)
		}
	}
	if !strings.Contains(log.String(), "a worker was lost") || !strings.Contains(log.String(), victim) {
		t.Errorf("the daemon's log does not say w1 was lost while on %s:\n%s", victim, log)
	}
	p.checkNoLeftovers()
	for _, d := range []string{d1, d2} {
		if left := carrying(fleet.RelaySocket(d)); len(left) > 0 {
			t.Errorf("processes of the runs of the worker in %s outlived the night: %v", d, left)
		}
	}
	again.stop()
	w2.stop()
	for _, w := range []*workerProc{again, w2} {
		if !strings.Contains(w.log.String(), "worker stopped") {
			t.Errorf("worker %s, stopped with SIGTERM, did not say it stopped:\n%s", w.name, w.log)
		}
	}
	for _, d := range []string{d1, d2} {
		if left, _ := os.ReadDir(filepath.Join(d, "lanes")); len(left) > 0 {
			t.Errorf("clones left in %s: %v", d, left)
		}
	}
	var coders []store.Run
	for _, r := range p.runs() {
		if r.Role == "coding-agent" {
			coders = append(coders, r)
		}
	}
	if len(coders) != 5 {
		t.Errorf("%d coding runs, want 5 (one a feature, two of F-004's)", len(coders))
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
