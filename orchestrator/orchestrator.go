// Package orchestrator owns the loop of one project's daemon: it watches
// .claude/progress/, decides with the statemachine rules, spawns Claude Code
// runs through the agents package, confined by Claude Code's sandbox, has
// them judged by their outcome (package judge) and keeps the state of
// record in the store.
//
// One goroutine, the loop in Run, owns the state machine, the session and the
// canonical feature list. Everything else (the watcher, the running agent,
// the daemon's own slow work such as re-running a test, control requests)
// talks to it over channels. The handlers of a run's end decide and return
// what it comes to (runEnd, with the verdict on a claim, claimOutcome);
// the loop applies it in one place (finishRun). Every change is committed
// to the store before its side effect starts, so that a crash at any point
// is resumed from the store without losing or repeating a transition.
package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// AgentRunner runs one claude -p process to its end. *agents.Runner is the
// implementation; the interface keeps the loop testable.
type AgentRunner interface {
	Run(ctx context.Context, spec agents.Spec, onStart func(pid int), onEvent func(agents.Event)) agents.Result
}

// Options configure an Orchestrator.
type Options struct {
	Project paths.Project
	Config  *config.Config
	Store   StateOfRecord
	Runner  AgentRunner
	// Judge is the daemon side of the gates; Repo the project's repository,
	// in which runs are judged and verdicts committed.
	Judge *judge.Judge
	Repo  *gitrepo.Repo
	Log   *zap.Logger
	// Hook is the hook command of every run: each run is given the hooks
	// its role needs (gates.RunHooks) in its settings; none when Path is
	// empty. HookCommand is its command line, for messages.
	Hook        gates.HookCommand
	HookCommand string
	// Writable are the directories outside the project that agents' programs
	// may write (temp and tool caches): the sandbox's allowWrite.
	Writable []string
	// MCPURL is where the daemon serves the context graph's MCP tools
	// (mcpserver.Handler), given to every run with the run's token; "":
	// no MCP server.
	MCPURL string
	// ExitWhenDone makes Run return once the session is done (or stopped).
	ExitWhenDone bool
	// Notify tells a person what happened (internal/notify); nil: no one.
	Notify func(notify.Event)
	// Setup runs the project's setup step in a tree before the first check
	// of a test there (setup:, or the fetches of toolchain.SafeSetupOf);
	// nil: no tree is set up.
	Setup *sandbox.Setup
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ErrSessionStopped is returned by Run with ExitWhenDone when the session
// stopped for a person rather than finishing.
var ErrSessionStopped = errors.New("session stopped")

// ErrUnfinished is returned by Run with ExitWhenDone when nothing is left
// to do but some features were never worked: they wait on blocked ones,
// or on each other.
var ErrUnfinished = errors.New("done, but features were never worked")

// unsettled lists the features of l that are neither tested nor blocked.
func unsettled(l *progress.List) []string {
	var ids []string
	if l == nil {
		return nil
	}
	for _, f := range l.Features {
		if !f.Tested && f.Status != progress.Blocked {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

// Orchestrator is one project's loop. Create it with New, run it with Run.
type Orchestrator struct {
	opts Options // its Store, Judge, Repo, Config, Log and clock are the loop's

	// Owned by the loop goroutine.
	machine   *statemachine.Machine
	session   store.Session
	canonical *progress.List // nil before the initializer
	// askedSetup: the session said once what the daemon would not fetch
	// by itself (setupTaken).
	askedSetup bool
	// freePort offers a port no process listens on (sandbox.FreePort);
	// lanePort keeps the ones open lanes hold apart.
	freePort func() int
	counters map[string]store.FeatureCounters
	tally    tally
	pending  store.Batch // changes that ride with the next persist
	// lanes are where features are worked, and the daemon's job in
	// flight (laneset.go). Every handler is handed the lane it works in.
	lanes     laneSet
	listFile  listFile
	guards    guardState
	timers    timers
	stopAfter bool // ctl stop: stop the session once the run is down
	// hooksSilent counts runs in a row whose hooks never checked in.
	hooksSilent int

	requests  chan request
	runEvents chan any
	quit      chan struct{} // closed when Run returns
	startedAt time.Time
	view      view
}

// view is what the loop publishes for other goroutines (the socket's
// Status, Features and their waiters), which read it without the loop.
type view struct {
	snap atomic.Pointer[control.Status]
	// lives are what the runs in flight are doing, by run id, written by
	// their streams' goroutines, read by Status; a run's goes when it
	// ends.
	lives sync.Map
	// changed is closed, and replaced, at each change of the status.
	changed  atomic.Pointer[chan struct{}]
	features atomic.Pointer[[]control.Feature]
}

type request struct {
	fn   func() error
	done chan error
}

type runStarted struct {
	runID string
	pid   int
}

type runEnded struct {
	runID  string
	result agents.Result
}

// tally is what the session has counted, as the store keeps it: the last
// sequence numbers given to a run and a transition, and the totals.
type tally struct {
	lastRun, lastTrans uint64
	totalCost          float64
	runCount           int
}

// listFile is what the loop knows of feature-list.json on the disk,
// beside the canonical list.
type listFile struct {
	problem string // what is wrong with it, if anything
	// problemFromAgent: the broken file was written during a run, so the
	// agent's redo may overwrite it; a person's broken file is held for them.
	problemFromAgent bool
	ownWrite         []byte // the last bytes the daemon wrote to it
	read             []byte // the bytes it held at the daemon's last read
	// behind: a write of the canonical list was held back (writeShown:
	// a save the daemon had not read was there), so the file lacks what
	// the daemon decided since known; known is what the file held, as far
	// as the daemon knew, when it held back: what the save was made on.
	behind bool
	known  []byte
	// readAfterWrite: the daemon's last read of the file came after its
	// last write (lastKnown).
	readAfterWrite bool
}

// timers are the loop's timers: the wait after a failure that waiting
// cures, and the retry after the store refused a write.
type timers struct {
	// waitFor is the failure the next wait is for: its reset time and
	// the CLI's own retry delay bound the wait from below.
	waitFor agents.Failure
	wait    *time.Timer
	persist *time.Timer
	// unsaved is why the store refused the last move, while persist is
	// armed to try it again: the loop holds, and the status says so
	// whatever else is published meanwhile.
	unsaved error
}

// New loads the state of record and prepares the loop.
func New(opts Options) (*Orchestrator, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Judge == nil || opts.Repo == nil {
		return nil, errors.New("orchestrator: Options.Judge and Options.Repo are required")
	}
	st, err := opts.Store.Load()
	if err != nil {
		return nil, err
	}
	o := &Orchestrator{
		opts:      opts,
		freePort:  sandbox.FreePort,
		session:   st.Session,
		counters:  st.Counters,
		tally:     tally{lastRun: st.LastRunSeq, lastTrans: st.LastTransSeq, totalCost: st.TotalCostUSD, runCount: st.RunCount},
		lanes:     laneSet{home: &lane{dir: opts.Project.Dir, repo: opts.Repo, project: true, commits: (*lane).commitTree}, clones: map[string]*lane{}},
		requests:  make(chan request),
		runEvents: make(chan any, 4),
		quit:      make(chan struct{}),
		startedAt: opts.Now(),
	}
	if !st.HasSession || !statemachine.State(o.session.State).Valid() {
		o.session = store.Session{State: string(statemachine.Idle)}
	}
	if st.FeatureList != nil {
		l, err := progress.Parse(st.FeatureList)
		if err != nil {
			return nil, fmt.Errorf("the canonical feature list in %s is unreadable: %w", opts.Store.Path(), err)
		}
		o.canonical = l
	}
	if st.Frozen != nil {
		var fz judge.Frozen
		if err := json.Unmarshal(st.Frozen, &fz); err != nil {
			return nil, fmt.Errorf("the frozen tests' record in %s is unreadable: %w", opts.Store.Path(), err)
		}
		if err := o.opts.Judge.SetFrozen(fz); err != nil {
			o.opts.Log.Warn("could not leave the frozen tests where the hooks find them", zap.Error(err))
		}
	}
	o.lanes.deps = &laneDeps{judge: o.opts.Judge, runs: o.opts.Judge, repo: o.opts.Repo, projectDir: opts.Project.Dir, trace: o.trace, log: o.opts.Log}
	o.lanes.home.deps, o.lanes.home.record = o.lanes.deps, &o.session.Run
	o.loadGuardFile()
	o.machine = statemachine.New(statemachine.State(o.session.State))
	o.publish()
	return o, nil
}

// Run runs the loop until ctx is cancelled (then it stops the agent in
// flight, records it as interrupted and returns nil) or, with ExitWhenDone,
// until the session is done.
func (o *Orchestrator) Run(ctx context.Context) error {
	progressDir := o.opts.Project.Progress()
	if err := os.MkdirAll(progressDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", progressDir, err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	changed := make(chan string, 4)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- watchProgressDir(watchCtx, progressDir, []string{progress.FeatureListFile}, o.opts.Config.Limits.Debounce, changed, o.opts.Log)
	}()
	defer func() {
		close(o.quit)
		stopWatch()
		<-watchErr
	}()

	o.ingestSpool()
	o.recover()
	// graph.retention: old traces are compacted beside the loop.
	stopRetention := o.startRetention()
	defer stopRetention()
	for {
		if o.opts.ExitWhenDone && o.lanes.home.active == nil && len(o.lanes.jobs()) == 0 && len(o.lanes.inFlight()) == 0 {
			switch statemachine.State(o.session.State) {
			case statemachine.Done, statemachine.Stopped:
				o.retireLanes()
				o.persist()
			}
			switch statemachine.State(o.session.State) {
			case statemachine.Done:
				if open := unsettled(o.canonical); len(open) > 0 {
					return fmt.Errorf("%w (%s): %s", ErrUnfinished, strings.Join(open, ", "), o.session.Message)
				}
				return nil
			case statemachine.Stopped:
				return fmt.Errorf("%w: %s", ErrSessionStopped, o.session.Message)
			}
		}
		select {
		case <-ctx.Done():
			o.shutdown()
			return nil
		case err := <-watchErr:
			watchErr <- nil // for the deferred receive
			if err != nil {
				o.shutdown()
				return fmt.Errorf("watch %s: %w", progressDir, err)
			}
		case <-changed:
			if o.syncList(o.lanes.home, false) {
				o.afterListChange(o.lanes.home)
			} else {
				o.persist() // violations and problems found on the way
			}
		case ev := <-o.runEvents:
			o.onEvent(ev)
		case r := <-o.requests:
			r.done <- r.fn()
		case <-o.persistC():
			o.timers.persist, o.timers.unsaved = nil, nil
			o.opts.Log.Info("trying again to save the state")
			o.step(o.lanes.home, nil)
		case <-o.waitC():
			o.timers.wait = nil
			o.opts.Log.Info("wait over; resuming")
			o.transition(o.lanes.home, statemachine.Advance, "", "the wait is over")
			o.step(o.lanes.home, nil)
		}
	}
}

// onEvent handles what the goroutines of runs and jobs report, each in
// the lane it is of.
func (o *Orchestrator) onEvent(ev any) {
	switch ev := ev.(type) {
	case runStarted:
		if l := o.lanes.byRun(ev.runID); l != nil {
			o.onRunStarted(l, ev)
		}
	case runEnded:
		if l := o.lanes.byRun(ev.runID); l != nil {
			if o.lanes.job != nil && !l.project {
				// Judging it is the daemon's work, which goes one job at
				// a time: it waits for the one in flight.
				o.lanes.queued = append(o.lanes.queued, ev)
				return
			}
			o.onRunEnded(l, ev)
		}
	case hooksLiveCheck:
		if l := o.lanes.byRun(ev.runID); l != nil {
			o.onHooksLiveCheck(l, ev)
		}
	case testChecked:
		if l := o.lanes.clones[ev.feature]; l != nil && l.check != nil {
			o.onTestChecked(l, ev)
			return
		}
		o.inJobLane(func(l *lane) { o.onTestChecked(l, ev) })
	case runJudged:
		o.inJobLane(func(l *lane) { o.onRunJudged(l, ev) })
	case tipSwept:
		o.inJobLane(func(l *lane) { o.onTipSwept(l, ev) })
	}
}

// inJobLane runs fn, the handling of the job in flight's result, in the
// job's lane, then takes the runs that ended meanwhile.
func (o *Orchestrator) inJobLane(fn func(*lane)) {
	fn(o.lanes.jobLane())
	for o.lanes.job == nil {
		ev, ok := o.lanes.nextQueued()
		if !ok {
			break
		}
		o.onEvent(ev)
	}
}

func (o *Orchestrator) waitC() <-chan time.Time {
	if o.timers.wait == nil {
		return nil
	}
	return o.timers.wait.C
}

// do runs fn on the loop goroutine and returns its error: control requests
// change state only there.
func (o *Orchestrator) do(ctx context.Context, fn func() error) error {
	r := request{fn: fn, done: make(chan error, 1)}
	select {
	case o.requests <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recover continues from the store after a start: a run that was in flight
// when the previous daemon died is killed if anything of it survived,
// judged by what it left in the tree (so that nothing it did escapes its
// gates for having outlived its daemon), and redone; a stopped session
// starts afresh, since starting the daemon is the request to continue.
func (o *Orchestrator) recover() {
	// Lanes a dead daemon had: what survived of their runs is killed, and
	// their clones go; their features are worked again from fresh ones.
	o.killLaneRuns()
	o.cleanLanes()
	if r := o.session.Run; r != nil {
		// What is found of it now still hangs from its node.
		o.opts.Judge.Link(r.ID, judge.RunLink{Trace: r.Trace, Attempt: r.Attempt})
		if runs, err := o.opts.Store.Runs(); err == nil {
			for _, rec := range runs {
				if rec.ID == r.ID && rec.PID > 0 {
					r.PID = rec.PID
				}
			}
		}
		if err := agents.KillGroup(r.PID, r.ID, o.opts.Project.Socket); err != nil {
			o.opts.Log.Warn("could not kill the interrupted run's processes", zap.String("run", r.ID), zap.Int("pid", r.PID), zap.Error(err))
		}
		o.opts.Log.Info("resuming after an interrupted run", zap.String("run", r.ID), zap.String("role", r.Role), zap.String("feature", r.Feature))
		// Its writes since the crash are judged as that run's writes.
		o.lanes.home.active = &activeRun{run: *r}
		o.syncList(o.lanes.home, true)
		o.lanes.home.active = nil
		o.dropUnjudgedClaim(o.lanes.home)
		o.judgeLeftovers(o.lanes.home, *r)
		ended := *r
		ended.EndedAt, ended.Outcome, ended.Ended = o.opts.Now(), "interrupted", "lost"
		o.pending.Runs = append(o.pending.Runs, ended)
		o.session.Run = nil
		o.step(o.lanes.home, &statemachine.Outcome{Role: statemachine.Role(r.Role), Feature: r.Feature, Interrupted: true})
		return
	}
	o.syncList(o.lanes.home, true)
	switch statemachine.State(o.session.State) {
	case statemachine.Paused:
		o.persist()
		return
	case statemachine.Stopped:
		o.session.BlockedInSession = 0
		o.transition(o.lanes.home, statemachine.Advance, "", "daemon started")
	case statemachine.Waiting:
		if o.waitsForApproval() {
			// The plan still waits for a person: nothing to redo.
			o.persist()
			return
		}
		if d := o.session.WaitingUntil.Sub(o.opts.Now()); d > 0 {
			o.timers.wait = time.NewTimer(d)
			o.persist()
			return
		}
		o.transition(o.lanes.home, statemachine.Advance, "", "the wait is over")
	}
	o.step(o.lanes.home, nil)
}

// shutdown stops the run or job in flight and records the run as
// interrupted; the next start redoes it.
func (o *Orchestrator) shutdown() {
	for _, j := range o.lanes.jobs() {
		j.interrupt = "daemon shutting down"
		j.cancel()
	}
	for _, l := range append(o.lanes.inFlight(), o.lanes.home) {
		if l.active != nil {
			l.active.interrupt = "daemon shutting down"
			l.active.cancel()
		}
	}
	events := func() any {
		if ev, ok := o.lanes.nextQueued(); ok { // ended while a job was in flight
			return ev
		}
		return <-o.runEvents
	}
	for o.lanes.home.active != nil || len(o.lanes.jobs()) > 0 || len(o.lanes.inFlight()) > 0 {
		switch ev := events().(type) {
		case runEnded:
			if l := o.lanes.byRun(ev.runID); l != nil {
				l.deps.runs.Forget(ev.runID)
				r := l.active.run
				o.finishRunRecord(&r, ev.result, "interrupted")
				o.pending.Runs = append(o.pending.Runs, r)
				// The project's own Session.Run stays set: the next
				// start sees the run as in flight, judges what it left
				// and redoes it. A lane's goes with its lane
				// (retireLanes).
				l.active = nil
				l.run = nil
			}
		case testChecked:
			// Its result is not taken: the work is redone at the next start.
			if l := o.lanes.clones[ev.feature]; l != nil && l.check != nil {
				l.check = nil
			} else {
				o.lanes.job = nil
			}
		case runJudged, tipSwept:
			o.lanes.job = nil // the same
		}
	}
	// A claim no verdict judged does not stay on the disk for the next
	// start to read as tested.
	o.dropUnjudgedClaim(o.lanes.home)
	o.retireLanes()
	if o.timers.wait != nil {
		o.timers.wait.Stop()
	}
	if o.timers.persist != nil {
		o.timers.persist.Stop()
	}
	o.persist()
}
