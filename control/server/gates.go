package server

import (
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// gateRoutes serves the hook route, which the gates answer, and the trace
// routes, which the records do.
func (s *Server) gateRoutes() {
	s.Handle("POST /v1/hook", Endpoint(func(r *http.Request) (control.HookResponse, error) {
		var req control.HookRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.HookResponse{}, err
		}
		return s.gates.Hook(r.Context(), r.Header.Get(control.RunTokenHeader), req)
	}))
	s.Handle("GET /v1/traces", Endpoint(func(r *http.Request) ([]control.Trace, error) {
		q, err := control.ParseTraceQuery(r.URL.Query())
		if err != nil {
			return nil, err
		}
		ts, err := s.records.Traces(r.Context(), q)
		if ts == nil && err == nil {
			ts = []control.Trace{}
		}
		return ts, err
	}))
	s.Handle("GET /v1/traces/{id}", Endpoint(func(r *http.Request) (control.Trace, error) {
		return s.records.Trace(r.Context(), r.PathValue("id"))
	}))
	s.Handle("GET /v1/traces/{id}/links", Endpoint(func(r *http.Request) (control.TraceLinks, error) {
		return s.records.TraceLinks(r.Context(), r.PathValue("id"))
	}))
}
