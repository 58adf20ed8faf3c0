package control

import "context"

// PruneRequest is the body of POST /v1/traces/prune.
type PruneRequest struct {
	// OlderThan is how old a trace must be to be compacted, a Go duration
	// ("720h"); "" means the project's graph.retention.
	OlderThan string `json:"older_than,omitempty"`
}

// PruneResult answers POST /v1/traces/prune: what compaction did to the
// old traces of finished features (store.Prune says the rules).
type PruneResult struct {
	// Before is the cutoff: traces older than it were looked at.
	Before string `json:"before"`
	// Features are the finished (tested or blocked) features whose traces
	// were looked at.
	Features []string `json:"features"`
	Examined int      `json:"examined"`
	// Folded are repeated refusals folded into the newest of their kind in
	// their run; Dropped the hooks' tool-level records; Kept the rest.
	Folded          int `json:"folded"`
	Dropped         int `json:"dropped"`
	Kept            int `json:"kept"`
	CommandsDropped int `json:"commands_dropped"`
	CommandsKept    int `json:"commands_kept"`
}

// PruneTraces compacts the old traces of finished features.
func (c *Client) PruneTraces(ctx context.Context, req PruneRequest) (PruneResult, error) {
	var res PruneResult
	err := c.post(ctx, "/v1/traces/prune", req, &res)
	return res, err
}
