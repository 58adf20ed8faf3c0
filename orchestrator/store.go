package orchestrator

import (
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/records"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// StateOfRecord is what the loop needs of the store: where it commits
// every change before acting on it, and reads back what it recorded.
// *store.Store is the one the daemon uses; a test hands in one that
// fails a kind of write, to hold the loop to its reaction (persistFailed).
type StateOfRecord interface {
	// Load reads the state of record when the loop starts; Path names it
	// in messages.
	Load() (store.State, error)
	Path() string
	// Apply commits one batch (the session with the transitions, runs,
	// counters and list that ride with it) or nothing.
	Apply(store.Batch) error
	Runs() ([]store.Run, error)
	Guards() ([]guards.Rule, error)
	PutGuards(...guards.Rule) error
	Commands(run string) ([]control.CommandRecord, error)
	AppendCommand(control.CommandRecord) error
	// A run's precedents are chosen from it (graph.Select), and
	// graph.retention compacts it (records.Compact).
	graph.Index
	records.Pruner
}

var _ StateOfRecord = (*store.Store)(nil)
