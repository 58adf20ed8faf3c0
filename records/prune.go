package records

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// PruneTraces implements control.Records: the old traces of finished
// features compacted now, older than req.OlderThan or graph.retention.
func (s *Service) PruneTraces(ctx context.Context, req control.PruneRequest) (control.PruneResult, error) {
	age := s.opts.Retention
	if req.OlderThan != "" {
		d, err := time.ParseDuration(req.OlderThan)
		if err != nil || d < 0 {
			return control.PruneResult{}, badRequest(fmt.Sprintf("older_than %q: want a duration >= 0 with a unit, such as 720h or 30m", req.OlderThan))
		}
		age = d
	} else if age == 0 {
		return control.PruneResult{}, badRequest("graph.retention is 0 (traces are kept forever) and no age was given: say how old a trace must be to be compacted, e.g. ctl traces --prune --older-than 720h")
	}
	features, err := s.opts.Features.Features(ctx)
	if err != nil {
		return control.PruneResult{}, err
	}
	return Compact(s.opts.Store, features, s.opts.Now(), age, s.log)
}

// Pruner is a store that compacts its traces.
type Pruner interface {
	Prune(store.PruneOptions) (control.PruneResult, error)
}

// Compact compacts the traces older than age, as of now, of the features
// finished (tested or blocked) in features, the canonical list as the loop
// published it: the rule of `ctl traces --prune` and of graph.retention's
// timer alike. It runs beside the loop, never on it: the store's
// transactions keep it apart from the appends of hooks, one feature at a
// time.
func Compact(st Pruner, features []control.Feature, now time.Time, age time.Duration, log *zap.Logger) (control.PruneResult, error) {
	before := now.UTC().Add(-age)
	finished := []string{}
	for _, f := range features {
		if f.Tested || f.Status == string(progress.Blocked) {
			finished = append(finished, f.ID)
		}
	}
	r, err := st.Prune(store.PruneOptions{Before: before, Finished: finished})
	r.Before, r.Features = before.Format(time.RFC3339), finished
	if err != nil {
		return r, err
	}
	log.Info("traces compacted", zap.Time("before", before), zap.Int("features", len(finished)), zap.Int("examined", r.Examined),
		zap.Int("folded", r.Folded), zap.Int("dropped", r.Dropped), zap.Int("commands_dropped", r.CommandsDropped))
	return r, nil
}
