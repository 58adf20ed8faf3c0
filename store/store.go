// Package store is the daemon's state of record in bbolt: the session, the
// canonical feature list, per-feature counters, every run and every
// transition.
//
// The database lives in the project's state directory, outside the project
// tree. bbolt's file lock doubles as the "one daemon per project" check.
// Every change of state goes through a Batch, one bbolt Update, so that a
// transition, the counters it changes and the run it starts are on disk
// together before anything acts on them.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
)

// SchemaVersion is the layout this build reads and writes.
const SchemaVersion = 2

// FileName is the database's name inside the state directory.
const FileName = "state.db"

var (
	bucketMeta        = []byte("meta")
	bucketSession     = []byte("session")
	bucketFeatures    = []byte("features")
	bucketCounters    = []byte("counters")
	bucketRuns        = []byte("runs")
	bucketTransitions = []byte("transitions")

	keySchema    = []byte("schema")
	keyProject   = []byte("project")
	keySession   = []byte("current")
	keyCanonical = []byte("canonical")
	keyFrozen    = []byte("frozen")
)

// Errors.
var (
	// ErrLocked means another process, normally another ctxgraphd for the
	// same project, holds the database.
	ErrLocked = errors.New("store: database is locked by another process")
	// ErrNewerSchema means the database was written by a newer ctxgraphd.
	ErrNewerSchema = errors.New("store: database schema is newer than this ctxgraphd")
)

// Store is the open database.
type Store struct {
	db   *bolt.DB
	path string
	// appends groups concurrent trace appends into one commit; commits
	// counts the commits of traces (tests).
	appends appendQueue
	commits atomic.Int64
	// fault, set by tests only, is asked after each part of a write that
	// must be all or nothing (see part); the error it returns fails the
	// write there.
	fault func(part string) error
}

// part marks the end of one part of a multi-part write, inside its
// transaction: a fault a test injects there must leave nothing of the
// write behind.
func (s *Store) part(name string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(name)
}

// Session is the persisted session: where the state machine is, and the run
// in flight, if any.
type Session struct {
	State            string    `json:"state"`
	Feature          string    `json:"feature,omitempty"`
	Run              *Run      `json:"run,omitempty"` // in flight: written before the process starts
	BlockedInSession int       `json:"blocked_in_session"`
	InitFailures     int       `json:"init_failures"`
	PauseRequested   bool      `json:"pause_requested,omitempty"`
	WaitingUntil     time.Time `json:"waiting_until,omitzero"`
	// Backoffs counts the waits in a row (limits.backoff doubles with
	// each); a run that ends on its own terms resets it.
	Backoffs int `json:"backoffs,omitempty"`
	// BudgetWarned: a person was warned that the session's budget is
	// nearly spent (once a session).
	BudgetWarned bool `json:"budget_warned,omitempty"`
	// PlanApproved: a person approved the plan (ctl approve), which
	// limits.approve_plan waits for before any feature's work; once for
	// the session's life.
	PlanApproved bool   `json:"plan_approved,omitempty"`
	Message      string `json:"message,omitempty"`
	// LastTree is the project's work tree (a git tree) as the last judged
	// run left it: what changed between it and the next run's start was
	// changed while no agent ran, by a person.
	LastTree string `json:"last_tree,omitempty"`
	// Lanes are the features worked in clones of their own
	// (limits.parallel above 1), each with its run in flight if it has
	// one: a restart kills what survived of those runs and removes the
	// clones.
	Lanes     []Lane    `json:"lanes,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Lane is a feature worked in a clone of the project's repository.
type Lane struct {
	Feature string `json:"feature"`
	// Dir is the clone, on Branch, made from the commit BaseHead.
	Dir      string `json:"dir"`
	Branch   string `json:"branch"`
	BaseHead string `json:"base_head"`
	// Run is the lane's run in flight, written before its process starts.
	Run *Run `json:"run,omitempty"`
}

// FeatureCounters are the per-feature counters and dossier.
type FeatureCounters struct {
	Failures int `json:"failures"`
	// CoderSession is the Claude Code session of the feature's coding
	// agent, resumed on a retry.
	CoderSession string  `json:"coder_session,omitempty"`
	LastFailure  string  `json:"last_failure,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	Runs         int     `json:"runs"`
	Note         string  `json:"note,omitempty"` // from ctl unblock --note
	// Red is what the daemon's run of the feature's test found before its
	// first coding attempt (statemachine.RedState), RedDetail in a sentence.
	Red       string `json:"red,omitempty"`
	RedDetail string `json:"red_detail,omitempty"`
	// Base is the work tree (a git tree) when the feature's work began, and
	// BaseHead the commit HEAD was at: a verdict's commit goes on the
	// branch only when the tree held nothing else then.
	Base     string `json:"base,omitempty"`
	BaseHead string `json:"base_head,omitempty"`
	// Commit is the commit of exactly the tree the feature was tested on,
	// and Branch the branch that took it ("" when only its ref did), or
	// OffBranch why none did.
	Commit    string `json:"commit,omitempty"`
	Branch    string `json:"branch,omitempty"`
	OffBranch string `json:"off_branch,omitempty"`
	// BudgetWarned: a person was warned that the feature's budget is
	// nearly spent.
	BudgetWarned bool `json:"budget_warned,omitempty"`
	// Diagnosis is what the daemon's own run of the test said when the
	// last attempt failed: the retry's reflexion.
	Diagnosis *diagnose.Diagnosis `json:"diagnosis,omitempty"`
	// The feature's nodes in the context graph: the trace of its being
	// taken up, of its current attempt (and that attempt's number), and of
	// its last block, which a person's correction answers.
	Trace        string `json:"trace,omitempty"`
	AttemptTrace string `json:"attempt_trace,omitempty"`
	AttemptNo    int    `json:"attempt_no,omitempty"`
	BlockTrace   string `json:"block_trace,omitempty"`
}

// Run is one claude -p subprocess.
type Run struct {
	Seq       uint64    `json:"seq"`
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Feature   string    `json:"feature,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	SessionID string    `json:"session_id"`
	Resume    bool      `json:"resume,omitempty"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at"` // decided and committed
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// AgentWall is how long the claude process itself ran, from its
	// start to the end of its output: StartedAt..EndedAt less the daemon's
	// own work around it (committing, judging, re-running the test).
	AgentWall time.Duration `json:"agent_wall_ns,omitempty"`
	// AgentCPU is the CPU time of the claude process and of what it
	// waited for (its hooks, its tools' programs, its MCP servers).
	AgentCPU time.Duration `json:"agent_cpu_ns,omitempty"`
	// BaseTree is the work tree (a git tree) when the run started: what it
	// changed is judged against it, even after a crash.
	BaseTree string `json:"base_tree,omitempty"`
	// TokenHash identifies the run's hooks (the hash of its token).
	TokenHash string `json:"token_hash,omitempty"`
	// Trace is the run's node in the context graph (its handoff): what
	// happens in the run hangs from it.
	Trace string `json:"trace,omitempty"`
	// Outcome: "" while in flight; then ok, failed, interrupted, transient.
	Outcome string `json:"outcome,omitempty"`
	// Dir is the clone the run worked in, when it was a lane's; "": the
	// project's own work tree.
	Dir string `json:"dir,omitempty"`
	// Commit is the commit of a tester run's accepted verdict.
	Commit    string  `json:"commit,omitempty"`
	Ended     string  `json:"ended,omitempty"` // exited, wall_timeout, idle_timeout, cancelled, start_failed, lost
	ExitCode  int     `json:"exit_code"`
	IsError   bool    `json:"is_error"`
	Subtype   string  `json:"subtype,omitempty"`
	CostUSD   float64 `json:"cost_usd"`
	NumTurns  int     `json:"num_turns"`
	ToolCalls int     `json:"tool_calls"`
	Summary   string  `json:"summary,omitempty"`
	Error     string  `json:"error,omitempty"`
	// Failure is why the run ended when it was not its agent's doing
	// (agents.FailureKind: auth, rate_limit, network, …); such a run is
	// never charged to its feature.
	Failure string `json:"failure,omitempty"`
}

// Transition is one move of the session state machine.
type Transition struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Feature string    `json:"feature,omitempty"`
	Run     string    `json:"run,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// State is everything the orchestrator reloads at start.
type State struct {
	Session      Session
	FeatureList  []byte // canonical feature-list.json, nil before the initializer
	Frozen       []byte // the frozen tests' record (JSON, package judge), nil before the list
	Counters     map[string]FeatureCounters
	LastRunSeq   uint64
	LastTransSeq uint64
	TotalCostUSD float64
	RunCount     int
	HasSession   bool
}

// Open opens (creating if needed) the database at dir/state.db. When another
// process holds it, Open fails after timeout with ErrLocked and names the
// holder's pid from the pid file beside the database, when there is one.
func Open(dir string, timeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create state directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolt.ErrTimeout) {
		holder := ""
		if pid := ReadPID(dir); pid > 0 {
			holder = fmt.Sprintf(" (ctxgraphd pid %d)", pid)
		}
		return nil, fmt.Errorf("%w: %s is held%s; only one daemon may run per project", ErrLocked, path, holder)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// ErrNoState is returned by OpenReadOnly for a project no daemon ever ran.
var ErrNoState = errors.New("store: no state yet")

// OpenReadOnly opens the database at dir/state.db for reading, as the
// morning's report does after the daemon has exited: it never creates,
// migrates or writes anything. A daemon holding the database makes it
// fail with ErrLocked after timeout; ask the daemon instead.
func OpenReadOnly(dir string, timeout time.Duration) (*Store, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist (has a daemon ever run for this project?)", ErrNoState, path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s is held by its daemon", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if v, err := s.Schema(); err != nil || v != SchemaVersion {
		db.Close()
		return nil, fmt.Errorf("store: %s has schema %d (%v), this build reads %d: start the daemon once to bring it up to date, or use the ctxgraphd that wrote it", path, v, err, SchemaVersion)
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close stores what is queued (QueueTraces) and closes the database.
func (s *Store) Close() error {
	s.appends.settle()
	return s.db.Close()
}

// view and update are the store's transactions. Each begins once the
// traces queued before it are stored (QueueTraces): a read finds every
// trace queued before it, and a write comes after them. Only the writer
// of the queue (appendTraces) and the migration at Open use the database
// directly. fn (and a callback it calls, as Postings' visit) must not call
// the Store: a transaction begun inside another would wait for the
// writer, which may be waiting for the open one to end (bbolt remaps the
// file under no reader).
func (s *Store) view(fn func(*bolt.Tx) error) error {
	s.appends.settle()
	return s.db.View(fn)
}

func (s *Store) update(fn func(*bolt.Tx) error) error {
	s.appends.settle()
	return s.db.Update(fn)
}

// migrations[i] brings a database from schema i to i+1. Schema 0 is a file
// without a schema key: a database that was created but never initialised.
var migrations = []func(tx *bolt.Tx) error{
	func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketSession, bucketFeatures, bucketCounters, bucketRuns, bucketTransitions, bucketTraces, bucketCommands} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	},
	migrateTraceIndexes,
}

func (s *Store) migrate() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		version := 0
		if v := meta.Get(keySchema); v != nil {
			version, err = strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("store: %s: unreadable schema version %q", s.path, v)
			}
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: %s has schema %d, this build reads %d; upgrade ctxgraphd", ErrNewerSchema, s.path, version, SchemaVersion)
		}
		for ; version < SchemaVersion; version++ {
			if err := migrations[version](tx); err != nil {
				return fmt.Errorf("store: migrate %s from schema %d: %w", s.path, version, err)
			}
		}
		return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
	})
}

// Schema returns the schema version on disk.
func (s *Store) Schema() (int, error) {
	var v int
	err := s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("no schema: the database was never initialised")
		}
		var err error
		v, err = strconv.Atoi(string(meta.Get(keySchema)))
		return err
	})
	return v, err
}

// Load reads the whole state of record.
func (s *Store) Load() (State, error) {
	st := State{Counters: map[string]FeatureCounters{}}
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketSession).Get(keySession); v != nil {
			if err := json.Unmarshal(v, &st.Session); err != nil {
				return fmt.Errorf("store: session record: %w", err)
			}
			st.HasSession = true
		}
		if v := tx.Bucket(bucketFeatures).Get(keyCanonical); v != nil {
			st.FeatureList = append([]byte(nil), v...)
		}
		if v := tx.Bucket(bucketFeatures).Get(keyFrozen); v != nil {
			st.Frozen = append([]byte(nil), v...)
		}
		err := tx.Bucket(bucketCounters).ForEach(func(k, v []byte) error {
			var c FeatureCounters
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("store: counters of %s: %w", k, err)
			}
			st.Counters[string(k)] = c
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("store: run %d: %w", binary.BigEndian.Uint64(k), err)
			}
			st.TotalCostUSD += r.CostUSD
			st.RunCount++
			st.LastRunSeq = binary.BigEndian.Uint64(k)
			return nil
		})
		if err != nil {
			return err
		}
		if k, _ := tx.Bucket(bucketTransitions).Cursor().Last(); k != nil {
			st.LastTransSeq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return st, err
}

// Batch is one atomic change of the state of record: what is written
// together, in one transaction, or not at all.
type Batch struct {
	Session     *Session
	FeatureList []byte // canonical list; nil leaves it as it is
	Frozen      []byte // the frozen tests' record; nil leaves it as it is
	Counters    map[string]FeatureCounters
	Runs        []Run        // upserted by Seq
	Transitions []Transition // appended; Seq must be the next ones
}

// Apply writes c in one transaction, synced to disk before it returns.
func (s *Store) Apply(c Batch) error {
	return s.update(func(tx *bolt.Tx) error {
		if c.Session != nil {
			if err := putJSON(tx.Bucket(bucketSession), keySession, c.Session); err != nil {
				return err
			}
			if err := s.part("session"); err != nil {
				return err
			}
		}
		if c.FeatureList != nil {
			if err := tx.Bucket(bucketFeatures).Put(keyCanonical, c.FeatureList); err != nil {
				return err
			}
			if err := s.part("feature list"); err != nil {
				return err
			}
		}
		if c.Frozen != nil {
			if err := tx.Bucket(bucketFeatures).Put(keyFrozen, c.Frozen); err != nil {
				return err
			}
			if err := s.part("frozen tests"); err != nil {
				return err
			}
		}
		for id, ctr := range c.Counters {
			if err := putJSON(tx.Bucket(bucketCounters), []byte(id), ctr); err != nil {
				return err
			}
			if err := s.part("counters of " + id); err != nil {
				return err
			}
		}
		for _, r := range c.Runs {
			if r.Seq == 0 {
				return fmt.Errorf("store: run %q has no sequence number", r.ID)
			}
			if err := putJSON(tx.Bucket(bucketRuns), seqKey(r.Seq), r); err != nil {
				return err
			}
			if err := s.part("run " + r.ID); err != nil {
				return err
			}
		}
		tb := tx.Bucket(bucketTransitions)
		for _, t := range c.Transitions {
			if k, _ := tb.Cursor().Last(); k != nil && binary.BigEndian.Uint64(k) >= t.Seq {
				return fmt.Errorf("store: transition %d is not after %d: a transition would be lost or repeated", t.Seq, binary.BigEndian.Uint64(k))
			}
			if err := putJSON(tb, seqKey(t.Seq), t); err != nil {
				return err
			}
			if err := s.part(fmt.Sprintf("transition %d", t.Seq)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Runs returns every run, oldest first.
func (s *Store) Runs() ([]Run, error) {
	var runs []Run
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(_, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			runs = append(runs, r)
			return nil
		})
	})
	return runs, err
}

// Transitions returns every transition, oldest first.
func (s *Store) Transitions() ([]Transition, error) {
	var ts []Transition
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTransitions).ForEach(func(_, v []byte) error {
			var t Transition
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			ts = append(ts, t)
			return nil
		})
	})
	return ts, err
}

// RunID formats a run's sequence number as its id.
func RunID(seq uint64) string { return fmt.Sprintf("run-%06d", seq) }

// ParseRunID is the inverse of RunID.
func ParseRunID(id string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "run-"), 10, 64)
	return n, err == nil && strings.HasPrefix(id, "run-")
}

func seqKey(n uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, n)
	return k
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}

// PIDFile is the name of the file in which the running daemon leaves its pid,
// so that a second one can say which process holds the project.
const PIDFile = "daemon.pid"

// WritePID records the current process as the project's daemon.
func WritePID(dir string) error {
	return os.WriteFile(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

// ReadPID returns the pid in the pid file, or 0.
func ReadPID(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
