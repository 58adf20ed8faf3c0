package orchestrator

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// A run starts from the tree the loop recorded a moment ago only within
// the event that recorded it, once, while it is young, and only where the
// daemon's own test runs cannot have written the work tree since.
func TestARunStartsFromARecentTreeOnlyWhereNothingCanHaveChangedIt(t *testing.T) {
	dir := t.TempDir()
	newO := func(mod func(c *config.Config)) *Orchestrator {
		cfg := config.Default()
		mod(cfg)
		return &Orchestrator{opts: Options{Config: cfg, Project: paths.Project{Dir: dir}}, lanes: laneSet{home: &lane{dir: dir, project: true}}}
	}
	const tree = gitrepo.Tree("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

	o := newO(func(*config.Config) {})
	forget := o.holdRecent(o.lanes.home, tree, time.Now())
	if r := o.takeRecent(o.lanes.home); r == nil || r.tree != tree {
		t.Fatalf("a tree recorded a moment ago was not taken: %+v", r)
	}
	if r := o.takeRecent(o.lanes.home); r != nil {
		t.Errorf("a recorded tree was taken twice: what started from it may have changed the tree")
	}
	forget()

	o.holdRecent(o.lanes.home, tree, time.Now())()
	if o.lanes.home.recent != nil {
		t.Errorf("the recorded tree outlived the event that recorded it")
	}

	o.holdRecent(o.lanes.home, tree, time.Now().Add(-recentMaxAge-time.Millisecond))
	if r := o.takeRecent(o.lanes.home); r != nil {
		t.Errorf("a tree recorded more than %s ago was taken", recentMaxAge)
	}

	for name, mod := range map[string]func(c *config.Config){
		"unconfined":                 func(c *config.Config) { c.Sandbox.Enabled = false },
		"a project directory opened": func(c *config.Config) { c.Sandbox.AllowWrite = []string{filepath.Join(dir, "out")} },
		"the project opened":         func(c *config.Config) { c.Sandbox.AllowWrite = []string{dir} },
	} {
		o := newO(mod)
		o.holdRecent(o.lanes.home, tree, time.Now())
		if o.lanes.home.recent != nil {
			t.Errorf("%s: the daemon's test runs may have written the work tree, yet the tree recorded before them was kept", name)
		}
	}
	o = newO(func(c *config.Config) {
		c.Sandbox.AllowWrite = []string{filepath.Join(filepath.Dir(dir), "elsewhere"), dir + "-sibling"}
	})
	o.holdRecent(o.lanes.home, tree, time.Now())
	if o.lanes.home.recent == nil {
		t.Errorf("directories outside the project made writable kept the recorded tree from being used")
	}
}
