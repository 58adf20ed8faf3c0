package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control/server"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/mcpserver"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/sdnotify"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/orchestrator"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/records"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func init() { subcommands = append(subcommands, newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		projectDir   string
		exitWhenDone bool
		sets         []string
	)
	cmd := &cobra.Command{
		Use:   "run [--project DIR] [--exit-when-done]",
		Short: "Run the project's daemon in the foreground (systemd and launchd run it this way)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			proj, err := findProject(projectDir)
			if err != nil {
				return err
			}
			flags, err := parseSets(sets)
			if err != nil {
				return withExitCode(exitUsage, err)
			}
			cfg, _, err := config.Load(config.Sources{ProjectDir: proj.Dir, Flags: flags})
			if err != nil {
				return fmt.Errorf("invalid configuration, not starting:\n%w", err)
			}
			log, err := newLogger(cfg.Log, proj)
			if err != nil {
				return err
			}
			defer log.Sync()
			err = runDaemon(cmd.Context(), daemonOptions{Project: proj, Config: cfg, Log: log, ExitWhenDone: exitWhenDone})
			if errors.Is(err, orchestrator.ErrSessionStopped) || errors.Is(err, orchestrator.ErrUnfinished) {
				return withExitCode(exitFailure, err)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&projectDir, "project", "", "project directory (default: the project around the current directory)")
	cmd.Flags().BoolVar(&exitWhenDone, "exit-when-done", false, "exit 0 once every feature is tested or blocked; exit 1 if the session stops (a dependency cycle stops it) or ends with features never worked (waiting on a blocked feature)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a configuration key, e.g. --set agent.timeout=10m (repeatable)")
	return cmd
}

// daemonOptions are what runDaemon needs; demo builds them too.
type daemonOptions struct {
	Project      paths.Project
	Config       *config.Config
	Log          *zap.Logger
	ExitWhenDone bool
	// AgentEnv is the environment of the agents; nil means the daemon's.
	AgentEnv []string
}

// runDaemon runs one project's daemon until a signal, ctx, or (with
// ExitWhenDone) the end of the work. The actors: the orchestrator's loop,
// the control server, the signal handler; when one ends, all end.
func runDaemon(ctx context.Context, o daemonOptions) error {
	cfg, log := o.Config, o.Log
	// The daemon's own environment, captured now: the daemon's runs of the
	// features' tests use it, and nothing an agent writes later changes it.
	daemonEnv := os.Environ()
	env := o.AgentEnv
	if env == nil {
		env = daemonEnv
	}
	// Claude Code gives every sandboxed command a temp directory that all
	// of a user's sessions share; one per project keeps projects out of
	// each other's scratch files. Short: the CLI binds sockets below it.
	env, err := withAgentTemp(env, agentTempDir(o.Project))
	if err != nil {
		return err
	}
	if err := carryOver(o.Project, log); err != nil {
		return err
	}
	if err := startCheck(ctx, o.Project, cfg, env, log); err != nil {
		return err
	}
	copies, err := captureCopies(ctx, o.Project, cfg)
	if err != nil {
		return err
	}
	st, err := store.Open(o.Project.StateDir, time.Second)
	if err != nil {
		return err
	}
	defer st.Close()
	repo, err := gitrepo.Open(ctx, gitrepo.Options{
		Dir: o.Project.Dir, Index: filepath.Join(o.Project.StateDir, "snapshot.index"),
		// .claude/ holds the daemon's progress files and Claude Code's and
		// the user's settings: the sandbox and the gates keep agents out of
		// it, and it is not part of what a feature's commit holds.
		// lanes.copy's files are the person's, never a commit's.
		Exclude: append([]string{".claude"}, cfg.Lanes.Copy...),
	})
	if errors.Is(err, gitrepo.ErrNotRepository) {
		return fmt.Errorf("%s is not a git repository: ctxgraphd judges each run by what it changed in the project's tree and commits each tested feature; run `ctxgraphd init` there (it creates one) or `git init`", o.Project.Dir)
	}
	if err != nil {
		return err
	}
	if err := store.WritePID(o.Project.StateDir); err != nil {
		return err
	}
	ln, err := server.Listen(o.Project.Socket)
	if err != nil {
		return err
	}
	// The context graph's MCP tools, served to the runs on loopback: a run
	// connects to the daemon rather than starting a server of its own.
	mcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return fmt.Errorf("could not listen on loopback for the agents' MCP tools: %w", err)
	}
	closeListeners := func() { ln.Close(); mcpLn.Close() }
	limits := sandbox.NewLimits(cfg.Sandbox.MaxProcesses, cfg.Sandbox.MaxMemoryMB, cfg.Sandbox.MaxFileMB)
	prlimit, _ := paths.LookPath("prlimit", os.Getenv("PATH"))
	if prlimit == "" && limits != (sandbox.Limits{}) {
		log.Warn("prlimit (util-linux) was not found on PATH: agent runs are not bounded by sandbox.max_processes, max_memory_mb, max_file_mb")
	}
	runner := agents.NewRunner(agents.Options{
		Command: cfg.Agent.Command, Model: cfg.Agent.Model, Timeout: cfg.Agent.Timeout, IdleTimeout: cfg.Agent.IdleTimeout,
		MaxTurns: cfg.Agent.MaxTurns, MaxBudgetUSD: cfg.Budget.RunUSD, AllowRoot: cfg.Agent.AllowRoot, StuckAfter: cfg.Agent.StuckAfter,
		SocketPath: o.Project.Socket, BaseEnv: env, Limits: limits, Prlimit: prlimit, Keeper: keeper(),
	}, log.Named("agents"))
	hook, err := hookCommand()
	if err != nil {
		closeListeners()
		return err
	}
	// What agents may write outside their tree: one list, which the
	// sandbox holds their programs to and the hooks their file tools.
	writable, dropped := agentPlaces(env, o.Project, cfg)
	for _, d := range dropped {
		log.Warn("agents may not write this directory: it holds the project, a lane's clone, the daemon's state or the system's temp directory; move the cache, or the sandbox.allow_write entry, out of it",
			zap.String("dir", d))
	}
	j := judge.New(judge.Options{
		Project: o.Project, Modes: gateModes(cfg), Records: st, Repo: repo,
		Jail:           testJail(daemonEnv, o.Project, cfg, writable),
		Writable:       writable,
		Network:        agentNetwork(cfg),
		ProtectedGlobs: cfg.Protected, TestTimeout: cfg.Agent.Timeout, Parallel: cfg.Limits.Parallel, FullSweepEvery: cfg.Limits.FullSweepEvery, Log: log.Named("judge"),
		Copies: copies,
	})
	// Checkouts a crash left behind go; then the jail is tried once.
	if err := j.Sweep(); err != nil {
		log.Warn("could not remove the test runs' old checkouts", zap.Error(err))
	}
	if err := checkJail(ctx, cfg, j, log); err != nil {
		closeListeners()
		return err
	}
	notifier := notify.New(notify.Options{Webhook: cfg.Notify.Webhook, Command: cfg.Notify.Command, Log: log.Named("notify")})
	// The fleet's NATS server, with executor nats (nil with local): it
	// stops after the loop, which hands it lanes, and the socket.
	fleetSrv, err := startFleet(ctx, o.Project, cfg, log)
	if err != nil {
		closeListeners()
		return err
	}
	var lanesRunner orchestrator.AgentRunner = runner
	if fleetSrv != nil {
		defer fleetSrv.Shutdown()
		ex, err := newExecutor(ctx, fleetSrv, o.Project, cfg, j, repo, log)
		if err != nil {
			closeListeners()
			return err
		}
		defer ex.Close()
		lanesRunner = ex
	}
	orch, err := orchestrator.New(orchestrator.Options{
		Project: o.Project, Config: cfg, Store: st, Runner: lanesRunner, Judge: j, Repo: repo, Log: log.Named("orchestrator"),
		ExitWhenDone: o.ExitWhenDone, Hook: hook, HookCommand: hook.String(), Writable: writable, MCPURL: "http://" + mcpLn.Addr().String() + "/mcp",
		Notify: notifier.Notify,
		Setup: &sandbox.Setup{Runtime: cfg.Sandbox.Runtime, Off: !cfg.Sandbox.Enabled, Env: env, Timeout: cfg.Agent.Timeout,
			SettingsDir: filepath.Join(o.Project.StateDir, "setup")},
	})
	if err != nil {
		closeListeners()
		return err
	}
	// The socket serves three parts of the daemon: the loop's commands, the
	// judge's answers to hooks (which never wait for the loop) and the
	// records, read from the store beside the loop.
	recs := records.New(records.Options{Store: st, Project: o.Project, Judge: j, Features: orch,
		Retention: cfg.Graph.Retention, Log: log.Named("records")})
	srv := server.New(orch, j, recs, fleetControl(fleetSrv), log.Named("control"))

	var g run.Group
	loopCtx, stopLoop := context.WithCancel(ctx)
	g.Add(func() error { return orch.Run(loopCtx) }, func(error) {
		// Tell systemd as soon as shutdown starts: stopping the run in
		// flight takes a few seconds, and it should not look hung.
		sdnotify.Stopping()
		stopLoop()
	})
	g.Add(func() error { return srv.Serve(ln) }, func(error) {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutCtx)
	})
	mcpSrv := &http.Server{
		Handler: mcpserver.Handler(o.Project.Socket, versionLine(), func(token string) bool {
			_, ok := j.ActorOf(token)
			return ok
		}),
		ReadHeaderTimeout: 10 * time.Second,
		// A run's few requests come close together; a connection kept
		// idle longer is nobody's.
		IdleTimeout: time.Minute,
		ErrorLog:    zap.NewStdLog(log.Named("mcp")),
	}
	g.Add(func() error {
		if err := mcpSrv.Serve(mcpLn); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("the agents' MCP server: %w", err)
		}
		return nil
	}, func(error) {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		mcpSrv.Shutdown(shutCtx)
	})
	// The notifier outlives the loop by its drain: the last events of a
	// night (done, stopped) are the ones a person waits for.
	notifyCtx, stopNotify := context.WithCancel(context.Background())
	g.Add(func() error { return notifier.Run(notifyCtx) }, func(error) { stopNotify() })
	g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))

	log.Info("daemon started", zap.String("dir", o.Project.Dir), zap.String("socket", o.Project.Socket), zap.String("state", st.Path()),
		zap.Int("pid", os.Getpid()), zap.Bool("confined", cfg.Sandbox.Enabled), zap.String("hook", hook.String()))
	sdnotify.Ready()
	err = g.Run()
	// oklog/run returns *SignalError; its As method claims the value type
	// too without filling it in, so ask for the pointer.
	var sig *run.SignalError
	if errors.As(err, &sig) && sig != nil && sig.Signal != nil {
		log.Info("daemon stopped by signal", zap.String("signal", sig.Signal.String()))
		return nil
	}
	if errors.Is(err, run.ErrSignal) {
		log.Info("daemon stopped by signal")
		return nil
	}
	if err == nil {
		log.Info("daemon stopped")
	}
	return err
}

// agentTempDir is the project's own CLAUDE_CODE_TMPDIR: Claude Code gives
// every sandboxed command a temp directory below it, writable by every run
// of the project.
// withAgentTemp is env for agents' runs with tmp (made here) as Claude
// Code's temp directory, where what Python and pytest write beside the
// code goes too: not in the project, where an honest test run would
// change what it judges.
func withAgentTemp(env []string, tmp string) ([]string, error) {
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("the agents' temp directory: %w", err)
	}
	env = append(slices.Clip(env), "CLAUDE_CODE_TMPDIR="+tmp)
	return append(env, sandbox.ByproductEnv(env, sandbox.TempDir(env))...), nil
}

func agentTempDir(p paths.Project) string {
	return filepath.Join(os.TempDir(), "cgt-"+p.ID[strings.LastIndexByte(p.ID, '-')+1:])
}

// agentNetwork is what agents may reach over the network: their programs
// the hosts of sandbox.allowed_domains, through the sandbox's proxy; their
// WebFetch calls, which Claude Code makes outside the sandbox, those and
// the pages of sandbox.fetch_domains. Unconfined, anything.
func agentNetwork(cfg *config.Config) gates.Network {
	return gates.Network{Unconfined: !cfg.Sandbox.Enabled, Hosts: slices.Concat(cfg.Sandbox.AllowedDomains, cfg.Sandbox.FetchDomains)}
}

// agentWritable are the directories outside the project that agents' runs
// may write (sandbox.AgentWritable), with env the agents' environment:
// nothing there may take part in judging them.
func agentWritable(env []string, p paths.Project, cfg *config.Config) []string {
	w, _ := agentPlaces(env, p, cfg)
	return w
}

// agentPlaces is agentWritable, with the entries it dropped. Kept out:
// every place a run must not reach that the layout can put below a cache or
// an allow_write entry (the project, the state directories with the lanes'
// clones, the socket's, the system's temp directory with verify's
// checkouts, the home).
func agentPlaces(env []string, p paths.Project, cfg *config.Config) (writable, dropped []string) {
	env = append(slices.Clip(env), "CLAUDE_CODE_TMPDIR="+agentTempDir(p))
	keepOut := []string{p.Dir, filepath.Dir(p.StateDir), filepath.Dir(p.Socket), os.TempDir()}
	home := "" // the last HOME wins, as in exec.Cmd
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = h
		}
	}
	keepOut = append(keepOut, home)
	return sandbox.AgentWritable(env, cfg.Sandbox.AllowWrite, keepOut...)
}

// testJail is where the daemon runs the features' tests (sandbox.TestJail):
// the daemon's environment as captured at start, less anything that is not
// a toolchain's (secrets above all) and any PATH directory an agent could
// write; no state or socket directory of any project; and caches of its
// own for the tools that trust theirs. Go takes a cached "ok" for a test
// whose inputs it has seen, and Python runs a cached .pyc in place of its
// source: caches agents may write must not vouch for the verdict. Go's
// build cache is the verdict's own, in the state directory, and a test run
// sees it read-only: a test's code that could write it could plant an
// entry that makes another tree's build pass (the compiled package of
// code that passes, filed under code that fails). It is filled before
// each test run by a command that compiles and runs nothing
// (toolchain.Toolchain.Warm), so a warm verdict costs what it did; Go
// builds on with a read-only cache, writing what else it compiles to its
// temporary directory. Go's modules are the verdict's own too: agents may
// write their module cache (an edited dependency would pass the verdict
// and nowhere else), so the warm-up extracts each module from the zips
// there, which Go checks against the tree's go.sum as it extracts them,
// into a module cache that test runs read only; never from the network.
// Python's cache goes with the run's /tmp. What a
// person named in sandbox.allow_write is writable too: agents may write it
// anyway, and a test that needs it (a tool's cache of its own) is then not
// kept from running.
func testJail(daemonEnv []string, p paths.Project, cfg *config.Config, agentWritable []string) sandbox.TestJail {
	goCache := filepath.Join(p.StateDir, "verdict-cache", "go-build")
	modCache := filepath.Join(p.StateDir, "verdict-cache", "mod")
	initGoBuildCache(goCache)
	os.MkdirAll(modCache, 0o700)
	// Go builds on when it cannot write its cache, but for its index of
	// module directories, which a package pattern (./pkg/...) needs
	// written: off, it is only an optimisation.
	godebug := "goindex=0"
	for _, kv := range daemonEnv {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok && v != "" {
			godebug = v + "," + godebug
		}
	}
	env := sandbox.TestEnv(daemonEnv, p.Dir, agentWritable,
		"GOCACHE="+goCache, "GOMODCACHE="+modCache, "GODEBUG="+godebug, "PYTHONPYCACHEPREFIX=/tmp/pycache", "PYTHONDONTWRITEBYTECODE=1",
		"GOPROXY=off", "GOTOOLCHAIN=local")
	var warmEnv []string
	if agentMods := sandbox.GoModCache(daemonEnv); agentMods != "" {
		// What go.sum names is checked against it as Go extracts it;
		// what it does not name (a module the tree's go.sum lacks)
		// could only be checked against sum.golang.org, which the jail
		// cannot reach: as before, such a build takes what it finds.
		warmEnv = []string{"GOPROXY=file://" + filepath.ToSlash(filepath.Join(agentMods, "cache", "download")), "GOSUMDB=off"}
	}
	home := ""
	for _, kv := range daemonEnv {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	// What agents may write is hidden from the test runs, but the
	// dependencies they read: code that reads its answer from a cache or a
	// temp directory an agent filled passes only on this machine.
	hide := []string{filepath.Dir(p.StateDir), filepath.Dir(p.Socket)}
	deps := sandbox.DependencyDirs(daemonEnv)
	for _, d := range agentWritable {
		holdsDeps := slices.ContainsFunc(deps, func(dep string) bool { return dep == d || strings.HasPrefix(dep, d+string(filepath.Separator)) })
		if !holdsDeps && !slices.Contains(cfg.Sandbox.AllowWrite, d) {
			hide = append(hide, d)
		}
	}
	return sandbox.TestJail{
		Off:      !cfg.Sandbox.Enabled,
		OwnPort:  !cfg.Sandbox.Enabled,
		Env:      env,
		Hide:     hide,
		Writable: cfg.Sandbox.AllowWrite,
		Caches:   []string{goCache, modCache},
		ReadOnly: deps,
		WarmEnv:  warmEnv,
		Secrets:  sandbox.SecretPaths(home),
		Limits:   sandbox.NewLimits(cfg.Sandbox.MaxProcesses, cfg.Sandbox.MaxMemoryMB, cfg.Sandbox.MaxFileMB),
	}
}

// captureCopies reads the files of lanes.copy from the person's tree, once:
// lanes and test runs get this copy, whatever an agent does to the file
// later.
func captureCopies(ctx context.Context, p paths.Project, cfg *config.Config) (lanecopy.Files, error) {
	if len(cfg.Lanes.Copy) == 0 {
		return lanecopy.Files{}, nil
	}
	tracked := func(name string) (bool, error) {
		out, err := exec.CommandContext(ctx, "git", "-C", p.Dir, "ls-files", "-z", "--", ":(literal)"+name).Output()
		return len(out) > 0, err
	}
	f, err := lanecopy.Capture(p.Dir, cfg.Lanes.Copy, tracked)
	if err != nil {
		return f, fmt.Errorf("ctxgraphd cannot start on %s:\n  - %s", p.Dir, strings.ReplaceAll(err.Error(), "\n", "\n  - "))
	}
	return f, nil
}

// checkSetupRuntime makes sure that the sandbox runtime which confines the
// project's setup step is there, where the person gave a setup: the
// daemon's own fetches of what the manifests name go without it (and say
// so), since agents fetch those anyway.
func checkSetupRuntime(cfg *config.Config, env []string) error {
	if !cfg.Sandbox.Enabled || strings.TrimSpace(cfg.Setup) == "" {
		return nil
	}
	if _, err := (sandbox.Setup{Runtime: cfg.Sandbox.Runtime, Env: env}).FindRuntime(); err != nil {
		return fmt.Errorf("the project's setup step runs confined by Anthropic's sandbox runtime, and %v", err)
	}
	return nil
}

// initGoBuildCache lays out an empty Go build cache at dir as Go would on
// its first use (a directory for each first byte of a key): Go cannot
// start with a cache it may neither write nor lay out, and the verdict's
// is read-only to the test runs, whether or not a warm-up ran before
// them (it does only where go.mod is at the project's top).
func initGoBuildCache(dir string) {
	for i := range 256 {
		os.MkdirAll(filepath.Join(dir, fmt.Sprintf("%02x", i)), 0o700)
	}
}

// startCheck makes sure, before anything is spent, that the night can
// begin: the Claude Code CLI is there, new enough and logged in, agents
// can run confined, git is there, the toolchains the project uses can run
// confined (their programs on PATH, their caches writable in the sandbox),
// and the initializer has a goal to work from. It says every problem at
// once, each with what to do, so that a person fixes them in one go rather
// than one per start.
func startCheck(ctx context.Context, p paths.Project, cfg *config.Config, env []string, log *zap.Logger) error {
	var problems startProblems
	add := problems.add
	add(agents.CheckRoot(cfg.Agent.AllowRoot, env, agents.DaemonSettings))
	// The CLI's checks take the longest (it starts twice): the others are
	// made meanwhile, and the problems said in the same order.
	preflight := make(chan error, 1)
	go func() { preflight <- agents.Preflight(ctx, cfg.Agent.Command, env, agents.DaemonSettings) }()
	confinement := checkConfinement(ctx, cfg, log)
	var noGit error
	if _, ok := paths.LookPath("git", os.Getenv("PATH")); !ok {
		noGit = errors.New("git was not found on PATH: ctxgraphd judges each run by what it changed in the project's git tree; install git")
	}
	toolchains := sandbox.CheckToolchains(ctx, p.Dir, env, agentWritable(env, p, cfg), cfg.Sandbox.Enabled)
	add(<-preflight)
	add(confinement)
	add(noGit)
	add(toolchains)
	add(checkGoal(p))
	add(checkExecutor(cfg))
	add(checkSetupRuntime(cfg, env))
	return problems.err("ctxgraphd cannot start on " + p.Dir)
}

// startProblems are what a start-up check found, each line of each error
// a problem of its own, said all at once.
type startProblems []string

func (ps *startProblems) add(err error) {
	if err != nil {
		*ps = append(*ps, strings.Split(err.Error(), "\n")...)
	}
}

// err is nil without problems, else one error that lists them under what.
func (ps startProblems) err(what string) error {
	if len(ps) == 0 {
		return nil
	}
	return fmt.Errorf("%s:\n  - %s", what, strings.Join(ps, "\n  - "))
}

// checkExecutor refuses an executor this build cannot run lanes on, rather
// than run them elsewhere than the person asked: executor nats runs its
// fleet on the server embedded in the daemon, not yet on a NATS server of
// the person's own (nats.url).
func checkExecutor(cfg *config.Config) error {
	if cfg.Executor == config.ExecutorNATS && cfg.NATS.URL != "" {
		return fmt.Errorf("nats.url is %q, and this version runs its fleet only on the NATS server embedded in the daemon: remove nats.url (workers then connect to the daemon's own server, nats.listen)", cfg.NATS.URL)
	}
	return nil
}

// checkGoal makes sure an initializer, if one is needed, has a goal: a
// project without a feature list is started from its goal, and an
// initializer without one would invent a project.
func checkGoal(p paths.Project) error {
	if _, err := os.Stat(filepath.Join(p.Progress(), progress.FeatureListFile)); err == nil {
		return nil
	}
	if _, err := progress.ReadGoal(p.Progress()); err == nil {
		return nil
	}
	return fmt.Errorf("%s has no feature list and no goal to write one from: run `ctxgraphd init --goal TEXT` (or --goal-file F) there, or write %s",
		p.Dir, filepath.Join(paths.ProgressDir, progress.GoalFile))
}

// checkConfinement makes sure agents will run confined before anything is
// spent: the sandbox can run here, or the user turned confinement off, and
// then the log says so plainly.
func checkConfinement(ctx context.Context, cfg *config.Config, log *zap.Logger) error {
	if !cfg.Sandbox.Enabled {
		log.Warn("CONFINEMENT IS OFF (sandbox.enabled: false): agents' commands run unconfined and can write anywhere this user can; only the gates and the verdicts hold them")
		return nil
	}
	if err := sandbox.Check(ctx); err != nil {
		return fmt.Errorf("%w. Confinement is on by default; turning it off is possible only explicitly, with sandbox.enabled: false in .claude/ctxgraphd.yaml", err)
	}
	return nil
}

// checkJail makes sure, before anything is spent, that the daemon's own
// test runs can be confined here, or says plainly that they are not.
func checkJail(ctx context.Context, cfg *config.Config, j *judge.Judge, log *zap.Logger) error {
	switch {
	case !cfg.Sandbox.Enabled:
		log.Warn("the daemon's test runs are not confined either (sandbox.enabled: false): the agents' code runs with this user's powers when the daemon runs a feature's test")
		return nil
	case !sandbox.Confines:
		log.Warn("the daemon's test runs cannot be confined on this system (bubblewrap is Linux's): each runs in a throwaway checkout with an allow-listed environment, and nothing more")
		return nil
	}
	if err := j.CheckJail(ctx); err != nil {
		return fmt.Errorf("%w. Install bubblewrap (the agents' sandbox needs it too), or turn confinement off explicitly with sandbox.enabled: false in .claude/ctxgraphd.yaml", err)
	}
	return nil
}

// gateModes are the gates' modes from the configuration.
func gateModes(cfg *config.Config) gates.Modes {
	m := gates.Modes{}
	for name, mode := range cfg.Gates {
		m[name] = gates.Mode(mode)
	}
	return m
}

// isExecutable reports whether path is a regular file someone may execute.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// hookCommand is the hook the daemon's runs call: the lean ctxgraphd-hook
// beside this binary when it is there (make build puts it there), else this
// binary's own `hook` subcommand.
func hookCommand() (gates.HookCommand, error) {
	exe, err := os.Executable()
	if err != nil {
		return gates.HookCommand{}, fmt.Errorf("cannot find the ctxgraphd binary for the hooks: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return gates.HookCommand{}, fmt.Errorf("cannot find the ctxgraphd binary for the hooks: %w", err)
	}
	lean := filepath.Join(filepath.Dir(exe), "ctxgraphd-hook")
	if isExecutable(lean) {
		return gates.HookCommand{Path: lean}, nil
	}
	return gates.MainHook(exe), nil
}

func findProject(dir string) (paths.Project, error) {
	if dir != "" {
		p, err := paths.ForProject(dir)
		if err != nil {
			return p, err
		}
		if _, err := os.Stat(p.Progress()); err != nil {
			return p, fmt.Errorf("%s is not a ctxgraphd project (no .claude/progress); run `ctxgraphd init` there first", p.Dir)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return paths.Project{}, err
	}
	return paths.FindProject(wd)
}

// parseSets turns repeated --set key=value into config flags.
func parseSets(sets []string) (map[string]string, error) {
	flags := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want key=value, e.g. --set agent.timeout=10m", s)
		}
		flags[k] = v
	}
	return flags, nil
}

// newLogger builds the daemon's logger: to stderr (the journal, launchd's
// log file), with the project on every line.
func newLogger(c config.Log, proj paths.Project) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level %q: %w", c.Level, err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	if c.Format != "json" {
		zc.Encoding = "console"
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	l, err := zc.Build(zap.WithCaller(false))
	if err != nil {
		return nil, err
	}
	return l.With(zap.String("project", proj.ID)), nil
}
