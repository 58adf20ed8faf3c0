package server

import (
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// pruneRoutes serves POST /v1/traces/prune. Compaction drops records for
// good: a person's to ask for.
func (s *Server) pruneRoutes() {
	s.Handle("POST /v1/traces/prune", s.peopleOnly(Endpoint(func(r *http.Request) (control.PruneResult, error) {
		var req control.PruneRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.PruneResult{}, err
		}
		res, err := s.records.PruneTraces(r.Context(), req)
		if res.Features == nil {
			res.Features = []string{}
		}
		return res, err
	})))
}
