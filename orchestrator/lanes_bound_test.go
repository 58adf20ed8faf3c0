package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// However many features are ready, no more than limits.parallel of them
// are in flight at once (a coder or a tester at work, or the test of one
// checked before its code), and lanes fill up to the bound: the property,
// over more ready features than lanes, with the list in either order.
func TestLanesNeverExceedTheBound(t *testing.T) {
	for _, parallel := range []int{2, 3} {
		for _, reversed := range []bool{false, true} {
			t.Run(fmt.Sprintf("parallel-%d/reversed-%v", parallel, reversed), func(t *testing.T) {
				n := parallel + 2
				h := newHarness(t)
				h.cfg.Limits.Parallel = parallel
				h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
					res := initializerWrites(n)(ctx, spec, h)
					if reversed {
						l, _, err := progress.ReadFeatureList(h.proj.Progress())
						if err != nil {
							h.t.Fatal(err)
						}
						slices.Reverse(l.Features)
						progress.WriteFeatureList(h.proj.Progress(), l)
					}
					return res
				}
				var mu sync.Mutex
				inFlight, most, started := map[string]bool{}, 0, 0
				enter := func(feature string) (first bool) {
					mu.Lock()
					defer mu.Unlock()
					inFlight[feature] = true
					most = max(most, len(inFlight))
					started++
					return started <= parallel
				}
				leave := func(feature string) {
					mu.Lock()
					delete(inFlight, feature)
					mu.Unlock()
				}
				// The first runs wait until the lanes are full (bounded by
				// agents' time, which only a hang reaches), and then hold
				// them full for a window in which a lane past the bound,
				// opened meanwhile, would start its run beside them.
				atLeast := func(k int) bool {
					mu.Lock()
					defer mu.Unlock()
					return len(inFlight) >= k
				}
				wrap := func(s script) script {
					return func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
						if enter(spec.FeatureID) {
							eventually.Within(20*time.Second, func() bool { return atLeast(parallel) })
							eventually.Within(time.Second, func() bool { return atLeast(parallel + 1) })
						}
						defer leave(spec.FeatureID)
						return s(ctx, spec, h)
					}
				}
				h.runner.script[role.Coder] = wrap(coderCompletes)
				h.runner.script[role.Tester] = wrap(testerRunsTheTest)
				if err := h.runToEnd(); err != nil {
					t.Fatal(err)
				}
				l := h.list()
				for _, f := range l.Features {
					if !f.Tested {
						t.Errorf("%s ended %s, want tested", f.ID, f.Status)
					}
				}
				if most > parallel {
					t.Errorf("%d features were in flight at once, past limits.parallel %d", most, parallel)
				}
				if most < parallel {
					t.Errorf("at most %d features were in flight at once with %d ready: the lanes (%d) never filled", most, n, parallel)
				}
			})
		}
	}
}
