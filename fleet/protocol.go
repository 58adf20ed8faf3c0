package fleet

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// The messages between the daemon and its workers, all JSON. One run of a
// lane crosses as follows (subjects in subjects.go):
//
//  1. The daemon commits the lane's work tree as it is (the run's base),
//     puts its bundle in the base bucket, keyed by commit, and publishes a
//     Job on the work queue. A Job holds no secret: any worker may pull it.
//  2. A worker pulls the Job, through the daemon (Pull: the daemon holds
//     each worker to its share of the queue's waiting pulls), and asks
//     for it on its Claim subject. The
//     daemon binds the run's attempt to that worker and answers with an
//     Assignment: the run's token and all the worker needs to start it. A
//     Job the daemon no longer wants (an attempt given up, a daemon
//     restarted since) is refused, and the worker drops it.
//  3. While the run works, the worker sends Heartbeats and the run's
//     Events, and its hooks ask the daemon on its Hook subject (HookCall);
//     the daemon answers only for a token bound to that worker.
//  4. When the run ends, the worker commits the tree it left on the base,
//     puts the bundle of base..tip in its results bucket and sends an
//     Outcome on its Result subject. The daemon takes the bundle into a
//     quarantine ref, checks it (branch.ImportResult), and only then puts
//     its tree in the lane's work tree, where the run is judged as a local
//     one.
//
// A worker that stops sending heartbeats loses the attempt: its token is
// revoked, and the run is published again as the next attempt, with a
// new token, for any worker. Whatever the old attempt still sends is
// refused.

// Job is a lane's run waiting for a worker, as the work queue holds it.
type Job struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"` // 1, then one more for every worker lost
	Feature string `json:"feature,omitempty"`
	Base    string `json:"base"`   // the commit the worker clones
	Bundle  string `json:"bundle"` // its bundle's key in the base bucket
	// Deps name the lane's dependency directories, whose archive is in
	// the base bucket under Bundle+".deps".
	Deps []string `json:"deps,omitempty"`
	// Deadline: a Job still unclaimed then is stale (the daemon gave the
	// attempt up, or restarted since).
	Deadline time.Time `json:"deadline"`
}

// Pull is a worker's request, on its Pull subject, for the next Job of
// the work queue. The daemon pulls it from the queue on the worker's
// behalf and answers with the Job's message as the queue gave it, and
// the subject to acknowledge it on in the AckHeader; an answer without
// that header is no Job (none came within Wait, or the worker is past its
// share of pulls, the answer's Status then saying why).
type Pull struct {
	// Wait is how long the daemon waits for a Job, at most pullMaxExpires.
	Wait time.Duration `json:"wait"`
}

// AckHeader names, on the daemon's answer to a Pull, the Job as the
// worker names it in its Acks.
const AckHeader = "Ctxgraphd-Ack"

// Ack is a worker's word on a Job the daemon pulled for it, on its Ack
// subject: the daemon acknowledges the Job on the work queue for it, for a
// Job it handed to that worker only. No worker acknowledges on the queue
// itself: JetStream's ack subjects take a pull (+NXT) and any Job's
// sequence, whoever was given it.
type Ack struct {
	// Job is the AckHeader of the daemon's answer that gave the Job.
	Job string `json:"job"`
	// Kind is AckDone, AckGiveBack, AckWorking or AckDrop.
	Kind string `json:"kind"`
	// Delay, with AckGiveBack: how long the Job stays out of every
	// worker's reach (at most pullMaxExpires).
	Delay time.Duration `json:"delay,omitempty"`
}

// The kinds of an Ack: JetStream's ack, nak, in progress and term.
const (
	AckDone     = "done"
	AckGiveBack = "give-back"
	AckWorking  = "working"
	AckDrop     = "drop"
)

// Claim is a worker's request for a Job it pulled.
type Claim struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
	// Dir is the worker's clone, where the run will work: the hooks' paths
	// are read against it.
	Dir string `json:"dir"`
	// Writable are the directories outside Dir the run may write there:
	// the worker's temp and caches, which its sandbox lets it write and
	// its hooks' file tools then may too.
	Writable []string `json:"writable,omitempty"`
}

// Assignment answers a Claim: the run is the worker's, or Refused says
// why not.
type Assignment struct {
	Refused string `json:"refused,omitempty"`
	// Retry, with Refused: the job is another worker's to take; the worker
	// puts it back on the queue rather than drop it.
	Retry bool `json:"retry,omitempty"`

	Token string    `json:"token,omitempty"`
	Spec  RemoteRun `json:"spec"`
	// Heartbeat is how often the worker must say it is alive; the daemon
	// gives the attempt up after missing a few (HeartbeatsMissed).
	Heartbeat time.Duration `json:"heartbeat"`
	// MaxBundleBytes bounds the base bundle the worker reads and the
	// result bundle the daemon will read.
	MaxBundleBytes int64 `json:"max_bundle_bytes"`
	// Base, Bundle and Deps are the Job's, from the daemon's own record of
	// the attempt: the worker clones these, never what the Job it pulled
	// says (a Job is not proved the daemon's by the queue it came from).
	Base   string   `json:"base"`
	Bundle string   `json:"bundle"`
	Deps   []string `json:"deps,omitempty"`
	// BundleDigest and DepsDigest are the objects' digests as the daemon
	// put them: the worker reads them only so (a bucket is not proved the
	// daemon's by its name: the server writes where a JetStream answer is
	// sent).
	BundleDigest string `json:"bundle_digest"`
	DepsDigest   string `json:"deps_digest,omitempty"`
	// Copies are the person's untracked files of lanes.copy (.env), for
	// the worker's clone: secrets, so in the Assignment, which only the
	// bound worker gets, never in the Job. The worker places them before
	// the setup and the agent, and no result of its carries them.
	Copies lanecopy.Files `json:"copies"`
}

// HeartbeatsMissed is how many heartbeats in a row an attempt may miss
// before the daemon gives it up.
const HeartbeatsMissed = 4

// RemoteRun is agents.Spec as it crosses to a worker: what is the run's
// and no path of the daemon's machine. The worker remakes the settings,
// the hooks and the sandbox, in its own clone and with its own paths.
type RemoteRun struct {
	RunID     string    `json:"run_id"`
	Role      role.Role `json:"role"`
	FeatureID string    `json:"feature,omitempty"`
	Attempt   int       `json:"attempt"`
	// SessionID is the conversation's id; a run on a worker never resumes
	// one (Executor.remoteRun).
	SessionID    string  `json:"session_id"`
	Prompt       string  `json:"prompt"`
	SystemPrompt string  `json:"system_prompt"`
	MaxBudgetUSD float64 `json:"max_budget_usd,omitempty"`
	// Hooks: the run's hooks are installed (HookMatcher is their
	// PreToolUse matcher, gates.PreToolUseMatcher).
	Hooks       bool   `json:"hooks"`
	HookMatcher string `json:"hook_matcher,omitempty"`
	// Policy is the run's sandbox with every path relative to the clone's
	// root (slash-separated); nil when the run is not confined. Paths the
	// daemon's policy names outside its work tree (its own state, its
	// machine's caches) do not cross: the worker adds its own.
	Policy *sandbox.Policy `json:"policy,omitempty"`
	// Progress are the files of .claude/progress as the run is to find
	// them (the feature list, the goal, evidence), by slash path relative
	// to that directory: the base commit leaves .claude/ out.
	Progress map[string][]byte `json:"progress,omitempty"`
	// Offline is the record the hooks decide from when the daemon cannot
	// be reached (gates.Offline, as the daemon saved it).
	Offline json.RawMessage `json:"offline,omitempty"`
	// Options are the daemon's agent options that bound the run.
	Options RunOptions `json:"options"`
	// Setup is the project's setup step (agents.Spec.Setup), which the
	// worker runs in its clone, confined by Policy as the agent is, before
	// the agent; "" when there is none.
	Setup string `json:"setup,omitempty"`
}

// RunOptions are the parts of agents.Options the daemon's configuration
// sets for every run, wherever it runs.
type RunOptions struct {
	Model        string        `json:"model,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"`
	IdleTimeout  time.Duration `json:"idle_timeout,omitempty"`
	MaxTurns     int           `json:"max_turns,omitempty"`
	MaxBudgetUSD float64       `json:"max_budget_usd,omitempty"`
	StuckAfter   int           `json:"stuck_after,omitempty"`
	// Limits are sandbox.max_*: processes, memory and file size of every
	// process of the run.
	Processes int `json:"max_processes,omitempty"`
	MemoryMB  int `json:"max_memory_mb,omitempty"`
	FileMB    int `json:"max_file_mb,omitempty"`
}

// Heartbeat says a worker's attempt is alive.
type Heartbeat struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
	// Token is the attempt's (Assignment.Token), as on every message a
	// worker sends about a run: the daemon takes none whose worker, run,
	// attempt and token do not agree.
	Token string `json:"token"`
}

// Event is what a worker's run says while it works: its process started
// (PID), or one of its stream's events.
type Event struct {
	Run     string        `json:"run"`
	Attempt int           `json:"attempt"`
	Token   string        `json:"token"`
	PID     int           `json:"pid,omitempty"`
	Event   *agents.Event `json:"event,omitempty"`
}

// HookCall is a run's hook asking the daemon, as it would on the socket.
type HookCall struct {
	Token   string              `json:"token"`
	Request control.HookRequest `json:"request"`
}

// HookAnswer is the daemon's answer, or the error it would have answered
// on the socket.
type HookAnswer struct {
	Response control.HookResponse `json:"response"`
	Error    *control.APIError    `json:"error,omitempty"`
}

// Outcome is how a worker's run ended.
type Outcome struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
	Token   string `json:"token"`
	// GivenBack says why the worker gives the attempt back without an
	// end (it is stopping): the daemon gives the run to another worker
	// at once, as it would after missed heartbeats, and nothing else of
	// the outcome counts.
	GivenBack string `json:"given_back,omitempty"`
	// Tip is the commit of the tree the run left, on the base; its bundle
	// (base..tip) is in the worker's results bucket under ResultKey. ""
	// when the run left no tree (its clone could not be made or read):
	// Result.Err says why.
	Tip    string        `json:"tip,omitempty"`
	Result agents.Result `json:"result"`
	// Err is Result.Err's text (an error does not cross as JSON).
	Err string `json:"err,omitempty"`
	// Progress are the files of .claude/progress that the run may write
	// (the feature list, its evidence), as it left them.
	Progress map[string][]byte `json:"progress,omitempty"`
	// Deps name the dependency directories the run left in its clone
	// (toolchain.DependencyDirs), whose archive is in the worker's results
	// bucket under DepsKey.
	Deps []string `json:"deps,omitempty"`
	// Spooled are what the run's hooks decided alone while the daemon was
	// out of reach, for the daemon to take in as it takes its own spool.
	Spooled []spool.Record `json:"spooled,omitempty"`
}

// OutcomeAnswer is the daemon's receipt of an Outcome: "" taken, or why
// not (the attempt is no longer the worker's).
type OutcomeAnswer struct {
	Refused string `json:"refused,omitempty"`
}

// Control is the daemon's word to a worker about one attempt.
type Control struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
	// Token is the attempt's: a worker takes the daemon's word only with
	// it, since what arrives on its control subject is not proved the
	// daemon's by the subject alone.
	Token string `json:"token"`
	// Cancel ends the attempt's run now (ctl stop, ctl pause, a shutdown,
	// an attempt given up), with why.
	Cancel string `json:"cancel,omitempty"`
}

// depsSuffix follows a bundle's key for the dependencies beside it.
const depsSuffix = ".deps"

// DepsKey names an attempt's dependencies' archive in the worker's bucket.
func DepsKey(run string, attempt int) string { return ResultKey(run, attempt) + depsSuffix }

// ResultKey names an attempt's result bundle in the worker's bucket.
func ResultKey(run string, attempt int) string {
	return run + "." + strconv.Itoa(attempt)
}
