package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// After a claim the regression sweep refused, the next attempt starts in a
// fresh lane from the branch, whether the branch moved since the lane was
// made (another lane landed meanwhile) or not (the feature waited for the
// one it breaks): one rule, whatever the timing. The retry's coder, which
// does not undo what broke the earlier feature (it only writes its own
// file again), finds it gone and is accepted: charged once.
func TestARefusedClaimStartsAgainInAFreshLane(t *testing.T) {
	for _, moved := range []bool{true, false} {
		t.Run(fmt.Sprintf("branch-moved-%v", moved), func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Limits.Parallel = 2
			f2 := progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", Scope: []string{"src/b/**"}}
			if !moved {
				f2.DependsOn = []string{"F-001"} // its lane is made from the branch holding F-001
			}
			h.runner.script[role.Initializer] = initializerWith(map[string]string{
				"tests/F-001.sh": "grep -qx 'F-001 works' src/a/F-001.txt && ! test -e src/b/breaks-a\n",
				"tests/F-002.sh": "grep -qx 'F-002 works' src/b/F-002.txt\n",
			}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh", Scope: []string{"src/a/**"}}, f2)
			var mu sync.Mutex
			leftover := map[int]bool{}
			h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
				dir := map[string]string{"F-001": "src/a/", "F-002": "src/b/"}[spec.FeatureID]
				if spec.FeatureID == "F-002" {
					_, err := os.Stat(filepath.Join(spec.Dir, "src/b/breaks-a"))
					mu.Lock()
					leftover[spec.Attempt] = err == nil
					mu.Unlock()
					if spec.Attempt == 1 {
						h.writeIn(spec, "src/b/breaks-a", "x\n")
					}
				}
				h.writeIn(spec, dir+spec.FeatureID+".txt", spec.FeatureID+" works\n")
				h.editIn(spec, func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
				return agents.Result{Summary: "implemented", NumTurns: 3}
			}
			h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
				if spec.FeatureID == "F-002" && moved {
					// F-001 lands while F-002's lane works: the branch moves.
					eventually.Within(20*time.Second, func() bool { f := h.list().Feature("F-001"); return f != nil && f.Tested })
				}
				return testerClaims(true)(ctx, spec, h)
			}
			if err := h.runToEnd(); err != nil {
				t.Fatal(err)
			}
			if got := summary(h.list()); got != "F-001=tested F-002=tested" {
				t.Fatalf("features = %s", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if leftover[1] || leftover[2] || len(leftover) != 2 {
				t.Errorf("F-002's coders found the refused change in their tree (attempt: found) %v: want two attempts, the second in a fresh lane from the branch", leftover)
			}
			if c := h.session().Counters["F-002"]; c.Failures != 1 {
				t.Errorf("F-002 counters %+v, want the breaking attempt charged once", c)
			}
			if _, ok := h.git("rev-parse", "--verify", "refs/ctxgraphd/lane/F-002"); !ok {
				t.Error("the refused change is not kept under refs/ctxgraphd/lane/F-002")
			}
		})
	}
}
