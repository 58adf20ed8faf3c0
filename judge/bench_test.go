package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// BenchmarkConfinedTestRun is what confining the daemon's runs of a
// feature's test costs per verdict: the same RunTest of the same tree, in
// the jail (bubblewrap, seccomp, limits) and with sandbox.TestJail.Off
// (its throwaway checkout and allow-listed environment only), one after
// the other in each iteration so that both meet the same machine. It
// reports each as ns/op and their ratio. The test is a shell script, the
// cheapest a test can be, so the ratio is the jail's share at its largest:
// a real test's own work comes on top of both.
func BenchmarkConfinedTestRun(b *testing.B) {
	if !sandbox.Confines {
		b.Skip("the daemon's test runs are confined with bubblewrap, on Linux only")
	}
	f := newFixture(b, nil)
	f.write(map[string]string{
		"tests/t.sh": "exec:#!/bin/sh\ngrep -qx works src/x.txt\n",
		"src/x.txt":  "works\n",
	})
	tree := f.snapshot()
	const test = "sh tests/t.sh"
	unconfined := f.j.opts
	unconfined.Jail.Off = true
	free := New(unconfined)
	ctx := b.Context()
	for _, j := range []*Judge{f.j, free} {
		if r := j.RunTest(ctx, tree, test); !r.Passed() {
			b.Fatalf("the test does not pass (jail off: %v): %s\n%s", j.opts.Jail.Off, r.Summary(), r.Output)
		}
	}
	var jailed, off time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		r := f.j.RunTest(ctx, tree, test)
		mid := time.Now()
		r2 := free.RunTest(ctx, tree, test)
		jailed, off, n = jailed+mid.Sub(start), off+time.Since(mid), n+1
		if !r.Passed() || !r2.Passed() {
			b.Fatalf("a run failed: jailed %s; unconfined %s", r.Summary(), r2.Summary())
		}
	}
	b.ReportMetric(float64(jailed.Nanoseconds())/float64(n), "jailed-ns/op")
	b.ReportMetric(float64(off.Nanoseconds())/float64(n), "unconfined-ns/op")
	b.ReportMetric(float64(jailed)/float64(off), "jailed/unconfined")
}

// BenchmarkRegressionSweep is a verdict's regression sweep of eight tested
// features whose tests take a while each (a quarter of a second of their
// own, besides their checkouts and jails), one test at a time and four at
// once (limits.parallel), one after the other in each iteration. It
// reports each sweep's wall time and their ratio: a test that is slow is
// still run, and with four slots the sweep takes about as long as its
// slowest quarter.
func BenchmarkRegressionSweep(b *testing.B) {
	// Every sweep full: this is the cost of running a sweep's tests, not
	// of choosing them.
	f := newFixture(b, func(o *Options) { o.FullSweepEvery = 1 })
	f.write(map[string]string{
		"tests/slow.sh": "exec:#!/bin/sh\nsleep 0.25\ngrep -qx works src/x.txt\n",
		"src/x.txt":     "works\n",
	})
	tree := f.snapshot()
	l := &progress.List{Version: 1}
	for i := range 8 {
		l.Features = append(l.Features, progress.Feature{ID: fmt.Sprintf("F-%03d", i+1), Test: "sh tests/slow.sh", Tested: true})
	}
	four := f.j.opts
	four.Parallel = 4
	judges := []*Judge{f.j, New(four)}
	var took [2]time.Duration
	n := 0
	for b.Loop() {
		for k, j := range judges {
			start := time.Now()
			if broken, _ := j.sweep(b.Context(), Root{}, l, "", tree); len(broken) > 0 {
				b.Fatalf("the sweep found %s broken: %s", broken[0].Feature, broken[0].Test.Summary())
			}
			took[k] += time.Since(start)
		}
		n++
	}
	b.ReportMetric(took[0].Seconds()/float64(n), "parallel1-s/op")
	b.ReportMetric(took[1].Seconds()/float64(n), "parallel4-s/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "parallel4/parallel1")
}

// BenchmarkSweepsAtScale is a night's verification as N features land one
// after another, each its own file and its own test (a tenth of a second
// of its own, beside its checkout and jail): at each landing the claim's
// own test on the candidate, then the regression sweep of every feature
// tested before, then, when the tip was not swept in full, the session's
// last sweep. "selected" is with selection on (limits.full_sweep_every
// 20), "full" every sweep full, the default, in the same run (at N =
// 100 only selected: the full night is N²/2 = 5 000 test runs).
// runs/feature is the daemon's test runs per feature (goal at N = 40: at
// most 3); sweep-share the sweeps' part of the daemon's test time.
func BenchmarkSweepsAtScale(b *testing.B) {
	if !sandbox.Confines {
		b.Skip("the daemon's test runs are recorded in its jail, bubblewrap's, on Linux")
	}
	for _, n := range []int{12, 40, 100} {
		for _, every := range []int{20, 1} {
			if every == 1 && n > 40 {
				continue
			}
			name := map[int]string{20: "selected", 1: "full"}[every]
			b.Run(fmt.Sprintf("features=%d/%s", n, name), func(b *testing.B) {
				var runs, sweepRuns int
				var tests, sweeps time.Duration
				for b.Loop() {
					r := landAll(b, n, every)
					runs += r.runs
					sweepRuns += r.sweepRuns
					tests += r.tests
					sweeps += r.sweeps
				}
				loops := float64(b.N)
				b.ReportMetric(float64(runs)/loops/float64(n), "runs/feature")
				b.ReportMetric(float64(sweepRuns)/loops/float64(n), "sweep-runs/feature")
				b.ReportMetric(sweeps.Seconds()/(tests+sweeps).Seconds(), "sweep-share")
			})
		}
	}
}

// landed is what landAll's night cost: the daemon's test runs, the
// sweeps' among them, and the time of the claims' own runs and of the
// sweeps.
type landed struct {
	runs, sweepRuns int
	tests, sweeps   time.Duration
}

// landAll lands n features one after another on a fresh project with
// limits.full_sweep_every at every, as the loop does (its own test, the
// sweep, Landed; the session's last sweep at the end), and says what it
// cost.
func landAll(b *testing.B, n, every int) landed {
	b.Helper()
	f := newFixture(b, func(o *Options) { o.FullSweepEvery = every })
	var r landed
	l := &progress.List{Version: 1}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("F-%03d", i)
		f.write(map[string]string{fmt.Sprintf("src/f%03d.txt", i): "ok\n"})
		tree := f.snapshot()
		test := fmt.Sprintf("sleep 0.1; grep -qx ok src/f%03d.txt", i)
		start := time.Now()
		if res := f.j.RunTest(b.Context(), tree, test); !res.Passed() {
			b.Fatalf("%s's own test: %s", id, res.Summary())
		}
		r.tests += time.Since(start)
		start = time.Now()
		broken, s := f.j.sweep(b.Context(), Root{}, l, id, tree)
		r.sweeps += time.Since(start)
		if len(broken) > 0 {
			b.Fatalf("landing %d broke %q", i, features(broken))
		}
		r.runs += 1 + s.Ran
		r.sweepRuns += s.Ran
		l.Features = append(l.Features, progress.Feature{ID: id, Test: test, Tested: true})
		f.j.Landed(id, tree)
	}
	if f.j.TipUnverified() {
		start := time.Now()
		s := f.j.SweepTip(b.Context(), l)
		r.sweeps += time.Since(start)
		if len(s.Broken) > 0 {
			b.Fatalf("the last sweep found %q broken", features(s.Broken))
		}
		r.runs += s.Ran
		r.sweepRuns += s.Ran
	}
	return r
}

// BenchmarkSettingOfACache is what fingerprinting a directory outside the
// tree costs a recorded test run: the same run of a shell test, with an
// agents' cache of 20 000 files bound into its jail (a module cache of a
// few dozen modules) and with an empty one, one after the other in each
// iteration. It reports each as ns/op and their ratio.
func BenchmarkSettingOfACache(b *testing.B) {
	if !sandbox.Confines {
		b.Skip("the daemon's test runs are recorded in their jail, on Linux only")
	}
	big, empty := b.TempDir(), b.TempDir()
	for i := range 20_000 {
		p := filepath.Join(big, fmt.Sprintf("m%03d", i/100), fmt.Sprintf("f%03d.go", i%100))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("package m\n"), 0o444); err != nil {
			b.Fatal(err)
		}
	}
	judges := make([]*Judge, 2)
	trees := make([]gitrepo.Tree, 2)
	for k, dir := range []string{big, empty} {
		f := newFixture(b, func(o *Options) {
			o.FullSweepEvery = 20
			o.Jail.ReadOnly = []string{dir}
		})
		f.write(map[string]string{"src/x.txt": "works\n"})
		trees[k], judges[k] = f.snapshot(), f.j
		if r := f.j.RunTest(b.Context(), trees[k], "grep -qx works src/x.txt"); !r.Passed() {
			b.Fatalf("the test does not pass: %s\n%s", r.Summary(), r.Output)
		}
	}
	var took [2]time.Duration
	n := 0
	for b.Loop() {
		for k, j := range judges {
			start := time.Now()
			if r := j.RunTest(b.Context(), trees[k], "grep -qx works src/x.txt"); !r.Passed() {
				b.Fatalf("a run failed: %s", r.Summary())
			}
			took[k] += time.Since(start)
		}
		n++
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(n), "cache20k-ns/op")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(n), "empty-ns/op")
	b.ReportMetric(float64(took[0])/float64(took[1]), "cache20k/empty")
}
