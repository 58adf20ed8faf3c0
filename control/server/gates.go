package server

import (
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// gateRoutes serves the hook and trace routes of a backend that enforces
// gates.
func (s *Server) gateRoutes(g control.GateBackend) {
	s.Handle("POST /v1/hook", Endpoint(func(r *http.Request) (control.HookResponse, error) {
		var req control.HookRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.HookResponse{}, err
		}
		return g.Hook(r.Context(), r.Header.Get(control.RunTokenHeader), req)
	}))
	s.Handle("GET /v1/traces", Endpoint(func(r *http.Request) ([]control.Trace, error) {
		q, err := control.ParseTraceQuery(r.URL.Query())
		if err != nil {
			return nil, err
		}
		ts, err := g.Traces(r.Context(), q)
		if ts == nil && err == nil {
			ts = []control.Trace{}
		}
		return ts, err
	}))
	s.Handle("GET /v1/traces/{id}", Endpoint(func(r *http.Request) (control.Trace, error) {
		return g.Trace(r.Context(), r.PathValue("id"))
	}))
	if lb, ok := g.(control.TraceLinksBackend); ok {
		s.Handle("GET /v1/traces/{id}/links", Endpoint(func(r *http.Request) (control.TraceLinks, error) {
			return lb.TraceLinks(r.Context(), r.PathValue("id"))
		}))
	}
}
