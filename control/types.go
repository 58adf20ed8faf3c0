// Package control is the daemon's local API, HTTP/JSON over a Unix socket,
// as its clients see it: the wire types, which the server (package
// control/server) shares so that the two cannot drift apart, and the client
// used by `ctxgraphd ctl`, the hook and the MCP server.
//
// The package stays light on purpose: it must not import bbolt, fsnotify,
// zap or any daemon package, because every ctl and hook invocation links it
// and those paths must start fast and never touch the state of record.
//
// Routes (version 1):
//
//	GET  /v1/status                  Status
//	GET  /v1/features                []Feature
//	POST /v1/pause                   OK
//	POST /v1/resume                  OK
//	POST /v1/stop                    OK
//	POST /v1/features/{id}/retry     OK
//	POST /v1/features/{id}/unblock   OK (body: UnblockRequest)
//	POST /v1/features/{id}/skip      OK
//
// Every error answer has an Error body.
package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNoDaemon is returned by the Client, wrapped with the socket path,
	// when the socket does not exist or nobody listens on it.
	ErrNoDaemon = errors.New("no ctxgraphd daemon listens")

	// ErrDaemonRunning is returned by Listen, wrapped with the socket path,
	// when a live daemon already answers on the socket.
	ErrDaemonRunning = errors.New("another ctxgraphd is already serving")
)

// RunTokenHeader carries a run's secret (CTXGRAPH_TOKEN in the run's
// environment) on every request of a client started inside a run. The hook
// route binds the request to its run by it; the routes for people refuse a
// request that carries one.
const RunTokenHeader = "Ctxgraph-Run-Token"

// RunTokenEnv is the variable of a run's environment that holds its token.
const RunTokenEnv = "CTXGRAPH_TOKEN"

// RunTokenBearer is the Authorization header with which a run's Claude Code
// presents its token to the daemon over HTTP (the MCP tools it serves them):
// Claude Code fills it in from the run's environment, so that the token is
// in no process's arguments, which every local user can read.
const RunTokenBearer = "Bearer ${" + RunTokenEnv + "}"

// TokenHash is how a run's token is kept where it is written down (the
// spool, the store): enough to bind a record to its run, useless to present.
func TokenHash(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// FeatureCounts counts the features of the feature list by where they are.
// Each feature is counted once: tested features are in Tested only, blocked
// ones in Blocked only, and Completed holds the features that are done but
// not tested yet. Total is the length of the list.
type FeatureCounts struct {
	Total      int `json:"total"`
	Pending    int `json:"pending"`
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"`
	Tested     int `json:"tested"`
	Blocked    int `json:"blocked"`
}

// RunInfo describes the run in flight: one `claude -p` subprocess.
type RunInfo struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Feature   string    `json:"feature,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	SessionID string    `json:"session_id"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// ToolCalls and LastTool are read off the run's stream as it goes:
	// what the agent is doing now.
	ToolCalls int    `json:"tool_calls"`
	LastTool  string `json:"last_tool,omitempty"`
	// Worker is the worker that runs it (executor: nats), "" on the
	// daemon's own machine; WaitingForWorker, that it is on the fleet's
	// queue and no worker has taken it (yet, or again after one was lost).
	Worker           string `json:"worker,omitempty"`
	WaitingForWorker bool   `json:"waiting_for_worker,omitempty"`
}

// Status is the answer of GET /v1/status and of `ctxgraphd ctl status
// --json`. State and Features are a contract: scripts read them.
type Status struct {
	State     string        `json:"state"`
	Features  FeatureCounts `json:"features"`
	Project   string        `json:"project"`
	ProjectID string        `json:"project_id"`
	PID       int           `json:"pid"`
	StartedAt time.Time     `json:"started_at"`
	Current   *RunInfo      `json:"current,omitempty"`
	// Lanes are the runs in flight in lanes of their own, one a feature
	// (limits.parallel above 1), by feature; Current is then none of them.
	Lanes            []RunInfo  `json:"lanes,omitempty"`
	BlockedInSession int        `json:"blocked_in_session"`
	WaitingUntil     *time.Time `json:"waiting_until,omitempty"`
	Message          string     `json:"message,omitempty"`
	CostUSD          float64    `json:"cost_usd"`
	Runs             int        `json:"runs"`
	// Confined says whether agent runs are confined by Claude Code's
	// sandbox; false only when the user turned confinement off.
	Confined bool `json:"confined"`
	// Working says what the daemon itself is doing, when it is busy with
	// more than waiting for a run: re-running a test, judging a run.
	Working string `json:"working,omitempty"`
	// PauseRequested: a pause takes effect once the run in flight ends.
	PauseRequested bool `json:"pause_requested,omitempty"`
}

// Feature is one feature as the daemon sees it: the list's fields plus the
// daemon's counters. GET /v1/features answers with an array of them, in the
// order of the feature list.
type Feature struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Status      string   `json:"status"`
	Tested      bool     `json:"tested"`
	DependsOn   []string `json:"depends_on,omitempty"`
	Attempts    int      `json:"attempts"`
	Retries     int      `json:"retries"`
	CostUSD     float64  `json:"cost_usd"`
	LastFailure string   `json:"last_failure,omitempty"`
	Note        string   `json:"note,omitempty"`
	// Lane is the clone the feature is worked in, with limits.parallel
	// above 1, while it has one.
	Lane string `json:"lane,omitempty"`
}

// UnblockRequest is the body of POST /v1/features/{id}/unblock. The body
// may be empty: the note is optional.
type UnblockRequest struct {
	// Note is passed to the next coding agent of the feature.
	Note string `json:"note,omitempty"`
}

// OK is the answer of the action routes, and what `ctl` prints for an
// action with --json.
type OK struct {
	OK bool `json:"ok"`
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"` // for people
	Code  string `json:"code"`  // for programs; see the Code* constants
}

// Codes of every error the API answers (contract: scripts branch on
// them). The first ones the server itself produces; the rest what it serves
// (the loop, the gates, the records).
const (
	CodeBadRequest       = "bad_request"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"

	CodeBadState      = "bad_state"       // the session is not in a state that allows it (stopped)
	CodeNotBlocked    = "not_blocked"     // unblock of a feature that is not blocked
	CodeRunning       = "running"         // a run or the daemon's own work in flight holds it
	CodeNoFeatureList = "no_feature_list" // no feature list yet
	CodeUnknownFeat   = "unknown_feature" // no such feature
	CodeUnknownTrace  = "unknown_trace"   // no such trace
	CodeUnknownGuard  = "unknown_guard"   // no such guard
	CodeGuardStatus   = "guard_status"    // a guard's promotion or retirement its status does not allow
	CodeGuardInFile   = "guard_in_file"   // a guard of guards.yaml, which only a person's edit changes
	CodeClaudeMD      = "claude_md"       // CLAUDE.md cannot take the lesson
	CodeUnknownRun    = "unknown_run"     // a hook's request with no known run's token
	CodeBadPayload    = "bad_payload"     // a hook's payload that cannot be read
	CodeNoFleet       = "no_fleet"        // a workers route of a daemon that runs its lanes itself (executor: local)
	CodeUnknownWorker = "unknown_worker"  // no such worker
)

// APIError is an error with an HTTP status. The loop, the gates or the
// records return one to answer 400, 404 or 409 with its own code and
// message (anything else they return is a 500); the Client turns every
// error answer back into an *APIError.
type APIError struct {
	HTTPStatus int
	Code       string
	Message    string
}

// Error returns the message for people, or the code when there is none.
func (e *APIError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Code != "" {
		return e.Code
	}
	return fmt.Sprintf("the daemon answered %d %s", e.HTTPStatus, statusText(e.HTTPStatus))
}

// The HTTP statuses of the API, by net/http's names, which control does
// not link (transport.go says why); control/server answers with net/http's
// own.
const (
	statusOK                  = 200
	statusBadRequest          = 400
	statusForbidden           = 403
	statusNotFound            = 404
	statusMethodNotAllowed    = 405
	statusConflict            = 409
	statusInternalServerError = 500
	statusServiceUnavailable  = 503
)

// statusText is net/http's StatusText for the statuses of the API.
func statusText(status int) string {
	switch status {
	case statusOK:
		return "OK"
	case statusBadRequest:
		return "Bad Request"
	case statusForbidden:
		return "Forbidden"
	case statusNotFound:
		return "Not Found"
	case statusMethodNotAllowed:
		return "Method Not Allowed"
	case statusConflict:
		return "Conflict"
	case statusInternalServerError:
		return "Internal Server Error"
	case statusServiceUnavailable:
		return "Service Unavailable"
	}
	return ""
}

// The server serves four parts of the daemon, each through an interface
// of its own, all of them required: the loop's commands (Loop), the gates
// that answer hooks (Gates), the project's records (Records) and the
// workers (Fleet, fleet.go). In the daemon they are the orchestrator, the
// judge, the records service (package records) and the fleet (package
// fleet); in tests, controltest's fake.

// Loop is the session: what the loop owns and only the loop changes.
type Loop interface {
	Status(ctx context.Context) (Status, error)
	Features(ctx context.Context) ([]Feature, error)
	// Changes returns a channel that is closed at the next change of what
	// Status says (GET /v1/watch).
	Changes() <-chan struct{}
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Approve approves the plan that limits.approve_plan holds the session
	// for, and goes on as Resume does.
	Approve(ctx context.Context) error
	Stop(ctx context.Context) error
	Retry(ctx context.Context, id string) error
	Unblock(ctx context.Context, id, note string) error
	Skip(ctx context.Context, id string) error
	// PromoteLesson writes the lesson (or the lesson made of a correction)
	// into ctxgraphd's section of CLAUDE.md and returns it. The loop's:
	// it writes the project's files, which it may do only while no run is
	// in flight or judged, and what it writes every later run reads.
	PromoteLesson(ctx context.Context, id string) (Trace, error)
	// Guards lists the project's guards, proposals refreshed first;
	// PromoteGuard (proposed → warn → enforce, one step a call) and
	// RetireGuard change one. The loop's: listing reads guards.yaml and
	// proposes guards from the patterns (which skip a feature's own files,
	// known from the canonical list), and every change is handed to the
	// judge, so that the next hook holds to it.
	Guards(ctx context.Context) (GuardList, error)
	PromoteGuard(ctx context.Context, id string) (Guard, error)
	RetireGuard(ctx context.Context, id string) (Guard, error)
}

// Gates answer the hooks of the daemon's runs, knowing each run by its
// token.
type Gates interface {
	// Hook judges one hook event. token is the run token the client
	// presented ("" for an interactive session, which has none).
	Hook(ctx context.Context, token string, req HookRequest) (HookResponse, error)
	// IsRunProcess reports whether pid belongs to a run of the daemon (an
	// agent's or one of its own test runs: it or an ancestor is a run's
	// process, or it carries a run's token), so that the routes for people
	// can refuse a process of a run, whatever it presents.
	IsRunProcess(pid int) bool
}

// Records are what happened in the project, read from the store: the
// traces and where each stands in the context graph, the patterns, the
// report; and the traces people and agents add, and their compaction.
type Records interface {
	Traces(ctx context.Context, q TraceQuery) ([]Trace, error)
	Trace(ctx context.Context, id string) (Trace, error)
	TraceLinks(ctx context.Context, id string) (TraceLinks, error)
	// AddLesson records a person's lesson, which later runs are told.
	AddLesson(ctx context.Context, text string) (Trace, error)
	// StoreTrace stores what an agent says; token is its run's ("" from
	// outside the daemon's runs).
	StoreTrace(ctx context.Context, token string, req TraceRequest) (Trace, error)
	Patterns(ctx context.Context, atLeast int) ([]Pattern, error)
	Report(ctx context.Context) (Report, error)
	PruneTraces(ctx context.Context, req PruneRequest) (PruneResult, error)
}

// CodeForStatus names an HTTP status for answers that carry no code of
// their own: the mux's 404 and 405, or a non-JSON body from something that
// is not our server.
func CodeForStatus(status int) string {
	switch status {
	case statusBadRequest:
		return CodeBadRequest
	case statusForbidden:
		return CodeForbidden
	case statusNotFound:
		return CodeNotFound
	case statusMethodNotAllowed:
		return CodeMethodNotAllowed
	case statusConflict:
		return CodeConflict
	case statusServiceUnavailable:
		return CodeUnavailable
	}
	return CodeInternal
}
