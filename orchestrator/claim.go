package orchestrator

// A tester's claim, one value from the change of the list that makes it to
// the commit that lands it. The lane holds it while its run is in flight
// (what the lane's list shows, lane.withClaim); the end of the run gives
// it what it is judged against (lane.judging: its run's own record, where
// its feature's work began, and for a clone the branch's head, read once);
// the judge's judgement is put in it (the verdict); and an accepted claim
// is committed from it alone (lane.commit). Nothing of the claim is read
// again from anywhere else on the way.

import (
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// claim is a tester's tested: true for its run's feature, on its way to
// the branch.
type claim struct {
	// run is the tester's run that wrote it.
	run store.Run
	// problem is why the run's own record does not back it
	// (lane.claimProblem), "" when it does.
	problem string
	// base is the work tree when its feature's work began, and baseHead
	// the commit HEAD was at then (the feature's counters): the project's
	// own tree's claim is judged beside base, and the branch takes its
	// commit only when the tree held nothing but HEAD then
	// (branch.Verdict).
	base     gitrepo.Tree
	baseHead string
	// onto is, for a clone's claim, the commit the branch was at when it
	// was judged, and ontoTree that commit's tree: the candidate is the
	// clone's tree merged onto it, and its commit moves the branch only
	// if the branch is still there (branch.CommitLane). "" for the
	// project's own tree, or a claim judged without its sweep.
	onto     string
	ontoTree gitrepo.Tree
	// jd is its judgement, once judged: the tree the daemon's test ran on
	// and the candidate its verdict commits.
	jd judge.Judgement
}

// feature is the feature the claim says is tested.
func (c *claim) feature() string { return c.run.Feature }

// request puts into in, the judge's request for the claim's run in l,
// what the claim is judged on when in asks for its regression sweep: a
// clone's claim on its candidate, the clone's tree merged onto the
// branch's head over the commit the lane was made from; and an earlier
// feature's test failing there on the tree without the claim's change:
// that head's, or for the project's own tree where the feature's work
// began.
func (c *claim) request(in *judge.RunEnd, l *lane) {
	switch {
	case !in.Sweep:
	case !l.project:
		in.Onto, in.OntoBase, in.Alone = c.onto, l.baseHead, c.ontoTree
	default:
		in.Alone = c.base
	}
}

// verdict is what the branch is told of the claim, accepted for f with
// the approval trace: its commit is of tree, exactly what the daemon's
// test ran on.
func (c *claim) verdict(f *progress.Feature, trace string, tree gitrepo.Tree) branch.Verdict {
	return branch.Verdict{Feature: f, Attempt: c.run.Attempt, Run: c.run.ID, Trace: trace, Tree: tree, Base: c.base, BaseHead: c.baseHead}
}
