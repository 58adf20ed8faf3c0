package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// The regression sweep holds a claim to the frozen test of every feature
// tested before it, whichever that feature is in the list and whichever
// lane landed first: three features land in lanes in a given order, then
// a fourth (depending on them) breaks one of their tests on its first
// attempt, within its own scope. The claim is refused, charged once, its
// retry told which test broke; the branch never holds the break.
func TestTheSweepCoversEveryTestedFeature(t *testing.T) {
	// Each feature broken once, landing first, in the middle and last,
	// and first, second and third in the list.
	for _, c := range []struct {
		broken string
		order  []string
	}{
		{"F-001", []string{"F-001", "F-002", "F-003"}},
		{"F-002", []string{"F-003", "F-002", "F-001"}},
		{"F-003", []string{"F-002", "F-001", "F-003"}},
	} {
		t.Run(fmt.Sprintf("breaks-%s/landed-%s", c.broken, strings.Join(c.order, ",")), func(t *testing.T) {
			sweepCase(t, c.broken, c.order)
		})
	}
}

func sweepCase(t *testing.T, broken string, order []string) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 3
	tests := map[string]string{"tests/F-004.sh": "grep -q 'F-004 works' src/F-004.txt\n"}
	var features []progress.Feature
	for _, id := range []string{"F-001", "F-002", "F-003"} {
		// Each earlier test also reads the fourth feature's file, which
		// the fourth may change within its scope.
		tests["tests/"+id+".sh"] = fmt.Sprintf("grep -qx '%s works' src/%s.txt && ! grep -q 'breaks %s' src/F-004.txt 2>/dev/null\n", id, id, id)
		features = append(features, progress.Feature{ID: id, Test: "sh tests/" + id + ".sh", Scope: []string{"src/" + id + ".txt"}})
	}
	features = append(features, progress.Feature{ID: "F-004", Test: "sh tests/F-004.sh", Scope: []string{"src/F-004.txt"}, DependsOn: []string{"F-001", "F-002", "F-003"}})
	h.runner.script[role.Initializer] = initializerWith(tests, features...)
	var mu sync.Mutex
	var told []string
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		text := spec.FeatureID + " works\n"
		if spec.FeatureID == "F-004" {
			if spec.Attempt == 1 {
				text += "breaks " + broken + "\n"
			} else {
				mu.Lock()
				told = append(told, spec.Prompt)
				mu.Unlock()
			}
		}
		h.writeIn(spec, "src/"+spec.FeatureID+".txt", text)
		h.editIn(spec, func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
		return agents.Result{Summary: "implemented", NumTurns: 3}
	}
	// The earlier features land in order: each tester claims once the
	// one before it in the order is tested.
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		for i, id := range order {
			if id != spec.FeatureID || i == 0 {
				continue
			}
			prev := order[i-1]
			eventually.Within(20*time.Second, func() bool { f := h.list().Feature(prev); return f != nil && f.Tested })
		}
		return testerClaims(true)(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested F-003=tested F-004=tested" {
		t.Fatalf("features = %s", got)
	}
	log := mustGit(t, h, "log", "--format=%(trailers:key=ctxgraphd-feature,valueonly)", "HEAD")
	var landed []string
	for _, f := range strings.Fields(log) {
		landed = append([]string{f}, landed...)
	}
	if got := strings.Join(landed, ","); !strings.HasPrefix(got, strings.Join(order, ",")) {
		t.Errorf("the features landed in the order %s, want %s first", got, strings.Join(order, ","))
	}
	// The refusal names the feature whose test broke, and no other.
	var named []string
	for _, tr := range h.violations() {
		if tr.Code == "breaks_tested" {
			what, _, _ := strings.Cut(tr.Event.WhatHappened, ", tested before it")
			named = append(named, what)
		}
	}
	if len(named) != 1 || !strings.HasSuffix(named[0], "the frozen test of "+broken) {
		t.Errorf("breaks_tested refusals %q, want one naming %s alone", named, broken)
	}
	if c := h.session().Counters["F-004"]; c.Failures != 1 {
		t.Errorf("F-004 counters %+v, want its breaking attempt charged once", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], broken) {
		t.Errorf("F-004's retry was told %q, want which feature's test its change broke (%s)", told, broken)
	}
	for _, c := range strings.Fields(mustGit(t, h, "rev-list", "HEAD")) {
		if out, _ := h.git("show", c+":src/F-004.txt"); strings.Contains(out, "breaks") {
			t.Errorf("commit %s on the branch holds the break of %s's test", c, broken)
		}
	}
}
