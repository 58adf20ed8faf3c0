package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// The night of BenchmarkWorkers: BenchmarkLanes's eight independent
// features, at the turn time where its runs wait on the model more than
// on the CPU (one only: a night on workers lasts minutes).
const (
	workersTurn     = 600 * time.Millisecond
	workersFeatures = 8
	workersParallel = 4
	// workerProcs workers of workerSlots slots each: as many slots as
	// the night's parallelism.
	workerProcs = 2
	workerSlots = 2
)

// workersNight is one night of BenchmarkWorkers, as measured from outside
// the daemon.
type workersNight struct {
	wall time.Duration // the daemon process, start to exit
	// inFlight is the runs' spans (the store's StartedAt to EndedAt)
	// summed, over wall: runs in flight on average.
	inFlight float64
	runs     int
}

// BenchmarkWorkers is what running lanes on workers costs against
// running them on the daemon's machine (issue 27): the same night, eight
// independent features each coded right at its first attempt by a
// scripted model that thinks workersTurn a turn, with limits.parallel 4,
// (a) local: the lanes' runs on the daemon's machine, (b) workers:
// executor nats, the runs on two `ctxgraphd worker` processes of two
// slots each on this same machine, each with a home and a directory of
// its own. Each iteration runs both nights, in alternating order, so that
// both see the same machine.
//
// Figures: local-s/op and workers-s/op are the nights' wall times, the
// daemon process's start to its exit (on workers, the workers' credentials
// issued and their processes started once the daemon answers are in it,
// as an operator's would be before the night); workers/local their ratio.
// in-flight-local and in-flight-workers are the runs' spans summed over
// wall time: how many runs were in flight on average, at most 4. runs/op
// is the runs of a night on workers; every one of them must have run on a
// worker (each worker logs the runs it takes), and every feature must end
// tested in both nights, or the benchmark fails: a broken night measures
// nothing. A night lasts a minute or more: -benchtime 1x is the usual.
func BenchmarkWorkers(b *testing.B) {
	sc := scriptedmodel.Scenario{Name: "workers", TurnLatencyMS: int(workersTurn / time.Millisecond)}
	for i := range workersFeatures {
		sc.Features = append(sc.Features, scriptedmodel.FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: fmt.Sprintf("Feature %d", i+1), Behavior: scriptedmodel.Pass})
	}
	url := startModel(b, sc)
	var local, remote []workersNight
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, onWorkers := range order {
			r := runWorkersNight(b, url, sc, onWorkers)
			if onWorkers {
				remote = append(remote, r)
			} else {
				local = append(local, r)
			}
		}
	}
	var wallLocal, wallWorkers time.Duration
	var inLocal, inWorkers float64
	runs := 0
	for _, r := range local {
		wallLocal += r.wall
		inLocal += r.inFlight / float64(len(local))
	}
	for _, r := range remote {
		wallWorkers += r.wall
		inWorkers += r.inFlight / float64(len(remote))
		runs += r.runs
	}
	n := float64(b.N)
	b.ReportMetric(wallWorkers.Seconds()/wallLocal.Seconds(), "workers/local")
	b.ReportMetric(wallLocal.Seconds()/n, "local-s/op")
	b.ReportMetric(wallWorkers.Seconds()/n, "workers-s/op")
	b.ReportMetric(inLocal, "in-flight-local")
	b.ReportMetric(inWorkers, "in-flight-workers")
	b.ReportMetric(float64(runs)/n, "runs/op")
}

// runWorkersNight runs sc's whole night on a fresh project with
// limits.parallel workersParallel, on the daemon's machine or on
// workerProcs workers, and checks that every feature ended tested (and,
// on workers, that every run ran on one). The benchmark timer runs only
// while the daemon does.
func runWorkersNight(b *testing.B, modelURL string, sc scriptedmodel.Scenario, onWorkers bool) workersNight {
	b.Helper()
	b.StopTimer()
	where := "local"
	env := append(modelEnv(b, modelURL),
		"CTXGRAPHD_LIMITS_PARALLEL="+strconv.Itoa(workersParallel),
		"CTXGRAPHD_LOG_FORMAT=json")
	if onWorkers {
		where = "workers"
		env = append(env, "CTXGRAPHD_EXECUTOR=nats")
	}
	p := newBenchProject(b, env)
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
	var workers []*workerProc
	if onWorkers {
		if err := waitForDaemon(p, exited); err != nil {
			b.Fatalf("the daemon on workers: %v\n%s", err, &log)
		}
		for i := range workerProcs {
			name := fmt.Sprintf("w%d", i+1)
			url, creds := addWorker(b, p, name)
			workers = append(workers, startWorker(b, modelURL, name, url, creds, filepath.Join(b.TempDir(), name), workerSlots))
		}
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(agentsWait):
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("the night did not end within %v", agentsWait)
	}
	wall := time.Since(start)
	b.StopTimer()
	taken := 0
	var perWorker []string
	for _, w := range workers {
		w.stop()
		n := strings.Count(w.log.String(), "running a lane's run")
		taken += n
		perWorker = append(perWorker, fmt.Sprintf("%s %d", w.name, n))
	}
	if err != nil {
		b.Fatalf("the daemon %s: %v\n%s", where, err, &log)
	}
	runs, spans := p.nightEnded(b, sc, where, &log)
	if onWorkers && taken < len(runs) {
		b.Fatalf("the night on workers had %d runs, the workers took %d (%s)\n%s", len(runs), taken, strings.Join(perWorker, ", "), &log)
	}
	r := workersNight{wall: wall, inFlight: spans.Seconds() / wall.Seconds(), runs: len(runs)}
	b.Logf("%s: %.1f s, %d runs, %.2f in flight on average", where, wall.Seconds(), r.runs, r.inFlight)
	if onWorkers {
		b.Logf("runs taken by worker: %s", strings.Join(perWorker, ", "))
	}
	return r
}

// waitForDaemon waits for p's daemon to answer on its socket. If it
// exited first, the error it exited with is put back on exited for the
// caller.
func waitForDaemon(p *benchProject, exited chan error) error {
	client := control.NewClient(p.paths.Socket)
	deadline := time.Now().Add(startWait)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("it exited before it answered: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Status(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("it did not answer within %v", startWait)
}
