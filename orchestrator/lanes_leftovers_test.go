package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// A lane's run that does not end by itself (a rate limit, an overload, ctl
// stop, a lane held by another lane's limit, a run stopped at its budget)
// is judged by what it left in its own lane (judgeLeftovers with the
// lane's Root), never against the project's own work tree, where what it
// may not change would otherwise be "put back" over a person's work.

// A person's new file in the project's own tree (which no lane writes)
// stays when a lane's run is cut short by a rate limit.
func TestLeftoversOfALaneAreJudgedInTheLane(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	h.cfg.Limits.Backoff, h.cfg.Limits.BackoffMax = 50*time.Millisecond, 50*time.Millisecond
	var m meeting
	var mu sync.Mutex
	limited := false
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		mu.Lock()
		first := !limited
		mu.Unlock()
		if first && m.meet(spec.FeatureID, []string{"F-001", "F-002"}, 20*time.Second) && spec.FeatureID == "F-001" {
			// Both lanes are open: a person starts a note in the project.
			h.write("notes/todo.txt", "the person's own work\n")
			mu.Lock()
			limited = true
			mu.Unlock()
			return apiFailure("rate_limit", 429, "API Error: Request rejected (429)")
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEndWithin(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Logf("features = %s", got)
	}
	if _, err := os.Stat(filepath.Join(h.proj.Dir, "notes/todo.txt")); err != nil {
		t.Errorf("the person's notes/todo.txt in the project's own tree is gone after a lane's run met a rate limit: %v", err)
	}
}

// A feature accepted from one lane stays in the person's work tree when
// another lane's run is cut short after it: the second lane's leftovers
// are judged in its lane, not in the project's tree, where the first
// feature's file is out of the second's scope and would be "put back".
func TestLeftoversOfALaneLeaveTheProjectsTreeAlone(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	h.cfg.Limits.Backoff, h.cfg.Limits.BackoffMax = 50*time.Millisecond, 50*time.Millisecond
	var mu sync.Mutex
	limited := false
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		mu.Lock()
		first := !limited && spec.FeatureID == "F-002"
		mu.Unlock()
		if first {
			// Wait for F-001 to land on the branch, and the daemon's work
			// of landing it to be over, then meet a rate limit.
			eventually.Within(20*time.Second, func() bool {
				f := h.list().Feature("F-001")
				st, _ := h.current.Status(ctx)
				return f != nil && f.Tested && st.Working == ""
			})
			mu.Lock()
			limited = true
			mu.Unlock()
			return apiFailure("rate_limit", 429, "API Error: Request rejected (429)")
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEndWithin(time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("features = %s", summary(h.list()))
	if got := strings.TrimSpace(h.read("src/F-001.txt")); got != "F-001 works" {
		t.Errorf("the project's work tree holds src/F-001.txt = %q after F-002's lane met a rate limit; HEAD holds it", got)
	}
	if st, _ := h.git("status", "--porcelain", "--untracked-files=no"); strings.TrimSpace(st) != "" {
		t.Errorf("the project's work tree differs from HEAD:\n%s", st)
	}
}
