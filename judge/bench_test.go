package judge

import (
	"testing"
	"time"

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
