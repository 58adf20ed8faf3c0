// Package agents runs the real Claude Code CLI (`claude -p`) as one agent
// run: it builds the command line and environment of a run, reads
// the stream-json output live to EOF, and supervises the process group with
// a wall timeout and an idle timeout so that no run outlives its welcome and
// no process outlives its run.
//
// It also holds what a run is told: the command object (the JSON handoff),
// and the three role prompts, embedded and overridable per project.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"go.uber.org/zap"
)

// Options configure a Runner; they come from the daemon's configuration.
type Options struct {
	Command      string        // the claude binary, looked up on PATH when it has no slash
	Model        string        // --model, when set
	Timeout      time.Duration // wall time of one run; 0: none
	IdleTimeout  time.Duration // longest silence on the stream; 0: none
	MaxTurns     int           // --max-turns, when > 0
	MaxBudgetUSD float64       // --max-budget-usd, when > 0 and the Spec sets none
	AllowRoot    bool          // agent.allow_root: opt in to IS_SANDBOX=1 as root
	SocketPath   string        // CTXGRAPH_SOCKET for the hooks
	BaseEnv      []string      // the environment runs start from; nil: the daemon's
	// Limits bound every process of a run (sandbox.max_*), set with the
	// util-linux program at Prlimit; without it, runs are not bounded.
	Limits    sandbox.Limits
	Prlimit   string
	KillGrace time.Duration // SIGTERM to SIGKILL; 0: DefaultKillGrace
	// StuckAfter: the same tool call failing this many times in a row,
	// with nothing succeeding in between, stops the run; 0: never.
	StuckAfter int
	// Keeper is the command that runs claude under a keeper
	// (procgroup.Keep: `ctxgraphd keep --`), so that nothing of a run
	// outlives the daemon or worker that started it, kill -9 included;
	// nil, or where procgroup.KeepWorks is false: claude is started
	// itself, and what it left outside its group is found when the
	// daemon starts again.
	Keeper []string
}

// DefaultKillGrace is how long a process group gets between SIGTERM and
// SIGKILL. Claude Code flushes its session file on SIGTERM, which is what
// lets a retry resume it.
const DefaultKillGrace = 3 * time.Second

// drainGrace bounds the wait for EOF after the run's process has exited:
// a grandchild that left the process group may hold stdout open forever.
const drainGrace = 2 * time.Second

// Spec is one run.
type Spec struct {
	RunID        string
	Role         role.Role
	FeatureID    string
	Attempt      int
	SessionID    string // the conversation: new for a fresh run, the old one to resume
	Resume       bool   // --resume SessionID instead of --session-id SessionID
	Prompt       string // with the command object
	SystemPrompt string // the role prompt, passed with --append-system-prompt
	// MCPConfig is the run's MCP servers (JSON), passed with --mcp-config.
	MCPConfig string
	Dir       string // the project directory, the run's working directory
	Settings  string // --settings: the hooks and the sandbox of ctxgraphd
	// Token is the run's secret (CTXGRAPH_TOKEN): its hooks present it, and
	// the daemon knows the run by it.
	Token        string
	ExtraEnv     []string
	MaxBudgetUSD float64 // overrides Options.MaxBudgetUSD when > 0

	// What Settings was made of, for an executor that runs the process on
	// another machine and remakes the settings there with its own paths
	// (fleet): the sandbox's policy (nil when the run is not confined),
	// and whether ctxgraphd's hooks are installed, with the PreToolUse
	// hook's matcher (gates.PreToolUseMatcher).
	Policy      *sandbox.Policy
	Hooks       bool
	HookMatcher string
	// Setup is the project's setup step (its setup:, the feature list's, or
	// the fetches the daemon makes by itself), which such an executor runs
	// in the clone it makes before the agent starts there; a local run's
	// tree was set up by the daemon before it.
	Setup string
}

// EndReason says why a run's process ended.
type EndReason string

// The ways a run ends.
const (
	EndExited      EndReason = "exited"       // the process ended by itself
	EndWallTimeout EndReason = "wall_timeout" // killed: agent.timeout
	EndIdleTimeout EndReason = "idle_timeout" // killed: no stream event for agent.idle_timeout
	EndStuck       EndReason = "stuck"        // killed: the same tool call failed agent.stuck_after times in a row
	EndCancelled   EndReason = "cancelled"    // killed: the daemon stopped or asked
	// EndAuthRefused: killed at the CLI's first retry of a request the API
	// refused for its credentials (an api_retry line of a 401). The CLI
	// would retry 10 times over minutes; a 401 does not heal by retrying.
	EndAuthRefused EndReason = "auth_refused"
	EndStartFailed EndReason = "start_failed" // never ran
)

// Event is one thing seen on a run's stream, for logs and `ctl watch`.
type Event struct {
	Time      time.Time
	RunID     string
	Kind      string // init, text, tool_use, tool_result, hook, api_retry, result, stream_error, worker
	Tool      string
	ToolUseID string // of a tool_use, and of the call a tool_result answers
	Detail    string
	IsError   bool
	SessionID string
	// CostUSD is, on a result event, the CLI's running total of the run's
	// cost at that point: what the stream showed, to which a worker's
	// figure for the whole run is held.
	CostUSD float64
}

// EventWorker is the kind of event that says which worker (Detail) runs
// the run, when an executor runs it on another machine; "" when it waits
// for one.
const EventWorker = "worker"

// Result is what a run came to, read from its exit and its stream.
type Result struct {
	RunID     string
	SessionID string
	StartedAt time.Time
	EndedAt   time.Time
	PID       int
	ExitCode  int // -1 when killed by a signal or never started
	Ended     EndReason
	// CPU is the CPU time of the claude process and of what it waited for
	// (its hooks, its tools' programs, its MCP servers), once it exited.
	CPU time.Duration

	SawInit           bool // the CLI began a session (its init line was read)
	SawResult         bool // a result line was read
	IsError           bool
	Subtype           string // of the result line: "success", SubtypeMaxBudget, …
	TerminalReason    string
	NumTurns          int
	CostUSD           float64
	APIErrorStatus    int
	RateLimitResetsAt time.Time
	// APIError is the CLI's name for the API error that ended the run
	// (authentication_failed, rate_limit, …), "" if none.
	APIError string
	// RetryDelay is the wait the CLI computed for its last retry of a
	// failed API call: the API's retry-after, when it sent one.
	RetryDelay time.Duration
	// StartupFailure is the CLI's startup_failure_reason: it could not start
	// the session at all ("sandbox_required_unavailable", …). No agent ran.
	StartupFailure string
	// SetupFailure says why the project's setup step failed in the clone
	// an executor made for the run (Spec.Setup), before any agent started.
	SetupFailure string
	// Workers name the workers the run failed on for their own reasons
	// (their CLI, login, sandbox or disk), when an executor ran it on
	// other machines and none of them could: the fix is on theirs.
	Workers []string
	Text    string // the result line's text, or the last assistant text
	Summary string // Text distilled to one short line
	// Stuck is what the run went round in circles on (EndStuck).
	Stuck      string
	ToolCalls  int
	StderrTail string
	Err        error // a start or supervision error, not an agent's failure
}

// SubtypeMaxBudget is the result's subtype when the CLI stopped a run at
// its --max-budget-usd.
const SubtypeMaxBudget = "error_max_budget_usd"

// OK reports whether the run ended by itself, said it succeeded, and exited 0.
func (r Result) OK() bool {
	return r.Ended == EndExited && r.SawResult && !r.IsError && r.ExitCode == 0
}

// Runner starts runs.
type Runner struct {
	opts Options
	log  *zap.Logger
}

// NewRunner returns a runner; log may be nil.
func NewRunner(opts Options, log *zap.Logger) *Runner {
	if opts.Command == "" {
		opts.Command = "claude"
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Runner{opts: opts, log: log}
}

// Args returns the command line of a run, without the binary. The prompt
// comes first, as NOTES.md advises: variadic flags would swallow it at the
// end.
func (r *Runner) Args(spec Spec) []string {
	args := []string{"-p"}
	promptLast := strings.HasPrefix(spec.Prompt, "-")
	if !promptLast {
		args = append(args, spec.Prompt)
	}
	args = append(args, "--output-format", "stream-json", "--verbose")
	if spec.Resume {
		args = append(args, "--resume", spec.SessionID)
	} else if spec.SessionID != "" {
		args = append(args, "--session-id", spec.SessionID)
	}
	args = append(args, "--permission-mode", "bypassPermissions")
	if spec.Settings != "" {
		args = append(args, "--settings", spec.Settings)
	}
	if spec.SystemPrompt != "" {
		args = append(args, "--append-system-prompt", spec.SystemPrompt)
	}
	if spec.MCPConfig != "" {
		// Variadic: the flags after it end its list.
		args = append(args, "--mcp-config", spec.MCPConfig)
	}
	if r.opts.MaxTurns > 0 {
		args = append(args, "--max-turns", fmt.Sprint(r.opts.MaxTurns))
	}
	budget := r.opts.MaxBudgetUSD
	if spec.MaxBudgetUSD > 0 {
		budget = spec.MaxBudgetUSD
	}
	if budget > 0 {
		args = append(args, "--max-budget-usd", fmt.Sprint(budget))
	}
	if r.opts.Model != "" {
		args = append(args, "--model", r.opts.Model)
	}
	if promptLast {
		args = append(args, "--", spec.Prompt)
	}
	return args
}

// proxyVars are the variables through which a proxy reaches the CLI.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// bypassProxyForLoopback keeps the CLI from sending its requests to the
// daemon's MCP tools, on 127.0.0.1, through a proxy the environment names
// (a company's, most often), which could not reach them: 127.0.0.1 is
// added to NO_PROXY and no_proxy. An environment without a proxy is
// returned as it is.
func bypassProxyForLoopback(env []string) []string {
	if !slices.ContainsFunc(proxyVars, func(v string) bool { return lookupEnv(env, v) != "" }) {
		return env
	}
	for _, v := range []string{"NO_PROXY", "no_proxy"} {
		list := lookupEnv(env, v)
		if slices.Contains(strings.Split(list, ","), "127.0.0.1") {
			continue
		}
		if list != "" {
			list += ","
		}
		env = append(env, v+"="+list+"127.0.0.1")
	}
	return env
}

// nestedVars make Claude Code believe it runs inside another session, or
// leak that session's identity into the run.
// NOTIFY_SOCKET is the daemon's line to systemd, not the agents'.
var nestedVars = []string{
	"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_CHILD_SESSION",
	"CLAUDE_PID", "CLAUDE_PROJECT_DIR", "CLAUDE_CODE_SSE_PORT", "NOTIFY_SOCKET",
}

// backgroundTasks turns off what Claude Code runs in the background: a
// command still running at its timeout would otherwise be moved there and
// go on beside the run's next calls, where the gates' judgement of a write
// and the write itself could be told apart by a link it swaps between them
// (gates' runs_beside refuses the calls that ask for the background; this
// is the one that does not ask). A command now ends at its timeout.
const backgroundTasks = "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS"

// Env returns the environment of a run: the base environment minus nested
// and stale CTXGRAPH_* variables, plus the run's identity for the hooks.
func (r *Runner) Env(spec Spec) []string {
	base := r.opts.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	drop := map[string]bool{backgroundTasks: true}
	for _, k := range nestedVars {
		drop[k] = true
	}
	env := make([]string, 0, len(base)+8)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "CTXGRAPH_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"CTXGRAPH_AGENT="+string(spec.Role),
		"CTXGRAPH_FEATURE="+spec.FeatureID,
		"CTXGRAPH_RUN="+spec.RunID,
		"CTXGRAPH_SOCKET="+r.opts.SocketPath,
		control.RunTokenEnv+"="+spec.Token,
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		backgroundTasks+"=1",
	)
	if spec.MCPConfig != "" {
		// MCP tools are otherwise deferred behind a tool search the model
		// must think of first: ctxgraphd's few tools are meant to be seen.
		env = append(env, "ENABLE_TOOL_SEARCH=false")
		env = bypassProxyForLoopback(env)
	}
	if r.opts.AllowRoot && os.Geteuid() == 0 && !hasVar(env, "IS_SANDBOX", "1") {
		env = append(env, "IS_SANDBOX=1")
	}
	return append(env, spec.ExtraEnv...)
}

func hasVar(env []string, key, value string) bool {
	for _, kv := range env {
		if kv == key+"="+value {
			return true
		}
	}
	return false
}

// CheckRoot refuses to run agents as root unless the user opted in
// (IS_SANDBOX=1 or agent.allow_root): Claude Code's bypassPermissions as
// root is only safe in a sandbox, and only the user can say that the
// machine is one.
func CheckRoot(allowRoot bool, env []string, where Settings) error {
	if os.Geteuid() != 0 || allowRoot || hasVar(env, "IS_SANDBOX", "1") {
		return nil
	}
	who := "the daemon"
	if where == WorkerSettings {
		who = "the worker"
	}
	return errors.New("ctxgraphd is running as root, and Claude Code runs agents as root only in a sandbox: " +
		"run " + who + " as an ordinary user, or, if this machine is a sandbox, opt in with " + where.AllowRoot)
}

// Run starts one run and supervises it to its end: every process of its
// group is gone when Run returns. onStart gets the pid (which is also the
// process group id) once the process runs; onEvent gets stream events as
// they come. Both are called from Run's goroutine and must not block long.
func (r *Runner) Run(ctx context.Context, spec Spec, onStart func(pid int), onEvent func(Event)) Result {
	res := Result{RunID: spec.RunID, SessionID: spec.SessionID, StartedAt: time.Now(), ExitCode: -1}
	log := r.log.With(zap.String("run", spec.RunID))
	if onEvent == nil {
		onEvent = func(Event) {}
	}

	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return startFailed(res, fmt.Errorf("stdout pipe: %w", err))
	}
	defer stdout.Close()
	stderr := &tailBuffer{max: 4 << 10}
	argv := append([]string{r.opts.Command}, r.Args(spec)...)
	if r.opts.Limits != (sandbox.Limits{}) && r.opts.Prlimit != "" {
		// prlimit sets the bounds on itself and executes claude in its
		// place: the pid is claude's, and every program of the run,
		// confined or not, inherits them.
		if abs, err := exec.LookPath(r.opts.Command); err == nil {
			argv[0] = abs
		}
		argv = r.opts.Limits.Wrap(r.opts.Prlimit, argv)
	}
	attr := sysProcAttr()
	var keeperEnd *os.File
	if len(r.opts.Keeper) > 0 && procgroup.KeepWorks {
		// The keeper's end of the pipe it watches; this end, kept
		// until the run is over, closes with the daemon however it
		// dies, and the keeper then kills the run's whole tree.
		var ours *os.File
		if keeperEnd, ours, err = os.Pipe(); err != nil {
			return startFailed(res, fmt.Errorf("the keeper's pipe: %w", err))
		}
		defer ours.Close()
		argv = append(slices.Clone(r.opts.Keeper), argv...)
		attr = keeperProcAttr()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = r.Env(spec)
	cmd.Stdin = nil // /dev/null: an open pipe makes claude wait for input
	cmd.Stdout = stdoutW
	cmd.Stderr = stderr
	cmd.SysProcAttr = attr
	if keeperEnd != nil {
		cmd.ExtraFiles = []*os.File{keeperEnd} // procgroup.KeeperFD
	}
	// stderr is copied through a pipe that a process which left the group
	// could hold open forever; Wait gives up on it after this long.
	cmd.WaitDelay = drainGrace
	err = cmd.Start()
	stdoutW.Close() // the child holds its own copy; EOF comes when every holder is gone
	if keeperEnd != nil {
		keeperEnd.Close()
	}
	if err != nil {
		return startFailed(res, fmt.Errorf("start %s: %w", r.opts.Command, err))
	}
	res.PID = cmd.Process.Pid
	if onStart != nil {
		onStart(res.PID)
	}
	log.Debug("agent started", zap.Int("pid", res.PID), zap.String("role", string(spec.Role)))

	msgs := make(chan Message, 64)
	readDone := make(chan error, 1)
	go func() {
		defer close(msgs)
		dec := NewDecoder(stdout)
		for {
			m, err := dec.Next()
			var le *LineError
			switch {
			case err == nil:
				msgs <- m
			case errors.As(err, &le):
				msgs <- Message{Type: "stream_error", Result: le.Error()}
			default:
				if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
					err = nil
				}
				readDone <- err
				return
			}
		}
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var (
		wall, idle, grace, drain <-chan time.Time
		idleTimer                *time.Timer
		killing                  bool
	)
	if r.opts.Timeout > 0 {
		t := time.NewTimer(r.opts.Timeout)
		defer t.Stop()
		wall = t.C
	}
	if r.opts.IdleTimeout > 0 {
		idleTimer = time.NewTimer(r.opts.IdleTimeout)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	kill := func(why EndReason) {
		if killing {
			return
		}
		killing = true
		res.Ended = why
		log.Info("stopping agent", zap.String("why", string(why)), zap.Int("pid", res.PID))
		procgroup.Signal(res.PID, syscall.SIGTERM)
		t := time.NewTimer(r.opts.KillGrace)
		grace = t.C
	}
	var lastText string
	stuck := newStuckWatch(r.opts.StuckAfter)
	exited, eof := false, false
	done := ctx.Done()
	for !exited || !eof {
		select {
		case m, ok := <-msgs:
			if !ok {
				eof, msgs = true, nil
				continue
			}
			if idleTimer != nil && !killing {
				idleTimer.Reset(r.opts.IdleTimeout)
			}
			on, refused := r.absorb(&res, &lastText, m, stuck, onEvent)
			switch {
			case killing:
			case refused:
				kill(EndAuthRefused)
			case on != "":
				res.Stuck = on
				kill(EndStuck)
			}
		case err := <-waitDone:
			exited = true
			if err != nil {
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee):
				case errors.Is(err, exec.ErrWaitDelay):
					log.Warn("agent's stderr still open after it exited; a process left its group", zap.Int("pid", res.PID))
				default:
					res.Err = err
				}
			}
			res.ExitCode = cmd.ProcessState.ExitCode()
			res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			// Whatever it left behind in its group goes with it.
			procgroup.Kill(res.PID)
			if !eof {
				drain = time.After(drainGrace)
			}
		case <-drain:
			log.Warn("agent's stdout still open after it exited; a process left its group", zap.Int("pid", res.PID))
			stdout.Close()
			drain = nil
		case <-done:
			done = nil
			kill(EndCancelled)
		case <-wall:
			kill(EndWallTimeout)
		case <-idle:
			kill(EndIdleTimeout)
		case <-grace:
			grace = nil
			procgroup.Kill(res.PID)
		}
	}
	// SIGKILL is delivered asynchronously: wait, briefly, until the group
	// is really empty, so that "the run is over" means no process is left.
	procgroup.KillAndWait(res.PID, drainGrace)
	if spec.RunID != "" {
		if n := killEscapees(spec.RunID, r.opts.SocketPath); n > 0 {
			log.Warn("killed processes of the run that had left its process group", zap.Int("processes", n))
		}
	}
	if err := <-readDone; err != nil && res.Err == nil {
		res.Err = fmt.Errorf("reading the agent's output: %w", err)
	}
	if res.Ended == "" {
		res.Ended = EndExited
	}
	res.EndedAt = time.Now()
	if res.Text == "" {
		res.Text = lastText
	}
	res.StderrTail = stderr.String()
	res.Summary = summarize(res)
	return res
}

// absorb folds one stream message into the result and passes it on as an
// event. It returns what the run is stuck on, once it is, and whether the
// API refused the run's credentials.
func (r *Runner) absorb(res *Result, lastText *string, m Message, stuck *stuckWatch, onEvent func(Event)) (stuckOn string, refused bool) {
	ev := Event{Time: time.Now(), RunID: res.RunID, SessionID: m.SessionID}
	if m.SessionID != "" {
		res.SessionID = m.SessionID
	}
	switch m.Type {
	case "system":
		switch m.Subtype {
		case "init":
			ev.Kind = "init"
			res.SawInit = true
		case "hook_started", "hook_response":
			ev.Kind, ev.Detail = "hook", m.HookEvent
		case "api_retry":
			ev.Kind, ev.Detail, ev.IsError = "api_retry", fmt.Sprintf("status %d", m.ErrorStatus), true
			if m.RetryDelayMS > 0 {
				res.RetryDelay = time.Duration(m.RetryDelayMS) * time.Millisecond
			}
			if authRefused(m) {
				// Kept only here: a retry of a limit or an overload the
				// run got over must not read as the run's failure.
				res.APIErrorStatus, res.APIError = m.ErrorStatus, firstNonEmpty(m.ErrorName(), "authentication_failed")
				refused = true
			}
		default:
			ev.Kind, ev.Detail = "system", m.Subtype
		}
		onEvent(ev)
	case "rate_limit_event":
		res.limited(m.RateLimitInfo)
	case "assistant", "user":
		if m.APIErrorStatus != 0 {
			res.APIErrorStatus = m.APIErrorStatus
		}
		if e := m.ErrorName(); e != "" && m.Type == "assistant" {
			res.APIError = e
			if m.APIErrorParams != nil {
				res.limited(m.APIErrorParams.RateLimitInfo)
			}
		}
		if m.Message == nil {
			return "", false
		}
		for _, b := range m.Message.Content {
			e := ev
			switch b.Type {
			case "text":
				if m.Type == "assistant" && m.ParentToolUseID == "" && strings.TrimSpace(b.Text) != "" {
					*lastText = b.Text
				}
				e.Kind, e.Detail = "text", textcut.Cut(b.Text, 200)
			case "tool_use":
				if m.ParentToolUseID == "" {
					res.ToolCalls++
					stuck.call(b.ID, b.Name, b.Input)
				}
				e.Kind, e.Tool, e.Detail, e.ToolUseID = "tool_use", b.Name, toolDetail(b.Name, b.Input), b.ID
			case "tool_result":
				e.Kind, e.IsError, e.ToolUseID = "tool_result", b.IsError, b.ToolUseID
				if on := stuck.result(b.ToolUseID, b.IsError); on != "" {
					stuckOn = on
				}
			default:
				continue
			}
			onEvent(e)
		}
	case "result":
		// Background subagents can add a second result: the last one read
		// is the run's, and cost and turns are the CLI's running totals.
		res.SawResult = true
		res.IsError = m.IsError
		res.Subtype = m.Subtype
		res.TerminalReason = m.TerminalReason
		res.NumTurns = m.NumTurns
		res.CostUSD = m.TotalCostUSD
		if m.StartupFailureReason != "" {
			res.StartupFailure = m.StartupFailureReason
		}
		if m.APIErrorStatus != 0 {
			res.APIErrorStatus = m.APIErrorStatus
		}
		if t := strings.TrimSpace(m.Result); t != "" {
			res.Text = t
		} else if len(m.Errors) > 0 {
			res.Text = strings.Join(m.Errors, "; ")
		}
		ev.Kind, ev.IsError, ev.Detail, ev.CostUSD = "result", m.IsError, m.Subtype, m.TotalCostUSD
		onEvent(ev)
	case "stream_error":
		ev.Kind, ev.IsError, ev.Detail = "stream_error", true, m.Result
		onEvent(ev)
	}
	return stuckOn, refused
}

// authRefused reports whether an api_retry line retries a request the API
// refused for the run's credentials: a 401, or an error the CLI names as
// an account's (see cliErrors). Retrying the same key cannot heal it.
func authRefused(m Message) bool {
	return m.ErrorStatus == 401 || cliErrors[m.ErrorName()] == FailAuth
}

// limited keeps when a limit that refuses requests resets.
func (res *Result) limited(info *RateLimitInfo) {
	if info != nil && info.ResetsAt > 0 && info.Status == "rejected" {
		res.RateLimitResetsAt = time.Unix(info.ResetsAt, 0)
	}
}

// toolDetail picks the one input field that says what a tool call does.
func toolDetail(tool string, input json.RawMessage) string {
	var in map[string]any
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "description"} {
		if s, ok := in[k].(string); ok && s != "" {
			return textcut.Cut(s, 200)
		}
	}
	return ""
}

// summarize distils a run into one line to keep with it: what the agent
// said, in its words, but without the start-up noise of the user's shell
// tools that it quoted from its commands' output.
func summarize(res Result) string {
	text := strings.Join(strings.Fields(diagnose.Quiet(res.Text)), " ")
	switch {
	case res.Ended == EndStartFailed:
		return fmt.Sprintf("did not start: %v", res.Err)
	case res.Ended == EndWallTimeout:
		return prefixed("killed after the wall timeout", text)
	case res.Ended == EndIdleTimeout:
		return prefixed("killed after the idle timeout", text)
	case res.Ended == EndStuck:
		return "stopped as stuck: " + res.Stuck
	case res.Ended == EndCancelled:
		return prefixed("stopped", text)
	case res.Ended == EndAuthRefused:
		return fmt.Sprintf("stopped: the API refused the credentials (HTTP %d, %s)", res.APIErrorStatus, res.APIError)
	case !res.SawResult:
		tail := strings.Join(strings.Fields(diagnose.Quiet(res.StderrTail)), " ")
		return prefixed(fmt.Sprintf("exited %d without a result", res.ExitCode), firstNonEmpty(tail, text))
	case res.IsError:
		return prefixed(firstNonEmpty(res.Subtype, "error"), text)
	}
	return textcut.Cut(text, 300)
}

func prefixed(what, text string) string {
	if text == "" {
		return what
	}
	return textcut.Cut(what+": "+text, 300)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func startFailed(res Result, err error) Result {
	res.Ended, res.Err, res.EndedAt = EndStartFailed, err, time.Now()
	res.Summary = summarize(res)
	return res
}

// tailBuffer keeps the last max bytes written to it: a run's stderr can be
// long, and only its end explains a crash.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
