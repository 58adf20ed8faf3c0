package control

import (
	"time"
)

// The report (GET /v1/report, and `ctxgraphd report` without a daemon):
// what happened in a project, built from the store by internal/report.

// Report is what happened in a project.
type Report struct {
	Project     string    `json:"project"`
	Dir         string    `json:"dir"`
	GeneratedAt time.Time `json:"generated_at"`
	// State is the session's state (done, stopped, waiting, …) and
	// Message why it is there.
	State   string       `json:"state"`
	Message string       `json:"message,omitempty"`
	Started time.Time    `json:"started,omitzero"` // the first transition
	Last    time.Time    `json:"last,omitzero"`    // the last transition or run's end
	Totals  ReportTotals `json:"totals"`
	Cost    ReportCost   `json:"cost"`
	// Features are in the list's order.
	Features []ReportFeature `json:"features"`
	// Runs are the timeline, in the order they started.
	Runs []ReportRun `json:"runs"`
	// Refusals are what the gates refused or put back, oldest first.
	Refusals []Refusal `json:"refusals"`
	// Verify is what the last runs of `ctxgraphd verify` found, as they
	// recorded themselves in the project's state directory.
	Verify ReportVerify `json:"verify"`
}

// ReportVerify holds the last run of `ctxgraphd verify` in each of its
// modes: confined as the daemon's own test runs are, and --unconfined, in
// the caller's own environment. nil: that mode was never run (or not
// since the state directory was made).
type ReportVerify struct {
	Confined   *VerifyRun `json:"confined"`
	Unconfined *VerifyRun `json:"unconfined"`
	// Unreadable says which record could not be read and what to do: a
	// mode whose record is unreadable is nil, and must not read as never
	// run.
	Unreadable string `json:"unreadable,omitempty"`
}

// VerifyRun is one run of `ctxgraphd verify`: when, on which commit, and
// each feature's result.
type VerifyRun struct {
	Time       time.Time `json:"time"`
	Unconfined bool      `json:"unconfined"`
	// Rev is the revision as given (--at), Commit the commit it named.
	Rev      string          `json:"rev"`
	Commit   string          `json:"commit"`
	Passed   bool            `json:"passed"`
	Features []VerifyFeature `json:"features"`
}

// VerifyFeature is one feature's frozen test in a verify run.
type VerifyFeature struct {
	ID      string `json:"id"`
	Passed  bool   `json:"passed"`
	Summary string `json:"summary,omitempty"`
}

// ReportTotals count the session.
type ReportTotals struct {
	Features int `json:"features"`
	Tested   int `json:"tested"`
	Blocked  int `json:"blocked"`
	Open     int `json:"open"` // neither tested nor blocked
	Runs     int `json:"runs"`
	Refusals int `json:"refusals"`
	// LostToRefusals is ReportRun.LostToRefusals added up: the turns a night's
	// false refusals cost.
	LostToRefusals int `json:"lost_to_refusals"`
	// AgentTime is the time runs took, start to end, added up.
	AgentTime time.Duration `json:"agent_time_ns"`
}

// ReportCost says where the money went.
type ReportCost struct {
	SessionUSD float64            `json:"session_usd"`
	ByRole     map[string]float64 `json:"by_role"`
	// PerTestedFeatureUSD is the session's cost over its tested features
	// (0 when none is): what a green feature cost, failures included.
	PerTestedFeatureUSD float64 `json:"per_tested_feature_usd"`
}

// A feature's outcome in a report: tested or blocked, or its status
// (completed and not yet tested, in_progress, pending).
const (
	OutcomeTested  = "tested"
	OutcomeBlocked = "blocked"
)

// ReportFeature is one feature's night.
type ReportFeature struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Outcome string `json:"outcome"` // OutcomeTested, OutcomeBlocked, or its status
	Test    string `json:"test,omitempty"`
	// Attempts is the highest coding attempt, Runs every run of it.
	Attempts int           `json:"attempts"`
	Runs     int           `json:"runs"`
	CostUSD  float64       `json:"cost_usd"`
	Time     time.Duration `json:"time_ns"`
	// Commit is the commit of exactly the tree it was tested on; Branch
	// the branch that took it, "" when only its ref did, and OffBranch
	// then why.
	Commit    string `json:"commit,omitempty"`
	Branch    string `json:"branch,omitempty"`
	OffBranch string `json:"off_branch,omitempty"`
	// Why is why it is blocked, or what its last attempt failed on.
	Why string `json:"why,omitempty"`
	// Kept is the ref that keeps a blocked feature's work, "" otherwise.
	Kept     string `json:"kept,omitempty"`
	Refusals int    `json:"refusals"`
}

// ReportRun is one run on the timeline.
type ReportRun struct {
	ID      string    `json:"id"`
	Role    string    `json:"role"`
	Feature string    `json:"feature,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	// Outcome is ok, failed, interrupted, transient, or "" in flight.
	Outcome string  `json:"outcome"`
	Failure string  `json:"failure,omitempty"`
	CostUSD float64 `json:"cost_usd"`
	Turns   int     `json:"turns"`
	Summary string  `json:"summary,omitempty"`
	Commit  string  `json:"commit,omitempty"`
	// LostToRefusals counts the turns a tester run lost to refusals of
	// honest work: the refusals of its claim (tested-needs-evidence) and
	// of its stop (tester-must-test) before the verdict accepted its claim
	// in the same run. A refusal the run never got past is not counted:
	// it may have been right.
	LostToRefusals int `json:"lost_to_refusals,omitempty"`
}

// Refusal is a gate's refusal or revert.
type Refusal struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Feature string    `json:"feature,omitempty"`
	Role    string    `json:"role,omitempty"`
	Gate    string    `json:"gate,omitempty"`
	Code    string    `json:"code,omitempty"`
	What    string    `json:"what"`
}

// Kinds of pattern.
const (
	PatternRefusal        = "refusal"         // the same gate refused agents of one role for the same reason
	PatternFailingCommand = "failing_command" // the same command failed again and again
	PatternRevertedFile   = "reverted_file"   // the same file was put back after runs again and again
)

// Pattern is something that happened again and again: what a person (or a
// guard, later) should look at (GET /v1/patterns; graph.Patterns finds them).
type Pattern struct {
	Kind string `json:"kind"`
	// What says it in a line: "coding-agent refused by scope
	// (out_of_scope)", the command, the file.
	What     string    `json:"what"`
	Role     string    `json:"role,omitempty"`
	Gate     string    `json:"gate,omitempty"`
	Code     string    `json:"code,omitempty"`
	Count    int       `json:"count"`
	Features []string  `json:"features"`
	Examples []string  `json:"examples"` // trace ids, or run ids for commands: the newest few
	Last     time.Time `json:"last"`
	// Path is the project file every trace of the pattern was about,
	// when they were all about the same one (a file put back, a refusal of
	// writes to one file): what a guard can match.
	Path string `json:"path,omitempty"`
	// Command is the failing command, whole (What clips it), and Test
	// whether it was a test run: a failing test is a verdict, not a
	// mistake to guard against.
	Command string `json:"command,omitempty"`
	Test    bool   `json:"test,omitempty"`
}
