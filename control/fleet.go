package control

import (
	"context"
	"net/url"
	"time"
)

// Fleet is the daemon's workers: the machines that run lanes over NATS
// JetStream (executor: nats), each with credentials the daemon issued. A
// daemon whose lanes run on its own machine (executor: local) answers
// every call with CodeNoFleet and how to have workers.
type Fleet interface {
	// Workers lists the workers with credentials, and where they connect.
	Workers(ctx context.Context) (WorkerList, error)
	// AddWorker issues credentials to a new worker: 400 CodeBadRequest
	// for a name that is not allowed, 409 CodeConflict for one that is
	// taken.
	AddWorker(ctx context.Context, name string) (NewWorker, error)
	// RevokeWorker removes a worker's credentials: its connections close
	// at once. 404 CodeUnknownWorker when there is no such worker.
	RevokeWorker(ctx context.Context, name string) error
}

// Worker is a worker the daemon issued credentials to.
type Worker struct {
	Name string `json:"name"`
	// PublicKey is the worker's NKey user, as the NATS server knows it.
	PublicKey string `json:"public_key"`
	// Credentials is the path of its credentials file on the daemon's
	// machine, for a person to copy to the worker's.
	Credentials string `json:"credentials"`
	// Connected: the worker is connected to the fleet's server now.
	Connected bool `json:"connected"`
	// Runs are the ids of the runs whose attempts it holds now.
	Runs []string `json:"runs"`
	// LastHeard is when the daemon last had a message from it (absent:
	// never, since the daemon started).
	LastHeard *time.Time `json:"last_heard,omitempty"`
	// Findings counts what it did that no honest worker does (a message
	// about a run not its own, an answer asked for outside its inbox, a
	// flood), and LastFindings says the last few, newest last.
	Findings     int      `json:"findings"`
	LastFindings []string `json:"last_findings,omitempty"`
}

// WorkerList answers GET /v1/workers.
type WorkerList struct {
	// URL is where workers connect: the fleet's NATS server.
	URL     string   `json:"url"`
	Workers []Worker `json:"workers"`
}

// AddWorkerRequest is the body of POST /v1/workers.
type AddWorkerRequest struct {
	Name string `json:"name"`
}

// NewWorker answers POST /v1/workers: the worker, and where it connects,
// so that the command that starts it can be said whole.
type NewWorker struct {
	Worker
	URL string `json:"url"`
}

// Workers lists the daemon's workers.
func (c *Client) Workers(ctx context.Context) (WorkerList, error) {
	var l WorkerList
	err := c.get(ctx, "/v1/workers", &l)
	return l, err
}

// AddWorker issues credentials to a new worker.
func (c *Client) AddWorker(ctx context.Context, name string) (NewWorker, error) {
	var w NewWorker
	err := c.post(ctx, "/v1/workers", AddWorkerRequest{Name: name}, &w)
	return w, err
}

// RevokeWorker revokes a worker's credentials.
func (c *Client) RevokeWorker(ctx context.Context, name string) error {
	if name == "" {
		return &APIError{HTTPStatus: statusBadRequest, Code: CodeBadRequest, Message: "a worker's name is needed, for example build-1"}
	}
	return c.do(ctx, "DELETE", "/v1/workers/"+url.PathEscape(name), nil, nil)
}
