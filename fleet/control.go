package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// Control is the fleet as the control API serves it (control.Fleet): the
// workers of s, and its errors as the API's.
func (s *Server) Control() control.Fleet { return controlFleet{s} }

type controlFleet struct{ s *Server }

func (c controlFleet) Workers(context.Context) (control.WorkerList, error) {
	ws, err := c.s.Workers()
	if err != nil {
		return control.WorkerList{}, err
	}
	l := control.WorkerList{URL: c.s.ClientURL(), Workers: make([]control.Worker, 0, len(ws))}
	connected := c.s.connected()
	c.s.mu.Lock()
	activity := c.s.activity
	c.s.mu.Unlock()
	for _, w := range ws {
		cw := w.control()
		cw.Connected, cw.Runs = connected[w.PublicKey], []string{}
		if activity != nil {
			a := activity(w.Name)
			if a.Runs != nil {
				cw.Runs = a.Runs
			}
			if !a.LastHeard.IsZero() {
				t := a.LastHeard.UTC()
				cw.LastHeard = &t
			}
			cw.Findings, cw.LastFindings = a.Findings.Count, a.Findings.Last
		}
		l.Workers = append(l.Workers, cw)
	}
	return l, nil
}

func (c controlFleet) AddWorker(ctx context.Context, name string) (control.NewWorker, error) {
	w, err := c.s.AddWorker(ctx, name)
	if err != nil {
		return control.NewWorker{}, apiError(err)
	}
	return control.NewWorker{Worker: w.control(), URL: c.s.ClientURL()}, nil
}

func (c controlFleet) RevokeWorker(_ context.Context, name string) error {
	if err := c.s.RevokeWorker(name); err != nil {
		if errors.Is(err, ErrUnknownWorker) {
			return &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownWorker,
				Message: fmt.Sprintf("no worker %q: `ctxgraphd ctl workers` lists them", name)}
		}
		return apiError(err)
	}
	return nil
}

// apiError is err with the API's status and code for its kind.
func apiError(err error) error {
	switch {
	case errors.Is(err, ErrBadName):
		return &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadRequest, Message: err.Error()}
	case errors.Is(err, ErrWorkerExists):
		return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeConflict, Message: err.Error()}
	}
	return err
}

func (w Worker) control() control.Worker {
	return control.Worker{Name: w.Name, PublicKey: w.PublicKey, Credentials: w.Path}
}

// Local is the control API's fleet of a daemon whose lanes run on its own
// machine (executor: local): it has no workers, and every call says how to
// have them.
var Local control.Fleet = local{}

type local struct{}

var errLocal = &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeNoFleet,
	Message: "this daemon runs its lanes on its own machine (executor: local) and has no workers: set executor: nats in .claude/ctxgraphd.yaml and restart the daemon (docs/operations.md, workers over NATS)"}

func (local) Workers(context.Context) (control.WorkerList, error) {
	return control.WorkerList{}, errLocal
}
func (local) AddWorker(context.Context, string) (control.NewWorker, error) {
	return control.NewWorker{}, errLocal
}
func (local) RevokeWorker(context.Context, string) error { return errLocal }
