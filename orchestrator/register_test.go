package orchestrator

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// registry is a laneRuns that keeps what it is told of each run.
type registry struct {
	actor  gates.Actor
	root   judge.Root
	denied map[string][]string
	lists  map[string]*progress.List
}

func (r *registry) RegisterIn(a gates.Actor, root judge.Root) string {
	r.actor, r.root = a, root
	return "token-of-" + a.Run
}
func (r *registry) Confine(token string, denied []string)   { r.denied[token] = denied }
func (r *registry) GiveList(token string, l *progress.List) { r.lists[token] = l }
func (r *registry) Started(string, int)                     {}
func (r *registry) StopFailure(string) string               { return "" }
func (r *registry) Forget(string)                           {}

// A run is made known to the gates as its lane's: on the project's tree,
// where it works and what its sandbox denies it, and no list of its own
// (the project's is the list); on a clone, its clone as its root, and the
// list as it is now, with the lane's pending claim, written into the
// clone and given to the gates, which read the run's writes of the list
// against it.
func TestARunIsRegisteredAsItsLanes(t *testing.T) {
	canonical := &progress.List{Version: 1, Features: []progress.Feature{
		{ID: "F-001", Title: "one", Test: "sh t1.sh", Status: progress.Completed},
		{ID: "F-002", Title: "two", Test: "sh t2.sh", Status: progress.Pending},
	}}
	denied := []string{"/project/.git", "/project/tests"}
	for _, clone := range []bool{false, true} {
		t.Run(map[bool]string{false: "the project's tree", true: "a clone"}[clone], func(t *testing.T) {
			reg := &registry{denied: map[string][]string{}, lists: map[string]*progress.List{}}
			l := &lane{deps: &laneDeps{runs: reg, log: zap.NewNop()}, dir: t.TempDir(), project: !clone, feature: "F-001"}
			if err := os.MkdirAll(filepath.Join(l.dir, paths.ProgressDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if clone {
				l.claim = &claim{run: store.Run{ID: "run-000006", Role: string(role.Tester), Feature: "F-001"}}
			}
			actor := gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-000007"}
			token := l.register(actor, denied, canonical)
			if token != "token-of-run-000007" || reg.actor != actor {
				t.Errorf("registered %+v, token %q; want %+v and its token", reg.actor, token, actor)
			}
			if !slices.Equal(reg.denied[token], denied) {
				t.Errorf("the gates believe the sandbox denies %q; want %q", reg.denied[token], denied)
			}
			given, ok := reg.lists[token]
			if !clone {
				if ok || reg.root != (judge.Root{}) {
					t.Errorf("a run of the project's tree: root %+v, given the list %v; want the project's root and no list of its own", reg.root, ok)
				}
				return
			}
			if reg.root.Dir != l.dir {
				t.Errorf("a clone's run registered in %q; want its clone %q", reg.root.Dir, l.dir)
			}
			if !ok || given.Feature("F-001") == nil || !given.Feature("F-001").Tested || given.Feature("F-002").Tested {
				t.Fatalf("the gates were given %+v; want the list with the lane's pending claim on F-001", given)
			}
			onDisk, _, err := progress.ReadFeatureList(filepath.Join(l.dir, paths.ProgressDir))
			if err != nil || onDisk.Feature("F-001") == nil || !onDisk.Feature("F-001").Tested {
				t.Errorf("the clone's list file holds %+v, %v; want what the gates were given", onDisk, err)
			}
			if canonical.Feature("F-001").Tested {
				t.Error("giving the clone its list marked the canonical list tested")
			}
		})
	}
}
