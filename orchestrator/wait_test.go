package orchestrator

import (
	"context"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// statusWithin reports whether o's status comes to hold cond within d. It
// wakes at each change of the status (Changes), as `ctl status --watch`
// does, not at a pace of its own; it is for the scripts' goroutines, which
// must not call t.Fatal.
func statusWithin(o *Orchestrator, d time.Duration, cond func(control.Status) bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		changed := o.Changes() // before the read, so that no change is missed
		if st, _ := o.Status(context.Background()); cond(st) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			st, _ := o.Status(context.Background())
			return cond(st)
		}
	}
}
