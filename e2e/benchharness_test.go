package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// benchProject is a project a benchmark drives. Unlike project, it keeps
// the production configuration (the watcher's default debounce included):
// benchmarks measure what users get.
type benchProject struct {
	b     *testing.B
	dir   string
	env   []string
	paths paths.Project
}

// newBenchProject prepares a project (`ctxgraphd init`) whose daemon and
// hooks run in env, with state, runtime and configuration directories of
// their own.
func newBenchProject(b *testing.B, env []string) *benchProject {
	b.Helper()
	dir := b.TempDir()
	runtime, err := os.MkdirTemp("", "cgrt") // short: socket paths have a length limit
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(runtime) })
	state := b.TempDir()
	p := &benchProject{b: b, dir: dir, env: append(slices.Clip(env),
		"XDG_STATE_HOME="+state,
		"XDG_RUNTIME_DIR="+runtime,
		"XDG_CONFIG_HOME="+b.TempDir(),
		"GORACE=atexit_sleep_ms=0", // in case the benchmarks run under -race
	)}
	p.mustRun("init", "--project", dir, "--goal", "a benchmark project")
	// Resolve the project's paths the way the binary does, under the
	// project's environment.
	if p.paths, err = paths.ForProjectEnv(dir, getenvIn(p.env)); err != nil {
		b.Fatal(err)
	}
	return p
}

// modelEnv is the environment of a project whose agents are the real
// Claude Code CLI (`claude` on PATH) talking to model, with a Claude Code
// configuration directory of its own.
func modelEnv(b *testing.B, modelURL string) []string {
	b.Helper()
	claude := claudetest.Binary(b)
	return append(claudetest.Env(b, modelURL),
		"PATH="+filepath.Dir(claude)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// startModel starts a scripted model of sc for the whole benchmark.
func startModel(b *testing.B, sc scriptedmodel.Scenario) string {
	b.Helper()
	claudetest.Binary(b) // skip before starting anything when the CLI is missing
	model := scriptedmodel.New(sc, nil)
	url, err := model.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { model.Close() })
	return url
}

// quietEnv is the environment of a project whose daemon never starts an
// agent. The daemon's start check still wants a CLI that is ready (found,
// logged in: an API key for a model that is nowhere) and agents as root
// allowed, as they would be; none runs.
func quietEnv(b *testing.B) []string {
	return append(modelEnv(b, "http://127.0.0.1:9"), "CTXGRAPHD_AGENT_ALLOW_ROOT=true")
}

func (p *benchProject) mustRun(args ...string) string {
	p.b.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		p.b.Fatalf("ctxgraphd %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, &out, &errOut)
	}
	return out.String()
}

// writeList replaces feature-list.json the way an editor saves: a new file
// renamed over the old one. It returns the moment of the rename, when the
// change becomes visible.
func (p *benchProject) writeList(features ...progress.Feature) time.Time {
	p.b.Helper()
	data := (&progress.List{Version: 1, Format: progress.FormatV1, Features: features}).Marshal()
	path := p.paths.Progress(progress.FeatureListFile)
	tmp := path + ".bench-tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		p.b.Fatal(err)
	}
	at := time.Now()
	if err := os.Rename(tmp, path); err != nil {
		p.b.Fatal(err)
	}
	return at
}

// openStore reads the state of record; the daemon must be down.
func (p *benchProject) openStore() *store.Store {
	p.b.Helper()
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		p.b.Fatal(err)
	}
	p.b.Cleanup(func() { st.Close() })
	return st
}

// benchDaemon is a `ctxgraphd run` in the background.
type benchDaemon struct {
	b   *testing.B
	cmd *exec.Cmd
	log *bytes.Buffer // read only after the process ended
}

func (p *benchProject) start(extra ...string) *benchDaemon {
	p.b.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, extra...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		p.b.Fatal(err)
	}
	d := &benchDaemon{b: p.b, cmd: cmd, log: &log}
	p.b.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return d
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// stop ends the daemon with SIGTERM, as systemd does, and checks it went
// down cleanly.
func (d *benchDaemon) stop() {
	d.b.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		d.b.Fatalf("daemon did not stop cleanly: %v\n%s", err, d.log)
	}
}

// mirrorWatcher follows session-state.json. The daemon replaces it
// atomically after every commit, so each event announces a complete new
// state, and waiting on it needs no polling.
type mirrorWatcher struct {
	b    *testing.B
	path string
	w    *fsnotify.Watcher
}

func watchMirror(b *testing.B, p *benchProject) *mirrorWatcher {
	b.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	if err := w.Add(p.paths.Progress()); err != nil {
		b.Fatal(err)
	}
	return &mirrorWatcher{b: b, path: p.paths.Progress(progress.SessionStateFile), w: w}
}

// wait returns the first state that satisfies cond, and when it was seen:
// the current one, or one the daemon writes within timeout.
func (m *mirrorWatcher) wait(what string, timeout time.Duration, cond func(progress.SessionState) bool) (progress.SessionState, time.Time) {
	m.b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last progress.SessionState
	check := func() bool {
		data, err := os.ReadFile(m.path)
		if err != nil {
			return false // not written yet
		}
		var s progress.SessionState
		if json.Unmarshal(data, &s) != nil {
			return false
		}
		last = s
		return cond(s)
	}
	if check() {
		return last, time.Now()
	}
	for {
		select {
		case ev := <-m.w.Events:
			if filepath.Base(ev.Name) == progress.SessionStateFile && ev.Has(fsnotify.Create|fsnotify.Write) && check() {
				return last, time.Now()
			}
		case err := <-m.w.Errors:
			m.b.Fatalf("watching session-state.json: %v", err)
		case <-deadline.C:
			m.b.Fatalf("timed out after %s waiting for %s; last session-state.json: %+v", timeout, what, last)
		}
	}
}

// isDone reports a session that has nothing left to do.
func isDone(s progress.SessionState) bool { return s.State == "done" }

// procSample is what /proc says of a process at one moment.
type procSample struct {
	at time.Time
	// cpuTicks is utime+stime of the whole process (threads that exited
	// included), in clock ticks.
	cpuTicks uint64
	// cpuNS and wakeups sum the live threads' schedstat: nanoseconds on a
	// CPU, and how many times a thread was put on one.
	cpuNS, wakeups uint64
	rssKB          uint64
	threads        int
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTick = 100

func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it. utime and stime are fields 14 and 15 of the line.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	s.cpuTicks = utime + stime

	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			s.rssKB, _ = strconv.ParseUint(fs[0], 10, 64)
		case "Threads":
			s.threads, _ = strconv.Atoi(fs[0])
		}
	}

	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return s, err
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		fs := strings.Fields(string(data))
		if len(fs) < 3 {
			continue
		}
		ns, _ := strconv.ParseUint(fs[0], 10, 64)
		n, _ := strconv.ParseUint(fs[2], 10, 64)
		s.cpuNS += ns
		s.wakeups += n
	}
	return s, nil
}

// percentile is the nearest-rank percentile q (0 < q ≤ 1) of ds, in
// milliseconds.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return millis(s[max(i, 0)])
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
