package control

import "context"

// PruneRequest is the body of POST /v1/traces/prune.
type PruneRequest struct {
	// OlderThan is how old a trace must be to be compacted, a Go duration
	// ("720h"); "" means the project's graph.retention.
	OlderThan string `json:"older_than,omitempty"`
}

// PruneResult answers POST /v1/traces/prune: what compaction did to the
// old traces of finished features (store.Prune says the rules, and counts
// what it did in one; the records service says which features and which
// cutoff).
type PruneResult struct {
	// Before is the cutoff: traces older than it were looked at.
	Before string `json:"before"`
	// Features are the finished (tested or blocked) features whose traces
	// were looked at.
	Features []string `json:"features"`
	// Examined are the traces of finished features older than the cutoff.
	Examined int `json:"examined"`
	// Folded are repeated refusals (same run, gate and reason) folded into
	// the newest of them, which counts them; Dropped are the hooks' own
	// tool-level records dropped; Kept is the rest of Examined.
	Folded  int `json:"folded"`
	Dropped int `json:"dropped"`
	Kept    int `json:"kept"`
	// CommandsDropped are the successful commands, not tests, of ended
	// runs of finished features; CommandsKept what is left of those runs'
	// commands (the failing ones and the tests).
	CommandsDropped int `json:"commands_dropped"`
	CommandsKept    int `json:"commands_kept"`
}

// PruneTraces compacts the old traces of finished features.
func (c *Client) PruneTraces(ctx context.Context, req PruneRequest) (PruneResult, error) {
	var res PruneResult
	err := c.post(ctx, "/v1/traces/prune", req, &res)
	return res, err
}
