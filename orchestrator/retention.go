package orchestrator

import (
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/records"
)

// prune compacts the traces older than age of the features that are
// finished, as the canonical list says now (records.Compact).
func (o *Orchestrator) prune(age time.Duration) (control.PruneResult, error) {
	return records.Compact(o.opts.Store, *o.view.features.Load(), o.opts.Now(), age, o.opts.Log)
}

// retentionEvery is how often graph.retention is applied: a tenth of it,
// between a minute and a day, so that a trace is compacted at most a tenth
// of the retention late.
func retentionEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Minute), 24*time.Hour)
}

// startRetention applies graph.retention now and then every
// retentionEvery, on a timer, until the returned stop is called (it waits
// for a compaction under way). Nothing when the retention is 0.
func (o *Orchestrator) startRetention() (stop func()) {
	age := o.opts.Config.Graph.Retention
	if age <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	apply := func() {
		if _, err := o.prune(age); err != nil {
			o.opts.Log.Warn("could not compact old traces (graph.retention)", zap.Error(err))
		}
	}
	go func() {
		defer close(done)
		apply() // at start: what aged while the daemon was down
		t := time.NewTimer(retentionEvery(age))
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				apply()
				t.Reset(retentionEvery(age))
			}
		}
	}()
	return func() { close(quit); <-done }
}
