package orchestrator

import "github.com/ctxgraphd/ctxgraphd/records"

// records is what the socket serves beside the harness's loop: the records
// of the same store, stamped and linked by the same judge.
func (h *harness) records() *records.Service {
	o := h.current
	return records.New(records.Options{Store: h.st, Project: h.proj, Judge: o.opts.Judge, Features: o, Retention: h.cfg.Graph.Retention, Now: o.opts.Now})
}
