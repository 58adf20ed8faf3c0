package judge

// The backstop. Selection (selection.go) skips a test only when its record
// rules the change out, but a record cannot see everything a test depends
// on: the clock, chance, what nobody thought of. The daemon therefore
// knows which landed trees were swept in full (every frozen test run, and
// passed), and the orchestrator sweeps the branch's tip in full before a
// session ends when it was not (SweepTip). A test that a full sweep finds
// failing is bisected over the session's landings, from the last one it
// passed on, to the landing whose tree first fails it (Miss): that
// landing's feature broke it, and no innocent one is charged.

import (
	"context"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Miss is what the bisection of a failing frozen test found.
type Miss struct {
	// Of is the feature whose test fails.
	Of string
	// Landing is the session's landing (1 for its first) whose tree is
	// the first to fail the test, and Tree that tree.
	Landing int
	Tree    gitrepo.Tree
	// Feature is the feature that landed there: its change broke the
	// test. "" when the test fails now on the landing it last passed on
	// too: no change broke it (the clock, a flaky test, the machine), and
	// it is the test's own feature's.
	Feature string
}

// landing is a claim that landed: its feature, and the branch's tree
// after it.
type landing struct {
	feature string
	tree    gitrepo.Tree
}

// Landed records that feature's claim landed, tree being the branch's
// tree now: the bisections run over the landings, and the session's last
// sweep is of the last one.
func (j *Judge) Landed(feature string, tree gitrepo.Tree) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.landings = append(j.landings, landing{feature: feature, tree: tree})
	// Only the tip's verification is ever asked for (TipUnverified): what
	// other candidates' sweeps found goes, so that the night's trees are
	// not all kept. A candidate swept before and landing after this one
	// lands on a tree merged onto this, which no sweep has verified.
	verified := j.verified[tree]
	clear(j.verified)
	if verified {
		j.verified[tree] = true
	}
}

// TipUnverified reports whether the branch's tip, the last landing's
// tree, was not swept in full: a sweep on it skipped tests, or failed, or
// was cut short.
func (j *Judge) TipUnverified() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.landings) > 0 && !j.verified[j.landings[len(j.landings)-1].tree]
}

// noteSwept records whether a sweep on tree ran every frozen test due and
// each passed: such a tree is verified, and needs no last sweep.
func (j *Judge) noteSwept(tree gitrepo.Tree, complete bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.verified[tree] = complete
}

// TipSweep is the session's last sweep: the tests it ran, and those that
// failed, each bisected (Regression.Miss).
type TipSweep struct {
	Ran    int
	Broken []Regression
}

// SweepTip runs every frozen test of l's tested features on the branch's
// tip, the last landing's tree, in the project's own work tree, and
// bisects each failure. Nothing, when nothing landed.
func (j *Judge) SweepTip(ctx context.Context, l *progress.List) TipSweep {
	j.mu.Lock()
	if len(j.landings) == 0 {
		j.mu.Unlock()
		return TipSweep{}
	}
	tip := j.landings[len(j.landings)-1].tree
	j.fullNext = true
	j.mu.Unlock()
	broken, swept := j.sweep(ctx, Root{}, l, "", tip)
	for i := range broken {
		broken[i].Miss = j.bisect(ctx, Root{}, broken[i], tip)
	}
	return TipSweep{Ran: swept.Ran, Broken: broken}
}

// bisect finds the landing that broke b's test, which fails on failing (a
// landing's tree): from the last landing whose tree it passed on
// (b.lastPass, from its record) to failing, it runs the test on the tree
// halfway, and halves the range by its outcome, until two landings are
// next to each other. It assumes, as every bisection does, that once a
// landing broke the test every later one fails it too. nil when it cannot
// say: failing is not a landing's, or no landing before it is known to
// have passed the test, or its record passed on failing itself (no change
// broke it there).
func (j *Judge) bisect(ctx context.Context, root Root, b Regression, failing gitrepo.Tree) *Miss {
	j.mu.Lock()
	landings := append([]landing(nil), j.landings...)
	j.mu.Unlock()
	hi := -1
	for i, l := range landings {
		if l.tree == failing {
			hi = i
		}
	}
	// From the last landing before it whose tree the test's record passed
	// on; a record of a tree that never landed (the candidate of a claim
	// refused) says nothing of the landings, and the test's own feature's
	// last landing is where it surely passed: its claim's run, on the tree
	// that landed.
	lo := -1
	for _, same := range []func(landing) bool{
		func(l landing) bool { return b.lastPass != "" && l.tree == b.lastPass },
		func(l landing) bool { return l.feature == b.Feature },
	} {
		for i := hi - 1; i >= 0 && lo < 0; i-- {
			if same(landings[i]) {
				lo = i
			}
		}
	}
	if hi < 0 || lo < 0 || b.lastPass == failing {
		return nil
	}
	test := b.Test.Command
	passes := func(i int) (bool, bool) {
		r := j.RunTestIn(ctx, root, landings[i].tree, test)
		return r.Passed(), !r.Interrupted
	}
	ok, ran := passes(lo)
	if !ran {
		return nil
	}
	if !ok {
		// It fails where it passed: no landing's doing.
		return &Miss{Of: b.Feature, Landing: lo + 1, Tree: landings[lo].tree}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, ran := passes(mid)
		if !ran {
			return nil
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	m := &Miss{Of: b.Feature, Landing: hi + 1, Tree: landings[hi].tree, Feature: landings[hi].feature}
	if m.Feature == b.Feature {
		m.Feature = "" // its own landing, which its own test passed on then
	}
	j.log.Info("a failing frozen test bisected to the landing that broke it", zap.String("feature", b.Feature), zap.Int("landing", m.Landing), zap.String("by", m.Feature))
	return m
}
