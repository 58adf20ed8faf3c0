package server

import (
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// fleetRoutes serves the workers routes. All of them are for people, the
// list too: it names the credentials files, and who holds a worker's
// credentials runs lanes and sees their code.
func (s *Server) fleetRoutes() {
	s.Handle("GET /v1/workers", s.peopleOnly(Endpoint(func(r *http.Request) (control.WorkerList, error) {
		l, err := s.fleet.Workers(r.Context())
		if l.Workers == nil && err == nil {
			l.Workers = []control.Worker{} // an array for scripts
		}
		return l, err
	})))
	s.Handle("POST /v1/workers", s.peopleOnly(Endpoint(func(r *http.Request) (control.NewWorker, error) {
		var req control.AddWorkerRequest
		if err := ReadJSON(r, &req); err != nil {
			return control.NewWorker{}, err
		}
		return s.fleet.AddWorker(r.Context(), req.Name)
	})))
	s.Handle("DELETE /v1/workers/{name}", s.peopleOnly(Endpoint(func(r *http.Request) (control.OK, error) {
		return done(s.fleet.RevokeWorker(r.Context(), r.PathValue("name")))
	})))
}
