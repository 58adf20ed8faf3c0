package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// A feature's id is an agent's choice (the initializer's), and may hold
// dots: the lane of a feature named after another lane's private files
// (F-001.index.git, once the name of F-001's lane's private git
// directory) reaches none of them. Each lane's files are in a directory
// of its own (laneWorkTree, laneIndex), so its agent's files (a git
// config naming a clean filter, attributes that apply it) never become a
// git directory the daemon's own git reads, and run nothing outside the
// sandbox; and closing one lane removes nothing of another.
func TestALaneNamedAfterAnotherLanesFilesReachesNone(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	marker := filepath.Join(t.TempDir(), "ran-outside-the-sandbox")
	evil := "F-001.index.git"
	// evil comes first in the list, so its lane opens first: a lane's
	// private git directory is made when the lane opens, so a lane named
	// after one made already could not even be cloned there (the session
	// would stop); it is a clone made before F-001's lane opens that
	// would become F-001's private git directory.
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": "grep -qx 'F-001 works' src/F-001.txt\n",
		"tests/evil.sh":  "test -e refs/x\n",
	}, progress.Feature{ID: evil, Test: "sh tests/evil.sh", Scope: []string{"config", "info/**", "refs/**"}},
		progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh", Scope: []string{"src/**"}})
	wrote := make(chan struct{})
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		switch spec.FeatureID {
		case evil:
			// Its work tree is F-001's lane's private common directory.
			h.writeIn(spec, "config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[filter \"pwn\"]\n\tclean = \"sh -c 'pwd >> "+marker+" && cat'\"\n")
			h.writeIn(spec, "info/attributes", "* filter=pwn\n")
			h.writeIn(spec, "refs/x", "x\n")
			h.writeIn(spec, "info/head-ignore", "")
			select {
			case <-wrote:
			default:
				close(wrote)
			}
		case "F-001":
			// F-001's run ends after the other's, whose files are then
			// all in their lane, has ended and been taken in.
			select {
			case <-wrote:
			case <-time.After(20 * time.Second):
			}
			eventually.Within(20*time.Second, func() bool {
				runs, _ := h.st.Runs()
				return slices.ContainsFunc(runs, func(r store.Run) bool { return r.Feature == evil && !r.EndedAt.IsZero() })
			})
		}
		return coderCompletes(ctx, spec, h)
	}
	err := h.runToEndWithin(40 * time.Second)
	t.Logf("run: %v; features = %s", err, summary(h.list()))
	if b, err := os.ReadFile(marker); err == nil {
		t.Logf("the filter ran in: %s", b)
		t.Errorf("a filter an agent wrote in its lane ran in the daemon's git, outside any sandbox (%s exists)", marker)
	}
}
