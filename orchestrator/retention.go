package orchestrator

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// PruneTraces implements control.PruneBackend: the old traces of finished
// features compacted now, older than req.OlderThan or graph.retention.
func (o *Orchestrator) PruneTraces(_ context.Context, req control.PruneRequest) (control.PruneResult, error) {
	age := o.cfg.Graph.Retention
	if req.OlderThan != "" {
		d, err := time.ParseDuration(req.OlderThan)
		if err != nil || d < 0 {
			return control.PruneResult{}, badRequest(fmt.Sprintf("older_than %q: want a duration >= 0 with a unit, such as 720h or 30m", req.OlderThan))
		}
		age = d
	} else if age == 0 {
		return control.PruneResult{}, badRequest("graph.retention is 0 (traces are kept forever) and no age was given: say how old a trace must be to be compacted, e.g. ctl traces --prune --older-than 720h")
	}
	return o.prune(age)
}

// prune compacts the traces older than age of the features that are
// finished (tested or blocked), as the canonical list says now. It runs
// beside the loop, never on it: the store's transactions keep it apart
// from the appends of hooks, one feature at a time.
func (o *Orchestrator) prune(age time.Duration) (control.PruneResult, error) {
	before := o.now().UTC().Add(-age)
	finished := []string{}
	for _, f := range *o.features.Load() {
		if f.Tested || f.Status == string(progress.Blocked) {
			finished = append(finished, f.ID)
		}
	}
	r, err := o.st.Prune(store.PruneOptions{Before: before, Finished: finished})
	res := control.PruneResult{Before: before.Format(time.RFC3339), Features: finished, Examined: r.Examined, Folded: r.Folded, Dropped: r.Dropped,
		Kept: r.Kept, CommandsDropped: r.CommandsDropped, CommandsKept: r.CommandsKept}
	if err != nil {
		return res, err
	}
	o.log.Info("traces compacted", zap.Time("before", before), zap.Int("features", len(finished)), zap.Int("examined", r.Examined),
		zap.Int("folded", r.Folded), zap.Int("dropped", r.Dropped), zap.Int("commands_dropped", r.CommandsDropped))
	return res, nil
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
	age := o.cfg.Graph.Retention
	if age <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	apply := func() {
		if _, err := o.prune(age); err != nil {
			o.log.Warn("could not compact old traces (graph.retention)", zap.Error(err))
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
