package fleet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// WorkerOptions configure a worker (`ctxgraphd worker`).
type WorkerOptions struct {
	// URL is the daemon's NATS server (or the cluster it uses).
	URL string
	// Credentials are the worker's, as the daemon issued them.
	Credentials Credentials
	// NATS are further connection options (a TLS root, say).
	NATS []nats.Option
	// Slots is how many lanes the worker runs at once; 0: 1.
	Slots int
	// Dir holds the worker's clones and their state while they run.
	Dir string
	// Claude is the claude binary (looked up on PATH without a slash).
	Claude string
	// Hook is this binary's hook command, which the runs' settings call.
	Hook gates.HookCommand
	// Env is the environment runs start from (nil: the worker's), with
	// the worker's own Claude Code login.
	Env []string
	// AllowRoot opts in to running agents as root (agent.allow_root).
	AllowRoot bool
	// Prlimit is util-linux's prlimit, which bounds a run's processes
	// (sandbox.max_*); "": runs are not bounded.
	Prlimit string
	// Keeper runs each agent under a keeper (agents.Options.Keeper), so
	// that a worker killed with -9 leaves none of its runs' processes.
	Keeper []string
	// SandboxRuntime is Anthropic's sandbox runtime (srt), which confines
	// the project's setup step in a clone as Claude Code's sandbox
	// confines the agent: a name looked up on PATH, or a path.
	SandboxRuntime string
	Log            *zap.Logger
}

// worker pulls lanes' runs from the fleet's work queue and runs them, each
// in a clone of its own, with its own Claude Code and sandbox.
type worker struct {
	opts     WorkerOptions
	fleet    Subjects
	subjects WorkerSubjects
	nc       *nats.Conn
	js       jetstream.JetStream
	relay    *Relay
	// relaySock is the relay's socket, the runs' CTXGRAPH_SOCKET.
	relaySock string
	log       *zap.Logger

	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc // by ResultKey
	// tokens are the runs' tokens, by ResultKey: the daemon's word about
	// a run carries its token.
	tokens map[string]string
}

// fetchWait bounds one pull of the work queue, so that a stopping worker
// notices its context.
const fetchWait = 2 * time.Second

// errShutdown is why a worker's runs end when it stops.
var errShutdown = errors.New("the worker is shutting down")

// RunWorker connects to the fleet and runs lanes until ctx ends; the runs
// in flight are then stopped and given back, for another worker.
func RunWorker(ctx context.Context, opts WorkerOptions) error {
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if !filepath.IsAbs(opts.Dir) {
		return fmt.Errorf("worker: its directory %q is not absolute", opts.Dir)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	subjects, err := NewSubjects(opts.Credentials.Project)
	if err != nil {
		return err
	}
	copts, err := opts.Credentials.Options()
	if err != nil {
		return err
	}
	log := opts.Log
	copts = append(copts, opts.NATS...)
	copts = append(copts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("lost the connection to the daemon's NATS server; reconnecting", zap.Error(err))
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("reconnected to the daemon's NATS server") }))
	nc, err := nats.Connect(opts.URL, copts...)
	if err != nil {
		return fmt.Errorf("worker: connecting to %s: %w", opts.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w := &worker{opts: opts, fleet: subjects, subjects: subjects.Worker(opts.Credentials.Worker), nc: nc, js: js, log: log, runs: map[string]context.CancelCauseFunc{}, tokens: map[string]string{}}
	unlock, err := lockDir(opts.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	// What a worker killed before this one left: its runs' processes
	// (claude dies with its worker, what it started in a sandbox of its own
	// may not), its clones, their state and its relay's socket.
	w.relaySock = RelaySocket(opts.Dir)
	if n := agents.KillRuns(w.relaySock); n > 0 {
		log.Info("killed what the runs of a worker killed before this one left", zap.Int("processes", n))
	}
	for _, d := range []string{w.lanesDir(), w.stateDir(), filepath.Join(opts.Dir, "index"), filepath.Dir(w.relaySock)} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("worker: removing what an earlier worker left: %w", err)
		}
	}
	defer os.RemoveAll(filepath.Dir(w.relaySock))
	w.relay, err = ListenRelay(w.relaySock, nc, w.subjects.Hook)
	if err != nil {
		return err
	}
	defer w.relay.Close()
	ctl, err := nc.Subscribe(w.subjects.Control, w.onControl)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer ctl.Unsubscribe()

	for {
		_, err = js.Consumer(ctx, subjects.LanesStream(), subjects.LanesConsumer())
		if err == nil {
			break
		}
		log.Warn("the work queue cannot be reached yet; trying again", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(fetchWait):
		}
	}
	log.Info("worker ready", zap.Int("slots", opts.Slots))

	slots := make(chan struct{}, opts.Slots)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		// SIGTERM's end, said: its runs are given back by now.
		log.Info("worker stopped", zap.NamedError("why", context.Cause(ctx)))
	}()
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		job, err := w.pull(ctx)
		if err != nil {
			<-slots
			if ctx.Err() == nil {
				log.Warn("pulling from the work queue failed", zap.Error(err))
				time.Sleep(fetchWait)
			}
			continue
		}
		took := false
		if job != nil {
			if a, j, ok := w.claim(ctx, job); ok {
				took = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					w.run(ctx, j, a, job)
				}()
			}
		}
		if !took {
			<-slots
		}
	}
	return nil
}

// clone is where an attempt works.
func (w *worker) clone(job Job) string {
	return filepath.Join(w.lanesDir(), ResultKey(job.Run, job.Attempt))
}

func (w *worker) lanesDir() string { return filepath.Join(w.opts.Dir, "lanes") }

// stateDir is the XDG_STATE_HOME of the worker's runs, where their hooks
// find their project's state (paths.ForProject): the offline record, the
// spool.
func (w *worker) stateDir() string { return filepath.Join(w.opts.Dir, "state") }

// RelaySocket is the socket of the hooks' relay of the worker whose
// directory is dir: in the system's temp directory, short enough for a
// socket's path, the same for every start of that worker.
func RelaySocket(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "ctxgraphd-worker-"+hex.EncodeToString(sum[:6]), "hook.sock")
}

// retryDelay is how long a job the daemon gives to another worker stays
// out of this worker's reach.
const retryDelay = 2 * time.Second

// queued is a Job the daemon pulled for this worker (Pull), acknowledged
// on the work queue by the daemon at the worker's word (Ack).
type queued struct {
	nc   *nats.Conn
	data []byte
	job  string // the answer's AckHeader
	to   string // the worker's Ack subject
}

func (q *queued) Data() []byte { return q.data }
func (q *queued) Ack()         { q.send(Ack{Kind: AckDone}) }
func (q *queued) Nak()         { q.send(Ack{Kind: AckGiveBack}) }
func (q *queued) Term()        { q.send(Ack{Kind: AckDrop}) }
func (q *queued) InProgress()  { q.send(Ack{Kind: AckWorking}) }
func (q *queued) NakWithDelay(d time.Duration) {
	q.send(Ack{Kind: AckGiveBack, Delay: d})
}

func (q *queued) send(a Ack) {
	a.Job = q.job
	data, _ := json.Marshal(a)
	q.nc.Publish(q.to, data)
}

// pull asks the daemon for the work queue's next Job, waiting fetchWait
// at most: nil, nil when none came.
func (w *worker) pull(ctx context.Context) (*queued, error) {
	return pullJob(ctx, w.nc, w.subjects, fetchWait)
}

// pullJob asks the daemon, on nc as the worker of subjects w, for the work
// queue's next Job, waiting up to wait: nil, nil when none came.
func pullJob(ctx context.Context, nc *nats.Conn, w WorkerSubjects, wait time.Duration) (*queued, error) {
	data, _ := json.Marshal(Pull{Wait: wait})
	rctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, w.Pull, data)
	if err != nil {
		return nil, err
	}
	job := m.Header.Get(AckHeader)
	if job == "" {
		if status := m.Header.Get("Status"); status != "" {
			return nil, fmt.Errorf("the daemon refused the pull: %s %s", status, m.Header.Get("Description"))
		}
		return nil, nil
	}
	return &queued{nc: nc, data: m.Data, job: job, to: w.Ack}, nil
}

// claim asks the daemon for a pulled job; a job it refuses is dropped,
// or put back for another worker where the daemon says so.
func (w *worker) claim(ctx context.Context, msg *queued) (Assignment, Job, bool) {
	var job Job
	if err := json.Unmarshal(msg.Data(), &job); err != nil || !branch.IsRunName(job.Run) {
		w.log.Warn("dropped a job that cannot be read", zap.Error(err))
		msg.Term()
		return Assignment{}, Job{}, false
	}
	data, _ := json.Marshal(Claim{Run: job.Run, Attempt: job.Attempt, Dir: w.clone(job), Writable: w.writable()})
	// Not the worker's context: a claim the daemon granted as the worker
	// began to stop must still be known here, to be given back (run).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	m, err := w.nc.RequestWithContext(rctx, w.subjects.Claim, data)
	if err != nil {
		// The daemon is away: the job goes back to the queue.
		msg.Nak()
		return Assignment{}, Job{}, false
	}
	var a Assignment
	if err := json.Unmarshal(m.Data, &a); err != nil {
		// Not a grant: a grant is an Assignment, its token and all.
		a = Assignment{Refused: "an answer that cannot be read: " + err.Error()}
	}
	if a.Refused != "" {
		w.log.Info("the daemon refused a job", zap.String("run", job.Run), zap.Int("attempt", job.Attempt), zap.String("why", a.Refused))
		if a.Retry {
			msg.NakWithDelay(retryDelay) // another worker's to take
		} else {
			msg.Term()
		}
		return Assignment{}, Job{}, false
	}
	// What to clone is the daemon's word, in the answer to the claim, not
	// the queue's.
	job.Base, job.Bundle, job.Deps = a.Base, a.Bundle, a.Deps
	return a, job, true
}

// onControl stops an attempt when the daemon says so.
func (w *worker) onControl(m *nats.Msg) {
	var c Control
	if json.Unmarshal(m.Data, &c) != nil || c.Cancel == "" {
		return
	}
	key := ResultKey(c.Run, c.Attempt)
	w.mu.Lock()
	token := w.tokens[key]
	w.mu.Unlock()
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(c.Token)) != 1 {
		w.log.Warn("a cancel without the attempt's token was ignored", zap.String("run", c.Run), zap.Int("attempt", c.Attempt))
		return
	}
	w.stop(key, errors.New(c.Cancel))
}

func (w *worker) stop(key string, why error) {
	w.mu.Lock()
	cancel := w.runs[key]
	w.mu.Unlock()
	if cancel != nil {
		cancel(why)
	}
}

// run runs one attempt to its end and sends its outcome; its clone and
// state are gone when it returns.
//
// The job stays unacknowledged while the attempt runs (each heartbeat
// tells JetStream it is in progress), so that the queue counts running
// lanes as well as waiting ones: what a scaler of workers reads (KEDA's
// nats-jetstream scaler counts both). It is acknowledged when the attempt
// ends, whatever its end; a worker killed leaves it to come back after
// the consumer's AckWait, when the daemon has long given the attempt to
// another worker and refuses it.
func (w *worker) run(parent context.Context, job Job, a Assignment, msg *queued) {
	defer msg.Ack()
	key := ResultKey(job.Run, job.Attempt)
	log := w.log.With(zap.String("run", job.Run), zap.Int("attempt", job.Attempt))
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	defer cancel(nil)
	stopOnShutdown := context.AfterFunc(parent, func() { cancel(errShutdown) })
	defer stopOnShutdown()
	w.mu.Lock()
	w.runs[key], w.tokens[key] = cancel, a.Token
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.runs, key)
		delete(w.tokens, key)
		w.mu.Unlock()
	}()
	go w.heartbeat(ctx, job, a.Token, a.Heartbeat, cancel, msg)

	dir := w.clone(job)
	proj := paths.Project{}
	defer func() {
		os.RemoveAll(dir)
		if proj.StateDir != "" {
			os.RemoveAll(proj.StateDir)
		}
		os.Remove(w.indexOf(key))
	}()
	log.Info("running a lane's run", zap.String("feature", job.Feature), zap.String("role", string(a.Spec.Role)))
	out := Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token}
	repo, err := w.prepare(ctx, job, a, dir)
	if err == nil {
		proj, err = paths.ForProjectEnv(dir, w.getenv)
	}
	var res agents.Result
	if err == nil {
		res.SetupFailure = w.setup(ctx, a, dir, log)
	}
	if err == nil && res.SetupFailure == "" {
		res, err = w.agent(ctx, job, a, dir, proj)
	}
	if errors.Is(context.Cause(ctx), errShutdown) {
		// Given back at once, rather than after missed heartbeats.
		log.Info("the worker stops: its run is given back")
		w.send(ctx, Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token, GivenBack: errShutdown.Error()}, log)
		return
	}
	switch {
	case err != nil:
		out.Err = err.Error()
		out.Result = agents.Result{RunID: job.Run, ExitCode: -1, Ended: agents.EndExited}
	case res.SetupFailure != "":
		// No agent ran: nothing of the clone is a result.
		out.Result = agents.Result{RunID: job.Run, ExitCode: -1, Ended: agents.EndExited, SetupFailure: res.SetupFailure}
	default:
		res.Err = nil
		out.Result = res
		out.Tip, err = w.putResult(ctx, repo, job, key)
		if err != nil {
			out.Err = fmt.Sprintf("the worker could not send the tree the run left: %v", err)
		} else if out.Deps, err = w.putDeps(ctx, dir, job, a.MaxBundleBytes); err != nil {
			out.Err = fmt.Sprintf("the worker could not send the run's dependencies: %v", err)
		}
		if out.Progress, err = readProgress(dir, mayReturn); err != nil {
			log.Warn("could not read the run's progress files", zap.Error(err))
		}
		if out.Spooled, err = spool.Read(proj.StateDir); err != nil {
			log.Warn("could not read what the run's hooks spooled", zap.Error(err))
		}
	}
	w.send(ctx, out, log)
}

// getenv reads the runs' environment: the last value of a key wins, as
// in exec.Cmd.
func (w *worker) getenv(k string) string {
	env := w.env()
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

// indexOf is the private index of an attempt's clone.
func (w *worker) indexOf(key string) string {
	return filepath.Join(w.opts.Dir, "index", key)
}

// prepare makes the attempt's clone: the base from the bucket, the
// progress files, the hooks' offline record.
func (w *worker) prepare(ctx context.Context, job Job, a Assignment, dir string) (*gitrepo.Repo, error) {
	obj, err := openObject(ctx, w.js, w.fleet.BaseBucket(), job.Bundle, a.MaxBundleBytes, cmp.Or(a.BundleDigest, "none"))
	if err != nil {
		return nil, fmt.Errorf("the base bundle %s: %w", job.Bundle, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	// A run of no feature (the initializer's) still needs a branch name.
	lane := job.Feature
	if lane == "" {
		lane = job.Run
	}
	if err := branch.CloneBase(ctx, obj, a.MaxBundleBytes, dir, lane, job.Base); err != nil {
		return nil, err
	}
	if err := writeProgress(dir, a.Spec.Progress); err != nil {
		return nil, err
	}
	if err := a.Copies.Place(dir); err != nil {
		return nil, err
	}
	if len(job.Deps) > 0 {
		deps, err := openObject(ctx, w.js, w.fleet.BaseBucket(), job.Bundle+depsSuffix, a.MaxBundleBytes, cmp.Or(a.DepsDigest, "none"))
		if err != nil {
			return nil, fmt.Errorf("the lane's dependencies: %w", err)
		}
		if err := toolchain.UnpackDeps(dir, deps, job.Deps, a.MaxBundleBytes); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(w.indexOf("x")), 0o700); err != nil {
		return nil, err
	}
	// The person's copies are in no result: the snapshot leaves them out.
	exclude := append([]string{paths.ProgressDir}, a.Copies.Names()...)
	return gitrepo.Open(ctx, gitrepo.Options{Dir: dir, Index: w.indexOf(ResultKey(job.Run, job.Attempt)), Exclude: exclude})
}

// agent runs the attempt's claude -p in dir, with settings made here.
func (w *worker) agent(ctx context.Context, job Job, a Assignment, dir string, proj paths.Project) (agents.Result, error) {
	spec := a.Spec
	if len(spec.Offline) > 0 {
		var o gates.Offline
		if err := json.Unmarshal(spec.Offline, &o); err != nil {
			return agents.Result{}, fmt.Errorf("the hooks' offline record: %w", err)
		}
		if err := gates.SaveOffline(proj.StateDir, o); err != nil {
			return agents.Result{}, err
		}
	}
	var hooks, confined map[string]any
	if spec.Hooks {
		hooks = gates.RunHooks(w.opts.Hook, string(spec.Role), spec.HookMatcher)
	}
	if pol := w.policy(spec, dir); pol != nil {
		if err := pol.Prepare(); err != nil {
			w.log.Warn("a directory runs may write could not be made", zap.Error(err))
		}
		confined = pol.Settings()
	}
	settings, err := gates.RunSettings(hooks, confined)
	if err != nil {
		return agents.Result{}, err
	}
	o := spec.Options
	runner := agents.NewRunner(agents.Options{
		Command: w.opts.Claude, Model: o.Model, Timeout: o.Timeout, IdleTimeout: o.IdleTimeout, MaxTurns: o.MaxTurns,
		MaxBudgetUSD: o.MaxBudgetUSD, AllowRoot: w.opts.AllowRoot, StuckAfter: o.StuckAfter,
		SocketPath: w.relaySock, BaseEnv: w.env(), Limits: sandbox.NewLimits(o.Processes, o.MemoryMB, o.FileMB), Prlimit: w.opts.Prlimit,
		Keeper: w.opts.Keeper,
	}, w.log.Named("agents"))
	run, attempt := job.Run, job.Attempt
	res := runner.Run(ctx, agents.Spec{
		RunID: run, Role: spec.Role, FeatureID: spec.FeatureID, Attempt: spec.Attempt, SessionID: spec.SessionID,
		Prompt: spec.Prompt, SystemPrompt: spec.SystemPrompt, Dir: dir, Settings: settings, Token: a.Token, MaxBudgetUSD: spec.MaxBudgetUSD,
	}, func(pid int) { w.publish(Event{Run: run, Attempt: attempt, Token: a.Token, PID: pid}) },
		func(ev agents.Event) { w.publish(Event{Run: run, Attempt: attempt, Token: a.Token, Event: &ev}) })
	return res, nil
}

// policy is the sandbox of the run of spec in its clone at dir: the
// daemon's policy made this machine's, with the worker's own state,
// credentials and relay denied, and its temp and caches writable; nil
// when the run is not confined.
func (w *worker) policy(spec RemoteRun, dir string) *sandbox.Policy {
	if spec.Policy == nil {
		return nil
	}
	pol := Rooted(*spec.Policy, dir)
	// The worker's own: its state, its credentials, the relay's socket
	// and the other clones are no run's to read or write.
	mine := []string{w.stateDir(), w.opts.Credentials.path, filepath.Dir(w.relaySock)}
	pol.DenyWrite = append(pol.DenyWrite, mine...)
	pol.DenyRead = append(pol.DenyRead, mine...)
	pol.AllowWrite = append(pol.AllowWrite, w.writable()...)
	return &pol
}

// setup runs the project's setup step in the attempt's clone at dir,
// before its agent, confined as the agent will be (by the sandbox
// runtime, with the run's policy: no more than the agent may do), or with
// sh where the run is not confined. It returns why it failed, with the
// step's output's end, or "".
func (w *worker) setup(ctx context.Context, a Assignment, dir string, log *zap.Logger) string {
	script := strings.TrimSpace(a.Spec.Setup)
	if script == "" {
		return ""
	}
	pol := w.policy(a.Spec, dir)
	run := sandbox.Setup{Runtime: cmp.Or(w.opts.SandboxRuntime, "srt"), RuntimeOption: "the worker's --sandbox-runtime", Off: pol == nil, Env: w.env(),
		Timeout: a.Spec.Options.Timeout, SettingsDir: filepath.Join(w.stateDir(), "setup")}
	if pol == nil {
		pol = &sandbox.Policy{ProjectDir: dir}
	}
	var out bytes.Buffer
	began := time.Now()
	err := run.Run(ctx, *pol, script, &out)
	log.Info("the setup step ran", zap.String("setup", script), zap.Duration("took", time.Since(began)), zap.Error(err))
	if err == nil || ctx.Err() != nil {
		return ""
	}
	return fmt.Sprintf("the project's setup (`%s`) failed on worker %s, in its clone of the lane: %v; nothing was charged. Its output ends:\n%s",
		script, w.opts.Credentials.Worker, err, sandbox.OutputEnd(out.Bytes()))
}

// writable are the directories outside its clone a run may write on this
// worker (its temp directory and the toolchains' caches): what its sandbox
// lets it write, and what the daemon's hooks then let its file tools
// write (Claim.Writable). Kept out: the worker's own directory, its
// relay's, the system's temp directory and the home, which hold them.
func (w *worker) writable() []string {
	dirs, _ := sandbox.AgentWritable(w.env(), nil, w.opts.Dir, filepath.Dir(w.relaySock), os.TempDir(), w.getenv("HOME"))
	return dirs
}

// env is the runs' base environment, with the worker's state directory
// for their hooks.
func (w *worker) env() []string {
	env := w.opts.Env
	if env == nil {
		env = os.Environ()
	}
	return append(slices.Clip(env), "XDG_STATE_HOME="+w.stateDir())
}

// publish sends an event of a run; a lost one is only a line of ctl watch.
func (w *worker) publish(ev Event) {
	data, _ := json.Marshal(ev)
	w.nc.Publish(w.subjects.Events, data)
}

// heartbeat says the attempt is alive until ctx ends; the daemon's answer
// that it is no longer this worker's stops it.
func (w *worker) heartbeat(ctx context.Context, job Job, token string, every time.Duration, stop context.CancelCauseFunc, msg *queued) {
	if every <= 0 {
		every = DefaultHeartbeat
	}
	data, _ := json.Marshal(Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: token})
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		msg.InProgress()
		rctx, cancel := context.WithTimeout(ctx, every)
		m, err := w.nc.RequestWithContext(rctx, w.subjects.Heartbeat, data)
		cancel()
		if err == nil {
			var c Control
			if json.Unmarshal(m.Data, &c) == nil && c.Cancel != "" && c.Token == token {
				stop(errors.New(c.Cancel))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// putResult commits the tree the run left on the base and puts the bundle
// of base..tip in the worker's results bucket.
func (w *worker) putResult(ctx context.Context, repo *gitrepo.Repo, job Job, key string) (string, error) {
	ctx = context.WithoutCancel(ctx)
	tree, err := repo.Snapshot(ctx)
	if err != nil {
		return "", err
	}
	tip, err := repo.Commit(ctx, tree, []string{job.Base}, "ctxgraphd: what "+job.Run+" left", gitrepo.Signature{Name: "ctxgraphd worker", Email: "ctxgraphd@localhost"})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := branch.WriteResult(ctx, repo, &buf, job.Base, tip); err != nil {
		return "", err
	}
	bucket, err := w.js.ObjectStore(ctx, w.fleet.ResultsBucket(w.opts.Credentials.Worker))
	if err != nil {
		return "", err
	}
	if _, err := bucket.PutBytes(ctx, key, buf.Bytes()); err != nil {
		return "", err
	}
	return tip, nil
}

// putDeps puts the archive of the dependency directories the run left in
// dir, if any, in the worker's results bucket, and names them.
func (w *worker) putDeps(ctx context.Context, dir string, job Job, limit int64) ([]string, error) {
	var buf bytes.Buffer
	names, err := toolchain.PackDeps(&buf, limit, dir)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	bucket, err := w.js.ObjectStore(ctx, w.fleet.ResultsBucket(w.opts.Credentials.Worker))
	if err != nil {
		return nil, err
	}
	if _, err := bucket.PutBytes(context.WithoutCancel(ctx), DepsKey(job.Run, job.Attempt), buf.Bytes()); err != nil {
		return nil, err
	}
	return names, nil
}

// send gives the daemon the outcome, trying again while it is away, for
// as long as a run may wait for one (sendFor).
func (w *worker) send(ctx context.Context, out Outcome, log *zap.Logger) {
	data, err := json.Marshal(out)
	if err != nil {
		log.Error("could not encode an outcome", zap.Error(err))
		return
	}
	deadline := time.Now().Add(sendFor)
	for {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := w.nc.RequestWithContext(rctx, w.subjects.Result, data)
		cancel()
		if err == nil {
			var ans OutcomeAnswer
			json.Unmarshal(m.Data, &ans)
			if ans.Refused != "" {
				log.Info("the daemon refused the run's outcome", zap.String("why", ans.Refused))
				if out.Tip != "" {
					// No one will read it: the bucket is the worker's to keep.
					if b, err := w.js.ObjectStore(ctx, w.fleet.ResultsBucket(w.opts.Credentials.Worker)); err == nil {
						b.Delete(context.WithoutCancel(ctx), ResultKey(out.Run, out.Attempt))
						if len(out.Deps) > 0 {
							b.Delete(context.WithoutCancel(ctx), DepsKey(out.Run, out.Attempt))
						}
					}
				}
			} else {
				log.Info("the run's outcome was taken", zap.Bool("ok", out.Result.OK()), zap.String("error", out.Err))
			}
			return
		}
		if time.Now().After(deadline) || errors.Is(context.Cause(ctx), errShutdown) {
			log.Warn("gave up sending the run's outcome: the daemon did not answer", zap.Error(err))
			return
		}
		time.Sleep(time.Second)
	}
}

// sendFor bounds the tries to send an outcome.
const sendFor = 2 * time.Minute
