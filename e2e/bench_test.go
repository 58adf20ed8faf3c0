package e2e

// Benchmarks of ctxgraphd's performance goals that need the real binary
// (each names its goal): each reports its figures as custom metrics, next
// to a baseline measured in the same run, and never asserts a timing.
// `make bench` runs them without -race, so the ctxgraphd they drive is the
// one users get.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// loopResult is one whole loop: `ctxgraphd run --exit-when-done` from its
// start to its exit, and the claude runs it made, as the store recorded
// them.
type loopResult struct {
	wall   time.Duration // the daemon process, start to exit
	claude time.Duration // sum of the claude processes' own wall times
	spans  time.Duration // sum of the runs' StartedAt..EndedAt in the store
	// cpu is the CPU time of the daemon and everything it waited for
	// (claude, hooks, tests): less sensitive than wall time to what else
	// the machine runs.
	cpu  time.Duration
	runs int
	// Where the rest went: from the daemon's start to its first run,
	// between runs, and from the last run to the daemon's exit.
	startup, gaps, tail time.Duration
	// claudeCPU sums the claude processes' CPU time (store.Run.AgentCPU,
	// with their hooks, tools and MCP servers).
	claudeCPU time.Duration
	// tests is the time of the daemon's own runs of the features' tests
	// (judge.TestResult.Took: the jail and the test), testCPU their CPU
	// time, and checkouts the time of the throwaway checkouts they ran
	// on, as its log says (read only when the daemon logs JSON).
	tests, testCPU, checkouts time.Duration
	testRuns                  int
	// sweeps is the time of the regression sweeps (the other features'
	// tests a claim is held to, their checkouts and jails), sweepTests
	// that of their test runs alone (part of tests), from the same log;
	// sweepCPU is the sweeps' CPU time, checkouts included, and
	// sweepTestCPU that of their test runs alone (part of testCPU).
	sweeps, sweepTests     time.Duration
	sweepCPU, sweepTestCPU time.Duration
	sweepRuns              int
	// lastSweep is the part of sweeps that is the session's last sweep
	// (of the branch's tip, after the last claim: its log line names no
	// feature), lastSweepRuns its test runs.
	lastSweep     time.Duration
	lastSweepRuns int
	// hookCalls is how many hook requests the daemon answered (read
	// only when it logs at debug level).
	hookCalls int
	// list is the runs as the store recorded them, in the order they
	// started.
	list []store.Run
}

// wantStates is how sc ends with the default limits: a feature whose coding
// agent never passes is blocked, every other one is tested.
func wantStates(sc scriptedmodel.Scenario) string {
	var parts []string
	for _, f := range sc.Features {
		s := "tested"
		if f.Behavior == scriptedmodel.NeverPass {
			s = "blocked"
		}
		parts = append(parts, f.ID+"="+s)
	}
	return strings.Join(parts, " ")
}

// runLoop runs sc's whole loop on a fresh project and checks that it ended
// as it should. The benchmark timer runs only while the daemon does.
func runLoop(b *testing.B, modelURL string, sc scriptedmodel.Scenario, extraEnv ...string) loopResult {
	b.Helper()
	b.StopTimer()
	p := newBenchProject(b, append(modelEnv(b, modelURL), extraEnv...))
	cmd := exec.Command(binary, "run", "--exit-when-done")
	cmd.Dir, cmd.Env = p.dir, p.env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log

	b.StartTimer()
	start := time.Now()
	err := cmd.Run()
	end := time.Now()
	b.StopTimer()

	if err != nil {
		b.Fatalf("daemon: %v\n%s", err, &log)
	}
	l, _, err := progress.ReadFeatureList(p.paths.Progress())
	if err != nil {
		b.Fatal(err)
	}
	if got, want := states(l), wantStates(sc); got != want {
		b.Fatalf("the loop ended with %q, want %q\n%s", got, want, &log)
	}
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	runs, err := st.Runs()
	st.Close()
	if err != nil {
		b.Fatal(err)
	}
	if len(runs) == 0 {
		b.Fatal("the loop recorded no run")
	}
	slices.SortFunc(runs, func(x, y store.Run) int { return x.StartedAt.Compare(y.StartedAt) })
	r := loopResult{wall: end.Sub(start), runs: len(runs), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	for i, run := range runs {
		if run.Outcome == "interrupted" || run.EndedAt.IsZero() {
			b.Fatalf("run %s did not end by itself: %+v", run.ID, run)
		}
		if run.AgentWall <= 0 {
			b.Fatalf("run %s has no agent wall time", run.ID)
		}
		r.claude += run.AgentWall
		r.claudeCPU += run.AgentCPU
		r.spans += run.EndedAt.Sub(run.StartedAt)
		if i > 0 {
			r.gaps += run.StartedAt.Sub(runs[i-1].EndedAt)
		}
	}
	r.startup = runs[0].StartedAt.Sub(start)
	r.tail = end.Sub(runs[len(runs)-1].EndedAt)
	r.list = runs
	testRunsLogged(&r, log.Bytes())
	return r
}

// testRunsLogged adds up what a daemon's JSON log says of its own test
// runs.
func testRunsLogged(r *loopResult, log []byte) {
	seconds := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	// The CPU time of each test run, in order: a sweep's are the last of
	// them before its line.
	var testCPU []time.Duration
	for line := range bytes.Lines(log) {
		var l struct {
			Msg     string `json:"msg"`
			Path    string `json:"path"`
			Feature *string
			// Seconds, as zap writes durations.
			Took, CPU, Checkout float64
			TestsTook           float64 `json:"tests_took"`
			Tests               int
		}
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		switch l.Msg {
		case "the daemon's test run ended":
			r.tests += seconds(l.Took)
			r.testCPU += seconds(l.CPU)
			testCPU = append(testCPU, seconds(l.CPU))
			r.checkouts += seconds(l.Checkout)
			r.testRuns++
		case "control request":
			if l.Path == "/v1/hook" {
				r.hookCalls++
			}
		case "the regression sweep ended":
			r.sweeps += seconds(l.Took)
			r.sweepTests += seconds(l.TestsTook)
			r.sweepRuns += l.Tests
			r.sweepCPU += seconds(l.CPU)
			if l.Feature != nil && *l.Feature == "" {
				r.lastSweep += seconds(l.Took)
				r.lastSweepRuns += l.Tests
			}
			for _, c := range testCPU[max(0, len(testCPU)-l.Tests):] {
				r.sweepTestCPU += c
			}
		}
	}
}

// BenchmarkLoop is the daemon's overhead on a whole loop (goal: the loop
// takes at most 1.10× the sum of its claude runs). The scenario is the
// demo's: a feature tested at once, one tested on its retry (a resumed
// session), one depending on another, one blocked after three attempts.
//
// The claude time is each process's own wall time (store.Run.AgentWall,
// from its start to the end of its output). loop/span compares with the
// runs' spans in the store instead, which also hold the daemon's work
// around each run (committing it, judging it, re-running the test), so
// startup, gaps and tail are what remains outside every run.
func BenchmarkLoop(b *testing.B) {
	sc := scriptedmodel.DefaultScenario()
	url := startModel(b, sc)
	var sum loopResult
	for i := 0; i < b.N; i++ {
		r := runLoop(b, url, sc)
		sum.wall += r.wall
		sum.claude += r.claude
		sum.spans += r.spans
		sum.cpu += r.cpu
		sum.runs += r.runs
		sum.startup += r.startup
		sum.gaps += r.gaps
		sum.tail += r.tail
	}
	n := float64(b.N)
	b.ReportMetric(sum.wall.Seconds()/sum.claude.Seconds(), "loop/claude")
	b.ReportMetric(sum.wall.Seconds()/sum.spans.Seconds(), "loop/span")
	b.ReportMetric(sum.claude.Seconds()/n, "claude-s/op")
	b.ReportMetric(sum.cpu.Seconds()/n, "cpu-s/op")
	b.ReportMetric(float64(sum.runs)/n, "runs/op")
	b.ReportMetric(millis(sum.startup)/n, "startup-ms/op")
	b.ReportMetric(millis(sum.gaps)/n, "gaps-ms/op")
	b.ReportMetric(millis(sum.tail)/n, "exit-ms/op")
}

// BenchmarkLoopGates is what enforcing the gates costs on a whole loop
// (goal: at most 1.05× the loop with every gate off). Each iteration runs
// the loop both ways, in alternating order, so that both see the same
// machine. The hooks run either way; off gates decide nothing, and the
// daemon does not re-run a tester's test.
//
// on/off compares wall times, the goal's measure; cpu-on/off compares the
// CPU time of the whole process tree, which other work on a shared machine
// disturbs less. A loop lasts about half a minute: -benchtime 3x buys
// precision.
func BenchmarkLoopGates(b *testing.B) {
	sc := scriptedmodel.DefaultScenario()
	url := startModel(b, sc)
	var off []string
	for _, g := range config.GateNames {
		off = append(off, "CTXGRAPHD_GATES_"+strings.ToUpper(strings.ReplaceAll(g, "-", "_"))+"=off")
	}
	var on, offSum loopResult
	for i := 0; i < b.N; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, enforce := range order {
			if enforce {
				r := runLoop(b, url, sc)
				on.wall += r.wall
				on.cpu += r.cpu
			} else {
				r := runLoop(b, url, sc, off...)
				offSum.wall += r.wall
				offSum.cpu += r.cpu
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(on.wall.Seconds()/offSum.wall.Seconds(), "on/off")
	b.ReportMetric(on.wall.Seconds()/n, "on-s/op")
	b.ReportMetric(offSum.wall.Seconds()/n, "off-s/op")
	b.ReportMetric(on.cpu.Seconds()/offSum.cpu.Seconds(), "cpu-on/off")
}

// BenchmarkLoopConfinement is what confining the agents costs on a whole
// loop: each iteration runs the loop with Claude Code's sandbox (the
// default) and with sandbox.enabled=false, in alternating order, so that
// both see the same machine. loop/claude on each side is the daemon's
// overhead over its claude runs, BenchmarkLoop's measure, which must hold with
// confinement on; on/off is the price of the sandbox itself (bubblewrap and
// its proxies around every Bash call), which the claude runs pay.
func BenchmarkLoopConfinement(b *testing.B) {
	sc := scriptedmodel.DefaultScenario()
	url := startModel(b, sc)
	var on, off loopResult
	add := func(sum *loopResult, r loopResult) {
		sum.wall += r.wall
		sum.claude += r.claude
		sum.cpu += r.cpu
	}
	for i := 0; i < b.N; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, confined := range order {
			if confined {
				add(&on, runLoop(b, url, sc))
			} else {
				add(&off, runLoop(b, url, sc, "CTXGRAPHD_SANDBOX_ENABLED=false"))
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(on.wall.Seconds()/on.claude.Seconds(), "confined-loop/claude")
	b.ReportMetric(off.wall.Seconds()/off.claude.Seconds(), "unconfined-loop/claude")
	b.ReportMetric(on.wall.Seconds()/off.wall.Seconds(), "on/off")
	b.ReportMetric(on.wall.Seconds()/n, "confined-s/op")
	b.ReportMetric(off.wall.Seconds()/n, "unconfined-s/op")
}

// BenchmarkLoopOverhead is the cost of the honest path as the user sees it:
// the whole loop against a bare sequence of the same `claude -p` runs, with
// no daemon, no hooks, no sandbox and no MCP server, split per run into what
// each part costs (goal: the daemon's own share at most 0.15 s a run, the
// same at 40 features as at 3). The scenario is n honest features, each
// tested at its first attempt: an initializer, then a coder and a tester per
// feature.
//
// Each iteration runs, in rotating order so that all see the same machine:
//
//   - the loop as users get it (full);
//   - the loop with Claude Code's sandbox off (sandbox.enabled=false),
//     each of its runs right after its bare twin (testdata/benchclaude:
//     the same run, on a copy of the project as it stands, as a person
//     would type it), whose time is then taken out of the run's;
//   - the loop without the MCP server (--mcp-config taken away by
//     testdata/benchclaude, which writes the runs down);
//   - the loop without hooks (the "hooks" of --settings taken away; the
//     gates that live on what the hooks tell, hooks-live and
//     tested-needs-evidence, in warn or off, or no run would pass);
//   - right after the loop without MCP, the bare sequence: its runs again,
//     without --settings, one after the other, in a fresh project.
//
// The sandbox, the hooks and the MCP server act inside the claude process:
// each one's share is the sum of the claude processes' own wall times
// (store.Run.AgentWall) in the full loop less that in the loop without it,
// which the gates relaxed for the hooks do not touch (they change only what
// the daemon does between runs). From the daemon's log: test is its own
// runs of the feature's test (judge.TestResult.Took, before any code and
// at the verdict, the jail and the warm-up of its caches included), sweep the regression sweeps (every
// feature tested before, run again on the tree a claim would commit: n-1
// test runs, with their checkouts, for the n-th feature's claim). Neither
// is the daemon's overhead; both are reported beside it. between is the
// rest of the full loop outside its claude processes (start, snapshots,
// judging, checkouts, commits, exit). own is the daemon's share: the full
// loop less the bare runs, the sandbox, test and sweep; own-rest is what
// of it neither the hooks, the MCP server nor between explain (the runs'
// longer prompts, noise). Every figure is per run of the full loop, split
// within each iteration, and the median over iterations. The same split in
// CPU time (cpu-*: the daemon and every process it waited for, against the
// bare processes'; cpu-test is the feature's own test runs, cpu-sweep the
// sweeps whole, checkouts included, as the daemon measures them) moves less
// with what else the machine runs than wall time does, and so do the
// *-p50 shares: the median over the loop's runs of the difference between
// a run of the full loop and the same run of the other loop (or its bare
// replay), where the shares above are differences of sums that a burst of
// load on a few runs moves. own-p50, the goal's figure, is between plus the
// median difference between a run of the loop without the sandbox and its
// bare twin, run a moment before on the same machine: everything the daemon
// adds to a run (hooks, MCP tools, environment) with nothing to subtract; own-full-p50 reckons it
// from the full loop less the sandbox's median instead. hook-calls is how
// many hook processes a run of the full loop started that reached the
// daemon.
func BenchmarkLoopOverhead(b *testing.B) {
	for _, n := range []int{3, 40} {
		b.Run(fmt.Sprintf("features=%d", n), func(b *testing.B) { benchOverhead(b, n) })
	}
}

func benchOverhead(b *testing.B, n int) {
	sc := scriptedmodel.Scenario{Name: "honest"}
	for i := range n {
		sc.Features = append(sc.Features, scriptedmodel.FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: fmt.Sprintf("Feature %d", i+1), Behavior: scriptedmodel.Pass})
	}
	url := startModel(b, sc)
	claude, err := filepath.Abs(claudetest.Binary(b))
	if err != nil {
		b.Fatal(err)
	}
	wrapper := filepath.Join(b.TempDir(), "benchclaude")
	if out, err := exec.Command("go", "build", "-o", wrapper, "./testdata/benchclaude").CombinedOutput(); err != nil {
		b.Fatalf("building testdata/benchclaude: %v\n%s", err, out)
	}
	// JSON, at debug level: the daemon's test runs, sweeps and hook
	// requests are read off it.
	logged := func(env ...string) []string {
		return append([]string{"CTXGRAPHD_LOG_FORMAT=json", "CTXGRAPHD_LOG_LEVEL=debug"}, env...)
	}
	without := func(part string) []string {
		return logged("CTXGRAPHD_AGENT_COMMAND="+wrapper, "BENCH_CLAUDE="+claude, "BENCH_DROP="+part)
	}
	record := filepath.Join(b.TempDir(), "runs.jsonl")
	twins := b.TempDir()
	const full, noSandbox, noMCP, noHooks = 0, 1, 2, 3
	configs := []struct {
		name string
		env  []string
	}{
		full:      {"full", logged()},
		noSandbox: {"no-sandbox", append(without(""), "CTXGRAPHD_SANDBOX_ENABLED=false", "BENCH_TWIN="+twins)},
		noMCP:     {"no-mcp", append(without("mcp"), "BENCH_RECORD="+record)},
		noHooks:   {"no-hooks", append(without("hooks"), "CTXGRAPHD_GATES_HOOKS_LIVE=off", "CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENCE=warn")},
	}
	want := 2*n + 1
	// Each iteration is split on its own and the figures are the median
	// over iterations: one loop that met a burst of load elsewhere on the
	// machine moves them less.
	var names []string
	figures := map[string][]float64{}
	report := func(name string, v float64) {
		if _, ok := figures[name]; !ok {
			names = append(names, name)
		}
		figures[name] = append(figures[name], v)
	}
	for i := 0; i < b.N; i++ {
		rs := make([]loopResult, len(configs))
		var bare, bareCPU time.Duration
		var bareEach, twinEach []time.Duration
		for k := range configs {
			c := (i + k) % len(configs)
			os.Remove(record)
			os.Remove(filepath.Join(twins, "twins.jsonl"))
			r := runLoop(b, url, sc, configs[c].env...)
			if r.runs != want {
				// A run redone (a transient failure of a loaded
				// machine) is the loop's cost all the same; said.
				var outcomes []string
				for _, run := range r.list {
					outcomes = append(outcomes, run.ID+" "+run.Role+" "+run.Feature+" "+run.Outcome+" "+run.Failure)
				}
				b.Logf("%s: %d runs, not %d:\n%s", configs[c].name, r.runs, want, strings.Join(outcomes, "\n"))
			}
			rs[c] = r
			switch c {
			case noMCP:
				bare, bareCPU, bareEach = replayBare(b, url, sc, record, r.list)
			case noSandbox:
				twinEach = takeTwins(b, twins, &rs[c])
			}
		}
		per := func(d time.Duration) float64 { return d.Seconds() / float64(want) }
		f := rs[full]
		// Wall time: the full loop is the bare runs, Claude Code's
		// sandbox, the feature's own tests (their jail included), the
		// regression sweeps and the daemon's own share, which is the rest.
		sandbox := f.claude - rs[noSandbox].claude
		hooks, mcp := f.claude-rs[noHooks].claude, f.claude-rs[noMCP].claude
		tests := f.tests - f.sweepTests
		between := f.wall - f.claude - tests - f.sweeps
		own := f.wall - bare - sandbox - tests - f.sweeps
		report("loop/bare", f.wall.Seconds()/bare.Seconds())
		report("bare-s/run", per(bare))
		report("loop-s/run", per(f.wall))
		report("own-s/run", per(own))
		report("sandbox-s/run", per(sandbox))
		report("test-s/run", per(tests))
		report("sweep-s/run", per(f.sweeps))
		report("hooks-s/run", per(hooks))
		report("mcp-s/run", per(mcp))
		report("between-s/run", per(between))
		// (of which the daemon's start, to its first run, and its exit,
		// after its last: once a loop, whatever its length)
		report("start-exit-s/loop", (f.startup + f.tail).Seconds())
		report("own-rest-s/run", per(own-hooks-mcp-between))
		for c, r := range rs {
			report(configs[c].name+"-claude-s/run", per(r.claude))
		}
		// The same shares as the median, over the loop's runs, of the
		// difference between a run of the full loop and the same run of
		// the other (the bare replay of the same run): a burst of load
		// elsewhere on the machine moves a few runs, and a sum, but not
		// the median. own-p50 is the daemon's share so reckoned, between
		// (measured within the full loop) included.
		if h, ok := pairedMedian(f.list, rs[noHooks].list, nil); ok {
			report("hooks-p50-s/run", h.Seconds())
		}
		if m, ok := pairedMedian(f.list, rs[noMCP].list, nil); ok {
			report("mcp-p50-s/run", m.Seconds())
		}
		d, okSandbox := pairedMedian(f.list, rs[noSandbox].list, nil)
		if okSandbox {
			report("sandbox-p50-s/run", d.Seconds())
		}
		// own-p50 pairs each run of the loop without Claude Code's sandbox
		// with its bare twin, made a moment before on the same machine:
		// the same run with and without the daemon's hooks, MCP tools and
		// environment, and nothing of the sandbox to take away (the loop
		// with it differs from this one by the sandbox alone). A replay
		// made after the whole loop meets another machine: between two
		// identical loops its median moved ten times as much. own-full-p50 reckons the same from the
		// full loop, less the sandbox's own median, which a median of
		// differences does not subtract exactly.
		if o, ok := pairedMedian(rs[noSandbox].list, nil, twinEach); ok {
			report("own-p50-s/run", o.Seconds()+per(between))
		}
		if o, ok := pairedMedian(f.list, rs[noMCP].list, bareEach); ok && okSandbox {
			report("own-full-p50-s/run", (o-d).Seconds()+per(between))
		}
		// CPU time, the same way: the feature's own tests (the jail's
		// processes) and the sweeps (their checkouts and jails, as the
		// daemon measured them) are not the daemon's overhead.
		cpuSandbox := f.claudeCPU - rs[noSandbox].claudeCPU
		cpuTests := f.testCPU - f.sweepTestCPU
		report("cpu-loop/bare", f.cpu.Seconds()/bareCPU.Seconds())
		report("cpu-bare-s/run", per(bareCPU))
		report("cpu-own-s/run", per(f.cpu-bareCPU-cpuSandbox-cpuTests-f.sweepCPU))
		report("cpu-sandbox-s/run", per(cpuSandbox))
		report("cpu-test-s/run", per(cpuTests))
		report("cpu-sweep-s/run", per(f.sweepCPU))
		report("cpu-hooks-s/run", per(f.claudeCPU-rs[noHooks].claudeCPU))
		report("cpu-mcp-s/run", per(f.claudeCPU-rs[noMCP].claudeCPU))
		report("cpu-between-s/run", per(f.cpu-f.claudeCPU-cpuTests-f.sweepCPU))
		report("hook-calls/run", float64(f.hookCalls)/float64(want))
		report("tests/op", float64(f.testRuns-f.sweepRuns))
		report("sweep-tests/op", float64(f.sweepRuns))
	}
	for _, name := range names {
		b.ReportMetric(median(figures[name]), name)
	}
}

// pairedMedian is the median over runs of full[i].AgentWall less the
// wall time of the same run in the other loop: other[i].AgentWall, or
// otherWall[i] when otherWall is not nil (its bare replay; 0 for a run not
// replayed). Only runs that are the same in both loops (role, feature,
// attempt, both ended well) count; ok is false when the loops' runs differ
// in number or order. With other nil, otherWall is a replay of full's own
// runs.
func pairedMedian(full, other []store.Run, otherWall []time.Duration) (time.Duration, bool) {
	if other == nil {
		other = full // otherWall is a replay of full's own runs
	}
	if len(full) != len(other) || (otherWall != nil && len(otherWall) != len(other)) {
		return 0, false
	}
	var ds []float64
	for i := range full {
		a, o := full[i], other[i]
		if a.Role != o.Role || a.Feature != o.Feature || a.Attempt != o.Attempt {
			return 0, false
		}
		w := o.AgentWall
		if otherWall != nil {
			w = otherWall[i]
		}
		if a.Outcome != "ok" || o.Outcome != "ok" || w == 0 {
			continue
		}
		ds = append(ds, float64(a.AgentWall-w))
	}
	if len(ds) == 0 {
		return 0, false
	}
	return time.Duration(median(ds)), true
}

// takeTwins reads what benchclaude wrote of the bare twins of r's runs
// (BENCH_TWIN: dir/twins.jsonl, a line a run in the order they started),
// takes each twin's time and CPU out of its run's, so that r holds the
// loop's runs alone, and returns each twin's wall time in the place of its
// run (0 for one that failed).
func takeTwins(b *testing.B, dir string, r *loopResult) []time.Duration {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "twins.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	lines := slices.Collect(bytes.Lines(data))
	if len(lines) != len(r.list) {
		b.Fatalf("%d bare twins for %d runs", len(lines), len(r.list))
	}
	each := make([]time.Duration, len(lines))
	for i, line := range lines {
		var t struct {
			Wall  time.Duration `json:"wall_ns"`
			OK    bool          `json:"ok"`
			Delay time.Duration `json:"delay_ns"`
			CPU   time.Duration `json:"cpu_ns"`
		}
		if err := json.Unmarshal(line, &t); err != nil {
			b.Fatalf("twins.jsonl: %v", err)
		}
		run := &r.list[i]
		run.AgentWall -= t.Delay
		run.AgentCPU -= t.CPU
		r.claude -= t.Delay
		r.claudeCPU -= t.CPU
		r.wall -= t.Delay
		r.cpu -= t.CPU
		if t.OK {
			each[i] = t.Wall
		}
	}
	return each
}

// median is the middle of vs (the mean of the two middle ones when there
// is an even number of them).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// replayBare runs again, as a person would type them, the claude runs
// benchclaude wrote down that ended well (ok, in runs): one after the
// other, in a fresh project with a fresh Claude Code home, without
// --settings (no hooks, no sandbox) and without --mcp-config, no daemon
// anywhere.
// It returns the sum of their wall times and of their CPU times, and each
// one's wall time in the place of its run in runs (0 for those not
// replayed), and checks that they did the loop's work: every feature
// tested.
func replayBare(b *testing.B, modelURL string, sc scriptedmodel.Scenario, record string, runs []store.Run) (wall, cpu time.Duration, each []time.Duration) {
	b.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		b.Fatal(err)
	}
	lines := slices.Collect(bytes.Lines(data))
	if len(lines) != len(runs) {
		b.Fatalf("%s holds %d runs, the store %d", record, len(lines), len(runs))
	}
	p := newBenchProject(b, modelEnv(b, modelURL))
	claude := claudetest.Binary(b)
	each = make([]time.Duration, len(runs))
	for i, line := range lines {
		if runs[i].Outcome != "ok" {
			continue
		}
		var rec struct {
			Dir  string   `json:"dir"`
			Args []string `json:"args"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			b.Fatalf("%s: %v", record, err)
		}
		var args []string
		for i := 0; i < len(rec.Args); i++ {
			if rec.Args[i] == "--settings" || rec.Args[i] == "--mcp-config" {
				i++
				continue
			}
			args = append(args, strings.ReplaceAll(rec.Args[i], rec.Dir, p.dir))
		}
		cmd := exec.Command(claude, args...)
		cmd.Dir, cmd.Env = p.dir, p.env
		var errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errOut
		start := time.Now()
		err := cmd.Run()
		each[i] = time.Since(start)
		wall += each[i]
		if err != nil {
			b.Fatalf("bare claude run: %v\n%s", err, &errOut)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	l, _, err := progress.ReadFeatureList(p.paths.Progress())
	if err != nil {
		b.Fatal(err)
	}
	if got, want := states(l), wantStates(sc); got != want {
		b.Fatalf("the bare runs ended with %q, want %q", got, want)
	}
	return wall, cpu, each
}

// BenchmarkFeatureListChange is the time from a change of feature-list.json
// to the transition it causes (goal: ≤ 50 ms, the watcher's debounce
// included). The daemon is done; each iteration adds a feature (waiting on a
// blocked one, so that no agent starts) or takes it away, with an editor's
// rename, and waits until session-state.json shows the daemon's decision.
//
// transition-ms is up to the done → next transition as the store recorded
// it; reaction-ms is up to the moment this process saw the new state in
// session-state.json, through fsnotify.
func BenchmarkFeatureListChange(b *testing.B) {
	p := newBenchProject(b, quietEnv(b))
	held := progress.Feature{ID: "F-001", Title: "held back", Status: progress.Blocked}
	waiting := progress.Feature{ID: "F-002", Title: "waits on F-001", Status: progress.Pending, DependsOn: []string{"F-001"}}
	p.writeList(held)
	m := watchMirror(b, p)
	d := p.start()
	m.wait("the daemon to take the list", time.Minute, isDone)

	changed := make([]time.Time, 0, b.N)
	reaction := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A new description every time: the daemon ignores a file that
		// matches what it wrote itself.
		held.Description = fmt.Sprintf("edit %d", i)
		want := "every feature is tested or blocked"
		var at time.Time
		if i%2 == 0 {
			at = p.writeList(held, waiting)
			want = "F-002 waits on F-001 (blocked)"
		} else {
			at = p.writeList(held)
		}
		_, seen := m.wait("the daemon's decision", 30*time.Second, func(s progress.SessionState) bool {
			return s.State == "done" && s.Message == want && s.UpdatedAt.After(at)
		})
		changed = append(changed, at)
		reaction = append(reaction, seen.Sub(at))
	}
	b.StopTimer()
	d.stop()

	ts, err := p.openStore().Transitions()
	if err != nil {
		b.Fatal(err)
	}
	transition := make([]time.Duration, 0, len(changed))
	for i, at := range changed {
		j := slices.IndexFunc(ts, func(t store.Transition) bool {
			return t.From == "done" && t.Reason == "feature list changed" && !t.Time.Before(at)
		})
		if j < 0 {
			b.Fatalf("change %d (at %s) caused no transition out of done", i, at.Format(time.RFC3339Nano))
		}
		transition = append(transition, ts[j].Time.Sub(at))
		ts = ts[j+1:]
	}
	b.ReportMetric(percentile(transition, 0.5), "transition-ms-p50")
	b.ReportMetric(percentile(transition, 0.95), "transition-ms-p95")
	b.ReportMetric(percentile(reaction, 0.5), "reaction-ms-p50")
	b.ReportMetric(percentile(reaction, 0.95), "reaction-ms-p95")
	b.ReportMetric(millis(config.Default().Limits.Debounce), "debounce-ms")
}

// BenchmarkIdleDaemon is what a daemon with nothing to do costs (goals:
// ~0 % CPU, no polling; RSS ≤ 30 MB). The daemon first runs a small loop
// with the real CLI, so that it is measured as it stays after work, then
// each iteration watches it for a few seconds through /proc.
func BenchmarkIdleDaemon(b *testing.B) {
	const window = 3 * time.Second
	sc := scriptedmodel.Scenario{Name: "idle", Features: []scriptedmodel.FeatureScript{{ID: "F-001", Title: "Greeting", Behavior: scriptedmodel.Pass}}}
	url := startModel(b, sc)
	p := newBenchProject(b, modelEnv(b, url))
	m := watchMirror(b, p)
	d := p.start()
	m.wait("the loop to finish", 5*time.Minute, func(s progress.SessionState) bool {
		return isDone(s) && s.Features.Tested == 1
	})
	// Let what the loop left behind (a GC cycle, the scavenger) finish:
	// idle is the state the daemon stays in.
	time.Sleep(time.Second)

	var cpuTicks, cpuNS, wakeups uint64
	var elapsed time.Duration
	var last procSample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before, err := readProc(d.pid())
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(window) // the measurement window, not a synchronisation
		after, err := readProc(d.pid())
		if err != nil {
			b.Fatal(err)
		}
		cpuTicks += after.cpuTicks - before.cpuTicks
		cpuNS += after.cpuNS - before.cpuNS
		wakeups += after.wakeups - before.wakeups
		elapsed += after.at.Sub(before.at)
		last = after
	}
	b.StopTimer()
	d.stop()
	sec := elapsed.Seconds()
	b.ReportMetric(100*float64(cpuTicks)/clockTick/sec, "cpu-%")
	b.ReportMetric(float64(cpuNS)/1e3/sec, "cpu-us/s")
	b.ReportMetric(float64(wakeups)/sec, "wakeups/s")
	b.ReportMetric(float64(last.rssKB)/1024, "rss-MB")
	b.ReportMetric(float64(last.threads), "threads")
}

// BenchmarkHook is the hook round trip (goals: median at most 2× a minimal
// Go program that reads the same payload, with the daemon up and with it
// down, and at least 10× faster than a Python hook doing the same check,
// all measured in the same run).
//
// process/*: `ctxgraphd-hook pre-tool-use`, the lean binary the daemon's
// runs call, as Claude Code runs it: payload on stdin, daemon up. In the
// same iteration: `ctxgraphd hook pre-tool-use` (the main binary, as
// interactive sessions' hooks run it), testdata/pretooluse_hook.py (the
// same rule and the same output, run by the real interpreter, not a version
// manager's shim), and two floors: /bin/true (any process) and
// testdata/gofloor (any Go program that reads its stdin, built as the hook
// is). allow is the common case; deny also records a violation. socket/* is
// the daemon's share: the same question over the socket from this process.
// decide/* is the gates' share: the decision in process. down/*: the lean
// hook once the daemon has stopped, deciding alone from the files it left
// (the feature list, the gates' record, the spool, which each iteration
// starts empty, as a run's first call after the daemon went down finds
// it), beside the same floor; it must decide as the daemon did.
func BenchmarkHook(b *testing.B) {
	python := pythonInterpreter(b)
	script, err := filepath.Abs(filepath.Join("testdata", "pretooluse_hook.py"))
	if err != nil {
		b.Fatal(err)
	}
	goFloor := filepath.Join(b.TempDir(), "gofloor")
	// Built as the hook is (`make build`), so that the ratio compares the
	// hook's own start-up and work, not build flags.
	build := exec.Command("go", append(append([]string{"build", "-o", goFloor}, releaseBuild...), "./testdata/gofloor")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building testdata/gofloor: %v\n%s", err, out)
	}
	lean := filepath.Join(filepath.Dir(binary), "ctxgraphd-hook")
	p := newBenchProject(b, quietEnv(b))
	p.writeList(progress.Feature{ID: "F-001", Title: "Greeting", Status: progress.Blocked})
	m := watchMirror(b, p)
	d := p.start()
	m.wait("the daemon to take the list", time.Minute, isDone)

	actor := gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "r-bench"}
	hookEnv := append(slices.Clip(p.env),
		"CLAUDE_PROJECT_DIR="+p.dir,
		"CTXGRAPH_SOCKET="+p.paths.Socket,
		"CTXGRAPH_AGENT="+actor.Role,
		"CTXGRAPH_FEATURE="+actor.Feature,
		"CTXGRAPH_RUN="+actor.Run,
	)
	cases := []struct {
		name, path string
		deny       bool
	}{
		{"allow", filepath.Join(p.dir, "src", "greeting.txt"), false},
		{"deny", p.paths.Progress(progress.SessionStateFile), true},
	}
	for _, c := range cases {
		payload := preToolUseWrite(p.dir, c.path)

		b.Run("process/"+c.name, func(b *testing.B) {
			var ours, main, theirs, anyExec, anyGo []time.Duration
			for i := 0; i < b.N; i++ {
				out, d := runHookProcess(b, hookEnv, payload, lean, "pre-tool-use")
				mainOut, mainD := runHookProcess(b, hookEnv, payload, binary, "hook", "pre-tool-use")
				pyOut, pyD := runHookProcess(b, hookEnv, payload, python, script)
				_, trueD := runHookProcess(b, hookEnv, nil, "/bin/true")
				_, goD := runHookProcess(b, hookEnv, payload, goFloor)
				if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(pyOut)) || !bytes.Equal(out, mainOut) {
					b.Fatalf("the hooks disagree on %s:\nctxgraphd-hook: %s\nctxgraphd hook: %s\npython:    %s", c.path, out, mainOut, pyOut)
				}
				if got := bytes.Contains(out, []byte(`"deny"`)); got != c.deny {
					b.Fatalf("denied %v, want %v: %s", got, c.deny, out)
				}
				ours, main, theirs = append(ours, d), append(main, mainD), append(theirs, pyD)
				anyExec, anyGo = append(anyExec, trueD), append(anyGo, goD)
			}
			b.ReportMetric(percentile(ours, 0.5), "hook-ms-p50")
			b.ReportMetric(percentile(ours, 0.95), "hook-ms-p95")
			b.ReportMetric(percentile(main, 0.5), "main-binary-ms-p50")
			b.ReportMetric(percentile(theirs, 0.5), "python-ms-p50")
			b.ReportMetric(percentile(anyExec, 0.5), "exec-floor-ms-p50")
			b.ReportMetric(percentile(anyGo, 0.5), "go-floor-ms-p50")
			b.ReportMetric(percentile(ours, 0.5)/percentile(anyGo, 0.5), "hook/go-floor")
			b.ReportMetric(percentile(theirs, 0.5)/percentile(ours, 0.5), "python/hook")
		})

		b.Run("socket/"+c.name, func(b *testing.B) {
			// No run token: the daemon takes the question as a person's
			// interactive session's, which the session-state rule holds
			// too.
			req := control.HookRequest{Event: "pre-tool-use", Payload: payload}
			for i := 0; i < b.N; i++ {
				// A client per question, as each hook process has.
				resp, err := control.NewClient(p.paths.Socket).Hook(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				if (resp.Decision != nil) != c.deny {
					b.Fatalf("decision %+v, want deny %v", resp.Decision, c.deny)
				}
			}
		})

		b.Run("decide/"+c.name, func(b *testing.B) {
			state := gates.State{ProjectDir: p.paths.Dir, Protected: []string{p.paths.StateDir}}
			for i := 0; i < b.N; i++ {
				pl, err := gates.ParsePayload("pre-tool-use", payload)
				if err != nil {
					b.Fatal(err)
				}
				out := gates.Render(pl.Event, gates.PreToolUse(gates.Modes{}, actor, state, pl))
				if (out != nil) != c.deny {
					b.Fatalf("decision %s, want deny %v", out, c.deny)
				}
			}
		})
	}

	d.stop()
	spooled := filepath.Join(p.paths.StateDir, spool.FileName)
	for _, c := range cases {
		payload := preToolUseWrite(p.dir, c.path)
		b.Run("down/"+c.name, func(b *testing.B) {
			var ours, anyGo []time.Duration
			for i := 0; i < b.N; i++ {
				if err := os.Remove(spooled); err != nil && !errors.Is(err, fs.ErrNotExist) {
					b.Fatal(err)
				}
				out, d := runHookProcess(b, hookEnv, payload, lean, "pre-tool-use")
				_, goD := runHookProcess(b, hookEnv, payload, goFloor)
				if got := bytes.Contains(out, []byte(`"deny"`)); got != c.deny {
					b.Fatalf("deciding alone, denied %v, want %v as the daemon: %s", got, c.deny, out)
				}
				if _, err := os.Stat(spooled); err != nil {
					b.Fatalf("the hook deciding alone spooled nothing for the daemon: %v", err)
				}
				ours, anyGo = append(ours, d), append(anyGo, goD)
			}
			b.ReportMetric(percentile(ours, 0.5), "hook-ms-p50")
			b.ReportMetric(percentile(ours, 0.95), "hook-ms-p95")
			b.ReportMetric(percentile(anyGo, 0.5), "go-floor-ms-p50")
			b.ReportMetric(percentile(ours, 0.5)/percentile(anyGo, 0.5), "hook/go-floor")
		})
	}
}

// preToolUseWrite is the payload Claude Code gives a PreToolUse hook for a
// Write of path.
func preToolUseWrite(cwd, path string) []byte {
	return fmt.Appendf(nil, `{"session_id":"81e53e74-7fe6-494a-9e0d-f4d6e994a684","transcript_path":"/tmp/transcript.jsonl",`+
		`"cwd":%q,"permission_mode":"bypassPermissions","hook_event_name":"PreToolUse","tool_name":"Write",`+
		`"tool_input":{"file_path":%q,"content":"Hello, world\n"},"tool_use_id":"toolu_01"}`, cwd, path)
}

// runHookProcess runs a hook the way Claude Code does: payload on stdin,
// decision on stdout. It returns the output and the wall time.
func runHookProcess(b *testing.B, env []string, payload []byte, name string, args ...string) ([]byte, time.Duration) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(payload)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, &errOut)
	}
	return out.Bytes(), d
}

// pythonInterpreter finds the python3 on PATH and, through it, the real
// interpreter: a version manager's shim would add its own start-up to the
// baseline.
func pythonInterpreter(b *testing.B) string {
	b.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not on PATH: no baseline for the hook")
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		b.Fatalf("python3: %v", err)
	}
	exe := strings.TrimSpace(string(out))
	if _, err := os.Stat(exe); err != nil {
		b.Fatalf("python3 reports its interpreter as %q: %v", exe, err)
	}
	return exe
}
