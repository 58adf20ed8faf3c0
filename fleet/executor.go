package fleet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// Gates is what the executor needs of the daemon's gates (the judge): to
// answer a worker's hooks as the socket would, and to follow a run whose
// files are on another machine.
type Gates interface {
	Hook(ctx context.Context, token string, req control.HookRequest) (control.HookResponse, error)
	// Relocate reads the run's hooks against its worker's clone.
	Relocate(token, dir string, denied, writable []string) error
	// Reissue gives the run a new token; the old one is refused from now.
	Reissue(token string) (string, bool)
	// ChangeRules are the rules the run's returned change set is held to.
	ChangeRules(token string) (gates.Modes, gates.Actor, gates.State, bool)
	// Trace records what happened.
	Trace(t control.Trace) control.Trace
}

// ExecutorOptions configure an Executor.
type ExecutorOptions struct {
	Gates Gates
	// ProjectDir is the project's own work tree, whose dependency
	// directories a lane without its own ships to its runs.
	ProjectDir string
	// OpenRepo opens the repository of a run's work tree (agents.Spec.Dir),
	// with the daemon's private index.
	OpenRepo func(ctx context.Context, dir string) (*gitrepo.Repo, error)
	// Run are the agent options every run is held to.
	Run RunOptions
	// Heartbeat is how often a worker says it is alive; 0: DefaultHeartbeat.
	Heartbeat time.Duration
	// MaxBundleBytes bounds a base or a result bundle; 0: DefaultMaxBundle.
	MaxBundleBytes int64
	// CancelGrace is how long a cancelled attempt's worker has to send
	// its outcome; 0: DefaultCancelGrace.
	CancelGrace time.Duration
	// WaitingNotice is how often a run no worker holds says so, and every
	// republishEvery of them is put on the queue again; 0: 30 s.
	WaitingNotice time.Duration
	// Offline reads the record the hooks decide from when the daemon
	// cannot be reached (gates.OfflineFile), shipped with every run.
	Offline func() ([]byte, error)
	// Spool takes in what a run's hooks decided alone on a worker.
	Spool func([]spool.Record)
	// Copies are the person's files of lanes.copy, which every worker's
	// clone gets (Assignment.Copies) and no result may hold.
	Copies lanecopy.Files
	Log    *zap.Logger
}

// Defaults of ExecutorOptions.
const (
	DefaultHeartbeat   = 2 * time.Second
	DefaultMaxBundle   = 1 << 30
	DefaultCancelGrace = 15 * time.Second
	// waitingNotice is how often a run no worker has taken says so.
	waitingNotice = 30 * time.Second
	// republishEvery: every so many notices, an attempt no worker holds
	// is put on the work queue again.
	republishEvery = 4
	// maxProgressBytes bounds the .claude/progress files that cross.
	maxProgressBytes = 16 << 20
)

// Executor runs agents' runs on workers: the daemon's side of the fleet.
// It is an orchestrator.AgentRunner, so that a lane run by a worker is the
// same lane as a local one: the loop spawns, the executor ships the run
// and brings its tree back into the lane's work tree, and the loop judges
// it there as it judges any run.
type Executor struct {
	opts     ExecutorOptions
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects Subjects
	log      *zap.Logger

	mu       sync.Mutex
	runs     map[string]*remote // by run id
	tokens   map[string]*remote // by token
	findings map[string]*Findings
	heard    map[string]time.Time // each worker's last message
	// connected names the workers connected now, and known says whether a
	// name is a worker's (Server.Attach); nil: unknown, and every name is.
	connected func() []string
	known     func(string) bool
	// mailboxes are the workers' queues (perWorker), until closed.
	mailboxes map[string]*mailbox
	closed    chan struct{}
	closeOnce sync.Once
	subs      []*nats.Subscription
	// lanes is the work queue's consumer, the workers' pulls' (onPull),
	// looked up at the first pull.
	lanes jetstream.Consumer
}

// Findings are what a worker did that no honest worker does (a message
// about a run not its own, a request that asks for no answer, a
// second outcome), as the daemon saw it: how many, and the last few.
type Findings struct {
	Count int
	Last  []string // the newest last, at most maxFindingsKept
}

// maxFindingsKept bounds a worker's Findings.Last: a worker's flood of
// them costs the daemon no more than this.
const maxFindingsKept = 8

// finding records what against worker, and logs it: the first few, then
// at each power of two, so that a flood of them floods no log.
func (e *Executor) finding(worker, what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.findings[worker]
	if f == nil {
		f = &Findings{}
		e.findings[worker] = f
	}
	f.Count++
	if f.Count <= maxFindingsKept || f.Count&(f.Count-1) == 0 {
		e.log.Warn("a finding against a worker", zap.String("worker", worker), zap.String("finding", what), zap.Int("findings", f.Count))
	}
	f.Last = append(f.Last, what)
	if len(f.Last) > maxFindingsKept {
		f.Last = slices.Delete(f.Last, 0, len(f.Last)-maxFindingsKept)
	}
}

// anyLeftFor reports whether a worker connected now may still take r:
// one whose machine has not failed it. With no server to ask, one may come.
func (e *Executor) anyLeftFor(r *remote) bool {
	e.mu.Lock()
	connected := e.connected
	e.mu.Unlock()
	if connected == nil {
		return true
	}
	// Asked without e.mu: the server takes its own lock, and calls into
	// the executor (Revoked) with it held.
	on := connected()
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(on, func(w string) bool { return r.avoid[w] == "" })
}

// avoided are the workers that failed r for their own reasons, sorted.
func (e *Executor) avoided(r *remote) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Collect(maps.Keys(r.avoid))
	slices.Sort(out)
	return out
}

// Activity is what the daemon saw of a worker lately: the runs it holds,
// its last message, the findings against it.
type Activity struct {
	Runs      []string // the ids of the runs whose attempts it holds, sorted
	LastHeard time.Time
	Findings  Findings
}

// Activity is worker's, as of now.
func (e *Executor) Activity(worker string) Activity {
	e.mu.Lock()
	var a Activity
	for id, r := range e.runs {
		if r.worker == worker {
			a.Runs = append(a.Runs, id)
		}
	}
	a.LastHeard = e.heard[worker]
	e.mu.Unlock()
	slices.Sort(a.Runs)
	a.Findings = e.FindingsOf(worker)
	return a
}

// FindingsOf are the findings against worker so far.
func (e *Executor) FindingsOf(worker string) Findings {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.findings[worker]; f != nil {
		return Findings{Count: f.Count, Last: slices.Clone(f.Last)}
	}
	return Findings{}
}

// remote is a run shipped to the fleet.
type remote struct {
	spec    RemoteRun
	dir     string // the lane's work tree, here
	base    string
	deps    []string  // the dependency directories beside the base
	digests [2]string // of the base's bundle and of its dependencies, as put
	attempt int
	token   string
	// spawnToken is the token the run was spawned with, by which the
	// daemon's records know it; token is the attempt's.
	spawnToken string
	worker     string // "" until an attempt is claimed
	ended      int    // the attempt whose outcome was taken
	// avoid are the workers whose own machines failed the run, which may
	// claim it no more, with the kind of failure.
	avoid map[string]agents.FailureKind
	// shownUSD is the highest running total of cost the attempt's stream
	// showed (its result events): the least its outcome may say. Only the
	// run's loop touches it.
	shownUSD float64
	msgs     chan any
}

// claimed, beat and the messages of protocol.go are what reach a run's
// loop from the subscriptions.
type claimed struct{ worker, dir string }
type beat struct{}

// revoked says the attempt's worker was revoked.
type revoked struct{ worker string }

// NewExecutor starts serving the fleet on nc (the daemon's connection):
// claims, hooks, heartbeats, events and outcomes. What the work queue
// held from a daemon before this one is dropped: its runs' tokens died
// with it, and its workers are told to stop them at their next heartbeat.
func NewExecutor(ctx context.Context, nc *nats.Conn, subjects Subjects, opts ExecutorOptions) (*Executor, error) {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxBundleBytes <= 0 {
		opts.MaxBundleBytes = DefaultMaxBundle
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	e := &Executor{opts: opts, nc: nc, js: js, subjects: subjects, log: opts.Log.Named("fleet"),
		runs: map[string]*remote{}, tokens: map[string]*remote{}, findings: map[string]*Findings{},
		mailboxes: map[string]*mailbox{}, closed: make(chan struct{}), heard: map[string]time.Time{}}
	if st, err := js.Stream(ctx, subjects.LanesStream()); err == nil {
		if err := st.Purge(ctx); err != nil {
			return nil, fmt.Errorf("fleet: dropping the lanes of an earlier daemon: %w", err)
		}
	} else {
		return nil, fmt.Errorf("fleet: the work queue %s: %w", subjects.LanesStream(), err)
	}
	for kind, h := range map[string]nats.MsgHandler{
		"claim": e.onClaim, "hook": e.onHook, "heartbeat": e.onHeartbeat, "events": e.onEvent, "result": e.onOutcome,
		"pull": e.onPull, "ack": e.onAck,
	} {
		sub, err := nc.Subscribe(subjects.Workers(kind), e.perWorker(kind, h))
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("fleet: subscribing to the workers' %s: %w", kind, err)
		}
		e.subs = append(e.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		e.Close()
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return e, nil
}

// Close stops serving the fleet. Runs in flight end with their contexts.
func (e *Executor) Close() {
	e.mu.Lock()
	subs := e.subs
	e.subs = nil
	e.mu.Unlock()
	for _, s := range subs {
		s.Unsubscribe()
	}
	e.closeOnce.Do(func() { close(e.closed) })
}

// A worker's messages wait in a mailbox of its own, handled in order by a
// goroutine of its own: the subscriptions, which every worker's messages
// share, only hand each on, and never wait. One worker's flood fills its
// own mailbox, whose overflow is dropped (a finding against it), and
// delays no other worker's results.
const (
	// mailboxDepth is how many of a worker's messages may wait; an honest
	// worker's runs send a few at a time.
	mailboxDepth = 256
	// hooksInFlight is how many of a worker's hooks the daemon answers at
	// once; more wait in its mailbox.
	hooksInFlight = 16
	// mailboxBytes bounds what a worker's waiting messages hold of the
	// daemon's memory, whatever their number: a hook may carry a Write of
	// a few MiB, and the server takes messages of 8 MiB.
	mailboxBytes = 32 << 20
)

// delivery is a message and its handler, in a worker's mailbox.
type delivery struct {
	h nats.MsgHandler
	m *nats.Msg
}

// mailbox is one worker's queue, and the bound on its hooks in flight.
type mailbox struct {
	in     chan delivery // requests
	events chan delivery
	hooks  chan struct{}
	quit   chan struct{} // closed when the worker is revoked
	// held is the bytes of the messages waiting in in and events.
	held atomic.Int64
	// pulls are how many of the worker's pulls wait on the work queue
	// (onPull), and leases the Jobs its pulls took, not acknowledged yet,
	// by their AckHeader (onAck); both guarded by the Executor's mu.
	pulls  int
	leases map[string]*lease
}

// perWorker wraps h, the handler of one kind of the workers' messages, to
// queue each in its sender's mailbox. A message on a worker's subject is
// that worker's: only its account imports the subject (accountsConfig),
// and the server answers it into that account alone. So a request with
// no answer asked is the worker's own malformed message, a finding, and
// dropped; a name that is no worker's is no mailbox; and the events,
// which ask for no answer, wait in a mailbox of their own, so that a
// flood of them drops only events.
func (e *Executor) perWorker(kind string, h nats.MsgHandler) nats.MsgHandler {
	// Acks ask no answer either (a request's answer the server would hold
	// for the asker), but wait with the requests, in order.
	request := kind != "events" && kind != "ack"
	return func(m *nats.Msg) {
		worker := e.workerName(m.Subject)
		e.mu.Lock()
		known := e.known
		e.mu.Unlock()
		if known != nil && !known(worker) {
			return
		}
		if request && m.Reply == "" {
			e.finding(worker, fmt.Sprintf("a request on %s asked for no answer: dropped", m.Subject))
			return
		}
		if !request && m.Reply != "" {
			// The server holds an answer asked for across accounts until
			// it comes (or for minutes): every one is given, at once.
			refuse(m, "no answer is given on this subject")
			e.finding(worker, fmt.Sprintf("a message on %s asked for an answer: dropped", m.Subject))
			return
		}
		mb := e.mailboxOf(worker)
		// Heard once the message is taken or dropped: a caller that sees
		// the time knows its fate is settled.
		defer func() {
			e.mu.Lock()
			e.heard[worker] = time.Now()
			e.mu.Unlock()
		}()
		q := mb.in
		if kind == "events" {
			q = mb.events
		}
		size := int64(len(m.Data))
		if mb.held.Add(size) > mailboxBytes {
			mb.held.Add(-size)
			if request {
				refuse(m, "dropped: the worker's mailbox at the daemon is full")
				e.finding(worker, fmt.Sprintf("more bytes of requests waiting at once than the daemon keeps (%d MiB): one on %s was dropped", mailboxBytes>>20, m.Subject))
			}
			return
		}
		select {
		case q <- delivery{h: h, m: m}:
		case <-mb.quit:
		default:
			mb.held.Add(-size)
			if request {
				// A flood of its making.
				refuse(m, "dropped: the worker's mailbox at the daemon is full")
				e.finding(worker, fmt.Sprintf("more requests at once than the daemon keeps waiting (%d): one on %s was dropped", mailboxDepth, m.Subject))
			}
		}
	}
}

// Revoked gives up every attempt worker holds, at once (each goes to
// another worker, uncharged), and drops what of its messages still wait:
// nothing a revoked worker sent is acted on. The server calls it
// (Server.OnRevoke) once the worker is cut off.
func (e *Executor) Revoked(worker string) {
	e.mu.Lock()
	if mb := e.mailboxes[worker]; mb != nil {
		close(mb.quit)
		delete(e.mailboxes, worker)
		// The Jobs it was given and did not end go back, to the others.
		for _, l := range mb.leases {
			l.msg.Nak()
		}
		mb.leases = nil
	}
	var held []*remote
	for _, r := range e.runs {
		if r.worker == worker {
			held = append(held, r)
		}
	}
	e.mu.Unlock()
	for _, r := range held {
		// Never waiting here: the server calls this with its own lock
		// held, and a run's loop that is busy (landing) or over must not
		// hold every change of the workers.
		select {
		case r.msgs <- revoked{worker: worker}:
		default:
			go func() {
				select {
				case r.msgs <- revoked{worker: worker}:
				case <-e.closed:
				case <-time.After(time.Minute):
				}
			}()
		}
	}
}

// mailboxOf is worker's mailbox, made (with its goroutine) at its first
// message.
func (e *Executor) mailboxOf(worker string) *mailbox {
	e.mu.Lock()
	defer e.mu.Unlock()
	mb := e.mailboxes[worker]
	if mb == nil {
		mb = &mailbox{in: make(chan delivery, mailboxDepth), events: make(chan delivery, mailboxDepth),
			hooks: make(chan struct{}, hooksInFlight), quit: make(chan struct{}), leases: map[string]*lease{}}
		e.mailboxes[worker] = mb
		for _, q := range []chan delivery{mb.in, mb.events} {
			go func() {
				for {
					select {
					case <-e.closed:
						return
					case <-mb.quit:
						return
					case d := <-q:
						select {
						case <-mb.quit: // revoked: what waits is dropped
							return
						default:
						}
						mb.held.Add(-int64(len(d.m.Data)))
						d.h(d.m)
					}
				}
			}()
		}
	}
	return mb
}

// Run ships one run to the fleet and waits for its end, which it puts in
// spec.Dir, the lane's work tree: the tree the run left, once checked
// (branch.ImportResult), and the files of .claude/progress it may write.
// A worker lost on the way costs the run a new attempt on another worker,
// with a new token; the loop sees only a longer run. onStart is never
// called: a worker's process is no process of this machine.
func (e *Executor) Run(ctx context.Context, spec agents.Spec, onStart func(pid int), onEvent func(agents.Event)) agents.Result {
	res := agents.Result{RunID: spec.RunID, SessionID: spec.SessionID, StartedAt: time.Now(), ExitCode: -1, Ended: agents.EndExited}
	fail := func(err error) agents.Result {
		res.Err, res.EndedAt = fmt.Errorf("running %s on a worker: %w", spec.RunID, err), time.Now()
		return res
	}
	repo, err := e.opts.OpenRepo(ctx, spec.Dir)
	if err != nil {
		return fail(err)
	}
	base, baseTree, err := e.commitBase(ctx, repo, spec.RunID)
	if err != nil {
		return fail(err)
	}
	defer repo.DeleteRef(context.WithoutCancel(ctx), baseRef(spec.RunID), base)
	deps, digests, dropBase, err := e.putBase(ctx, repo, base, spec.RunID, spec.Dir)
	if err != nil {
		return fail(err)
	}
	defer dropBase()
	rr, err := e.remoteRun(spec)
	if err != nil {
		return fail(err)
	}
	r := &remote{spec: rr, dir: spec.Dir, base: base, deps: deps, digests: digests, attempt: 1, token: spec.Token, spawnToken: spec.Token, msgs: make(chan any, 256), avoid: map[string]agents.FailureKind{}}
	e.mu.Lock()
	e.runs[spec.RunID], e.tokens[spec.Token] = r, r
	e.mu.Unlock()
	defer e.forget(r)
	if err := e.publish(ctx, r, onEvent); err != nil {
		return fail(err)
	}

	lost := time.NewTimer(time.Hour)
	lost.Stop()
	// The run's wall time is the daemon's to hold, as a local run's: the
	// worker's runner ends it at agent.timeout and has the cancel grace to
	// send what it did; an attempt that goes on past that (a worker's
	// heartbeats alone) is ended here. It counts from the claim: a run
	// waiting for a worker waits as long as the session does.
	wall := time.NewTimer(time.Hour)
	wall.Stop()
	defer wall.Stop()
	notice := time.NewTicker(cmp.Or(e.opts.WaitingNotice, waitingNotice))
	defer notice.Stop()
	unclaimed := 0 // notices in a row with no worker holding the attempt
	for {
		select {
		case <-ctx.Done():
			return e.cancel(ctx, repo, r, baseTree, res, agents.EndCancelled, "the daemon cancelled the run")
		case <-wall.C:
			e.log.Warn("a worker's run went on past agent.timeout: the daemon ends it", zap.String("run", spec.RunID), zap.String("worker", e.workerOf(r)),
				zap.Duration("timeout", e.opts.Run.Timeout))
			return e.cancel(ctx, repo, r, baseTree, res, agents.EndWallTimeout, "the run went on past agent.timeout")
		case <-notice.C:
			if e.workerOf(r) == "" {
				e.log.Warn("no worker has taken the run yet: the session waits for one (start `ctxgraphd worker` on a machine)",
					zap.String("run", spec.RunID), zap.Int("attempt", r.attempt))
				// A Job a worker pulled and dropped without a claim is
				// gone from the queue: the attempt is put there again,
				// now and then, while no worker holds it (a second copy
				// of it is refused at its claim).
				if unclaimed++; unclaimed%republishEvery == 0 {
					if err := e.publish(ctx, r, func(agents.Event) {}); err != nil {
						e.log.Warn("could not put the run's attempt on the work queue again", zap.String("run", spec.RunID), zap.Error(err))
					}
				}
			}
		case <-lost.C:
			wall.Stop()
			if err := e.redeliver(ctx, r, "its worker stopped sending heartbeats", onEvent); err != nil {
				return fail(err)
			}
		case m := <-r.msgs:
			switch m := m.(type) {
			case claimed:
				unclaimed = 0
				e.log.Info("a worker took the run", zap.String("run", spec.RunID), zap.String("worker", m.worker), zap.Int("attempt", r.attempt))
				onEvent(agents.Event{Time: time.Now(), RunID: spec.RunID, Kind: agents.EventWorker, Detail: m.worker})
				lost.Reset(HeartbeatsMissed * e.opts.Heartbeat)
				if t := e.opts.Run.Timeout; t > 0 {
					wall.Reset(t + e.opts.CancelGrace)
				}
			case beat:
				lost.Reset(HeartbeatsMissed * e.opts.Heartbeat)
			case revoked:
				if e.workerOf(r) != m.worker {
					continue // the attempt went elsewhere already
				}
				lost.Stop()
				wall.Stop()
				if err := e.redeliver(ctx, r, "it was revoked", onEvent); err != nil {
					return fail(err)
				}
			case Event:
				if _, attempt := e.workerAndAttempt(r); m.Event != nil && m.Attempt == attempt {
					ev := *m.Event
					ev.RunID = spec.RunID
					if ev.Kind == "result" && ev.CostUSD > r.shownUSD && !math.IsInf(ev.CostUSD, 0) {
						r.shownUSD = ev.CostUSD
					}
					onEvent(ev)
				}
			case Outcome:
				if _, attempt := e.workerAndAttempt(r); m.Attempt != attempt {
					// Queued before its attempt was given up: it counts no more.
					continue
				}
				lost.Stop()
				wall.Stop()
				if m.GivenBack != "" {
					if err := e.redeliver(ctx, r, "it gave the run back: "+m.GivenBack, onEvent); err != nil {
						return fail(err)
					}
					continue
				}
				if f, ok := m.Result.Failure(""); ok && f.OnWorker() {
					// The worker's own machine failed the run (its CLI,
					// login, sandbox, disk): nothing of it is the agent's
					// or the feature's. Another worker runs it; the
					// session stops only when every worker connected has
					// failed it so.
					worker, _ := e.workerAndAttempt(r)
					e.mu.Lock()
					r.avoid[worker] = f.Kind
					e.mu.Unlock()
					if !e.anyLeftFor(r) {
						res := m.Result
						res.RunID, res.PID, res.Err = r.spec.RunID, 0, nil
						res.Workers = e.avoided(r)
						return res
					}
					if err := e.redeliver(ctx, r, fmt.Sprintf("its machine could not run it (%s: %s)", f.Kind, f.Detail), onEvent); err != nil {
						return fail(err)
					}
					continue
				}
				return e.land(ctx, repo, r, baseTree, m)
			}
		}
	}
}

// baseRef holds a run's base commit while the run is out.
func baseRef(run string) string { return "refs/ctxgraphd/base/" + run }

// commitBase commits the work tree as it is, on HEAD, as the run's base:
// what the worker clones, and what its result must descend from.
func (e *Executor) commitBase(ctx context.Context, repo *gitrepo.Repo, run string) (string, gitrepo.Tree, error) {
	tree, err := repo.Snapshot(ctx)
	if err != nil {
		return "", "", err
	}
	head, _, _, err := repo.Head(ctx)
	if err != nil {
		return "", "", err
	}
	var parents []string
	if head != "" {
		parents = []string{head}
	}
	commit, err := repo.Commit(ctx, tree, parents, "ctxgraphd: the work tree as "+run+" starts from", gitrepo.Signature{Name: "ctxgraphd", Email: "ctxgraphd@localhost"})
	if err != nil {
		return "", "", err
	}
	if err := repo.UpdateRef(ctx, baseRef(run), commit, ""); err != nil {
		return "", "", err
	}
	return commit, tree, nil
}

// putBase puts base's bundle in the base bucket under the run's id, with
// the archive of the lane's dependencies beside it (or the project's
// where the lane has none, as the judge lends them), and returns their
// names, the digests of both as put (the Assignment's, which a worker
// reads them against: a bucket a worker can have the server write to is
// not proved the daemon's by its name) and the func that removes both
// once the run is over. A base is a run's own (its commit holds the time
// it was made), and the bucket would otherwise grow by a whole history a
// run.
func (e *Executor) putBase(ctx context.Context, repo *gitrepo.Repo, base, run, dir string) ([]string, [2]string, func(), error) {
	var digests [2]string
	deps, drop, err := e.putBaseObjects(ctx, repo, base, run, dir, &digests)
	return deps, digests, drop, err
}

func (e *Executor) putBaseObjects(ctx context.Context, repo *gitrepo.Repo, base, run, dir string, digests *[2]string) ([]string, func(), error) {
	bucket, err := e.js.ObjectStore(ctx, e.subjects.BaseBucket())
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := branch.WriteBase(ctx, repo, &buf, base); err != nil {
		return nil, nil, err
	}
	if int64(buf.Len()) > e.opts.MaxBundleBytes {
		return nil, nil, fmt.Errorf("the lane's base bundle is %d bytes, over the bound of %d", buf.Len(), e.opts.MaxBundleBytes)
	}
	info, err := bucket.PutBytes(ctx, run, buf.Bytes())
	if err != nil {
		return nil, nil, err
	}
	digests[0] = info.Digest
	drop := func() {
		for _, key := range []string{run, run + depsSuffix} {
			if err := bucket.Delete(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				e.log.Warn("could not remove a run's base", zap.String("key", key), zap.Error(err))
			}
		}
	}
	buf.Reset()
	deps, err := toolchain.PackDeps(&buf, e.opts.MaxBundleBytes, dir, e.opts.ProjectDir)
	if err == nil && len(deps) > 0 {
		if info, err = bucket.PutBytes(ctx, run+depsSuffix, buf.Bytes()); err == nil {
			digests[1] = info.Digest
		}
	}
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("the lane's dependencies: %w", err)
	}
	return deps, drop, nil
}

// remoteRun is spec as it crosses: no path of this machine.
func (e *Executor) remoteRun(spec agents.Spec) (RemoteRun, error) {
	// A conversation does not cross machines, nor clones: Claude Code keeps
	// it by the working directory, which is the attempt's own clone, and on
	// the machine that ran it. A resumed coder starts a new conversation
	// under the same id instead; its command object carries what the
	// attempts before it left (the precedent), as a fresh run's does.
	rr := RemoteRun{
		RunID: spec.RunID, Role: spec.Role, FeatureID: spec.FeatureID, Attempt: spec.Attempt,
		SessionID: spec.SessionID, Prompt: spec.Prompt, SystemPrompt: spec.SystemPrompt,
		MaxBudgetUSD: spec.MaxBudgetUSD, Hooks: spec.Hooks, HookMatcher: spec.HookMatcher, Options: e.opts.Run,
		Setup: spec.Setup,
	}
	if spec.Policy != nil {
		p := Relative(*spec.Policy, spec.Dir)
		rr.Policy = &p
	}
	progress, err := readProgress(spec.Dir, func(string) bool { return true })
	if err != nil {
		return RemoteRun{}, err
	}
	rr.Progress = progress
	if e.opts.Offline != nil {
		data, err := e.opts.Offline()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return RemoteRun{}, fmt.Errorf("the hooks' offline record: %w", err)
		}
		if json.Valid(data) {
			rr.Offline = data
		}
	}
	return rr, nil
}

// Relative is p with its paths relative to dir, slash-separated; paths
// outside dir are dropped (they are this machine's).
func Relative(p sandbox.Policy, dir string) sandbox.Policy {
	rel := func(ps []string) []string {
		var out []string
		for _, x := range ps {
			r, err := filepath.Rel(dir, x)
			if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
				continue
			}
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	return sandbox.Policy{DenyWrite: rel(p.DenyWrite), DenyRead: rel(p.DenyRead), AllowWrite: rel(p.AllowWrite), AllowedDomains: p.AllowedDomains}
}

// Rooted is a Relative policy made absolute again in dir.
func Rooted(p sandbox.Policy, dir string) sandbox.Policy {
	abs := func(ps []string) []string {
		out := make([]string, 0, len(ps))
		for _, x := range ps {
			if c := path.Clean("/" + x); c != "/" {
				out = append(out, filepath.Join(dir, filepath.FromSlash(c)))
			}
		}
		return out
	}
	return sandbox.Policy{ProjectDir: dir, DenyWrite: abs(p.DenyWrite), DenyRead: abs(p.DenyRead), AllowWrite: abs(p.AllowWrite), AllowedDomains: p.AllowedDomains}
}

// readProgress reads the regular files of dir's .claude/progress that
// keep accepts, by slash path in it, at most maxProgressBytes in all.
func readProgress(dir string, keep func(rel string) bool) (map[string][]byte, error) {
	root := filepath.Join(dir, paths.ProgressDir)
	out := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !keep(rel) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(data); total > maxProgressBytes {
			return fmt.Errorf("the files of %s are over %d bytes", paths.ProgressDir, maxProgressBytes)
		}
		out[rel] = data
		return nil
	})
	return out, err
}

// writeProgress writes files (readProgress's) into dir's
// .claude/progress, each only if it changed; a path that is not a plain
// relative path in it is refused.
func writeProgress(dir string, files map[string][]byte) error {
	root := filepath.Join(dir, paths.ProgressDir)
	for rel, data := range files {
		if !fs.ValidPath(rel) || rel == "." || strings.Contains(rel, "\\") {
			return fmt.Errorf("%s: %q is not a path inside it", paths.ProgressDir, rel)
		}
		p := filepath.Join(root, filepath.FromSlash(rel))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := refuseLinks(root, rel); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// refuseLinks refuses rel when a directory on its way in root, or rel
// itself, is a symbolic link: a write must not leave root.
func refuseLinks(root, rel string) error {
	p := root
	for _, part := range strings.Split(rel, "/") {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %s is a symbolic link; nothing is written through one", paths.ProgressDir, rel)
		}
	}
	return nil
}

// mayReturn are the files of .claude/progress a run may change: the
// feature list (its tester's claim, read as a local run's write of it
// is) and evidence.
func mayReturn(rel string) bool {
	return rel == progress.FeatureListFile || strings.HasPrefix(rel, progress.EvidenceDir+"/")
}

// publish puts r's current attempt on the work queue, and says that the
// run waits for a worker.
func (e *Executor) publish(ctx context.Context, r *remote, onEvent func(agents.Event)) error {
	onEvent(agents.Event{Time: time.Now(), RunID: r.spec.RunID, Kind: agents.EventWorker})
	e.mu.Lock()
	job := Job{Run: r.spec.RunID, Attempt: r.attempt, Feature: r.spec.FeatureID, Base: r.base, Bundle: r.spec.RunID, Deps: r.deps}
	e.mu.Unlock()
	data, err := json.Marshal(job)
	if err != nil {
		return err
	}
	if e.nc.IsClosed() {
		// nats.go's JetStream publish on a closed connection leaves a
		// goroutine of its own waiting forever (v1.55.0): say it here.
		return nats.ErrConnectionClosed
	}
	// The id is the attempt's, and no one else's to guess: a message
	// planted under it first would have the server drop this one as a
	// duplicate.
	ack, err := e.js.Publish(ctx, e.subjects.Lanes(), data, jetstream.WithMsgID(ResultKey(job.Run, job.Attempt)+"."+rand.Text()[:12]))
	if err == nil && ack.Duplicate {
		err = fmt.Errorf("the work queue took attempt %d of %s as a duplicate of a message already there", job.Attempt, job.Run)
	}
	return err
}

// redeliver gives r's attempt up and publishes the next, with a new token.
func (e *Executor) redeliver(ctx context.Context, r *remote, why string, onEvent func(agents.Event)) error {
	e.mu.Lock()
	old, oldAttempt, oldToken := r.worker, r.attempt, r.token
	token, ok := e.opts.Gates.Reissue(r.token)
	if ok {
		delete(e.tokens, r.token)
		r.token = token
		e.tokens[token] = r
	}
	r.attempt++
	r.worker = ""
	r.shownUSD = 0
	e.mu.Unlock()
	e.log.Warn("a worker was lost; the run goes to the next worker, not charged to its feature",
		zap.String("run", r.spec.RunID), zap.String("worker", old), zap.Int("attempt", oldAttempt), zap.String("why", why))
	e.opts.Gates.Trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto,
		Context: control.TraceContext{Agent: string(r.spec.Role), Feature: r.spec.FeatureID, Run: r.spec.RunID},
		Event:   control.TraceEvent{WhatHappened: fmt.Sprintf("worker %s was lost (%s) during attempt %d; the run is given to another worker", old, why, oldAttempt)}})
	if old != "" {
		e.tell(old, Control{Run: r.spec.RunID, Attempt: oldAttempt, Token: oldToken, Cancel: "the daemon gave this attempt to another worker: " + why})
	}
	return e.publish(ctx, r, onEvent)
}

// cancel ends r's run when the loop asks (or when it went past its wall
// time): its worker is told why, and has CancelGrace to send the outcome, which lands as any other (what an
// interrupted run left is judged, as a local one's is).
func (e *Executor) cancel(ctx context.Context, repo *gitrepo.Repo, r *remote, baseTree gitrepo.Tree, res agents.Result, ended agents.EndReason, why string) agents.Result {
	res.Ended, res.EndedAt = ended, time.Now()
	worker, attempt := e.workerAndAttempt(r)
	if worker == "" {
		return res
	}
	e.tell(worker, Control{Run: r.spec.RunID, Attempt: attempt, Token: e.tokenOf(r), Cancel: why})
	wait := time.NewTimer(e.opts.CancelGrace)
	defer wait.Stop()
	for {
		select {
		case <-wait.C:
			e.log.Warn("a cancelled run's worker did not answer in time; what it did is dropped", zap.String("run", r.spec.RunID), zap.String("worker", worker))
			return res
		case m := <-r.msgs:
			if o, ok := m.(Outcome); ok && o.GivenBack == "" && o.Attempt == attempt {
				out := e.land(context.WithoutCancel(ctx), repo, r, baseTree, o)
				out.Ended = ended
				return out
			}
		}
	}
}

// land takes an outcome in: the result bundle from the worker's bucket
// into a quarantine ref, checked, then its tree into the lane's work tree,
// and the progress files the run may write.
func (e *Executor) land(ctx context.Context, repo *gitrepo.Repo, r *remote, baseTree gitrepo.Tree, o Outcome) agents.Result {
	res := e.believable(r, o.Result)
	res.RunID, res.PID, res.Err = r.spec.RunID, 0, nil
	if o.Err != "" {
		res.Err = errors.New(o.Err)
	}
	worker, attempt := e.workerAndAttempt(r)
	if len(o.Spooled) > 0 && e.opts.Spool != nil {
		e.opts.Spool(e.ownSpooled(r, worker, o.Spooled))
	}
	if o.Tip == "" {
		return res
	}
	refuse := func(why string) agents.Result {
		e.log.Warn("a worker's result was refused", zap.String("run", r.spec.RunID), zap.String("worker", worker), zap.String("why", why))
		e.opts.Gates.Trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: "worker_result",
			Context: control.TraceContext{Agent: string(r.spec.Role), Feature: r.spec.FeatureID, Run: r.spec.RunID},
			Event:   control.TraceEvent{WhatHappened: fmt.Sprintf("the result worker %s returned was refused, and nothing of it was kept: %s", worker, why)}})
		res.IsError, res.Text, res.Summary = true, "the worker's result was refused: "+why, "result refused: "+why
		return res
	}
	bucket, err := e.js.ObjectStore(ctx, e.subjects.ResultsBucket(worker))
	if err != nil {
		return refuse(fmt.Sprintf("its results bucket: %v", err))
	}
	key := ResultKey(r.spec.RunID, attempt)
	// Read as a worker reads the daemon's objects (openObject): whole or
	// not at all, bounded, no link followed, no chunk waited for.
	obj, err := openObject(ctx, e.js, e.subjects.ResultsBucket(worker), key, e.opts.MaxBundleBytes, "")
	if err != nil {
		e.fullBucket(ctx, worker, bucket)
		return refuse(fmt.Sprintf("its bundle %s: %v", key, err))
	}
	defer func() {
		bucket.Delete(context.WithoutCancel(ctx), key)
		if len(o.Deps) > 0 {
			bucket.Delete(context.WithoutCancel(ctx), DepsKey(r.spec.RunID, attempt))
		}
	}()
	modes, actor, state, ok := e.opts.Gates.ChangeRules(e.tokenOf(r))
	if !ok {
		return refuse("the run is no longer known to the gates")
	}
	imp, err := branch.ImportResult(ctx, repo, obj, branch.Result{
		Run: key, Base: r.base, MaxBytes: e.opts.MaxBundleBytes, Modes: modes, Actor: actor, State: state,
	})
	if err != nil {
		if errors.Is(err, branch.ErrRefused) {
			return refuse(err.Error())
		}
		res.Err = err
		return res
	}
	defer branch.ReleaseResult(context.WithoutCancel(ctx), repo, key, imp.Commit)
	if imp.Commit != o.Tip {
		return refuse(fmt.Sprintf("its bundle's tip %s is not the tip %s its outcome names", gitrepo.Short(imp.Commit), gitrepo.Short(o.Tip)))
	}
	if len(o.Deps) > 0 {
		// Before the tree: an archive that would write outside its
		// directories refuses the result whole.
		if err := e.landDeps(ctx, worker, r, attempt, o.Deps); err != nil {
			e.fullBucket(ctx, worker, bucket)
			return refuse(err.Error())
		}
	}
	changed, err := repo.ChangedPaths(ctx, baseTree, imp.Tree)
	if err == nil {
		// The person's files are never a result's: a bundle that holds
		// one would put a worker's version of the person's secret in the
		// lane, and on the branch.
		for _, p := range changed {
			if slices.Contains(e.opts.Copies.Names(), p) {
				return refuse(fmt.Sprintf("its tree holds %s, a file of lanes.copy, which only the person's tree gives", p))
			}
		}
	}
	if err == nil {
		err = repo.Restore(ctx, imp.Tree, changed)
	}
	if err == nil {
		returned := map[string][]byte{}
		for rel, data := range o.Progress {
			if mayReturn(rel) {
				returned[rel] = data
			}
		}
		err = writeProgress(r.dir, returned)
	}
	if err != nil {
		res.Err = fmt.Errorf("putting worker %s's result in the lane's work tree: %w", worker, err)
	}
	return res
}

// believable is what of a worker's account of its run the daemon takes:
// a cost that is no amount (negative, not a number, infinite) counts as the
// run's whole cap, so that no budget is dodged by it, and is a finding
// against the worker, as is a cost past the cap the run was given by
// more than the CLI's last step could take it (counted as twice the cap),
// and one below what the
// run's own stream showed (counted as shown: the CLI's total only
// grows, so an honest outcome is never below it). (How long the session
// waits for what the run says of the API is the loop's to bound, for every
// run alike.)
func (e *Executor) believable(r *remote, res agents.Result) agents.Result {
	worker, _ := e.workerAndAttempt(r)
	capUSD := r.spec.MaxBudgetUSD
	if capUSD <= 0 {
		capUSD = r.spec.Options.MaxBudgetUSD
	}
	switch c := res.CostUSD; {
	case c < 0 || math.IsNaN(c) || math.IsInf(c, 0):
		e.finding(worker, fmt.Sprintf("run %s's cost was said to be %v: counted as its cap, $%.2f", r.spec.RunID, c, capUSD))
		res.CostUSD = capUSD
	case capUSD > 0 && c > 2*capUSD:
		// Counted as twice the cap, the most the CLI's last step past it
		// could take: one outcome must not spend the night's budget.
		e.finding(worker, fmt.Sprintf("run %s's cost was said to be $%.2f, past twice its cap of $%.2f: counted as twice the cap", r.spec.RunID, c, capUSD))
		res.CostUSD = 2 * capUSD
	}
	if res.CostUSD < r.shownUSD {
		e.finding(worker, fmt.Sprintf("run %s's cost was said to be $%.2f, less than its stream showed, $%.2f: counted as shown", r.spec.RunID, res.CostUSD, r.shownUSD))
		res.CostUSD = r.shownUSD
	}
	return res
}

// ownSpooled are the records of spooled that the attempt's own hooks
// made: those bound to its token (the worker's relay spools with the
// token its assignment gave). Each is bound to the run as the daemon knows
// it (the hash of the token it spawned the run with, and its role,
// feature and run): a record bound to another run's token, or to none (a
// person's), is a worker's forgery, a finding, and dropped.
func (e *Executor) ownSpooled(r *remote, worker string, spooled []spool.Record) []spool.Record {
	e.mu.Lock()
	mine := control.TokenHash(r.token)
	e.mu.Unlock()
	var out []spool.Record
	for _, rec := range spooled {
		if rec.TokenHash != mine {
			e.finding(worker, fmt.Sprintf("a hook record it returned with run %s is bound to another run's token, or to none: dropped", r.spec.RunID))
			continue
		}
		rec.TokenHash = control.TokenHash(r.spawnToken)
		rec.Role, rec.Feature, rec.Run = string(r.spec.Role), r.spec.FeatureID, r.spec.RunID
		out = append(out, rec)
	}
	return out
}

// fullBucket files a finding against worker when its results bucket has
// no room left for a bundle, called when what its outcome names is not
// there. The daemon deletes what it reads, so an honest worker's bucket
// holds only the results of its runs in flight; one with no room left
// was filled by the worker (the server refused the rest, DiscardNew).
func (e *Executor) fullBucket(ctx context.Context, worker string, bucket jetstream.ObjectStore) {
	st, err := bucket.Status(ctx)
	if err != nil {
		return
	}
	s, ok := st.(*jetstream.ObjectBucketStatus)
	if !ok {
		return
	}
	used, max := int64(st.Size()), s.StreamInfo().Config.MaxBytes
	if max > 0 && used+e.opts.MaxBundleBytes > max {
		e.finding(worker, fmt.Sprintf("its results bucket is full (%d of its %d bytes): what its outcome names is not there", used, max))
	}
}

// landDeps unpacks the run's dependency directories into the lane's work
// tree (toolchain.UnpackDeps), where the daemon's test run is lent them as a local
// lane's.
func (e *Executor) landDeps(ctx context.Context, worker string, r *remote, attempt int, names []string) error {
	key := DepsKey(r.spec.RunID, attempt)
	obj, err := openObject(ctx, e.js, e.subjects.ResultsBucket(worker), key, e.opts.MaxBundleBytes, "")
	if err != nil {
		return fmt.Errorf("the run's dependencies %s: %w", key, err)
	}
	return toolchain.UnpackDeps(r.dir, obj, names, e.opts.MaxBundleBytes)
}

func (e *Executor) forget(r *remote) {
	e.mu.Lock()
	delete(e.runs, r.spec.RunID)
	delete(e.tokens, r.token)
	worker, attempt, token := r.worker, r.attempt, r.token
	r.worker = ""
	e.mu.Unlock()
	if worker != "" {
		e.tell(worker, Control{Run: r.spec.RunID, Attempt: attempt, Token: token, Cancel: "the run is over"})
	}
}

func (e *Executor) workerOf(r *remote) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.worker
}

func (e *Executor) workerAndAttempt(r *remote) (string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.worker, r.attempt
}

func (e *Executor) tokenOf(r *remote) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.token
}

// tell sends worker the daemon's word.
func (e *Executor) tell(worker string, c Control) {
	data, _ := json.Marshal(c)
	if err := e.nc.Publish(e.subjects.Worker(worker).Control, data); err != nil {
		e.log.Warn("could not tell a worker", zap.String("worker", worker), zap.Error(err))
	}
}

// workerName is the worker a subject of Subjects.Workers names; the
// server lets only that worker publish on it.
func (e *Executor) workerName(subject string) string {
	rest := strings.TrimPrefix(subject, e.subjects.Prefix()+".worker.")
	name, _, _ := strings.Cut(rest, ".")
	return name
}

// reply answers m, a request of a worker's: the server takes the answer
// back to the worker's own account, whatever reply subject it named.
// refuse answers m, a request the daemon drops, with only why (a status,
// as JetStream's): an answer asked for across accounts is held by the
// server until it comes, and a flood of unanswered requests would hold
// the daemon's memory for minutes.
func refuse(m *nats.Msg, why string) {
	if m.Reply == "" {
		return
	}
	status := nats.NewMsg(m.Reply)
	status.Header.Set("Status", "400")
	status.Header.Set("Description", why)
	m.RespondMsg(status)
}

func reply(m *nats.Msg, v any) {
	data, err := json.Marshal(v)
	if err == nil {
		m.Respond(data)
	}
}

// onClaim binds a run's attempt to the worker that claims it first.
func (e *Executor) onClaim(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	var c Claim
	if err := json.Unmarshal(m.Data, &c); err != nil {
		reply(m, Assignment{Refused: "a claim that cannot be read: " + err.Error()})
		return
	}
	e.mu.Lock()
	r := e.runs[c.Run]
	switch {
	case r == nil:
		e.mu.Unlock()
		reply(m, Assignment{Refused: "no such run in flight (over, or of a daemon before this one)"})
		return
	case r.attempt != c.Attempt || r.worker != "":
		e.mu.Unlock()
		reply(m, Assignment{Refused: fmt.Sprintf("attempt %d of %s is not open", c.Attempt, c.Run)})
		return
	case r.avoid[worker] != "":
		why := r.avoid[worker]
		e.mu.Unlock()
		reply(m, Assignment{Refused: fmt.Sprintf("this worker's machine failed %s already (%s): another worker is to run it", c.Run, why), Retry: true})
		return
	}
	var denied []string
	if r.spec.Policy != nil {
		denied = Rooted(*r.spec.Policy, c.Dir).Denied()
	}
	if err := e.opts.Gates.Relocate(r.token, c.Dir, denied, c.Writable); err != nil {
		e.mu.Unlock()
		reply(m, Assignment{Refused: err.Error()})
		return
	}
	r.worker = worker
	e.claimedLocked(worker, c.Run, c.Attempt)
	a := Assignment{Token: r.token, Spec: r.spec, Heartbeat: e.opts.Heartbeat, MaxBundleBytes: e.opts.MaxBundleBytes, Copies: e.opts.Copies,
		Base: r.base, Bundle: r.spec.RunID, Deps: r.deps, BundleDigest: r.digests[0], DepsDigest: r.digests[1]}
	e.mu.Unlock()
	reply(m, a)
	r.msgs <- claimed{worker: worker, dir: c.Dir}
}

// pullsPerWorker is how many of a worker's pulls the daemon keeps
// waiting on the work queue at once. An honest worker has one waiting (it
// pulls again only once a pull has ended), now and then two as one
// expires; the consumer keeps pullsMaxWaiting, so that many workers fit
// beside each other.
const pullsPerWorker = 4

// onPull pulls a Job of the work queue for a worker (Pull), if fewer than
// pullsPerWorker of its pulls wait already, and answers with it. The
// consumer's bound on waiting pulls is every worker's: a worker that held
// them all would keep every Job from the others, and so no worker pulls
// from the consumer itself (workerServices). Past its share, the worker
// is told as JetStream would tell it (409) and it is a finding.
func (e *Executor) onPull(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	var p Pull
	if err := json.Unmarshal(m.Data, &p); err != nil {
		refuse(m, "a pull that cannot be read")
		e.finding(worker, fmt.Sprintf("a pull that cannot be read (%v): dropped", err))
		return
	}
	wait := p.Wait
	if wait <= 0 || wait > pullMaxExpires {
		wait = pullMaxExpires
	}
	e.mu.Lock()
	mb := e.mailboxes[worker]
	full := mb == nil || mb.pulls+mb.unclaimed() >= pullsPerWorker || len(mb.leases)+mb.pulls >= leasesPerWorker
	if !full {
		mb.pulls++
	}
	e.mu.Unlock()
	if mb == nil { // revoked since
		return
	}
	if full {
		e.finding(worker, fmt.Sprintf("more pulls of the work queue waiting, or Jobs pulled and not claimed, than a worker may have (%d), or more Jobs held not acknowledged (%d): a pull was refused", pullsPerWorker, leasesPerWorker))
		status := nats.NewMsg(m.Reply)
		status.Header.Set("Status", "409")
		status.Header.Set("Description", "Exceeded MaxWaiting")
		m.RespondMsg(status)
		return
	}
	go func() {
		defer func() {
			e.mu.Lock()
			mb.pulls--
			e.mu.Unlock()
		}()
		answer := nats.NewMsg(m.Reply)
		if job, ok := e.pullJob(wait, mb.quit); ok {
			if !e.isConnected(worker) {
				// Gone while its pull waited (killed): the Job goes back
				// at once, not after the queue's AckWait.
				job.Nak()
				return
			}
			var j Job
			json.Unmarshal(job.Data(), &j)
			e.mu.Lock()
			held := mb.leases != nil
			if held {
				mb.leases[job.Reply()] = &lease{msg: job, run: j.Run, attempt: j.Attempt}
			}
			e.mu.Unlock()
			if !held { // revoked since
				job.Nak()
				return
			}
			answer.Data = job.Data()
			answer.Header.Set(AckHeader, job.Reply())
		}
		if err := m.RespondMsg(answer); err != nil && answer.Header.Get(AckHeader) != "" {
			e.log.Warn("a Job pulled for a worker did not reach it; it goes back on the queue", zap.String("worker", worker), zap.Error(err))
			e.endLease(mb, answer.Header.Get(AckHeader), Ack{Kind: AckGiveBack})
		}
	}()
}

// lease is a Job the daemon pulled for a worker, until the worker's Ack
// ends it; claimed once the worker claimed its attempt.
type lease struct {
	msg     jetstream.Msg
	run     string
	attempt int
	claimed bool
}

// unclaimed is how many of mb's Jobs are not claimed yet; mu held.
func (mb *mailbox) unclaimed() int {
	n := 0
	for _, l := range mb.leases {
		if !l.claimed {
			n++
		}
	}
	return n
}

// claimedLocked marks worker's Job of run's attempt claimed; mu held.
func (e *Executor) claimedLocked(worker, run string, attempt int) {
	if mb := e.mailboxes[worker]; mb != nil {
		for _, l := range mb.leases {
			if l.run == run && l.attempt == attempt && !l.claimed {
				l.claimed = true
				return
			}
		}
	}
}

// leasesPerWorker bounds the Jobs a worker holds not acknowledged (its
// runs, and the Jobs it is claiming): an honest worker's slots, and a
// few more; past it, its pulls are refused, so that no worker hoards the
// queue.
const leasesPerWorker = 64

// onAck acknowledges on the work queue, for a worker, a Job the daemon
// pulled for that worker (its Ack): an Ack of a Job not handed to it is a
// finding, and nothing.
func (e *Executor) onAck(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	var a Ack
	if err := json.Unmarshal(m.Data, &a); err != nil {
		e.finding(worker, fmt.Sprintf("an acknowledgement that cannot be read (%v): dropped", err))
		return
	}
	switch a.Kind {
	case AckDone, AckGiveBack, AckWorking, AckDrop:
	default:
		e.finding(worker, fmt.Sprintf("an acknowledgement of no kind the daemon knows (%q): dropped", a.Kind))
		return
	}
	e.mu.Lock()
	mb := e.mailboxes[worker]
	e.mu.Unlock()
	if mb == nil || !e.endLease(mb, a.Job, a) {
		e.finding(worker, "an acknowledgement of a Job the daemon did not give it: dropped")
	}
}

// endLease acknowledges the Job of mb's worker named job as a says, and
// forgets it unless the worker is still at it; false if mb holds no such
// Job.
func (e *Executor) endLease(mb *mailbox, job string, a Ack) bool {
	e.mu.Lock()
	l := mb.leases[job]
	if l != nil && a.Kind != AckWorking {
		delete(mb.leases, job)
	}
	e.mu.Unlock()
	if l == nil {
		return false
	}
	msg := l.msg
	switch a.Kind {
	case AckDone:
		msg.Ack()
	case AckGiveBack:
		msg.NakWithDelay(min(max(a.Delay, 0), pullMaxExpires))
	case AckWorking:
		msg.InProgress()
	case AckDrop:
		msg.Term()
	}
	return true
}

// isConnected says whether worker is connected now (true where the
// executor is told of no server's connections).
func (e *Executor) isConnected(worker string) bool {
	e.mu.Lock()
	connected := e.connected
	e.mu.Unlock()
	return connected == nil || slices.Contains(connected(), worker)
}

// pullJob waits up to wait for the work queue's next Job, or until quit
// (the worker revoked: a Job it took then goes back on the queue at once).
func (e *Executor) pullJob(wait time.Duration, quit <-chan struct{}) (jetstream.Msg, bool) {
	e.mu.Lock()
	cons := e.lanes
	e.mu.Unlock()
	if cons == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := e.js.Consumer(ctx, e.subjects.LanesStream(), e.subjects.LanesConsumer())
		cancel()
		if err != nil {
			e.log.Warn("the work queue's consumer cannot be reached; a worker's pull is answered with no Job", zap.Error(err))
			return nil, false
		}
		e.mu.Lock()
		e.lanes, cons = c, c
		e.mu.Unlock()
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, false
	}
	for msg := range batch.Messages() {
		select {
		case <-quit:
			msg.Nak()
			return nil, false
		default:
			return msg, true
		}
	}
	return nil, false
}

// bound is run's attempt if it is bound to worker and token is its: a
// worker speaks only of its own runs, with the token each was given.
func (e *Executor) bound(worker, run string, attempt int, token string) *remote {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs[run]
	if r == nil || r.worker != worker || r.attempt != attempt || subtle.ConstantTimeCompare([]byte(r.token), []byte(token)) != 1 {
		return nil
	}
	return r
}

// onHook answers a worker's hook as the socket would, for a token bound
// to that worker only: a worker cannot ask as another's run.
func (e *Executor) onHook(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	// At most hooksInFlight at once: the rest wait in the worker's own
	// mailbox, delaying that worker only.
	hooks := e.mailboxOf(worker).hooks
	select {
	case hooks <- struct{}{}:
	case <-e.closed:
		return
	}
	go func() {
		defer func() { <-hooks }()
		var call HookCall
		if err := json.Unmarshal(m.Data, &call); err != nil {
			reply(m, HookAnswer{Error: &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadPayload, Message: err.Error()}})
			return
		}
		e.mu.Lock()
		r := e.tokens[call.Token]
		ok := r != nil && r.worker == worker
		e.mu.Unlock()
		if !ok {
			reply(m, HookAnswer{Error: &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeUnknownRun,
				Message: "the run token is no run's of this worker (the attempt was given to another worker, or is over)"}})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := e.opts.Gates.Hook(ctx, call.Token, call.Request)
		if err != nil {
			var api *control.APIError
			if !errors.As(err, &api) {
				api = &control.APIError{HTTPStatus: http.StatusInternalServerError, Code: control.CodeInternal, Message: err.Error()}
			}
			reply(m, HookAnswer{Error: api})
			return
		}
		reply(m, HookAnswer{Response: resp})
	}()
}

// onHeartbeat keeps an attempt alive, or tells its worker to stop it.
func (e *Executor) onHeartbeat(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	var h Heartbeat
	if json.Unmarshal(m.Data, &h) != nil {
		return
	}
	r := e.bound(worker, h.Run, h.Attempt, h.Token)
	if r == nil {
		reply(m, Control{Run: h.Run, Attempt: h.Attempt, Token: h.Token, Cancel: "the attempt is not this worker's (given to another worker, over, or of a daemon before this one)"})
		return
	}
	reply(m, Control{Run: h.Run, Attempt: h.Attempt, Token: h.Token})
	select {
	case r.msgs <- beat{}:
	default:
	}
}

// onEvent passes a bound attempt's events to its run.
func (e *Executor) onEvent(m *nats.Msg) {
	var ev Event
	if json.Unmarshal(m.Data, &ev) != nil {
		return
	}
	if r := e.bound(e.workerName(m.Subject), ev.Run, ev.Attempt, ev.Token); r != nil {
		select {
		case r.msgs <- ev:
		default:
			e.log.Debug("a run's event was dropped: its run is behind", zap.String("run", ev.Run))
		}
	}
}

// onOutcome takes a bound attempt's end to its run.
func (e *Executor) onOutcome(m *nats.Msg) {
	worker := e.workerName(m.Subject)
	var o Outcome
	if err := json.Unmarshal(m.Data, &o); err != nil {
		reply(m, OutcomeAnswer{Refused: "an outcome that cannot be read: " + err.Error()})
		return
	}
	r := e.bound(worker, o.Run, o.Attempt, o.Token)
	if r == nil {
		reply(m, OutcomeAnswer{Refused: "the attempt is not this worker's (given to another worker, over, or of a daemon before this one)"})
		return
	}
	// One outcome an attempt: the run's channel never holds a flood of
	// them, and the handler, which all workers' results share, never
	// waits behind one worker's.
	e.mu.Lock()
	taken := r.ended == o.Attempt
	r.ended = o.Attempt
	e.mu.Unlock()
	if taken {
		reply(m, OutcomeAnswer{Refused: "the attempt's outcome was taken already"})
		e.finding(worker, fmt.Sprintf("a second outcome for attempt %d of %s", o.Attempt, o.Run))
		return
	}
	reply(m, OutcomeAnswer{})
	r.msgs <- o
}
