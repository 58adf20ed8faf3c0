// Package judge is the daemon side of the gates (docs/gates.md).
//
// It answers the hooks of every run, and knows each run by a secret token
// the run carries in its environment, never by what a request says about
// itself. It keeps what the hooks recorded (the test commands a run ran,
// its Stop blocks, whether its hooks checked in). And it judges a run by
// what it produced rather than by the commands it ran: the run's change set
// in its work tree (the project's, or a lane's: Root), held against the
// scope and the frozen tests; the feature's test, re-run by the daemon in
// an environment no agent could have changed; and, when a tester's claim
// holds, exactly the tree it tested, which package branch commits: the
// judge decides, branch writes.
//
// The rules themselves are package gates', shared with the hook; this
// package supplies what only the daemon knows. Its methods are safe for
// concurrent use: hooks are answered while the loop is busy, and the slow
// parts (a snapshot, a test) run off the loop, cancellable.
package judge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// Records is where the judge keeps what it learns: the commands runs ran
// and the traces of its decisions. *store.Store is one.
type Records interface {
	AppendCommand(control.CommandRecord) error
	// AppendTraces stores traces and returns them with their ids.
	AppendTraces(...control.Trace) ([]control.Trace, error)
	// QueueTraces stores traces after it returns, in the order of the
	// calls (of both methods), and tells done the outcome; whatever
	// reads the records after it returned finds them, and closing the
	// records stores them first (store.Store.QueueTraces). What the hooks
	// saw is queued: a hook's answer does not wait for the disk.
	QueueTraces(done func(error), ts ...control.Trace)
}

// Options configure a Judge.
type Options struct {
	Project paths.Project
	Modes   gates.Modes
	Records Records
	// Repo is the project's repository: the runs of the project's own work
	// tree are judged in it (a lane's, in its Root).
	Repo *gitrepo.Repo
	// Jail confines the daemon's own runs of the features' tests (its
	// Checkout and Mount are set per run): see RunTest.
	Jail sandbox.TestJail
	// Scratch is where the test runs' checkouts are made; by default
	// "checkouts" in the state directory.
	Scratch string
	// Writable are the directories outside the project agents may write
	// (sandbox.AgentWritable): the one list their sandbox allows their
	// programs and the hooks allow their file tools. A test that could not
	// write below one of them found it missing.
	Writable []string
	// ProtectedGlobs are gates.protected: where the project's tests live.
	ProtectedGlobs []string
	// Network is what agents' WebFetch calls may reach (sandbox.enabled,
	// sandbox.allowed_domains and sandbox.fetch_domains): WebFetch runs
	// outside the sandbox, so the hook holds it to that.
	Network gates.Network
	// TestTimeout bounds one run of a feature's test by the daemon.
	TestTimeout time.Duration
	// Parallel is how many frozen tests a regression sweep runs at once
	// (limits.parallel), each on a checkout and in a jail of its own; 1 or
	// less runs them one after the other.
	Parallel int
	// Copies are the person's untracked files (lanes.copy) every test
	// run's checkout is given, as a person's tree has them.
	Copies lanecopy.Files
	// AsThePerson runs each test as the person runs it in a clone of
	// their own (ctxgraphd verify --unconfined): the command exactly as
	// written, nothing added for the daemon's reading of its report (which
	// is then read off the runner's plain output, or the exit status
	// alone), in a checkout named as the project's directory is, in a
	// directory of no name of the daemon's, with nothing of the daemon's
	// beside it. Only with an unconfined Jail.
	AsThePerson bool
	// FullSweepEvery is how many regression sweeps apart the full ones
	// are (limits.full_sweep_every, see selection.go): between them a
	// sweep runs only the frozen tests the candidate's change can affect.
	// 1 runs every test at every sweep, and records nothing; 0 or less
	// is config.DefaultFullSweepEvery.
	FullSweepEvery int
	Log            *zap.Logger
	Now            func() time.Time
}

// Copies are the person's untracked files of lanes.copy, as captured at
// the daemon's start.
func (j *Judge) Copies() lanecopy.Files { return j.opts.Copies }

// Root is the work tree a run works in and is judged in: the project's
// own, or a lane's linked work tree of the project's repository. The zero
// Root is the project's (Options.Project.Dir and Options.Repo); a Root
// with a Repo and no Dir is in the Repo's directory.
//
// Dir must lie outside the daemon's own directories (its state directory
// and its socket, Judge.Protected): they stay protected for every run, so
// a run in a work tree inside them would be refused every write of its
// own.
type Root struct {
	Dir  string // real path (symlinks resolved), as gates.State.ProjectDir
	Repo *gitrepo.Repo
}

// root is r with the project's in place of what it leaves out.
func (j *Judge) root(r Root) Root {
	switch {
	case r.Dir == "" && r.Repo == nil:
		return Root{Dir: j.opts.Project.Dir, Repo: j.opts.Repo}
	case r.Dir == "":
		r.Dir = r.Repo.Dir()
	}
	return r
}

// Judge is the daemon side of the gates of one project.
type Judge struct {
	opts Options
	log  *zap.Logger

	mu     sync.Mutex
	list   *progress.List // canonical, as the loop last published it
	frozen Frozen
	runs   map[string]*run // by token
	guards []guards.Rule   // the active guards (SetGuards)
	// links are the runs' nodes in the context graph, by run id. They
	// outlive the run's token: a verdict is recorded after its run ended.
	links map[string]RunLink
	// tests are the daemon's own test runs while they run: the pid of
	// each one's first process, which leads its process group. Their
	// processes are refused what is for people.
	tests map[int]bool
	// warmed are the trees whose warm-up filled the verdict's caches:
	// a sweep runs every frozen test on one tree, and its build is in the
	// caches from the first.
	warmed map[gitrepo.Tree]bool
	// seen are the records of the frozen tests' last runs, by test
	// command, when they passed (selection.go); sinceFull counts the
	// sweeps since the last full one, fullNext asks for one; noView: the
	// daemon said once that runs cannot be recorded here, tooBig that a
	// directory the test runs see is too big to fingerprint.
	seen      map[string]seenRun
	sinceFull int
	fullNext  bool
	noView    bool
	tooBig    bool
	// landings are the claims that landed this session, in order, and
	// verified the trees a sweep ran every frozen test on, all passing
	// (backstop.go).
	landings []landing
	verified map[gitrepo.Tree]bool
}

// RunLink is a run's place in the context graph: its node (the trace of
// its handoff) and the feature's attempt it is part of.
type RunLink struct {
	Trace   string
	Attempt int
}

// run is what the judge knows of one run.
type run struct {
	actor gates.Actor
	token string
	// root is the work tree the run works in: its hooks' paths and
	// commands mean what they mean there.
	root Root
	// remote: root.Dir is on a worker (Relocate), not on this machine;
	// writable are then the directories outside it that the run may
	// write there (its worker's temp and caches), in place of this
	// machine's (Options.Writable).
	remote     bool
	writable   []string
	pid        int
	commands   []control.CommandRecord
	stopBlocks int
	// list is the feature list as the run was given it in its own work
	// tree (a lane's: GiveList), nil for the canonical one: its writes of
	// the list are read against what it was given.
	list *progress.List
	// controls are the repository's hooks and configuration when the run
	// was registered, before it started (gitrepo.Controls); nil: unknown.
	controls gitrepo.Controls
	// subagents are its subagent calls at work: let through by PreToolUse,
	// not ended by a PostToolUse yet (gates.State.Subagents).
	subagents int
	live      bool
	// stopFailure is the API error the run's StopFailure hook reported.
	stopFailure string
	// listWrite is the content of the run's last Write of the feature
	// list its gates let through; listEdited: an Edit of it went through,
	// whose result the hooks do not see.
	listWrite  []byte
	listEdited bool
	// env is the first failure of the machine or the confinement that a
	// failing test command of the run showed (diagnose.ReadEnvironment).
	env *diagnose.Environment
	// denied is what the run's sandbox denies it (nil: not known): a
	// refusal read off a command's output is believed only where the
	// sandbox can have made it (gates.Believable).
	denied []string
}

// New returns a judge. Options.Records is required.
func New(opts Options) *Judge {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TestTimeout <= 0 {
		opts.TestTimeout = 30 * time.Minute
	}
	if opts.FullSweepEvery <= 0 {
		opts.FullSweepEvery = config.DefaultFullSweepEvery
	}
	return &Judge{opts: opts, log: opts.Log, runs: map[string]*run{}, links: map[string]RunLink{}, tests: map[int]bool{},
		warmed: map[gitrepo.Tree]bool{}, seen: map[string]seenRun{}, verified: map[gitrepo.Tree]bool{}}
}

// Modes returns the gates' modes.
func (j *Judge) Modes() gates.Modes { return j.opts.Modes }

// SetList publishes the canonical feature list to the hooks.
func (j *Judge) SetList(l *progress.List) {
	if l != nil {
		l = l.Clone()
	}
	j.mu.Lock()
	j.list = l
	j.mu.Unlock()
}

// Register makes a run in the project's own work tree known to the gates
// and returns its token: RegisterIn(a, Root{}).
func (j *Judge) Register(a gates.Actor) string { return j.RegisterIn(a, Root{}) }

// RegisterIn makes a run in root's work tree known to the gates and returns
// its token: the secret its hooks present (control.RunTokenEnv in its
// environment). The hooks of a run are believed to be that run's because
// of the token, and only then. The run is judged in root: its writes are
// the project's only inside root.Dir, so that a run in a lane's work tree
// writes neither the project's own tree nor another lane's.
func (j *Judge) RegisterIn(a gates.Actor, root Root) string {
	root = j.root(root)
	for _, d := range j.Protected() {
		if d != "" && within(root.Dir, d) {
			j.log.Warn("a run's work tree lies in the daemon's own files, which it may not write: every write of the run will be refused",
				zap.String("run", a.Run), zap.String("dir", root.Dir), zap.String("protected", d))
		}
	}
	token := newToken()
	rg := &run{actor: a, token: token, root: root}
	if root.Repo != nil {
		// The repository's hooks and configuration as the run finds them:
		// no snapshot holds them, and JudgeRun holds the run to them.
		c, err := root.Repo.Controls()
		if err != nil {
			j.log.Warn("could not read the repository's hooks and configuration before a run; what the run does to them will not be seen", zap.String("run", a.Run), zap.Error(err))
		}
		rg.controls = c
	}
	j.mu.Lock()
	j.runs[token] = rg
	j.mu.Unlock()
	return token
}

// newToken is a run's secret: 32 random bytes, in hex.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b)
}

// Reissue gives the run of token a new token and returns it: the old one
// opens nothing from now on (its hooks are refused as an unknown run's),
// and everything known of the run (its commands, its Stop blocks, its
// list, its confinement, its root) is the new token's. A run that moves to
// another worker gets a new token so: whatever the worker it leaves still
// sends in its name is refused. false when token is no run's.
func (j *Judge) Reissue(token string) (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rg := j.runs[token]
	if rg == nil {
		return "", false
	}
	next := newToken()
	delete(j.runs, token)
	rg.token = next
	j.runs[next] = rg
	return next, true
}

// Relocate says that the run of token works on another machine: in dir
// there (a worker's clone of the lane), where its hooks' paths point, and
// confined by a sandbox that denies it denied (as Confine) and lets it
// write writable outside dir (the worker's temp and caches). Its hooks are
// judged against dir, by their paths alone (gates.State.Remote): nothing
// of this machine's disk is read by a path of the run's. The run's
// repository stays the lane's, where its result is judged. dir must be an
// absolute, clean path.
func (j *Judge) Relocate(token, dir string, denied, writable []string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("judge: a run's directory on its worker must be an absolute, clean path, not %q", dir)
	}
	if denied == nil {
		denied = []string{}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	rg := j.runs[token]
	if rg == nil {
		return errUnknownRun
	}
	for _, w := range writable {
		if !filepath.IsAbs(w) {
			return fmt.Errorf("judge: a directory a run may write on its worker must be an absolute path, not %q", w)
		}
	}
	rg.root.Dir, rg.remote, rg.denied, rg.writable = dir, true, denied, slices.Clone(writable)
	return nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	r, err := filepath.Rel(dir, path)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// GiveList records the feature list the run with token was given in its
// own work tree (a lane's copy, which the canonical list moves on from
// while the run works): the gates read its writes of the list against it.
func (j *Judge) GiveList(token string, l *progress.List) {
	j.mu.Lock()
	if rg := j.runs[token]; rg != nil {
		rg.list = l.Clone()
	}
	j.mu.Unlock()
}

// Confine records what the sandbox of the run with token denies it
// (sandbox.Policy.DenyWrite; empty, not nil, when the run is not
// confined): the hooks believe a refusal the run's commands print only
// where the sandbox can have made it.
func (j *Judge) Confine(token string, denied []string) {
	if denied == nil {
		denied = []string{}
	}
	j.mu.Lock()
	if rg := j.runs[token]; rg != nil {
		rg.denied = denied
	}
	j.mu.Unlock()
}

// Link records the run's node in the context graph: from now on what is
// traced of the run hangs from it.
func (j *Judge) Link(runID string, l RunLink) {
	j.mu.Lock()
	j.links[runID] = l
	j.mu.Unlock()
}

// Started records the pid of a run's process, so that IsRunProcess can
// recognise the run's processes.
func (j *Judge) Started(runID string, pid int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.byRun(runID); r != nil {
		r.pid = pid
	}
}

// Forget ends what the gates know of a run: its token opens nothing after.
func (j *Judge) Forget(runID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.byRun(runID); r != nil {
		delete(j.runs, r.token)
	}
}

// IsLive reports whether any of the run's hooks reached the daemon. A run
// the judge no longer knows is over: nothing to kill.
func (j *Judge) IsLive(runID string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.byRun(runID)
	return r == nil || r.live
}

// Bounds of what a run's commands cost the daemon: how many are kept for
// the run (an honest run runs hundreds), and how much of each the store
// keeps (the run's own judging has each whole).
const (
	maxCommandsKept  = 10_000
	maxCommandStored = 16 << 10
)

// Commands returns the Bash commands the run's hooks recorded.
func (j *Judge) Commands(runID string) []control.CommandRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.byRun(runID); r != nil {
		return slices.Clone(r.commands)
	}
	return nil
}

func (j *Judge) byRun(runID string) *run {
	for _, r := range j.runs {
		if r.actor.Run == runID {
			return r
		}
	}
	return nil
}

// state is what the rules know besides the payload, for actor's run rg (nil
// for a person's interactive session, in the project's own work tree). The
// gates' ProjectDir is the run's work tree: the project's directory is
// outside it for a run in a lane, as any directory but its own is. The
// daemon's own files are protected for every run.
func (j *Judge) state(rg *run) gates.State {
	dir := j.opts.Project.Dir
	if rg != nil {
		dir = rg.root.Dir
	}
	s := gates.State{
		ProjectDir: dir, List: j.list,
		Protected: j.Protected(), Frozen: j.frozen.paths(), ProtectedGlobs: j.opts.ProtectedGlobs,
		Writable: j.opts.Writable, MaxFileSize: j.opts.Jail.Limits.FileSize, Network: j.opts.Network,
	}
	if rg != nil {
		s.Commands, s.StopBlocks, s.Subagents = rg.commands, rg.stopBlocks, rg.subagents
		if rg.list != nil {
			s.List = rg.list
		}
		if rg.remote {
			s.Remote, s.ReadFile, s.Writable = true, remoteFiles(rg, s.List), rg.writable
		}
	}
	return s
}

// remoteFiles is what the gates may read of a run on a worker, whose files
// are not here: its feature list as the daemon knows the run has it (what
// its last Write or Edit of it left there, or the list it was given, as
// the daemon writes a list), for an Edit of it to be judged. Any other
// file of the run, or the list after an edit the daemon could not apply
// (let through in warn mode), is unknown.
func remoteFiles(rg *run, l *progress.List) func(string) ([]byte, error) {
	listPath := filepath.Join(rg.root.Dir, paths.ProgressDir, progress.FeatureListFile)
	written, edited := rg.listWrite, rg.listEdited
	return func(p string) ([]byte, error) {
		switch {
		case p != listPath:
			return nil, fmt.Errorf("%s is on the run's worker", p)
		case written != nil:
			return written, nil
		case edited:
			return nil, fmt.Errorf("%s is on the run's worker, and the daemon does not know what an edit left in it", p)
		case l != nil:
			return l.Marshal(), nil
		}
		return nil, fmt.Errorf("%s is on the run's worker, and the run was given no feature list", p)
	}
}

// StopFailure is the API error (the CLI's name for it) that a run's
// StopFailure hook reported, or "".
func (j *Judge) StopFailure(runID string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.byRun(runID); r != nil {
		return r.stopFailure
	}
	return ""
}

// Environment is the first failure of the machine or the confinement (a
// cache held read-only, a host the sandbox refused, a runner missing, a
// full disk) that a failing test command of the run showed in its output,
// nil if none did: what kept the run's tests from running is then no
// attempt's doing.
func (j *Judge) Environment(runID string) *diagnose.Environment {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.byRun(runID); r != nil && r.env != nil {
		e := *r.env
		return &e
	}
	return nil
}

// environment reads the output of a failed Bash call of run rg, as its
// hook reports it, for a failure of the machine or the sandbox: a
// directory held read-only is the run's work tree's or not.
func (j *Judge) environment(rg *run, p *gates.Payload) *diagnose.Environment {
	out := p.Error
	if p.Event == "PostToolUse" {
		var r gates.BashResponse
		json.Unmarshal(p.ToolResponse, &r)
		out = r.Stdout + "\n" + r.Stderr
	}
	e, ok := diagnose.ReadEnvironment(out, diagnose.Setting{Place: diagnose.InSandbox, ProjectDir: rg.root.Dir,
		Writable: j.opts.Writable, Caches: j.opts.Writable})
	if !ok {
		return nil
	}
	return &e
}

// MayHaveWrittenList reports whether data, the feature list as it is on
// disk, can be the run's own writing: what its last Write of the list put
// there, or anything after an Edit of it (whose result the hooks do not
// see). Confined, a file tool is the only way an agent writes the list.
func (j *Judge) MayHaveWrittenList(runID string, data []byte) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.byRun(runID)
	return r != nil && (r.listEdited || (r.listWrite != nil && bytes.Equal(r.listWrite, data)))
}

// MayBeWritingList reports whether data, the feature list as it is on disk
// while the run is in flight, can be the run's doing half-way: the start
// of what its last Write of the list lets through (the Write tool lands a
// file in pieces, and the watcher may read it between them), anything
// after an Edit of it, or an empty file. Claude Code's sandbox leaves one
// where a path it denies does not exist yet, for as long as each of the
// run's commands runs (a mount point for the /dev/null it binds there):
// the initializer's sandbox, before its Write of the list, makes one.
func (j *Judge) MayBeWritingList(runID string, data []byte) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.byRun(runID)
	return r != nil && (len(data) == 0 || r.listEdited || (r.listWrite != nil && bytes.HasPrefix(r.listWrite, data)))
}

// Protected lists the daemon's own files: its state directory and its
// socket (the socket itself: its directory may be a shared one).
func (j *Judge) Protected() []string {
	return []string{j.opts.Project.StateDir, j.opts.Project.Socket}
}

// ErrUnknownRun answers a hook whose token is no run's: a run that is over
// (its process still exiting) or one of a daemon that restarted.
var errUnknownRun = &control.APIError{HTTPStatus: http.StatusForbidden, Code: control.CodeUnknownRun,
	Message: "this hook's run is not one of this daemon's runs (it ended, or the daemon restarted); the action is refused"}

// ActorOf says whose run a token is, while the run is the daemon's.
func (j *Judge) ActorOf(token string) (gates.Actor, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rg := j.runs[token]; rg != nil {
		return rg.actor, true
	}
	return gates.Actor{}, false
}

// The judge answers the hooks on the control socket, without the loop.
var _ control.Gates = (*Judge)(nil)

// Hook answers one hook event (control.Gates). token says which run
// sent it; no token is a person's interactive session.
func (j *Judge) Hook(ctx context.Context, token string, req control.HookRequest) (control.HookResponse, error) {
	p, err := gates.ParsePayload(req.Event, req.Payload)
	if err != nil {
		return control.HookResponse{}, &control.APIError{HTTPStatus: http.StatusBadRequest, Code: control.CodeBadPayload, Message: err.Error()}
	}
	j.mu.Lock()
	var rg *run
	actor := gates.Actor{} // a person
	if token != "" {
		if rg = j.runs[token]; rg == nil {
			j.mu.Unlock()
			return control.HookResponse{}, errUnknownRun
		}
		actor = rg.actor
		// Any hook of the run that reaches the daemon shows its hooks
		// run: Claude Code runs all of a process's hooks or none.
		rg.live = true
	}
	state := j.state(rg)
	var d *control.HookDecision
	var rec *control.CommandRecord
	var refused []refusal
	var guardHits []*control.HookDecision // guards' decisions besides d
	switch p.Event {
	case "PreToolUse":
		d = gates.PreToolUse(j.opts.Modes, actor, state, p)
		d, guardHits = j.withGuards(actor, state, p, d)
		if rg != nil && !d.Blocks() && gates.IsSubagentCall(p.ToolName) {
			rg.subagents++
		}
		if rg != nil && !d.Blocks() && gates.WritesFeatureList(state, p) {
			switch {
			case p.ToolName == "Write":
				rg.listWrite = []byte(p.Input().Content)
			case rg.remote:
				// The run's list is on its worker: what the edit leaves
				// is what its next Edit is judged against.
				rg.listEdited = true
				rg.listWrite, _ = gates.ListAfter(state, p)
			default:
				rg.listEdited = true
			}
		}
	case "Stop", "SubagentStop":
		d = gates.Stop(j.opts.Modes, actor, state, p)
		if d.Blocks() && rg != nil {
			rg.stopBlocks++
		}
	case "PostToolUse", "PostToolUseFailure":
		if rg != nil && gates.IsSubagentCall(p.ToolName) && rg.subagents > 0 {
			rg.subagents--
		}
		test := ""
		if state.List != nil {
			if f := state.List.Feature(actor.Feature); f != nil {
				test = f.Test
			}
		}
		if r, ok := gates.RecordCommand(actor, test, state.ProjectDir, p); ok && (rg == nil || len(rg.commands) < maxCommandsKept) {
			if rg != nil {
				rg.commands = append(rg.commands, r)
				if r.IsTest && r.ExitCode != 0 && rg.env == nil {
					rg.env = j.environment(rg, p)
				}
			}
			rec = &r
		}
		if rg != nil {
			for _, r := range gates.SandboxRefusals(p) {
				if !gates.Believable(state, r, rg.denied) {
					continue // printed by the command, not the sandbox's
				}
				d := gates.JudgeRefusal(actor, state, r)
				if d == nil {
					d = gates.GuardRefusal(j.guards, actor, state, r)
				}
				refused = append(refused, refusal{r, d})
			}
		}
	case "StopFailure":
		if rg != nil {
			rg.stopFailure = p.Error
		}
	}
	j.mu.Unlock()

	if rec != nil && rg != nil {
		// Kept whole for the run's own judging (above), and cut to a
		// bound in the store: a run's commands are its agent's to make as
		// long as it likes, and a worker's hooks reach the store too.
		stored := *rec
		stored.Command = textcut.Cut(stored.Command, maxCommandStored)
		if err := j.opts.Records.AppendCommand(stored); err != nil {
			j.log.Warn("could not record a command", zap.Error(err))
		}
	}
	for _, r := range refused {
		j.recordRefusal(actor, p, r, state)
	}
	// The project file a refused call was about, so that later agents on
	// that file are told (precedent by files).
	file, _ := state.ProjectPath(gates.FilePath(p))
	for _, g := range guardHits {
		j.recordDecision(actor, p, g, file)
	}
	if p.Event == "StopFailure" {
		j.record(control.Trace{Type: control.TraceDecision, Source: control.SourceHook, Context: TraceContext(actor),
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("the turn ended on an API error: %s", p.Error)}})
	}
	if d == nil {
		return control.HookResponse{}, nil
	}
	j.recordDecision(actor, p, d, file)
	return control.HookResponse{Decision: d}, nil
}

// recordDecision keeps every denial (and every warning) as a violation.
func (j *Judge) recordDecision(a gates.Actor, p *gates.Payload, d *control.HookDecision, file string) {
	what := fmt.Sprintf("%s %s was blocked by %s: %s", p.Event, p.ToolName, d.Gate, d.Message)
	switch {
	case d.Code == guards.CodeWouldDeny:
		what = fmt.Sprintf("%s %s would have been denied by %s (the guard is in warn, the action was let through): %s", p.Event, p.ToolName, d.Gate, d.Message)
	case d.Mode == gates.Warn:
		what = fmt.Sprintf("%s %s broke %s (warn mode, let through): %s", p.Event, p.ToolName, d.Gate, d.Message)
	}
	j.record(control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Context: TraceContext(a), Gate: d.Gate, Code: d.Code,
		Path: file, Tool: ToolCall(p), Event: control.TraceEvent{WhatHappened: what, WhatWasCorrect: d.Suggestion, Why: "gate " + d.Gate}})
	j.log.Info("gate", zap.String("gate", d.Gate), zap.String("code", d.Code), zap.String("mode", d.Mode),
		zap.String("role", a.Role), zap.String("feature", a.Feature), zap.String("run", a.Run))
}

// refusal is a sandbox refusal and the rule it enforced, if one names it.
type refusal struct {
	gates.Refusal
	rule *control.HookDecision
}

// recordRefusal makes what the sandbox refused a run visible: a violation
// of the gate whose rule the path falls under (the sandbox enforced it;
// the hook could not see it in the command), or of the network allowlist.
func (j *Judge) recordRefusal(a gates.Actor, p *gates.Payload, r refusal, s gates.State) {
	cmd := p.Input().Command
	file, _ := s.ProjectPath(r.Path)
	t := control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Context: TraceContext(a), Tool: ToolCall(p), Path: file}
	switch {
	case r.Host != "":
		t.Gate, t.Code = gates.Confinement, gates.NetworkDenied
		t.Event = control.TraceEvent{WhatHappened: fmt.Sprintf("the sandbox refused a connection to %s by `%s`: not a host sandbox.allowed_domains lets through", r.Host, textcut.Line(cmd, 200)),
			WhatWasCorrect: "reach only the hosts the project allows", Why: "confinement"}
	case r.rule != nil:
		t.Gate, t.Code = r.rule.Gate, r.rule.Code
		t.Event = control.TraceEvent{WhatHappened: fmt.Sprintf("the sandbox refused `%s` a write of %s: %s", textcut.Line(cmd, 200), r.Path, r.rule.Message),
			WhatWasCorrect: r.rule.Suggestion, Why: "gate " + r.rule.Gate + ", held by the sandbox whatever program writes"}
	default:
		return // a refusal no rule of ours names: the sandbox's own business
	}
	j.record(t)
	j.log.Info("sandbox refusal", zap.String("gate", t.Gate), zap.String("code", t.Code), zap.String("run", a.Run), zap.String("path", r.Path), zap.String("host", r.Host))
}

// TraceContext is the trace context of an actor.
func TraceContext(a gates.Actor) control.TraceContext {
	return control.TraceContext{Agent: a.Role, Feature: a.Feature, Run: a.Run}
}

// ToolCall is the tool call a hook's payload is about, as a trace keeps it:
// the tool and, in a line, the command or the path it was given.
func ToolCall(p *gates.Payload) *control.TraceTool {
	if p.ToolName == "" {
		return nil
	}
	in := p.Input()
	return &control.TraceTool{Name: p.ToolName, Input: textcut.Line(cmp.Or(in.Command, in.FilePath, in.NotebookPath, in.Path, in.URL), maxToolInput)}
}

// maxToolInput bounds what a trace keeps of a tool call's input.
const maxToolInput = 200

// Trace stores a trace of this project and returns it with its id; storage
// errors are logged, not fatal: the trace is a record, the state of record
// is elsewhere. What is traced of a run hangs from the run's node in the
// context graph and belongs to its attempt, unless it says otherwise.
func (j *Judge) Trace(t control.Trace) control.Trace {
	t = j.complete(t)
	out, err := j.opts.Records.AppendTraces(t)
	if err != nil || len(out) == 0 {
		j.log.Warn("could not store a trace", zap.Error(err))
		return t
	}
	return out[0]
}

// record is Trace for what the hooks saw: the trace is queued, and
// stored after the hook is answered (Records.QueueTraces). A violation's
// commit, its fsync above all, cost a denied call several times what
// deciding it does; queued, the trace is still found by everything that
// reads the records after the answer, in the order it came, and stored
// at a clean shutdown. Only a crash of the daemon between the answer and
// the commit, a few milliseconds, loses it: the refusal itself was made.
func (j *Judge) record(t control.Trace) {
	j.opts.Records.QueueTraces(func(err error) {
		if err != nil {
			j.log.Warn("could not store a trace", zap.Error(err))
		}
	}, j.complete(t))
}

// complete gives t what every trace of the judge's carries: the project,
// the run's node and attempt, the time.
func (j *Judge) complete(t control.Trace) control.Trace {
	t.Project = j.opts.Project.ID
	if t.Context.Run != "" {
		j.mu.Lock()
		l, ok := j.links[t.Context.Run]
		j.mu.Unlock()
		if ok && t.Parent == "" && l.Trace != t.ID {
			t.Parent = l.Trace
		}
		if ok && t.Context.Attempt == 0 {
			t.Context.Attempt = l.Attempt
		}
	}
	if t.Timestamp.IsZero() {
		t.Timestamp = j.opts.Now().UTC()
	}
	return t
}
