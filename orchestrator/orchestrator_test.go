package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script plays one run in-process: it changes files as an agent would and
// returns the run's result. These unit tests exercise the loop's rules; the
// end-to-end tests (package e2e) run the real Claude Code CLI.
type script func(ctx context.Context, spec agents.Spec, h *harness) agents.Result

type fakeRunner struct {
	h      *harness
	mu     sync.Mutex
	specs  []agents.Spec
	script map[role.Role]script
	// silent runs call a gated tool (a Write, on their stream, answered)
	// and none of their hooks ever reaches the daemon, as when hooks are
	// turned off; every other run first reads the goal, its hook called
	// between the call and its answer, as Claude Code does.
	silent bool
	// silentTool is the tool a silent run calls; "": Write. silentError:
	// the call fails (a file tool's, refused on its input).
	silentTool  string
	silentError bool
	// silentUnanswered: the silent call's answer never comes (the run
	// ends while the tool is still at work).
	silentUnanswered bool
	// firstCall is how long an honest run's first call (the read of the
	// goal) goes on after its hook, before its answer.
	firstCall time.Duration
	// onRun, when set, is called first thing in Run, before the process
	// would start: what the store holds then is what a crash would leave.
	onRun func(agents.Spec)
}

func (f *fakeRunner) Run(ctx context.Context, spec agents.Spec, onStart func(int), onEvent func(agents.Event)) agents.Result {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	s, silent, silentTool, silentError, firstCall, onRun := f.script[spec.Role], f.silent, cmp.Or(f.silentTool, "Write"), f.silentError, f.firstCall, f.onRun
	unanswered := f.silentUnanswered
	f.mu.Unlock()
	if onRun != nil {
		onRun(spec)
	}
	onStart(os.Getpid())
	if silent {
		onEvent(agents.Event{Kind: "tool_use", Tool: silentTool, ToolUseID: "toolu_first"})
		if !unanswered {
			onEvent(agents.Event{Kind: "tool_result", ToolUseID: "toolu_first", IsError: silentError})
		}
	} else {
		onEvent(agents.Event{Kind: "tool_use", Tool: "Read", ToolUseID: "toolu_first"})
		f.h.readGoal(spec, "toolu_first")
		time.Sleep(firstCall) // not a synchronisation: the call goes on that long
		onEvent(agents.Event{Kind: "tool_result", ToolUseID: "toolu_first"})
	}
	res := s(ctx, spec, f.h)
	res.RunID, res.SessionID = spec.RunID, spec.SessionID
	if res.Ended == "" {
		res.Ended = agents.EndExited
	}
	return res
}

func (f *fakeRunner) runs() []agents.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agents.Spec(nil), f.specs...)
}

type harness struct {
	t      *testing.T
	proj   paths.Project
	cfg    *config.Config
	st     *store.Store
	runner *fakeRunner
	// current is the orchestrator under test, which the scripts' hooks talk to.
	current *Orchestrator
	// logOpts adjust the loop's logger (a test that reads the log tees it).
	logOpts []zap.Option
	// mcpURL is where the daemon would serve its MCP tools ("": nowhere).
	mcpURL string
	// faults, when set, stands between st and the loop and its judge, and
	// fails the writes a test names (store_test.go).
	faults *faultyStore
	// setup runs the project's setup step (nil: none); copies are the
	// person's files of lanes.copy.
	setup  *sandbox.Setup
	copies lanecopy.Files
	// freePort, when set, offers the lanes' ports in place of the
	// machine's free ones.
	freePort func() int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	rt, err := os.MkdirTemp("", "cgo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, paths.ProgressDir), 0o755)
	if err := progress.WriteGoal(filepath.Join(dir, paths.ProgressDir), "a project of a few features"); err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	proj, err := paths.ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Limits.Debounce = 5 * time.Millisecond
	h := &harness{t: t, proj: proj, cfg: cfg}
	h.runner = &fakeRunner{h: h, script: map[role.Role]script{
		role.Initializer: initializerWrites(2),
		role.Coder:       coderCompletes,
		role.Tester:      testerRunsTheTest,
	}}
	h.reopen()
	return h
}

func (h *harness) reopen() {
	h.t.Helper()
	if h.st != nil {
		h.st.Close()
	}
	st, err := store.Open(h.proj.StateDir, time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	h.st = st
	h.t.Cleanup(func() { st.Close() })
}

func (h *harness) orchestrator(exitWhenDone bool) *Orchestrator {
	h.t.Helper()
	ctx := context.Background()
	// As the daemon opens it: lanes.copy's files are never snapshotted.
	repo, err := gitrepo.Open(ctx, gitrepo.Options{Dir: h.proj.Dir, Index: filepath.Join(h.proj.StateDir, "snapshot.index"), Exclude: append([]string{".claude"}, h.copies.Names()...)})
	if err != nil {
		h.t.Fatal(err)
	}
	modes := gates.Modes{}
	for g, m := range h.cfg.Gates {
		modes[g] = gates.Mode(m)
	}
	log := zaptest.NewLogger(h.t, zaptest.WrapOptions(h.logOpts...))
	var st interface {
		StateOfRecord
		judge.Records
	} = h.st
	if h.faults != nil {
		h.faults.Store = h.st
		st = h.faults
	}
	// The loop's tests watch the daemon's test runs from outside (their
	// pids, files they write): unconfined, in their checkouts. The jail is
	// judge's and sandbox's to test, and the e2e tests run it whole.
	j := judge.New(judge.Options{Project: h.proj, Modes: modes, Records: st, Repo: repo, Jail: sandbox.TestJail{Env: os.Environ(), Off: true},
		ProtectedGlobs: h.cfg.Protected, Writable: []string{os.TempDir()}, Log: log.Named("judge"), Copies: h.copies})
	o, err := New(Options{Project: h.proj, Config: h.cfg, Store: st, Runner: h.runner, Judge: j, Repo: repo, Log: log,
		ExitWhenDone: exitWhenDone, HookCommand: "ctxgraphd hook", MCPURL: h.mcpURL, Setup: h.setup})
	if err != nil {
		h.t.Fatal(err)
	}
	if h.freePort != nil {
		o.freePort = h.freePort
	}
	h.current = o
	return o
}

// runToEnd runs a loop with ExitWhenDone and returns its error.
func (h *harness) runToEnd() error {
	h.t.Helper()
	return h.runToEndWithin(time.Minute)
}

// session is what the store holds now; a store that cannot be read ends
// the test.
func (h *harness) session() store.State {
	h.t.Helper()
	st, err := h.st.Load()
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// runToEndWithin is runToEnd with a deadline of d, after which the loop is
// shut down (and Run returns nil): a test of a timer uses a short one, so
// that a timer that does not fire fails it in seconds.
func (h *harness) runToEndWithin(d time.Duration) error {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.orchestrator(true).Run(ctx)
}

func (h *harness) list() *progress.List {
	h.t.Helper()
	l, _, err := progress.ReadFeatureList(h.proj.Progress())
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

func (h *harness) edit(fn func(l *progress.List)) {
	h.t.Helper()
	l := h.list()
	fn(l)
	if _, err := progress.WriteFeatureList(h.proj.Progress(), l); err != nil {
		h.t.Fatal(err)
	}
}

// writeIn and editIn are write and edit in the work tree of the run of
// spec: the project's, or its lane's.
func (h *harness) writeIn(spec agents.Spec, rel, content string) {
	h.t.Helper()
	p := filepath.Join(spec.Dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) editIn(spec agents.Spec, fn func(l *progress.List)) {
	h.t.Helper()
	dir := filepath.Join(spec.Dir, paths.ProgressDir)
	l, _, err := progress.ReadFeatureList(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	fn(l)
	if _, err := progress.WriteFeatureList(dir, l); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) write(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.proj.Dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func summary(l *progress.List) string {
	var parts []string
	for _, f := range l.Features {
		s := string(f.Status)
		if f.Tested {
			s = "tested"
		}
		parts = append(parts, f.ID+"="+s)
	}
	return strings.Join(parts, " ")
}

// The agents of these tests.

func initializerWrites(n int) script {
	return func(_ context.Context, _ agents.Spec, h *harness) agents.Result {
		l := &progress.List{Version: 1}
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("F-%03d", i)
			h.write("tests/"+id+".sh", fmt.Sprintf("#!/bin/sh\ngrep -qx '%s works' src/%s.txt\n", id, id))
			l.Features = append(l.Features, progress.Feature{ID: id, Title: "feature " + id, Test: "sh tests/" + id + ".sh", Status: progress.Pending, Scope: []string{"src/" + id + ".txt"}})
		}
		progress.WriteFeatureList(h.proj.Progress(), l)
		return agents.Result{Summary: "wrote the list", NumTurns: 2}
	}
}

func coderCompletes(_ context.Context, spec agents.Spec, h *harness) agents.Result {
	h.writeIn(spec, "src/"+spec.FeatureID+".txt", spec.FeatureID+" works\n")
	h.editIn(spec, func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
	return agents.Result{Summary: "implemented", NumTurns: 3, CostUSD: 0.01}
}

// testerRunsTheTest reports, as the hooks would, a passing run of the
// feature's test, leaves evidence and claims tested.
func testerRunsTheTest(_ context.Context, spec agents.Spec, h *harness) agents.Result {
	return testerClaims(true)(context.Background(), spec, h)
}

func testerClaims(runTest bool) script {
	return func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		if runTest {
			h.hook("post-tool-use", spec, map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash",
				"tool_input": map[string]any{"command": "sh tests/" + spec.FeatureID + ".sh"}, "tool_response": map[string]any{"stdout": "", "stderr": ""}})
		}
		ev := ".claude/progress/evidence/" + spec.FeatureID + "/a.log"
		h.writeIn(spec, ev, "ok\n")
		h.editIn(spec, func(l *progress.List) {
			f := l.Feature(spec.FeatureID)
			f.Tested, f.Evidence = true, []string{ev}
		})
		return agents.Result{Summary: "passed", NumTurns: 3}
	}
}

// hook sends a hook event to the running orchestrator, as `ctxgraphd hook`
// does over the socket.
func (h *harness) hook(event string, spec agents.Spec, payload map[string]any) *control.HookDecision {
	h.t.Helper()
	data, _ := json.Marshal(payload)
	resp, err := h.current.opts.Judge.Hook(context.Background(), spec.Token, control.HookRequest{Event: event, Payload: data})
	if err != nil {
		h.t.Errorf("hook %s: %v", event, err)
		return nil
	}
	return resp.Decision
}

func roles(specs []agents.Spec) string {
	var out []string
	for _, s := range specs {
		r := strings.TrimSuffix(string(s.Role), "-agent")
		if s.FeatureID != "" {
			r += ":" + s.FeatureID
		}
		out = append(out, r)
	}
	return strings.Join(out, " ")
}

func TestLoopHappyPath(t *testing.T) {
	h := newHarness(t)
	if err := h.runToEnd(); err != nil {
		t.Fatalf("loop: %v", err)
	}
	if got, want := summary(h.list()), "F-001=tested F-002=tested"; got != want {
		t.Errorf("features = %s, want %s", got, want)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 tester:F-001 coding:F-002 tester:F-002"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	// Every transition was persisted, in order, and the state ends done.
	sess := h.session()
	if sess.Session.State != "done" {
		t.Errorf("stored state = %q, want done", sess.Session.State)
	}
	trs, err := h.st.Transitions()
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) < 6 {
		t.Errorf("only %d transitions stored", len(trs))
	}
	// The mirror is written for people and tools.
	var mirror map[string]any
	data, err := os.ReadFile(filepath.Join(h.proj.Progress(), progress.SessionStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &mirror); err != nil {
		t.Fatalf("session-state.json: %v", err)
	}
}

func TestCommandObjectHandsOffTheFeature(t *testing.T) {
	h := newHarness(t)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	specs := h.runner.runs()
	cmd, err := agents.ParseCommand(specs[2].Prompt)
	if err != nil {
		t.Fatalf("tester prompt: %v\n%s", err, specs[2].Prompt)
	}
	if cmd.Agent != role.Tester || cmd.Task != "validate_feature" || cmd.Context.FeatureID != "F-001" ||
		cmd.SuccessCriteria.Test != "sh tests/F-001.sh" || !cmd.SuccessCriteria.TestsPass || cmd.NextAgent != "main" {
		t.Errorf("tester command = %+v", cmd)
	}
	if specs[2].SystemPrompt == "" {
		t.Error("no role prompt")
	}
}

// Every run is given the daemon's MCP server over HTTP, with its own token
// as the bearer: the one its hooks carry (in its environment), so that
// what it stores through the tools is its run's. The token itself is not
// in the arguments, which every user of the machine can read: Claude Code
// takes it from the run's environment. A daemon that serves none gives
// none.
func TestEveryRunGetsTheGraphWithItsOwnToken(t *testing.T) {
	h := newHarness(t)
	h.mcpURL = "http://127.0.0.1:4321/mcp"
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	specs := h.runner.runs()
	if len(specs) < 3 {
		t.Fatalf("%d runs", len(specs))
	}
	seen := map[string]bool{}
	for _, spec := range specs {
		var cfg struct {
			MCPServers map[string]struct {
				Type, URL string
				Headers   map[string]string
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(spec.MCPConfig), &cfg); err != nil {
			t.Fatalf("%s: --mcp-config %q: %v", spec.RunID, spec.MCPConfig, err)
		}
		s, ok := cfg.MCPServers[MCPServer]
		if len(cfg.MCPServers) != 1 || !ok || s.Type != "http" || s.URL != h.mcpURL {
			t.Errorf("%s: --mcp-config %s, want only %s over http at %s", spec.RunID, spec.MCPConfig, MCPServer, h.mcpURL)
		}
		if s.Headers["Authorization"] != "Bearer ${"+control.RunTokenEnv+"}" || spec.Token == "" || strings.Contains(spec.MCPConfig, spec.Token) || seen[spec.Token] {
			t.Errorf("%s: Authorization %q (token %q), want the run's own token, from its environment", spec.RunID, s.Headers["Authorization"], spec.Token)
		}
		seen[spec.Token] = true
	}

	h2 := newHarness(t)
	if err := h2.runToEnd(); err != nil {
		t.Fatal(err)
	}
	for _, spec := range h2.runner.runs() {
		if spec.MCPConfig != "" {
			t.Errorf("%s: --mcp-config %s from a daemon that serves no MCP", spec.RunID, spec.MCPConfig)
		}
	}
}

// A tester that claims tested without a recorded passing run of the test is
// refused every time; the feature ends blocked after max_retries+1 attempts
// and is never tested.
func TestVerdictWithoutTestRunIsRefused(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Tester] = testerClaims(false)
	// One blocked feature is under max_blocked: the session ends done.
	if err := h.runToEnd(); err != nil {
		t.Fatalf("loop: %v", err)
	}
	l := h.list()
	if f := l.Feature("F-001"); f.Tested || f.Status != progress.Blocked {
		t.Errorf("F-001 = status %s tested %v, want blocked and not tested", f.Status, f.Tested)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 tester:F-001 coding:F-001 tester:F-001 coding:F-001 tester:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) == 0 {
		t.Error("no violation trace for the unproven verdicts")
	}
	// The next coding attempt is told what was refused.
	cmd, err := agents.ParseCommand(h.runner.runs()[3].Prompt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cmd.Precedent, func(p string) bool { return strings.Contains(p, "refused by tested-needs-evidence") }) {
		t.Errorf("the retry's precedent does not carry the refusal: %q", cmd.Precedent)
	}
}

// A retry resumes the coding agent's own session and tells it what failed.
func TestRetryResumesCodingSession(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	failed := false
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if !failed {
			failed = true
			return agents.Result{Summary: "the test printed: expected 'F-001 works'", NumTurns: 2}
		}
		return testerRunsTheTest(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	specs := h.runner.runs()
	if got, want := roles(specs), "initializer coding:F-001 tester:F-001 coding:F-001 tester:F-001"; got != want {
		t.Fatalf("runs = %s, want %s", got, want)
	}
	first, retry := specs[1], specs[3]
	if !retry.Resume || retry.SessionID != first.SessionID || first.Resume {
		t.Errorf("retry: resume=%v session %s, first: resume=%v session %s", retry.Resume, retry.SessionID, first.Resume, first.SessionID)
	}
	cmd, err := agents.ParseCommand(retry.Prompt)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Task != "fix_feature" || cmd.Context.Attempt != 2 || !strings.Contains(cmd.Context.TesterReport, "expected") {
		t.Errorf("retry command = %+v", cmd)
	}
	if summary(h.list()) != "F-001=tested" {
		t.Errorf("features = %s", summary(h.list()))
	}
}

// Features run in dependency order, not list order.
func TestDependencyOrder(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := initializerWrites(2)(ctx, spec, h)
		h.edit(func(l *progress.List) { l.Feature("F-001").DependsOn = []string{"F-002"} })
		return res
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-002 tester:F-002 coding:F-001 tester:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
}

// A half-written feature list never replaces the last good one: the daemon
// reports the problem, keeps its state, and goes on when the file is fixed.
func TestMalformedFeatureListKeepsLastGoodState(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := h.orchestrator(false)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	eventually.True(t, 10*time.Second, func() bool { s, _ := o.Status(ctx); return s.State == "done" }, "the session done")

	good, err := os.ReadFile(filepath.Join(h.proj.Progress(), progress.FeatureListFile))
	if err != nil {
		t.Fatal(err)
	}
	h.write(".claude/progress/feature-list.json", `{"version": 1, "features": [{"id": "F-001", "title": `)
	eventually.True(t, 10*time.Second, func() bool { s, _ := o.Status(ctx); return strings.Contains(s.Message, "feature-list.json") }, "the status naming the broken feature-list.json")
	s, _ := o.Status(ctx)
	if s.Features.Tested != 1 {
		t.Errorf("after a bad write: %+v, want the last good counts", s.Features)
	}
	if _, err := o.Features(ctx); err != nil {
		t.Errorf("features: %v", err)
	}
	// Fixing the file clears the problem.
	h.write(".claude/progress/feature-list.json", string(good))
	eventually.True(t, 10*time.Second, func() bool { s, _ := o.Status(ctx); return !strings.Contains(s.Message, "feature-list.json:") }, "the problem cleared")
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Errorf("loop: %v", err)
	}
}

// running starts o's loop for the test; it ends with the test, before
// the store is closed.
func running(t *testing.T, o *Orchestrator) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// The budgets reach the rules: a session that has spent its budget stops
// before the next run, with a message that names the key.
func TestSessionBudgetStopsTheLoop(t *testing.T) {
	h := newHarness(t)
	h.cfg.Budget.SessionUSD = 0.005 // the coder costs 0.01
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "budget.session_usd") {
		t.Fatalf("loop ended with %v, want a stop naming budget.session_usd", err)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
}

// No run may spend past a budget: each is capped (--max-budget-usd) at
// budget.run_usd lowered to what is left of the session's and the
// feature's budgets, since a budget checked only between runs would be
// overshot by up to a whole run.
func TestRunsAreCappedAtWhatIsLeftOfTheBudgets(t *testing.T) {
	h := newHarness(t)
	h.cfg.Budget = config.Budget{RunUSD: 1, SessionUSD: 0.05, FeatureUSD: 0.025}
	h.runToEnd()
	var caps []string
	for _, s := range h.runner.runs() {
		caps = append(caps, fmt.Sprintf("%s:%s $%.3f", s.Role, s.FeatureID, s.MaxBudgetUSD))
	}
	// The initializer costs nothing, and no feature's budget holds it;
	// each coder costs 0.01.
	want := []string{"initializer-agent: $0.050", "coding-agent:F-001 $0.025", "tester-agent:F-001 $0.015", "coding-agent:F-002 $0.025", "tester-agent:F-002 $0.015"}
	if !slices.Equal(caps, want) {
		t.Errorf("runs' caps = %q, want %q", caps, want)
	}
}

// A run that Claude Code stopped at its cap has spent what the cap said.
// When the cap was what was left of the session's budget, the budget is
// spent, not the agent wrong: the session stops, the attempt is not
// charged. When the cap was the run's own budget.run_usd, the run was too
// costly by itself: a failed attempt, as ever.
func TestARunStoppedAtTheBudgetsRestIsNotCharged(t *testing.T) {
	atCap := func(_ context.Context, spec agents.Spec, _ *harness) agents.Result {
		return agents.Result{SawInit: true, SawResult: true, IsError: true, Subtype: agents.SubtypeMaxBudget, ExitCode: 1, CostUSD: spec.MaxBudgetUSD}
	}
	for _, tt := range []struct {
		name     string
		budget   config.Budget
		failures int
		failure  string
	}{
		{"the session's rest", config.Budget{RunUSD: 1, SessionUSD: 0.5}, 0, "out_of_budget"},
		{"the run's own cap", config.Budget{RunUSD: 0.2, SessionUSD: 5}, 1, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Budget = tt.budget
			h.runner.script[role.Initializer] = initializerWrites(1)
			h.runner.script[role.Coder] = atCap
			if tt.failures == 0 {
				err := h.runToEnd()
				if err == nil || !strings.Contains(err.Error(), "what was left of budget.session_usd") {
					t.Fatalf("loop ended with %v, want a stop that says the session's budget ran out in a run", err)
				}
			} else {
				h.cfg.Limits.MaxRetries = 0
				h.runToEnd()
			}
			sess := h.session()
			if c := sess.Counters["F-001"]; c.Failures != tt.failures {
				t.Errorf("F-001: %d failures (%q), want %d", c.Failures, c.LastFailure, tt.failures)
			}
			runs, err := h.st.Runs()
			if err != nil {
				t.Fatal(err)
			}
			if last := runs[len(runs)-1]; last.Role != string(role.Coder) || last.Failure != tt.failure {
				t.Errorf("last run: %s, failure %q; want the coder's, failure %q", last.Role, last.Failure, tt.failure)
			}
		})
	}
}

// blockUntilCancelled is a run whose hooks never check in: it runs until
// the daemon kills it.
// afterThinking is next, after the agent thinks for d: a run cancelled
// meanwhile ends there. The sleep is the run's length, not a
// synchronisation: the tests of hooks-live need a run that outlasts the
// timeout, and no event says that a run was spared.
func afterThinking(d time.Duration, next script) script {
	return func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		time.Sleep(d)
		if ctx.Err() != nil {
			return agents.Result{Ended: agents.EndCancelled}
		}
		return next(ctx, spec, h)
	}
}

// readGoal is the PreToolUse hook of spec's run reading the goal, in the
// call id: a hook that allows, as an honest run's first.
func (h *harness) readGoal(spec agents.Spec, id string) {
	h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_use_id": id,
		"tool_input": map[string]any{"file_path": filepath.Join(spec.Dir, paths.ProgressDir, progress.GoalFile)}})
}

// wantSilentHooksStop fails the test unless the loop stopped because the
// hooks of runs in a row never reached the daemon, after runs (as roles
// gives them).
func (h *harness) wantSilentHooksStop(err error, runs string) {
	h.t.Helper()
	if err == nil || !strings.Contains(err.Error(), "never reached the daemon") {
		h.t.Fatalf("loop ended with %v, want a stop that says the hooks never reached the daemon", err)
	}
	if got := roles(h.runner.runs()); got != runs {
		h.t.Errorf("runs = %s, want %s", got, runs)
	}
}

// noHooksLiveViolation fails the test if a run was held silent.
func (h *harness) noHooksLiveViolation(why string) {
	h.t.Helper()
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, tr := range trs {
		if tr.Gate == gates.HooksLive {
			h.t.Errorf("%s: %+v", why, tr.Event)
		}
	}
}

func blockUntilCancelled(ctx context.Context, _ agents.Spec, _ *harness) agents.Result {
	<-ctx.Done()
	return agents.Result{Ended: agents.EndCancelled, Summary: "stopped"}
}

// A run that calls a gated tool while none of its hooks reaches the
// daemon is killed: its gates are not running. A few in a row stop the session with a message
// that says what to check, and each is a hooks-live violation.
func TestHooksLiveKillsSilentRuns(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.script[role.Initializer] = blockUntilCancelled
	h.runner.silent = true
	err := h.runToEndWithin(15 * time.Second)
	h.wantSilentHooksStop(err, "initializer initializer initializer")
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		t.Fatal(err)
	}
	silent := 0
	for _, tr := range trs {
		if tr.Gate == "hooks-live" && tr.Code == "hooks_silent" {
			silent++
		}
	}
	if silent != 3 {
		t.Errorf("%d hooks-live violations, want 3", silent)
	}
}

// A gated call that goes on, unanswered, for hooks_live_timeout with no
// hook of its run reaching the daemon kills the run: the clock is the
// only witness, since no answer comes to show the hook was skipped.
func TestHooksLiveKillsARunWhoseGatedCallGoesOnWithoutItsHooks(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.script[role.Initializer] = blockUntilCancelled
	h.runner.silent, h.runner.silentUnanswered = true, true
	err := h.runToEndWithin(15 * time.Second)
	h.wantSilentHooksStop(err, "initializer initializer initializer")
}

// initializerInFlight starts the loop with an initializer that stays in
// flight until the loop is stopped, and returns once it is; stop ends the
// loop and fails the test if it did not end cleanly.
func (h *harness) initializerInFlight() (o *Orchestrator, stop func()) {
	h.t.Helper()
	inFlight := make(chan struct{})
	h.runner.script[role.Initializer] = func(ctx context.Context, _ agents.Spec, _ *harness) agents.Result {
		close(inFlight)
		<-ctx.Done()
		return agents.Result{Ended: agents.EndCancelled, Summary: "stopped"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o = h.orchestrator(true)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	<-inFlight
	return o, func() {
		h.t.Helper()
		cancel()
		if err := <-done; err != nil {
			h.t.Fatal(err)
		}
	}
}

// In warn mode the watch still says, while the run is in flight, that
// its hooks never reached the daemon: a hooks-live violation is recorded
// at the gated call, not only at the run's end, and the run is not killed.
func TestHooksLiveWarnsWhileTheRunIsInFlight(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates[gates.HooksLive] = config.Warn
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.silent = true
	_, stop := h.initializerInFlight()
	eventually.True(t, 10*time.Second, func() bool {
		trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
		return err == nil && slices.ContainsFunc(trs, func(tr control.Trace) bool { return tr.Gate == gates.HooksLive && tr.Code == "hooks_silent" })
	}, "a hooks-live violation while the silent run is in flight")
	if got := roles(h.runner.runs()); got != "initializer" {
		t.Errorf("runs = %s, want the one initializer, never killed and redone in warn mode", got)
	}
	stop()
}

// A run's pid is recorded as soon as it starts, in the store's record of
// the run in flight: a daemon that restarts after a crash finds the
// process by it.
func TestARunsPidIsRecordedWhenItStarts(t *testing.T) {
	h := newHarness(t)
	o, stop := h.initializerInFlight()
	eventually.True(t, 10*time.Second, func() bool {
		st, err := h.st.Load()
		return err == nil && st.Session.Run != nil && st.Session.Run.PID == os.Getpid() // the fake runner's process
	}, "the run in flight recorded with its pid")
	if runtime.GOOS == "linux" && !o.opts.Judge.IsRunProcess(os.Getpid()) {
		// The fake runner's process has no run's token in its environment:
		// only its pid, told to the judge at the start, says it is the run's.
		t.Error("the judge does not know the run's process by its pid")
	}
	stop()
}

// A run's token opens nothing once the run has ended: at the end of a
// night whose every run ended by itself, the judge knows none of the
// tokens its runs were given.
func TestARunsTokenOpensNothingAfterItsEnd(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(2)
	o := h.orchestrator(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	h.runner.mu.Lock()
	specs := slices.Clone(h.runner.specs)
	h.runner.mu.Unlock()
	if len(specs) < 5 {
		t.Fatalf("%d runs; want the initializer's and each feature's coder and tester", len(specs))
	}
	for _, spec := range specs {
		if a, ok := o.opts.Judge.ActorOf(spec.Token); ok {
			t.Errorf("the token of %s (%s %s), which ended, still opens the hooks", a.Run, a.Role, a.Feature)
		}
	}
}

// A run whose hooks check in is left alone, however long it takes, and
// however long a gated call of it goes on.
func TestHooksLiveSparesLiveRuns(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.firstCall = 100 * time.Millisecond
	// Killed live runs would be redone for ever (a live run resets the
	// count of silent ones): bounded, the loop ends with an error.
	h.runner.script[role.Initializer] = afterThinking(100*time.Millisecond, initializerWrites(1)) // five times the hooks-live timeout
	if err := h.runToEndWithin(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
}

// A run that calls no tool its hooks gate (here, one of the daemon's MCP
// tools) did nothing a gate judges, whether or not its hooks reach the
// daemon: the clock starts at a gated call, and there is none.
func TestHooksLiveWaitsForAGatedCall(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.silent = true
	h.runner.silentTool = "mcp__ctxgraphd__query_traces"
	h.runner.script[role.Initializer] = afterThinking(100*time.Millisecond, initializerWrites(1)) // five times the hooks-live timeout
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	h.noHooksLiveViolation("a run that called no gated tool was held silent")
}

// A gated call answered without its hook is one whose hooks do not run:
// Claude Code waits for the hook's answer before the tool runs. The run is
// killed at once, however long hooks_live_timeout.
func TestHooksLiveKillsAtAGatedAnswerWithoutHook(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = time.Hour
	h.runner.script[role.Initializer] = blockUntilCancelled
	h.runner.silent = true
	err := h.runToEndWithin(15 * time.Second)
	h.wantSilentHooksStop(err, "initializer initializer initializer")
}

// A file tool's call that Claude Code refuses on its input (a Write of a
// file not read yet) never reaches a hook, and did nothing: a run whose
// hooks run is not killed for it, however long it then thinks.
func TestHooksLiveIgnoresAFileCallRefusedOnItsInput(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 20 * time.Millisecond
	h.runner.silent, h.runner.silentError = true, true
	h.runner.script[role.Initializer] = afterThinking(100*time.Millisecond, func(ctx context.Context, spec agents.Spec, h *harness) agents.Result { // five times the hooks-live timeout
		h.readGoal(spec, "toolu_next")
		return initializerWrites(1)(ctx, spec, h)
	})
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	h.noHooksLiveViolation("a run was held silent for a refused file call")
}

// A tester ends through its Stop hook, a gate: one that ended by itself
// while none of its hooks reached the daemon is not judged, whatever tools
// it called (here none the hooks gate).
func TestHooksLiveHoldsATestersEnd(t *testing.T) {
	h := newHarness(t)
	h.runner.silent = true
	h.runner.silentTool = "mcp__ctxgraphd__query_traces"
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Tester] = func(context.Context, agents.Spec, *harness) agents.Result {
		return agents.Result{Ended: agents.EndExited}
	}
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "never reached the daemon") {
		t.Fatalf("loop ended with %v, want a stop that says the hooks never reached the daemon", err)
	}
	if got := roles(h.runner.runs()); !strings.HasSuffix(got, "tester:F-001 tester:F-001 tester:F-001") {
		t.Errorf("runs = %s, want three testers not judged", got)
	}
	if got := summary(h.list()); got == "F-001=tested" {
		t.Errorf("a tester whose hooks never ran got its feature tested")
	}
}

// An initializer that wrote its list with no hook of it reaching the
// daemon and then ended on a failure not its own (the API refused the
// credentials, which stops the session at once) wrote without gates all
// the same: the list is set aside, never taken.
func TestListOfAFailedSilentRunIsNotTaken(t *testing.T) {
	h := newHarness(t)
	// Its gated call is never answered, so nothing kills it before it
	// ends: the run ends on its failure.
	h.cfg.Agent.HooksLiveTimeout = time.Hour
	h.runner.silent, h.runner.silentUnanswered = true, true
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := initializerWrites(1)(ctx, spec, h)
		res.IsError, res.APIErrorStatus, res.APIError = true, 401, "authentication_failed"
		return res
	}
	if err := h.runToEndWithin(15 * time.Second); err == nil || !strings.Contains(err.Error(), "could not authenticate") {
		t.Fatalf("loop ended with %v, want a stop for the refused login", err)
	}
	if got := roles(h.runner.runs()); got != "initializer" {
		t.Errorf("runs = %s, want the one initializer", got)
	}
	if st := h.session(); st.FeatureList != nil {
		t.Errorf("the store took a list written without gates:\n%s", st.FeatureList)
	}
	if _, err := os.Stat(h.proj.Progress(UnjudgedListFile)); err != nil {
		t.Errorf("the list written without gates was not set aside: %v", err)
	}
}

// A quick run that ends before its hooks-live check, without its hooks
// ever checking in, is not judged either: its tested: true is not taken.
func TestQuickSilentRunsAreNotTrusted(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.silent = true
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "never reached the daemon") {
		t.Fatalf("loop ended with %v, want a stop that says the hooks never reached the daemon", err)
	}
	// Written without gates, the list is not taken: no feature of it is
	// worked, the store holds none, and it is set aside on disk, where a
	// restart will not take it for a person's.
	if got, want := roles(h.runner.runs()), "initializer initializer initializer"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	st := h.session()
	if st.FeatureList != nil {
		t.Errorf("the store took a list written without gates:\n%s", st.FeatureList)
	}
	if _, err := os.Stat(h.proj.Progress(progress.FeatureListFile)); err == nil {
		t.Error("the list written without gates is still where a restart would take it")
	}
	if _, err := os.Stat(h.proj.Progress(UnjudgedListFile)); err != nil {
		t.Errorf("the list written without gates was not set aside: %v", err)
	}
}

// In warn mode the same quick silent run is trusted: its list is taken
// and worked, and what it did without hooks is a violation on record.
func TestQuickSilentRunsAreTrustedInWarnMode(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates[gates.HooksLive] = config.Warn
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.silent = true
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s, want the silent initializer's list taken and worked", got)
	}
	if _, err := os.Stat(h.proj.Progress(UnjudgedListFile)); err == nil {
		t.Error("the list of a run trusted in warn mode was set aside")
	}
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(trs, func(tr control.Trace) bool { return tr.Gate == gates.HooksLive && tr.Code == "hooks_silent" }) {
		t.Error("no hooks-live violation on record for the runs without hooks")
	}
}

// In warn mode a silent initializer that wrote its list and then failed
// is trusted as any failed run is: its list is not set aside as written
// without gates (enforce mode's TestListOfAFailedSilentRunIsNotTaken).
func TestListOfAFailedSilentRunStaysInWarnMode(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates[gates.HooksLive] = config.Warn
	h.cfg.Agent.HooksLiveTimeout = time.Hour
	h.runner.silent, h.runner.silentUnanswered = true, true
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := initializerWrites(1)(ctx, spec, h)
		res.IsError, res.APIErrorStatus, res.APIError = true, 401, "authentication_failed"
		return res
	}
	if err := h.runToEndWithin(15 * time.Second); err == nil || !strings.Contains(err.Error(), "could not authenticate") {
		t.Fatalf("loop ended with %v, want a stop for the refused login", err)
	}
	if _, err := os.Stat(h.proj.Progress(UnjudgedListFile)); err == nil {
		t.Error("in warn mode the failed run's list was set aside as written without gates")
	}
}

// A tester's tested: true that no verdict judged (here the run is stopped
// by ctl stop right after the claim) does not stay on disk.
func TestUnjudgedClaimIsTakenOffTheDisk(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		testerClaims(true)(ctx, spec, h)
		if err := h.current.Stop(context.Background()); err != nil {
			t.Errorf("ctl stop: %v", err)
		}
		<-ctx.Done()
		return agents.Result{Ended: agents.EndCancelled}
	}
	if err := h.runToEnd(); err == nil {
		t.Fatal("the loop finished; want it stopped")
	}
	if f := h.list().Feature("F-001"); f.Tested {
		t.Error("the stopped tester's tested: true is still on disk")
	}
}

// A mistake a gate refused to the coding agent of one feature reaches the
// coding agent of the next feature, naming the trace; with
// graph.precedent_tokens 0, nothing of the past is told.
func TestPrecedentCrossesFeatures(t *testing.T) {
	for _, tokens := range []int{600, 0} {
		t.Run(fmt.Sprint(tokens), func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Graph.PrecedentTokens = tokens
			h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
				if spec.FeatureID == "F-001" {
					d := h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
						"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, "src/shared.txt"), "content": "x"}})
					if d == nil || d.Gate != "scope" || d.Mode != "enforce" {
						h.t.Errorf("the write outside F-001's scope was not refused: %+v", d)
					}
				}
				return coderCompletes(ctx, spec, h)
			}
			if err := h.runToEnd(); err != nil {
				t.Fatal(err)
			}
			refusals, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation, Feature: "F-001", Agent: string(role.Coder)})
			if err != nil || len(refusals) != 1 {
				t.Fatalf("F-001's coder refusals = %v, %v; want one", refusals, err)
			}
			var cmd agents.Command
			for _, s := range h.runner.runs() {
				if s.Role == role.Coder && s.FeatureID == "F-002" {
					if cmd, err = agents.ParseCommand(s.Prompt); err != nil {
						t.Fatal(err)
					}
				}
			}
			told := slices.ContainsFunc(cmd.Precedent, func(p string) bool {
				return strings.HasPrefix(p, refusals[0].ID+" on F-001, a coding-agent was refused by scope")
			})
			if told != (tokens > 0) {
				t.Errorf("precedent_tokens %d: F-002's coder told of %s: %v; precedent %q", tokens, refusals[0].ID, told, cmd.Precedent)
			}
			if tokens == 0 && len(cmd.Precedent) != 0 {
				t.Errorf("precedent_tokens 0: precedent %q, want none", cmd.Precedent)
			}
		})
	}
}

// A coding retry reads a diagnosis of the failing test apart from the
// tester's report: the daemon's own run of the test, what it expected and
// got, and what the last coding agent believed.
func TestRetryReadsTheDiagnosis(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		h.write("tests/F-001.sh", "#!/bin/sh\ngot=$(cat src/F-001.txt)\n[ \"$got\" = 'F-001 works' ] || { echo \"expected 'F-001 works' but got '$got'\"; exit 1; }\n")
		l := &progress.List{Version: 1, Features: []progress.Feature{{ID: "F-001", Title: "feature F-001", Test: "sh tests/F-001.sh", Status: progress.Pending, Scope: []string{"src/F-001.txt"}}}}
		progress.WriteFeatureList(h.proj.Progress(), l)
		return agents.Result{Summary: "wrote the list"}
	}
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.Attempt == 1 {
			h.write("src/F-001.txt", "F-001 almost\n")
			h.edit(func(l *progress.List) { l.Feature("F-001").Status = progress.Completed })
			return agents.Result{Summary: "F-001 is done and works"}
		}
		return coderCompletes(ctx, spec, h)
	}
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.Attempt == 1 {
			return agents.Result{Summary: "the test failed"} // no claim: a failure
		}
		return testerRunsTheTest(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	var retry *agents.Command
	for _, s := range h.runner.runs() {
		if s.Role == role.Coder && s.Attempt == 2 {
			cmd, err := agents.ParseCommand(s.Prompt)
			if err != nil {
				t.Fatal(err)
			}
			retry = &cmd
		}
	}
	if retry == nil {
		t.Fatalf("no retry; runs %s", roles(h.runner.runs()))
	}
	d := retry.Context.Diagnosis
	if d == nil {
		t.Fatalf("the retry has no diagnosis; tester report %q", retry.Context.TesterReport)
	}
	if d.Test != "sh tests/F-001.sh" || d.ExitCode != 1 || d.Expected != "'F-001 works'" || d.Got != "'F-001 almost'" ||
		!strings.Contains(d.Output, "expected 'F-001 works' but got 'F-001 almost'") ||
		!strings.Contains(d.FailedAssumption, `"F-001 is done and works"`) {
		t.Errorf("diagnosis = %+v", *d)
	}
	if retry.Context.TesterReport != "the test failed" {
		t.Errorf("tester report %q: the raw report stays beside the diagnosis", retry.Context.TesterReport)
	}
	if c := h.current.counters["F-001"]; c.Diagnosis != nil {
		t.Errorf("a tested feature keeps a diagnosis: %+v", c.Diagnosis)
	}
}

// What a person does to a feature with ctl is a correction in the graph,
// from user_correction, with their note: later agents and `ctl why` see it.
func TestPersonsCorrectionsAreTraced(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxRetries = 0
	h.runner.script[role.Initializer] = initializerWrites(2)
	h.runner.script[role.Tester] = testerClaims(false) // never a run of the test: blocked
	o := h.orchestrator(false)
	ctx := running(t, o)
	eventually.True(t, 30*time.Second, func() bool {
		st, err := o.Status(ctx)
		return err == nil && st.Features.Blocked == 2
	}, "both features blocked")
	if err := o.Unblock(ctx, "F-001", "use the v2 API"); err != nil {
		t.Fatal(err)
	}
	if err := o.Skip(ctx, "F-001"); err != nil {
		t.Fatal(err)
	}
	if err := o.Retry(ctx, "F-002"); err != nil {
		t.Fatal(err)
	}
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceCorrection})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range trs {
		if tr.Source != control.SourceUser {
			t.Errorf("%s: source %s, want %s", tr.ID, tr.Source, control.SourceUser)
		}
		got = append(got, tr.Context.Feature+": "+tr.Event.WhatHappened+" / "+tr.Event.WhatWasCorrect)
	}
	want := []string{"F-001: F-001 reopened by ctl unblock / use the v2 API", "F-001: F-001 set aside by ctl skip / ", "F-002: F-002 reopened by ctl retry / "}
	if !slices.Equal(got, want) {
		t.Errorf("corrections:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An initializer killed because its hooks never checked in wrote its list
// without gates, however far it got before the kill: the list is set
// aside, never taken, as when such a run ends by itself.
func TestListOfAHooksKilledRunIsNotTaken(t *testing.T) {
	h := newHarness(t)
	h.cfg.Agent.HooksLiveTimeout = 50 * time.Millisecond
	h.runner.silent = true
	h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		initializerWrites(1)(ctx, spec, h) // the whole list, before the kill
		return blockUntilCancelled(ctx, spec, h)
	}
	err := h.runToEndWithin(15 * time.Second)
	h.wantSilentHooksStop(err, "initializer initializer initializer")
	if st, err := h.st.Load(); err != nil || len(st.FeatureList) != 0 {
		t.Errorf("the store took a list written without gates: %s (%v)", st.FeatureList, err)
	}
	if _, err := os.Stat(h.proj.Progress(UnjudgedListFile)); err != nil {
		t.Errorf("the list was not set aside as %s: %v", UnjudgedListFile, err)
	}
}
