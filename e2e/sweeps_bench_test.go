package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// BenchmarkNightSweeps is what verifying a night costs as it grows: a
// whole night of N honest, independent text features whose tests take a
// second each (scriptedmodel's test_seconds), on the real CLI, at
// limits.parallel 1, with selection (limits.full_sweep_every 50) and
// with every sweep full (1) in the same run. From the
// daemon's log:
//
//   - runs/feature is the daemon's test runs per feature (the check before
//     code, the verdict's, every sweep's, the session's last sweep and
//     any bisection): goal at N = 40, at most 3;
//   - sweep-runs/feature is the sweeps' part of them;
//   - sweep-share is the sweeps' wall time over the night's (goal at
//     N = 40, at most 10 %), last-sweep-share the part of it that is the
//     session's last sweep, of the branch's tip (full whenever a sweep
//     since the last full one skipped a test: N - 1 runs, every test but
//     the last claim's own, which its verdict passed on that tree; the
//     claims' agents all done);
//   - night-s is the night's wall time.
//
// The sweeps' share depends on how long the agents take: the scripted
// model thinks 300 ms a turn, as BenchmarkLanes' does at its shorter turn
// (a real model takes seconds, which makes the share smaller still);
// BENCH_NIGHT_TURN_MS says otherwise (0: it answers at once, and the
// night is the CLI's and the daemon's own time alone).
//
// A full night's sweeps are N(N-1)/2 runs by construction: at N = 40 some
// 800 runs of a second, at N = 100 some 5 000, hours. The full night runs
// at N = 12 only, unless BENCH_NIGHT_FULL_UPTO says up to which
// N (0: none). N is 12, 40 and 100 unless BENCH_NIGHT_FEATURES
// lists others (12,40).
func BenchmarkNightSweeps(b *testing.B) {
	sizes := []int{12, 40, 100}
	fullUpTo := 12
	turnMS := 300
	if v := os.Getenv("BENCH_NIGHT_TURN_MS"); v != "" {
		var err error
		if turnMS, err = strconv.Atoi(v); err != nil || turnMS < 0 {
			b.Fatalf("BENCH_NIGHT_TURN_MS=%q: want the scripted model's milliseconds a turn, such as 300 or 0", v)
		}
	}
	if v := os.Getenv("BENCH_NIGHT_FULL_UPTO"); v != "" {
		var err error
		if fullUpTo, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BENCH_NIGHT_FULL_UPTO=%q: want a feature count, such as 40", v)
		}
	}
	if v := os.Getenv("BENCH_NIGHT_FEATURES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("BENCH_NIGHT_FEATURES=%q: want feature counts, such as 12,40", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		for _, every := range []int{50, 1} {
			if every == 1 && n > fullUpTo {
				continue
			}
			name := map[int]string{50: "selected", 1: "full"}[every]
			b.Run(fmt.Sprintf("features=%d/%s/turn=%dms", n, name, turnMS), func(b *testing.B) { benchNight(b, n, every, turnMS) })
		}
	}
}

func benchNight(b *testing.B, n, every, turnMS int) {
	sc := scriptedmodel.Scenario{Name: "night", TestSeconds: 1, TurnLatencyMS: turnMS}
	for i := range n {
		sc.Features = append(sc.Features, scriptedmodel.FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: fmt.Sprintf("Feature %d", i+1), Behavior: scriptedmodel.Pass})
	}
	url := startModel(b, sc)
	var runs, sweepRuns int
	var sweepShare, lastShare, night float64
	for range b.N {
		r := runLoop(b, url, sc, "CTXGRAPHD_LOG_FORMAT=json", "CTXGRAPHD_LIMITS_FULL_SWEEP_EVERY="+strconv.Itoa(every))
		runs += r.testRuns
		sweepRuns += r.sweepRuns
		sweepShare += r.sweeps.Seconds() / r.wall.Seconds()
		lastShare += r.lastSweep.Seconds() / r.wall.Seconds()
		night += r.wall.Seconds()
	}
	loops := float64(b.N)
	b.ReportMetric(float64(runs)/loops/float64(n), "runs/feature")
	b.ReportMetric(float64(sweepRuns)/loops/float64(n), "sweep-runs/feature")
	b.ReportMetric(sweepShare/loops, "sweep-share")
	b.ReportMetric(lastShare/loops, "last-sweep-share")
	b.ReportMetric(night/loops, "night-s")
}
