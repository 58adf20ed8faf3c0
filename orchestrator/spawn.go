package orchestrator

// A run begins here: the action's run committed with its work tree, its
// settings, hooks and sandbox policy written, the process started.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// spawn starts the run an action asks for, in l. The run (with the work
// tree it starts from), its transition and the counters are committed
// before the process starts.
func (o *Orchestrator) spawn(l *lane, a statemachine.Action) {
	who := map[statemachine.Kind]role.Role{
		statemachine.SpawnInitializer: role.Initializer,
		statemachine.SpawnCoder:       role.Coder,
		statemachine.SpawnTester:      role.Tester,
	}[a.Kind]
	prev := o.machine.State()
	o.loadGuardFile() // a person's change of guards.yaml holds from the next run
	if who == role.Initializer {
		if _, err := progress.ReadGoal(o.opts.Project.Progress()); err != nil {
			// An initializer without a goal would invent a project.
			why := err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				why = "the project has no goal (" + filepath.Join(paths.ProgressDir, progress.GoalFile) + ")"
			}
			o.transition(l, statemachine.Stop, "", fmt.Sprintf("no initializer started: %s; run `ctxgraphd init --goal TEXT` (or write the file), then `ctxgraphd ctl resume`", why))
			return
		}
	}

	// What the run changes is judged against the tree it starts from.
	base, err := o.startTree(l, context.Background())
	if err != nil {
		o.transition(l, statemachine.Stop, a.Feature, fmt.Sprintf("could not record the project's work tree before a run, so the run could not be judged: %v", err))
		return
	}
	o.adoptFrozenDrift(base)

	counted := o.counters[a.Feature] // put back if the run's start is not committed
	o.tally.lastRun++
	run := store.Run{
		Seq: o.tally.lastRun, ID: store.RunID(o.tally.lastRun), Role: string(who), Feature: a.Feature,
		Attempt: a.Attempt, SessionID: uuid.NewString(), StartedAt: o.opts.Now().UTC(), BaseTree: string(base),
	}
	if !l.project {
		run.Dir = l.dir
	}
	listChanged := false
	if who == role.Coder {
		c := o.counters[a.Feature]
		if a.Resume && c.CoderSession != "" {
			run.SessionID, run.Resume = c.CoderSession, true
		} else {
			c.CoderSession = run.SessionID
		}
		if c.Base == "" {
			// The feature's work begins: what a verdict may commit on the
			// branch is measured from here.
			head, _, _, err := l.repo.Head(context.Background())
			if err != nil {
				o.opts.Log.Warn("could not read HEAD", zap.Error(err))
			}
			c.Base, c.BaseHead = string(base), head
		}
		c.Runs++
		o.setCounters(a.Feature, c)
		if f := o.canonical.Feature(a.Feature); f != nil && f.Status != progress.InProgress {
			f.Status = progress.InProgress
			listChanged = true
		}
	} else if a.Feature != "" {
		c := o.counters[a.Feature]
		c.Runs++
		o.setCounters(a.Feature, c)
	}
	if listChanged {
		o.pending.FeatureList = o.canonical.Marshal()
	}
	cmd := o.command(who, a, prev)
	prompt, system, err := o.prompts(who, cmd)
	if err != nil {
		o.tally.lastRun--
		o.transition(l, statemachine.Stop, a.Feature, err.Error())
		return
	}
	matcher := gates.PreToolUseMatcher(o.opts.Judge.Guards())
	settings, denied, policy, err := o.runSettingsDenied(l, who, a.Feature, matcher)
	if err != nil {
		o.tally.lastRun--
		o.transition(l, statemachine.Stop, a.Feature, err.Error())
		return
	}
	o.runNode(&run, cmd)
	token := l.register(gates.Actor{Role: string(who), Feature: a.Feature, Run: run.ID}, denied, o.canonical)
	run.TokenHash = control.TokenHash(token)
	l.setRunRecord(&run)
	o.pending.Runs = append(o.pending.Runs, run)
	if !o.transition(l, a.Event(), a.Feature, a.String()) {
		// Refused or not persisted, and logged: do not act. The run never
		// was: its number and what it counted go back, as a crash before
		// the commit would leave them, so that its retry counts it once.
		o.tally.lastRun--
		o.pending.Runs = o.pending.Runs[:len(o.pending.Runs)-1]
		if a.Feature != "" {
			o.setCounters(a.Feature, counted)
		}
		l.setRunRecord(nil)
		l.deps.runs.Forget(run.ID)
		return
	}
	if listChanged {
		o.writeFeatureList()
	}

	capUSD, cappedBy := statemachine.RunCap(o.decisionInput(l, nil), a.Feature)
	ctx, cancel := context.WithCancel(context.Background())
	hooks := l.watchHooks(run.ID, matcher, o.opts.Config.Agent.HooksLiveTimeout, o.runEvents, o.quit)
	l.active = &activeRun{run: run, cancel: cancel, cappedBy: cappedBy, capUSD: capUSD, hooks: hooks}
	l.claim = nil
	spec := agents.Spec{
		RunID: run.ID, Role: who, FeatureID: a.Feature, Attempt: a.Attempt,
		SessionID: run.SessionID, Resume: run.Resume, Prompt: prompt, SystemPrompt: system,
		Dir: l.dir, Settings: settings, Token: token, MaxBudgetUSD: capUSD,
		MCPConfig: o.mcpConfig(token),
		Policy:    policy, Hooks: o.opts.Hook.Path != "", HookMatcher: matcher,
	}
	if l.port != 0 {
		spec.ExtraEnv = append(spec.ExtraEnv, fmt.Sprintf("PORT=%d", l.port))
	}
	if who != role.Initializer {
		// For a run in a clone of the executor's own (a worker's): this
		// tree was set up before its check, that one is set up there.
		spec.Setup = l.setupScript
	}
	o.opts.Log.Info("run starting", zap.String("run", run.ID), zap.String("role", string(who)), zap.String("feature", a.Feature), zap.Int("attempt", a.Attempt),
		zap.Bool("resume", run.Resume), zap.String("session", run.SessionID), zap.Bool("confined", o.opts.Config.Sandbox.Enabled))
	l.start(ctx, o.opts.Runner, spec, func(ev agents.Event) { o.onRunEvent(run.ID, ev) }, o.runEvents)
}

// start runs spec, l's run in flight (l.active), with runner, off the
// loop, to its end: its pid and its end go to events (runStarted,
// runEnded), each event of its stream to its hooks' watch and to follow
// (the status's view of it), on the run's goroutine.
func (l *lane) start(ctx context.Context, runner AgentRunner, spec agents.Spec, follow func(agents.Event), events chan<- any) {
	id, hooks, log := spec.RunID, l.active.hooks, l.deps.log.With(zap.String("run", spec.RunID))
	go func() {
		res := runner.Run(ctx, spec,
			func(pid int) { events <- runStarted{runID: id, pid: pid} },
			func(ev agents.Event) {
				if ev.Kind == "tool_use" {
					log.Debug("tool", zap.String("tool", ev.Tool), zap.String("detail", ev.Detail))
				}
				hooks.seen(ev)
				follow(ev)
			})
		events <- runEnded{runID: id, result: res}
	}()
}

// recentMaxAge bounds the age of a recorded work tree that a run or a
// test check may start from instead of recording the tree again.
const recentMaxAge = time.Second

// recentTree is the work tree as the loop recorded it while handling the
// event in flight: the tree a run was just judged on (after what the gates
// put back), or the one a feature's test was just checked on.
type recentTree struct {
	tree gitrepo.Tree
	at   time.Time // when it was recorded (the wall clock, not o.opts.Now)
}

// holdRecent makes tree, recorded at at in l, the tree the next run or
// test check of the event in flight starts from; the returned func,
// deferred by the event's handler, forgets it, so that no later event
// starts from it. Only the project's own tree is held (lane.recent).
func (o *Orchestrator) holdRecent(l *lane, tree gitrepo.Tree, at time.Time) func() {
	home := o.lanes.home
	if tree != "" && !at.IsZero() && o.testsKeepOut() && l.project {
		home.recent = &recentTree{tree: tree, at: at}
	}
	return func() { home.recent = nil }
}

// testsKeepOut reports whether the daemon's own test runs (a verdict's, a
// sweep's, a check's, which come between a recorded tree and the next
// start) cannot write the project's work tree: confined, on a checkout of
// their own, with no directory of the project made writable to them.
// Unconfined, a test may write the project by its absolute path, and the
// next run must not be taken for its author.
func (o *Orchestrator) testsKeepOut() bool {
	if !o.opts.Config.Sandbox.Enabled {
		return false
	}
	for _, d := range o.opts.Config.Sandbox.AllowWrite {
		rel, err := filepath.Rel(o.opts.Project.Dir, d)
		if err != nil || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))) {
			return false
		}
	}
	return true
}

// startTree is the work tree a run, or a feature's test check, starts
// from: a snapshot (a dozen git processes), unless the loop recorded the
// tree moments ago while handling the same event and wrote nothing outside
// .claude/ (which snapshots leave out) since. Between those two moments
// the loop only decides; a person's change in that window (under
// recentMaxAge) is then taken for the next run's, as one made a moment
// after a new snapshot would be, for the whole of the run. Whatever
// changes the work tree on the loop (block's Preserve) forgets it.
func (o *Orchestrator) startTree(l *lane, ctx context.Context) (gitrepo.Tree, error) {
	if r := o.takeRecent(l); r != nil {
		return r.tree, nil
	}
	return l.repo.Snapshot(ctx)
}

// takeRecent is the recent tree if there is one young enough to start
// from (see startTree), nil otherwise; either way it is then forgotten,
// whichever lane starts: what starts from it may change the tree. It is
// the project's own tree's: l, where the start is, must be the project's
// own lane.
func (o *Orchestrator) takeRecent(l *lane) *recentTree {
	r := o.lanes.home.recent
	o.lanes.home.recent = nil
	if r == nil || time.Since(r.at) > recentMaxAge || !l.project {
		return nil
	}
	return r
}

// runSettings is the --settings of a run: ctxgraphd's hooks and, unless the
// user turned confinement off, the sandbox that holds every program the
// agent runs to what it may touch.
func (o *Orchestrator) runSettings(who role.Role, feature string) (string, error) {
	s, _, _, err := o.runSettingsDenied(o.lanes.home, who, feature, gates.PreToolUseMatcher(o.opts.Judge.Guards()))
	return s, err
}

// runSettingsDenied is runSettings, what the run's sandbox denies it
// (empty when confinement is off: the hooks believe a refusal the run's
// commands print only there) and its policy (nil then). The directories
// the run may write besides the project are made here, once per run
// (sandbox.Policy.Prepare). matcher is the PreToolUse hook's
// (gates.PreToolUseMatcher). The run works in l.
func (o *Orchestrator) runSettingsDenied(l *lane, who role.Role, feature, matcher string) (string, []string, *sandbox.Policy, error) {
	var hooks, confined map[string]any
	if o.opts.Hook.Path != "" {
		hooks = gates.RunHooks(o.opts.Hook, string(who), matcher)
	}
	denied := []string{}
	var pol *sandbox.Policy
	if o.opts.Config.Sandbox.Enabled {
		p := o.policy(l, who, feature)
		// Made before the run, or the sandbox holds them read-only.
		if err := p.Prepare(); err != nil {
			o.opts.Log.Warn("a directory runs may write could not be made; the tools that need it fail in the sandbox", zap.Error(err))
		}
		confined, denied, pol = p.Settings(), p.Denied(), &p
	}
	settings, err := gates.RunSettings(hooks, confined)
	return settings, denied, pol, err
}

// policy is what a run's programs may touch: the project but for what is
// the daemon's, Claude Code's and the frozen tests'; the temp and cache
// directories honest builds need; the hosts the user allows. The daemon's
// state and socket can be neither read nor written. The run works in l.
func (o *Orchestrator) policy(l *lane, who role.Role, feature string) sandbox.Policy {
	dir := l.dir
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	deny := []string{
		in(".claude/progress/" + progress.FeatureListFile), in(".claude/progress/" + progress.SessionStateFile),
		in(".claude/progress/" + progress.GoalFile),
		in(".claude/ctxgraphd.yaml"), in(".claude/ctxgraphd"), in(".claude/settings.json"), in(".claude/settings.local.json"),
		in(".mcp.json"), in(".git"), in("CLAUDE.md"), in("CLAUDE.local.md"),
		o.opts.Project.StateDir, o.opts.Project.Socket,
	}
	for _, p := range o.opts.Judge.Frozen().Sorted() {
		deny = append(deny, in(p))
	}
	// The person's untracked files of lanes.copy are theirs: a run's
	// programs read them and do not change them.
	for _, p := range o.opts.Judge.Copies().Names() {
		deny = append(deny, in(p))
	}
	if o.canonical != nil && who != role.Initializer {
		// Where tests live as a whole directory (tests/**), the sandbox
		// keeps new files out too, not only the verdict afterwards.
		for _, g := range o.opts.Config.Protected {
			if d, ok := strings.CutSuffix(g, "/**"); ok && !strings.ContainsAny(d, "*?[{") {
				if fi, err := os.Stat(in(d)); err == nil && fi.IsDir() {
					deny = append(deny, in(d))
				}
			}
		}
	}
	// The project's enforced deny guards on a file, for this role: held
	// whatever program writes, as the built-in gates' files are.
	deny = append(deny, o.guardDenies(string(who))...)
	allow := slices.Clone(o.opts.Writable)
	if who == role.Tester && feature != "" {
		// Its own evidence, which Claude Code's sandbox would otherwise
		// keep it from writing with Bash (it holds .claude/ read-only).
		allow = append(allow, in(".claude/progress/"+progress.EvidenceDir+"/"+feature))
	}
	return sandbox.Policy{
		ProjectDir:     dir,
		DenyWrite:      deny,
		DenyRead:       []string{o.opts.Project.StateDir, o.opts.Project.Socket},
		AllowWrite:     allow,
		AllowedDomains: o.opts.Config.Sandbox.AllowedDomains,
	}
}

// onRunStarted takes the process id of l's run in flight.
func (o *Orchestrator) onRunStarted(l *lane, ev runStarted) {
	if l.active == nil || l.active.run.ID != ev.runID {
		return
	}
	l.deps.runs.Started(ev.runID, ev.pid)
	l.active.run.PID = ev.pid
	if r := l.runRecord(); r != nil {
		r.PID = ev.pid
	}
	o.pending.Runs = append(o.pending.Runs, l.active.run)
	o.persist()
}
