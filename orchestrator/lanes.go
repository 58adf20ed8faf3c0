package orchestrator

// Lanes: with limits.parallel above 1, each feature is worked in a git
// clone of its own (sharing the repository's objects), made from the head
// of the project's branch, beside
// the daemon's state directory; up to limits.parallel of them at once, on
// features whose scopes do not overlap (statemachine.Decide). A lane's runs
// work, are confined and are judged in its clone; its claim is judged on
// the candidate, its tree merged onto the branch as it is then, with the
// regression sweep, and only a candidate that passes moves the branch
// (branch.CommitLane). The daemon's own work that reads or moves the branch
// (judging, the verdicts, opening a lane) is done one job at a time, so
// that the branch moves in one place and in order; a lane's check of its
// test before any code reads its own tree only, and runs beside it.
// The initializer works in the project's own tree, alone.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
)

// lanesMode reports whether features are worked in lanes of their own.
func (o *Orchestrator) lanesMode() bool { return o.opts.Config.Limits.Parallel > 1 }

// lanesDir is where the lanes are: beside the state directory,
// which every run's gates and sandbox hold as the daemon's (a lane in
// it could not be written by its own run, and the gates hold any path that
// names the state directory's as the daemon's, so its name is no prefix of
// this one), and outside every directory an agent may write (a lane is
// written by its own runs only).
func (o *Orchestrator) lanesDir() string {
	return filepath.Join(filepath.Dir(o.opts.Project.StateDir), "lanes", o.opts.Project.ID)
}

// openLane makes feature id's lane: a clone on its branch, made from the
// commit the project's branch is at, with the canonical feature list in it.
// It needs the project's work tree to hold nothing but that commit: a
// lane holds the branch's code, and a person's uncommitted work is theirs,
// neither to be worked on nor committed under a feature's name.
func (o *Orchestrator) openLane(id string) (*lane, error) {
	ctx := context.Background()
	head, headTree, _, err := o.opts.Repo.Head(ctx)
	if err != nil {
		return nil, err
	}
	if head == "" {
		return nil, errors.New("the project's branch has no commit yet: lanes are made from one (commit the project, then `ctxgraphd ctl resume`)")
	}
	tree, err := o.opts.Repo.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if tree != headTree {
		changed, _ := o.opts.Repo.ChangedPaths(ctx, headTree, tree)
		return nil, fmt.Errorf("the project's work tree holds uncommitted changes (%s): lanes are made from the branch's last commit, and a person's work is not an agent's to build on; commit or stash them, then `ctxgraphd ctl resume`", textcut.FirstN(changed, 5))
	}
	dir := laneWorkTree(o.lanesDir(), id)
	l := &lane{deps: o.lanes.deps, feature: id, dir: dir, branch: branch.LaneBranch(id), baseHead: head, commits: (*lane).commitCandidate}
	l.record = &l.run
	if !o.opts.Config.Sandbox.Enabled {
		l.port = o.lanePort()
	}
	o.removeLane(dir) // what a crash left of an earlier one
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	if err := branch.Clone(ctx, o.opts.Repo, dir, id, head); err != nil {
		return nil, err
	}
	copies := o.opts.Judge.Copies()
	exclude := append([]string{paths.ProgressDir}, copies.Names()...)
	if l.repo, err = gitrepo.Open(ctx, gitrepo.Options{Dir: dir, Index: laneIndex(dir), Exclude: exclude, Objects: o.opts.Repo.ObjectsDir()}); err != nil {
		o.removeLane(dir)
		return nil, err
	}
	// What the person keeps untracked so that the project runs (.env).
	if err := copies.Place(dir); err != nil {
		o.removeLane(dir)
		return nil, err
	}
	if err := treefile.MkdirAll(dir, paths.ProgressDir); err != nil {
		o.removeLane(dir)
		return nil, err
	}
	// Its agents see what they would in the project, at the same paths:
	// the goal beside the list (which giveList writes).
	if goal, err := treefile.ReadFile(o.opts.Project.Dir, filepath.Join(paths.ProgressDir, progress.GoalFile)); err == nil {
		if err := treefile.WriteFile(dir, filepath.Join(paths.ProgressDir, progress.GoalFile), goal, 0o644); err != nil {
			o.opts.Log.Warn("could not give a lane the project's goal", zap.String("feature", id), zap.Error(err))
		}
	}
	o.lanes.clones[id] = l
	l.giveList(o.canonical)
	o.opts.Log.Info("lane opened", zap.String("feature", id), zap.String("dir", dir), zap.String("base", gitrepo.Short(head)))
	return l, nil
}

// lanePort is a port for a new lane's PORT: one the kernel had free and
// no open lane holds.
func (o *Orchestrator) lanePort() int {
	for range 20 {
		p := o.freePort()
		if p == 0 || !slices.ContainsFunc(slices.Collect(maps.Values(o.lanes.clones)), func(l *lane) bool { return l.port == p }) {
			return p
		}
	}
	return 0
}

// laneFor is the lane feature's action works in, given in, the lane of
// the event being handled (nil: none yet, when lanes are being filled):
// feature's own, opened if it is not open (a lane closed on the way, by a
// verdict or a block, is not); outside lanes mode, or for the initializer,
// in, or the project's own. It is nil, having stopped the session with the
// reason, when the lane could not be made.
func (o *Orchestrator) laneFor(in *lane, feature string) *lane {
	if !o.lanesMode() || feature == "" {
		if in == nil {
			return o.lanes.home // for the initializer
		}
		return in
	}
	l := o.lanes.clones[feature]
	if l == nil {
		var err error
		if l, err = o.openLane(feature); err != nil {
			o.transition(in, statemachine.Stop, feature, fmt.Sprintf("could not make a lane for %s: %v", feature, err))
			return nil
		}
	}
	return l
}

// closeLane removes l's clone; keep, when set, is a ref that
// keeps its work (its tree as it is now, on the commit it was made from).
func (o *Orchestrator) closeLane(l *lane, keep string) (kept string) {
	if keep != "" {
		kept = l.keepWork(keep)
	}
	o.removeLane(l.dir)
	delete(o.lanes.clones, l.feature)
	o.opts.Log.Info("lane closed", zap.String("feature", l.feature), zap.String("kept", kept))
	return kept
}

// laneWorkTree is feature id's clone: <lanes>/<id>/wt. Each lane's
// files are in a directory of its own, named by its feature's id alone,
// so that no feature's id (which an agent, the initializer, chooses) names
// another lane's files: its clone, or the private index and git
// directory the daemon keeps beside it (laneIndex), where an agent that
// could write would have the daemon's own git run what it wrote.
func laneWorkTree(lanes, id string) string { return filepath.Join(lanes, id, "wt") }

// laneIndex is the daemon's private index of the lane whose clone is
// dir, outside the clone (gitrepo keeps its git directory beside it).
func laneIndex(dir string) string { return filepath.Join(filepath.Dir(dir), "index") }

// removeLane removes the lane whose clone is dir: its directory, with
// the clone and the daemon's private index beside it, whatever state it is
// in. Nothing of a lane is in the project's repository (AddClone).
func (o *Orchestrator) removeLane(dir string) {
	if lane := filepath.Dir(dir); filepath.Dir(lane) == o.lanesDir() && filepath.Base(dir) == "wt" {
		if err := os.RemoveAll(lane); err != nil {
			o.opts.Log.Warn("could not remove a lane", zap.String("dir", lane), zap.Error(err))
		}
	}
}

// cleanLanes removes every lane a previous daemon left (one that died:
// one that exits closes its own, retireLanes): their runs were killed
// (recover), and their features are worked again from a fresh lane.
func (o *Orchestrator) cleanLanes() {
	for _, rec := range o.session.Lanes {
		o.removeLane(rec.Dir)
		o.laneGone(rec.Feature)
	}
	o.session.Lanes = nil
	if ents, err := os.ReadDir(o.lanesDir()); err == nil {
		for _, e := range ents {
			os.RemoveAll(filepath.Join(o.lanesDir(), e.Name())) // nothing of the daemon's is there but lanes
		}
	}
}

// retireLanes closes every lane when the daemon exits, after their runs
// ended (shutdown): each lane's work is kept at branch.LaneRef, and its feature
// is worked again from a fresh lane at the next start, not charged, as
// after a crash. No lane outlives its daemon.
func (o *Orchestrator) retireLanes() {
	for _, id := range slices.Sorted(maps.Keys(o.lanes.clones)) {
		o.closeLane(o.lanes.clones[id], branch.LaneRef(id))
		o.laneGone(id)
	}
	if o.pending.FeatureList != nil {
		o.writeFeatureList()
	}
}

// laneGone forgets what feature's lane held, gone with it: what its work
// began from, and a completed status, so that the feature is coded again
// (its coder's session is resumed, and remembers).
func (o *Orchestrator) laneGone(feature string) {
	if c, ok := o.counters[feature]; ok && c.Base != "" {
		c.Base, c.BaseHead = "", ""
		o.setCounters(feature, c)
	}
	if o.canonical == nil {
		return
	}
	if f := o.canonical.Feature(feature); f != nil && f.Status == progress.Completed {
		f.Status = progress.InProgress
		o.pending.FeatureList = o.canonical.Marshal()
	}
}

// closeSettledLane closes l when its feature no longer needs it: a
// person set it aside, removed it, or marked it tested meanwhile. A
// set-aside feature's work is kept, as a blocked one's is.
func (o *Orchestrator) closeSettledLane(l *lane) {
	if l.project || l.feature == "" || l.active != nil || l.check != nil || o.lanes.clones[l.feature] != l {
		return
	}
	f := o.canonical.Feature(l.feature)
	switch {
	case f == nil || f.Tested:
		o.closeLane(l, "")
	case f.Status == progress.Blocked:
		o.closeLane(l, branch.BlockedRef(l.feature))
	}
}

// holdLanes stops the runs in flight in lanes when the session waits or
// stops: what held one lane (a rate limit, an overload, a spent budget, a
// failed login) holds them all, and no lane goes on calling the API while
// another waits. They end interrupted, not charged, and are redone when
// the session moves on.
func (o *Orchestrator) holdLanes(why string) {
	for _, l := range o.lanes.inFlight() {
		if l.active.interrupt == "" {
			l.active.interrupt = why
			l.active.cancel()
		}
	}
}

// killLaneRuns kills what survived of the runs a dead daemon's lanes had
// in flight, and records them as interrupted: their features are worked
// again from fresh lanes, not charged.
func (o *Orchestrator) killLaneRuns() {
	for _, rec := range o.session.Lanes {
		r := rec.Run
		if r == nil {
			continue
		}
		if runs, err := o.opts.Store.Runs(); err == nil {
			for _, s := range runs {
				if s.ID == r.ID && s.PID > 0 {
					r.PID = s.PID
				}
			}
		}
		if err := agents.KillGroup(r.PID, r.ID, o.opts.Project.Socket); err != nil {
			o.opts.Log.Warn("could not kill an interrupted lane's run", zap.String("run", r.ID), zap.Error(err))
		}
		ended := *r
		ended.EndedAt, ended.Outcome, ended.Ended = o.opts.Now(), "interrupted", "lost"
		o.pending.Runs = append(o.pending.Runs, ended)
		o.opts.Log.Info("a lane's run was in flight when the daemon stopped; its feature is worked again from a fresh lane", zap.String("run", r.ID), zap.String("feature", rec.Feature))
	}
}

// rebaseLane closes l, a lane whose work cannot go onto the branch as it
// is now, keeping its work under branch.LaneRef: the feature's next run
// opens a fresh lane from the branch. The project's own lane is never
// closed.
func (o *Orchestrator) rebaseLane(l *lane, why string) {
	if l.project {
		return
	}
	o.opts.Log.Info("a lane starts again from the branch", zap.String("feature", l.feature), zap.String("why", why))
	o.closeLane(l, branch.LaneRef(l.feature))
	if c, ok := o.counters[l.feature]; ok {
		c.Base, c.BaseHead = "", ""
		o.setCounters(l.feature, c)
	}
}
