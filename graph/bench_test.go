package graph

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/tracebench"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// BenchmarkSelect measures a run's precedent selection (goal: at most
// 5 ms with 1,000,000 traces) over a project's history as
// tracebench builds it, each size once per process.
func BenchmarkSelect(b *testing.B) {
	for _, n := range tracebench.Sizes(testing.Short()) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, err := tracebench.Shared(n, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
			if err != nil {
				b.Fatal(err)
			}
			subj := Subject{Role: coder, Feature: "F-007", Text: "Parse the configuration file: read the webhook retry settings and write them to the cache",
				History: []Told{{Frame: "F-007: attempt 1 failed"}}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Select(st, subj, 600); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSelectUniform is the benchmark of the store that scanned (ids
// of that commit, 40b7a07): the same traces, so that its figures compare
// with the baseline's (1k: 13 ms, 10k: 148 ms, 100k: 1.16 s).
func BenchmarkSelectUniform(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			batch := make([]control.Trace, 0, 10_000)
			for i := range n {
				tr := refused([]string{coder, tester}[i%2], fmt.Sprintf("F-%03d", i%200), fmt.Sprintf("gate-%d", i%9), "code",
					fmt.Sprintf("write %d outside the scope of the parser", i), "stay in scope")
				if i%10 == 0 {
					tr.Type = control.TraceTransition
				}
				batch = append(batch, tr)
				if len(batch) == cap(batch) || i == n-1 {
					if _, err := st.AppendTraces(batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			subj := Subject{Role: coder, Feature: "F-007", Text: "parse the configuration file", History: []Told{{Frame: "F-007: attempt 1 failed"}}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Select(st, subj, 600); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
