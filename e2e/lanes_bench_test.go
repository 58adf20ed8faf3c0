package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// lanesTurns are how long the scripted model of BenchmarkLanes thinks a
// turn, one sub-benchmark each: a real model takes seconds, during which
// lanes overlap; a model that answered at once would leave nothing but the
// CLI's and the daemon's own CPU to overlap, on a machine of two cores.
// At 300 ms the four CLIs' own CPU still bounds the ratio on two cores;
// at 600 ms the runs wait on the model more than on the CPU, as real
// ones do.
var lanesTurns = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}

// lanesPoll is how often BenchmarkLanes asks the daemon for its status
// and reads its memory while a night runs.
const lanesPoll = 100 * time.Millisecond

// lanesNight is one whole night of BenchmarkLanes, as measured from
// outside the daemon.
type lanesNight struct {
	wall time.Duration // the daemon process, start to exit
	// status are the times the daemon took to answer GET /v1/status over
	// its socket (control.Client.Status), and ctl those of a whole `ctl
	// status --json` process, each counted only while the status showed
	// busy: at least two lanes' runs in flight (one run, at parallel 1).
	status, ctl []time.Duration
	// hwmKB is the daemon's peak resident set (VmHWM) at the last reading
	// before it exited.
	hwmKB uint64
	// laneKB is, at the reading with the most lanes, the size on disk of
	// a lane's directory (the average over the lanes then).
	laneKB   float64
	lanesMax int     // the most lanes with a run in flight at once
	inFlight float64 // the runs' spans summed, over wall: runs in flight on average
	runs     int
	// agent is the claude processes' own wall times summed
	// (store.Run.AgentWall), around the rest of the runs' spans: the
	// daemon's work on each run (its start, judging it, its tests) and
	// the wait of a run that ended for the job in flight to end.
	agent, around time.Duration
	// cpu is the CPU time of the daemon and of everything it waited for
	// (the claude processes, hooks, tests); agentCPU that of the claude
	// processes and what they ran (store.Run.AgentCPU), of it.
	cpu, agentCPU time.Duration
}

// BenchmarkLanes is what working features at once in lanes buys (goals,
// with limits.parallel 4 against 1: wall time at most 0.40 of it, ideally
// 0.25; `ctl status` answers within 50 ms while four runs are in flight;
// the daemon's RSS with four lanes at most 60 MB; the disk a lane takes,
// reported). The project has eight independent features (the scripted
// initializer gives each a scope of its own), each coded right at its
// first attempt, and a scripted model that thinks each of lanesTurns a
// turn (a sub-benchmark each, turn=300ms and turn=600ms).
// Each iteration runs the whole night with limits.parallel 1 and with 4,
// in alternating order, so that both see the same machine.
//
// Figures: parallel1-s/op and parallel4-s/op are the nights' wall times,
// parallel4/parallel1 their ratio, the goal's measure. While a night
// runs, its daemon is asked for its status every lanesPoll over its
// socket (and every fifth time with a `ctl status --json` process), at
// both parallelisms so that both nights carry the same load:
// status-ms-* and ctl-status-ms-* are the median and 95th percentile
// at parallel 4 over the answers given while at least two lanes had a run
// in flight, status1-ms-p95 the same at parallel 1 while a run was in
// flight. rss-mb-max (rss1-mb-max at parallel 1) is the daemon's peak
// resident set, VmHWM, read as often. lane-disk-kb is the size on disk
// (allocated blocks, as du counts) of a lane's directory,
// <state home>/ctxgraphd/lanes/<project id>/<feature> (its clone, with its
// git directory, and the daemon's private index beside it), the average
// over the lanes at the reading with the most of them. in-flight-mean is the runs' spans (the store's StartedAt to
// EndedAt) summed over wall time: how many runs were in flight on
// average, at most 4; lanes-max the most lanes the status showed at once.
// Where the time went, at parallel 1 and 4: agent1-s/run and agent4-s/run
// are a claude process's own wall time (store.Run.AgentWall; four at once
// share the machine's cores), around1-s/run and around4-s/run the rest of
// a run's span (the daemon's work on it, and a run that ended waiting for
// the daemon's job in flight), cpu1-s/op and cpu4-s/op the CPU time of the
// daemon and of everything it waited for, and runs4/op the runs at
// parallel 4 (17 when every feature passes at its first attempt; a run
// that failed is logged). With BENCH_LANES_LOGS set to a directory, each
// daemon's JSON log is written there.
// A night lasts half a minute to a minute: -benchtime 1x is the usual.
func BenchmarkLanes(b *testing.B) {
	for _, turn := range lanesTurns {
		b.Run("turn="+turn.String(), func(b *testing.B) { benchLanes(b, turn) })
	}
}

func benchLanes(b *testing.B, turn time.Duration) {
	const features = 8
	sc := scriptedmodel.Scenario{Name: "lanes", TurnLatencyMS: int(turn / time.Millisecond)}
	for i := range features {
		sc.Features = append(sc.Features, scriptedmodel.FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: fmt.Sprintf("Feature %d", i+1), Behavior: scriptedmodel.Pass})
	}
	url := startModel(b, sc)
	var one, four []lanesNight
	for i := 0; i < b.N; i++ {
		order := []int{1, 4}
		if i%2 == 1 {
			order = []int{4, 1}
		}
		for _, n := range order {
			r := runLanesNight(b, url, sc, n)
			if n == 1 {
				one = append(one, r)
			} else {
				four = append(four, r)
			}
		}
	}
	var wall1, wall4 time.Duration
	var status, ctl, status1 []time.Duration
	var hwm, hwm1 uint64
	var laneKB, inFlight float64
	lanesMax := 0
	var agent1, agent4, around1, around4, cpu1, cpu4, agentCPU1, agentCPU4 time.Duration
	runs1, runs4 := 0, 0
	for _, r := range one {
		wall1 += r.wall
		agent1, around1, cpu1, runs1 = agent1+r.agent, around1+r.around, cpu1+r.cpu, runs1+r.runs
		agentCPU1 += r.agentCPU
		status1 = append(status1, r.status...)
		hwm1 = max(hwm1, r.hwmKB)
	}
	for _, r := range four {
		wall4 += r.wall
		agent4, around4, cpu4, runs4 = agent4+r.agent, around4+r.around, cpu4+r.cpu, runs4+r.runs
		agentCPU4 += r.agentCPU
		status, ctl = append(status, r.status...), append(ctl, r.ctl...)
		hwm = max(hwm, r.hwmKB)
		laneKB = max(laneKB, r.laneKB)
		inFlight += r.inFlight / float64(len(four))
		lanesMax = max(lanesMax, r.lanesMax)
	}
	n := float64(b.N)
	b.ReportMetric(wall4.Seconds()/wall1.Seconds(), "parallel4/parallel1")
	b.ReportMetric(wall1.Seconds()/n, "parallel1-s/op")
	b.ReportMetric(wall4.Seconds()/n, "parallel4-s/op")
	b.ReportMetric(percentile(status, 0.5), "status-ms-p50")
	b.ReportMetric(percentile(status, 0.95), "status-ms-p95")
	b.ReportMetric(percentile(ctl, 0.5), "ctl-status-ms-p50")
	b.ReportMetric(percentile(ctl, 0.95), "ctl-status-ms-p95")
	b.ReportMetric(percentile(status1, 0.95), "status1-ms-p95")
	b.ReportMetric(float64(len(status))/n, "status-samples/op")
	b.ReportMetric(float64(hwm)/1024, "rss-mb-max")
	b.ReportMetric(float64(hwm1)/1024, "rss1-mb-max")
	b.ReportMetric(laneKB, "lane-disk-kb")
	b.ReportMetric(inFlight, "in-flight-mean")
	b.ReportMetric(float64(lanesMax), "lanes-max")
	b.ReportMetric(agent1.Seconds()/float64(runs1), "agent1-s/run")
	b.ReportMetric(agent4.Seconds()/float64(runs4), "agent4-s/run")
	b.ReportMetric(around1.Seconds()/float64(runs1), "around1-s/run")
	b.ReportMetric(around4.Seconds()/float64(runs4), "around4-s/run")
	b.ReportMetric(cpu1.Seconds()/n, "cpu1-s/op")
	b.ReportMetric(cpu4.Seconds()/n, "cpu4-s/op")
	b.ReportMetric(agentCPU1.Seconds()/n, "agent-cpu1-s/op")
	b.ReportMetric(agentCPU4.Seconds()/n, "agent-cpu4-s/op")
	b.ReportMetric(float64(runs4)/n, "runs4/op")
}

// runLanesNight runs sc's whole night on a fresh project with
// limits.parallel set to parallel, watching the daemon as it goes, and
// checks that every feature ended tested. The benchmark timer runs only
// while the daemon does.
func runLanesNight(b *testing.B, modelURL string, sc scriptedmodel.Scenario, parallel int) lanesNight {
	b.Helper()
	b.StopTimer()
	p := newBenchProject(b, append(modelEnv(b, modelURL),
		"CTXGRAPHD_LIMITS_PARALLEL="+strconv.Itoa(parallel),
		"CTXGRAPHD_LOG_FORMAT=json"))
	lanesDir := filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)
	client := control.NewClient(p.paths.Socket)
	cmd := exec.Command(binary, "run", "--exit-when-done")
	cmd.Dir, cmd.Env = p.dir, p.env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.WaitDelay = leftoverDelay

	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var r lanesNight
	busy := min(parallel, 2) // runs in flight for a status answer to count
	mostLanes := 0
	tick := time.NewTicker(lanesPoll)
	var err error
watch:
	for i := 0; ; i++ {
		select {
		case err = <-exited:
			break watch
		case <-tick.C:
		}
		if hwm, ok := vmHWM(cmd.Process.Pid); ok {
			r.hwmKB = hwm
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		asked := time.Now()
		st, serr := client.Status(ctx)
		took := time.Since(asked)
		cancel()
		if serr != nil {
			continue // not up yet, or gone
		}
		inFlight := len(st.Lanes)
		if st.Current != nil {
			inFlight++
		}
		r.lanesMax = max(r.lanesMax, len(st.Lanes))
		if inFlight < busy {
			continue
		}
		r.status = append(r.status, took)
		if i%5 == 0 {
			asked := time.Now()
			ctlCmd := exec.Command(binary, "ctl", "status", "--json")
			ctlCmd.Dir, ctlCmd.Env = p.dir, p.env
			if out, err := ctlCmd.Output(); err == nil && bytes.Contains(out, []byte(`"state"`)) {
				r.ctl = append(r.ctl, time.Since(asked))
			}
		}
		if parallel > 1 && len(st.Lanes) > mostLanes {
			if lane, n := laneDisk(lanesDir); n > 0 {
				mostLanes = len(st.Lanes)
				r.laneKB = lane
			}
		}
	}
	tick.Stop()
	r.wall = time.Since(start)
	b.StopTimer()

	if err != nil {
		b.Fatalf("daemon at parallel %d: %v\n%s", parallel, err, &log)
	}
	runs, spans := p.nightEnded(b, sc, fmt.Sprintf("at parallel %d", parallel), &log)
	for _, run := range runs {
		r.agent += run.AgentWall
		r.agentCPU += run.AgentCPU
	}
	r.around = spans - r.agent
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.runs = len(runs)
	if dir := os.Getenv("BENCH_LANES_LOGS"); dir != "" {
		name := filepath.Join(dir, fmt.Sprintf("lanes-parallel%d-%s.log", parallel, start.Format("150405")))
		if err := os.WriteFile(name, log.Bytes(), 0o644); err != nil {
			b.Error(err)
		}
	}
	r.inFlight = spans.Seconds() / r.wall.Seconds()
	if parallel > 1 && r.lanesMax < 2 {
		b.Errorf("at parallel %d the status never showed two lanes at once (%d samples)", parallel, len(r.status))
	}
	b.Logf("parallel %d: %.1f s, %d runs, %.2f in flight on average, %d status answers while busy",
		parallel, r.wall.Seconds(), r.runs, r.inFlight, len(r.status))
	return r
}

// vmHWM reads a process's peak resident set, in KB.
func vmHWM(pid int) (uint64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// laneDisk is the average size on disk, in KB, of the lanes'
// directories in lanesDir, and how many there were.
func laneDisk(lanesDir string) (lane float64, n int) {
	entries, err := os.ReadDir(lanesDir)
	if err != nil {
		return 0, 0
	}
	var total uint64
	for _, e := range entries {
		if e.IsDir() {
			total += diskUsage(filepath.Join(lanesDir, e.Name()))
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(total) / 1024 / float64(n), n
}

// diskUsage is what du counts under dir: the blocks allocated to every
// file and directory, each inode once. A file removed during the walk is
// skipped.
func diskUsage(dir string) uint64 {
	var total uint64
	seen := map[uint64]bool{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		total += uint64(st.Blocks) * 512
		return nil
	})
	return total
}

// nightEnded checks that p's night (where: which, for the messages) ended
// with every feature of sc as sc wants it, logs each run that did not
// end ok, and returns the runs and their spans summed. log is the
// daemon's, shown when it did not.
func (p *benchProject) nightEnded(b *testing.B, sc scriptedmodel.Scenario, where string, log fmt.Stringer) ([]store.Run, time.Duration) {
	b.Helper()
	l, _, err := progress.ReadFeatureList(p.paths.Progress())
	if err != nil {
		b.Fatal(err)
	}
	if got, want := states(l), wantStates(sc); got != want {
		b.Fatalf("the night %s ended with %q, want %q\n%s", where, got, want, log)
	}
	runs, err := p.openStore().Runs()
	if err != nil {
		b.Fatal(err)
	}
	var spans time.Duration
	for _, run := range runs {
		spans += run.EndedAt.Sub(run.StartedAt)
		if run.Outcome != "ok" {
			b.Logf("%s: run %s (%s %s, attempt %d) %s: %s", where, run.ID, run.Role, run.Feature, run.Attempt, run.Outcome, run.Summary)
		}
	}
	return runs, spans
}
