package server

import (
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// guardRoutes serves the guard routes. Promoting and retiring a guard
// changes what holds every later agent: a person's to do.
func (s *Server) guardRoutes() {
	s.Handle("GET /v1/guards", Endpoint(func(r *http.Request) (control.GuardList, error) {
		l, err := s.loop.Guards(r.Context())
		if l.Guards == nil && err == nil {
			l.Guards = []control.Guard{}
		}
		return l, err
	}))
	s.Handle("POST /v1/guards/{id}/promote", s.peopleOnly(Endpoint(func(r *http.Request) (control.Guard, error) {
		return s.loop.PromoteGuard(r.Context(), r.PathValue("id"))
	})))
	s.Handle("POST /v1/guards/{id}/retire", s.peopleOnly(Endpoint(func(r *http.Request) (control.Guard, error) {
		return s.loop.RetireGuard(r.Context(), r.PathValue("id"))
	})))
}
