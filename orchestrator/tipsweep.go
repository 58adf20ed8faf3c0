package orchestrator

// The session's last sweep. With selection (limits.full_sweep_every above
// 1) a claim's sweep may skip an earlier feature's test that no change
// touched; what the record of its inputs cannot see (the clock, a flaky
// test, what selection missed) is found by a full sweep. Before the
// session ends, the branch's tip is swept in full whenever a sweep since
// its last full one skipped anything: the morning's green features passed
// their tests on the tree the person reads. A failure there reopens the
// feature the bisection blames (judge.Miss): the one whose landing broke
// the test, or the test's own feature when it fails where it once passed.

import (
	"context"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// tipSwept is the end of the session's last sweep.
type tipSwept struct {
	sweep       judge.TipSweep
	interrupted bool
}

// lastSweep is what a claim is called by whose sweep found a failure: the
// session's last sweep has no claim.
const lastSweep = "the session's last sweep"

// sweepTip starts the full sweep of the branch's tip when the judge says
// one is due, and reports whether it did: the session ends once it has
// passed.
func (o *Orchestrator) sweepTip(l *lane) bool {
	j := o.opts.Judge
	if o.lanes.job != nil || !j.TipUnverified() {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.lanes.job = &job{what: "running every frozen test on the branch's tip before the session ends", cancel: cancel, lane: l}
	o.opts.Log.Info("a full sweep of the branch's tip before the session ends: a sweep since the last full one skipped tests")
	o.publish()
	list, events := o.listOrEmpty(), o.runEvents
	go func() {
		ev := tipSwept{sweep: j.SweepTip(ctx, list)}
		ev.interrupted = ctx.Err() != nil
		cancel()
		events <- ev
	}()
	return true
}

// onTipSwept takes the end of the session's last sweep: each test that
// failed reopens the features its bisection blames (withCulprits), and the
// loop decides again (a session with nothing reopened ends).
func (o *Orchestrator) onTipSwept(l *lane, ev tipSwept) {
	o.lanes.job = nil
	if ev.interrupted {
		o.opts.Log.Info("the sweep of the branch's tip was stopped; it runs again before the session ends")
		o.decide(l, nil)
		return
	}
	s := ev.sweep
	o.opts.Log.Info("the sweep of the branch's tip ended", zap.Int("tests", s.Ran), zap.Int("broken", len(s.Broken)))
	broken := make([]judge.Regression, len(s.Broken))
	for i, b := range s.Broken {
		if b.Alone == nil {
			tip := b.Test // no claim: the branch's tip is the tree without one
			b.Alone = &tip
		}
		broken[i] = b
	}
	o.reopenTested(lastSweep, o.reopenings(l, lastSweep, store.Run{}, withCulprits(broken)))
	o.decide(l, nil)
}

// withCulprits is broken with, before each failure that a bisection blamed
// on a landing (judge.Miss), the reopening of the feature that landed
// there: its change broke the test, so it is charged; the test's own
// feature is reopened too, uncharged (reopenReason), since its verdict no
// longer holds on the branch until the culprit's next attempt lands.
func withCulprits(broken []judge.Regression) []judge.Regression {
	var out []judge.Regression
	for _, b := range broken {
		if m := b.Miss; m != nil && m.Feature != "" && m.Feature != b.Feature {
			culprit := b
			culprit.Feature = m.Feature
			out = append(out, culprit)
		}
		out = append(out, b)
	}
	return out
}
