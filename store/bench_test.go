package store_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/tracebench"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	tracebench.Cleanup()
	os.Exit(code)
}

// sharedStore is the store of n traces this benchmark process built.
func sharedStore(b *testing.B, n int) *store.Store {
	b.Helper()
	st, err := tracebench.Shared(n, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkTraceQuery measures a `metadata` query (goal: a median of at
// most 10 ms with a million traces): the newest 50 traces of
// one type, feature and gate, of one type and feature, of one run, and of
// the last hour, across features. It reports the median, and the store's
// size per trace.
func BenchmarkTraceQuery(b *testing.B) {
	for _, n := range tracebench.Sizes(testing.Short()) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := sharedStore(b, n)
			last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * 3 * time.Second)
			// Features of runs every size holds (a run is TracesPerRun traces).
			filters := []store.TraceFilter{
				{Type: control.TraceViolation, Feature: "F-007", Gate: "scope", Limit: 50},
				{Type: control.TraceDecision, Feature: "F-019", Limit: 50},
				{Run: store.RunID(uint64(n / tracebench.TracesPerRun / 2)), Limit: 50},
				{Since: last.Add(-time.Hour), Limit: 50},
				{Type: control.TraceViolation, Agent: "tester-agent", Gate: "log-read-limit", Limit: 50},
			}
			var times []time.Duration
			i := 0
			b.ResetTimer()
			for b.Loop() {
				f := filters[i%len(filters)]
				i++
				start := time.Now()
				ts, err := st.Traces(f)
				times = append(times, time.Since(start))
				if err != nil || len(ts) == 0 {
					b.Fatalf("%+v: %d traces, %v", f, len(ts), err)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2])/1e6, "median-ms")
			if fi, err := os.Stat(st.Path()); err == nil {
				b.ReportMetric(float64(fi.Size())/float64(n), "bytes/trace")
			}
		})
	}
}

// BenchmarkTraceAppend measures appends (goal: at least 10,000 traces a
// second) into the store of a million traces: in batches
// of 100 and of 1,000 by one appender, and one trace at a time by 16 and
// by 64 concurrent appenders (the hooks of concurrent tool calls), whose
// appends the store groups into shared commits. Every commit is synced.
func BenchmarkTraceAppend(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	st := sharedStore(b, n)
	tr := control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope",
		Context: control.TraceContext{Agent: "coding-agent", Feature: "F-042", Run: "run-099999"},
		Event:   control.TraceEvent{WhatHappened: "PreToolUse Write src/shared.txt is outside F-042's scope (call 3 of the run)", WhatWasCorrect: "write only the feature's own files", Why: "gate scope"}}
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batches-of-%d", size), func(b *testing.B) {
			batch := make([]control.Trace, size)
			count := 0
			for b.Loop() {
				for i := range batch {
					batch[i] = tr
				}
				if _, err := st.AppendTraces(batch...); err != nil {
					b.Fatal(err)
				}
				count += len(batch)
			}
			b.ReportMetric(float64(count)/b.Elapsed().Seconds(), "traces/s")
		})
	}
	for _, appenders := range []int{16, 64} {
		b.Run(fmt.Sprintf("%d-concurrent-appenders", appenders), func(b *testing.B) {
			var count atomic.Int64
			b.SetParallelism(max(1, appenders/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := st.AppendTraces(tr); err != nil {
						b.Error(err)
						return
					}
					count.Add(1)
				}
			})
			b.ReportMetric(float64(count.Load())/b.Elapsed().Seconds(), "traces/s")
		})
	}
}
