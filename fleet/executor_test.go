package fleet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
)

// These tests run the executor and workers over a real embedded server,
// with a stand-in for claude: a shell script that does what its run's
// prompt says to the files and prints the two lines of stream-json a run
// needs. The end-to-end night (e2e) runs the real CLI.

// fakeClaude writes a claude that runs the prompt as shell commands in
// its working directory, then reports success. A prompt "A;;B" runs A
// before the session's init line and B after it, so that a test that
// sees the run's init event knows A is done.
func fakeClaude(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	script := `#!/bin/sh
prompt="$2"
before="${prompt%%;;*}"
after=""
case "$prompt" in *";;"*) after="${prompt#*;;}" ;; esac
sh -c "$before" >/dev/null 2>&1
echo '{"type":"system","subtype":"init","session_id":"s-1","tools":[],"model":"m"}'
sh -c "$after" >/dev/null 2>&1
echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"total_cost_usd":0.01,"result":"done","session_id":"s-1"}'
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// gatesRecord is the daemon's gates as the executor sees them, recording
// what it is asked.
type gatesRecord struct {
	mu        sync.Mutex
	tokens    map[string]string // token → run
	relocated map[string]string // run → dir
	hooks     []string          // runs whose hooks were answered
	traces    []control.Trace
	modes     gates.Modes
	issued    int
	// stall, when set, holds every hook of these runs until it is closed;
	// stalled counts the hooks held now, and mostStalled the most at once.
	stall                map[string]chan struct{}
	stalled, mostStalled int
}

// stalledNow is how many hooks are held now, and the most held at once.
func (g *gatesRecord) stalledNow() (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stalled, g.mostStalled
}

func newGates() *gatesRecord {
	return &gatesRecord{tokens: map[string]string{}, relocated: map[string]string{}, modes: gates.Modes{}}
}

func (g *gatesRecord) register(run string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issued++
	tok := "tok-" + run + "-" + fmt.Sprint(g.issued)
	g.tokens[tok] = run
	return tok
}

func (g *gatesRecord) Hook(ctx context.Context, token string, _ control.HookRequest) (control.HookResponse, error) {
	g.mu.Lock()
	stall := g.stall[g.tokens[token]]
	if stall != nil {
		g.stalled++
		g.mostStalled = max(g.mostStalled, g.stalled)
	}
	g.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.stalled--
		g.mu.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	run, ok := g.tokens[token]
	if !ok {
		return control.HookResponse{}, &control.APIError{HTTPStatus: 403, Code: control.CodeUnknownRun, Message: "unknown run"}
	}
	g.hooks = append(g.hooks, run)
	return control.HookResponse{}, nil
}

func (g *gatesRecord) Relocate(token, dir string, _, _ []string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%q is not absolute", dir)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.relocated[g.tokens[token]] = dir
	return nil
}

func (g *gatesRecord) Reissue(token string) (string, bool) {
	g.mu.Lock()
	run, ok := g.tokens[token]
	if ok {
		delete(g.tokens, token)
	}
	g.mu.Unlock()
	if !ok {
		return "", false
	}
	return g.register(run), true
}

func (g *gatesRecord) ChangeRules(token string) (gates.Modes, gates.Actor, gates.State, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	run, ok := g.tokens[token]
	return g.modes, gates.Actor{Role: "coder", Run: run}, gates.State{ProjectDir: "/nonexistent", MaxFileSize: 1 << 20}, ok
}

func (g *gatesRecord) Trace(t control.Trace) control.Trace {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traces = append(g.traces, t)
	return t
}

func (g *gatesRecord) traceTexts() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, t := range g.traces {
		b.WriteString(t.Event.WhatHappened + "\n")
	}
	return b.String()
}

// lane is a work tree with one commit, as a lane's clone is.
func lane(t *testing.T) (string, *gitrepo.Repo) {
	t.Helper()
	dir := t.TempDir()
	// A project ignores its dependencies, as real ones do: no bundle
	// carries them.
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules/\n.venv/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", ".gitignore"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".claude/progress"), 0o755)
	os.WriteFile(filepath.Join(dir, ".claude/progress/feature_list.json"), []byte(`{"features":[]}`), 0o644)
	repo, err := gitrepo.Open(context.Background(), gitrepo.Options{Dir: dir, Index: filepath.Join(t.TempDir(), "index"), Exclude: []string{".claude"}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, repo
}

// fleetRig is a server, an executor on it and workers' credentials.
type fleetRig struct {
	s     *Server
	e     *Executor
	g     *gatesRecord
	creds map[string]string
	dirs  map[string]string // the workers' directories, by name
}

func newRig(t *testing.T, repo func(string) *gitrepo.Repo, workers ...string) *fleetRig {
	t.Helper()
	return newRigWith(t, Config{}, ExecutorOptions{}, repo, workers...)
}

// newRigWith is newRig with the server's configuration and the executor's
// bounds (MaxBundleBytes, Heartbeat: 100 ms when 0) of the test's
// choosing.
func newRigWith(t *testing.T, cfg Config, bounds ExecutorOptions, repo func(string) *gitrepo.Repo, workers ...string) *fleetRig {
	t.Helper()
	s := start(t, cfg)
	r := &fleetRig{s: s, g: newGates(), creds: map[string]string{}, dirs: map[string]string{}}
	for _, w := range workers {
		r.creds[w] = addWorker(t, s, w).Path
	}
	e, err := NewExecutor(context.Background(), s.Conn(), s.Subjects(), ExecutorOptions{
		Gates: r.g, OpenRepo: func(_ context.Context, dir string) (*gitrepo.Repo, error) { return repo(dir), nil },
		Heartbeat: cmp.Or(bounds.Heartbeat, 100*time.Millisecond), CancelGrace: 5 * time.Second, Log: zaptest.NewLogger(t),
		MaxBundleBytes: bounds.MaxBundleBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s.Attach(e)
	r.e = e
	return r
}

// pullsWaiting waits until n of worker's pulls wait on the work queue in
// the daemon (onPull took them), for a test whose next step needs them
// there; the test fails after 10 s.
func (r *fleetRig) pullsWaiting(t *testing.T, worker string, n int) {
	t.Helper()
	held := func() int {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		if mb := r.e.mailboxes[worker]; mb != nil {
			return mb.pulls
		}
		return 0
	}
	if !eventually.Within(10*time.Second, func() bool { return held() >= n }) {
		t.Fatalf("%d of %s's pulls wait in the daemon after 10 s; want %d", held(), worker, n)
	}
}

// worker runs a worker until the test ends; stop stops it (SIGTERM's way).
func (r *fleetRig) worker(t *testing.T, name, claude string, env ...string) (stop func()) {
	t.Helper()
	c, err := LoadCredentials(r.creds[name])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	dir := t.TempDir()
	r.dirs[name] = dir
	go func() {
		done <- RunWorker(ctx, WorkerOptions{URL: r.s.ClientURL(), Credentials: c, Slots: 1, Dir: dir, Claude: claude,
			Env: append(append(os.Environ(), "HOME="+t.TempDir()), env...), Log: zaptest.NewLogger(t).Named(name)})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func spec(run, dir, prompt, token string) agents.Spec {
	return featureSpec("F-001", run, dir, prompt, token)
}

func featureSpec(feature, run, dir, prompt, token string) agents.Spec {
	return agents.Spec{RunID: run, Role: role.Coder, FeatureID: feature, Attempt: 1, SessionID: "s-1", Prompt: prompt, Dir: dir, Token: token}
}

func TestAWorkersRunLandsInTheLanesWorkTree(t *testing.T) {
	for _, feature := range []string{"F-001", ""} { // "": the initializer's run
		t.Run("feature="+feature, func(t *testing.T) { testAWorkersRunLands(t, feature) })
	}
}

func testAWorkersRunLands(t *testing.T, feature string) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	var events []agents.Event
	res := rig.e.Run(context.Background(),
		featureSpec(feature, "run-0001", dir, `echo made > made.txt && rm main.go && mkdir -p .claude/progress/evidence/F-001 && echo ok > .claude/progress/evidence/F-001/log && echo claimed > .claude/progress/feature-list.json && echo mine > .claude/progress/goal.md && mkdir -p node_modules/left-pad node_modules/.bin && echo pad > node_modules/left-pad/index.js && ln -s ../left-pad/index.js node_modules/.bin/left-pad`, tok),
		func(int) { t.Error("onStart called for a worker's process") },
		func(ev agents.Event) { events = append(events, ev) })
	if res.Err != nil || !res.OK() {
		t.Fatalf("run: err %v, ok %v: %+v", res.Err, res.OK(), res)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(got) != "made\n" {
		t.Errorf("made.txt in the lane = %q, %v; want the worker's file", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "main.go")); !os.IsNotExist(err) {
		t.Errorf("main.go, removed by the run, is still in the lane: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, ".claude/progress/evidence/F-001/log")); err != nil || string(got) != "ok\n" {
		t.Errorf("the run's evidence in the lane = %q, %v", got, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".claude/progress/feature-list.json")); string(got) != "claimed\n" {
		t.Errorf("the feature list the run wrote did not land: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude/progress/goal.md")); !os.IsNotExist(err) {
		t.Errorf("a goal the run wrote landed (%v); only the feature list and evidence may", err)
	}
	// The dependencies the run installed came back, for the daemon's test
	// run to be lent them.
	if got, err := os.ReadFile(filepath.Join(dir, "node_modules/.bin/left-pad")); err != nil || string(got) != "pad\n" {
		t.Errorf("the run's node_modules in the lane: %q, %v", got, err)
	}
	if d := rig.g.relocated["run-0001"]; d == "" || strings.HasPrefix(d, dir) {
		t.Errorf("the run's hooks were read against %q; want the worker's clone", d)
	}
	if len(events) < 2 || events[0].Kind != agents.EventWorker || events[0].Detail != "" || events[1].Kind != agents.EventWorker || events[1].Detail != "a" {
		t.Errorf("first events %+v; want that the run waits for a worker, then which worker took it", events)
	}
	refs, _ := exec.Command("git", "-C", dir, "for-each-ref", "refs/ctxgraphd/").CombinedOutput()
	if len(refs) != 0 {
		t.Errorf("refs left behind:\n%s", refs)
	}
	// Nor bundles: the base's and the result's go with the run.
	js, _ := jetstream.New(rig.s.Conn())
	for _, b := range []string{rig.s.Subjects().BaseBucket(), rig.s.Subjects().ResultsBucket("a")} {
		bucket, err := js.ObjectStore(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if left, err := bucket.List(context.Background()); !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Errorf("bundles left in %s: %v (%v)", b, left, err)
		}
	}
}

// silentWorker claims the next job as worker name and then says nothing,
// as a worker killed with -9 after its claim does.
// succeeded is the result of a run that went as an honest one does.
var succeeded = agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}

// ended sends o, worker name's outcome of job's attempt (its run, attempt
// and token filled in from job and a), as the silent worker on nc would,
// and returns the daemon's answer.
func (r *fleetRig) ended(t *testing.T, nc *nats.Conn, name string, job Job, a Assignment, o Outcome) OutcomeAnswer {
	t.Helper()
	o.Run, o.Attempt, o.Token = job.Run, job.Attempt, a.Token
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(r.s.Subjects().Worker(name).Result, out, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ans OutcomeAnswer
	if err := json.Unmarshal(m.Data, &ans); err != nil {
		t.Fatalf("the daemon's answer to %s's outcome: %v", name, err)
	}
	return ans
}

// pull is the next Job of the work queue, pulled through the daemon as
// worker name does, on nc: the test fails if none comes within wait.
func (r *fleetRig) pull(t *testing.T, nc *nats.Conn, name string, wait time.Duration) *queued {
	t.Helper()
	msg, err := pullJob(context.Background(), nc, r.s.Subjects().Worker(name), wait)
	if err == nil && msg == nil {
		err = fmt.Errorf("no Job in %s", wait)
	}
	if err != nil {
		t.Fatalf("%s pulling from the work queue: %v", name, err)
	}
	return msg
}

func (r *fleetRig) silentWorker(t *testing.T, name string) (Job, Assignment, *nats.Conn) {
	t.Helper()
	nc, err := connect(t, r.s, r.creds[name])
	if err != nil {
		t.Fatal(err)
	}
	msg := r.pull(t, nc, name, 15*time.Second)
	var job Job
	json.Unmarshal(msg.Data(), &job)
	data, _ := json.Marshal(Claim{Run: job.Run, Attempt: job.Attempt, Dir: "/worker/" + name})
	m, err := nc.Request(r.s.Subjects().Worker(name).Claim, data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var a Assignment
	json.Unmarshal(m.Data, &a)
	if a.Refused != "" {
		t.Fatalf("claim refused: %s", a.Refused)
	}
	msg.Ack()
	return job, a, nc
}

func TestALostWorkersRunGoesToAnotherWorkerWithANewToken(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `echo b > b.txt`, tok), nil, func(agents.Event) {})
	}()
	job, a, nc := rig.silentWorker(t, "a")
	if job.Attempt != 1 || a.Token != tok {
		t.Fatalf("a's claim: attempt %d token %q", job.Attempt, a.Token)
	}
	// a falls silent, as a worker killed with -9 does: the daemon gives
	// its attempt up.
	if !eventually.Within(30*time.Second, func() bool { return strings.Contains(rig.g.traceTexts(), "worker a was lost") }) {
		t.Fatalf("a's silence was not noticed:\n%s", rig.g.traceTexts())
	}
	rig.g.mu.Lock()
	_, known := rig.g.tokens[a.Token]
	rig.g.mu.Unlock()
	if known {
		t.Error("a's token is still known after its attempt was given up")
	}
	// a comes back late, while the run waits for its next worker: its
	// hook and its outcome (a tip of its own) are refused.
	call, _ := json.Marshal(HookCall{Token: a.Token, Request: control.HookRequest{Event: "pre-tool-use", Payload: []byte(`{}`)}})
	m, err := nc.Request(rig.s.Subjects().Worker("a").Hook, call, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ans HookAnswer
	json.Unmarshal(m.Data, &ans)
	if ans.Error == nil || ans.Error.Code != control.CodeUnknownRun {
		t.Errorf("a's late hook answered %+v; want unknown run", ans)
	}
	if oa := rig.ended(t, nc, "a", job, a, Outcome{Result: succeeded}); oa.Refused == "" {
		t.Error("a's late outcome was taken")
	}
	// b comes and runs the next attempt.
	rig.worker(t, "b", fakeClaude(t))
	var res agents.Result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end on worker b")
	}
	if res.Err != nil || !res.OK() {
		t.Fatalf("run: %v %+v", res.Err, res)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
		t.Errorf("b's work is not in the lane: %v", err)
	}
}

func TestAWorkerCannotAskAsAnotherWorkersRun(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	tok := rig.g.register("run-0001")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan agents.Result, 1)
	go func() { done <- rig.e.Run(ctx, spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {}) }()
	_, a, _ := rig.silentWorker(t, "a")
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	call, _ := json.Marshal(HookCall{Token: a.Token, Request: control.HookRequest{Event: "pre-tool-use", Payload: []byte(`{}`)}})
	m, err := nb.Request(rig.s.Subjects().Worker("b").Hook, call, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ans HookAnswer
	json.Unmarshal(m.Data, &ans)
	if ans.Error == nil || ans.Error.Code != control.CodeUnknownRun {
		t.Errorf("b asking with a's token answered %+v; want unknown run", ans)
	}
	cancel()
	<-done
}

// forge claims the run as a silent worker, puts bundle as its result and
// sends the outcome naming tip.
func (r *fleetRig) forge(t *testing.T, name string, bundle []byte, tip string) {
	t.Helper()
	r.forgeOn(t, name, func(string) ([]byte, string) { return bundle, tip })
}

// forgeOn is forge with the bundle and its tip made from the base of the
// job the worker claimed.
func (r *fleetRig) forgeOn(t *testing.T, name string, make func(base string) ([]byte, string)) {
	t.Helper()
	job, a, nc := r.silentWorker(t, name)
	bundle, tip := make(job.Base)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	bucket, err := js.ObjectStore(ctx, r.s.Subjects().ResultsBucket(name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.PutBytes(ctx, ResultKey(job.Run, job.Attempt), bundle); err != nil {
		t.Fatal(err)
	}
	res := succeeded
	res.Text = "all tests pass"
	r.ended(t, nc, name, job, a, Outcome{Tip: tip, Result: res})
}

func TestAForgedResultIsRefusedAndNothingOfItLands(t *testing.T) {
	dir, repo := lane(t)
	// A commit of another history: it does not descend from the base.
	other := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
	} {
		exec.Command("git", append([]string{"-C", other}, args...)...).Run()
	}
	os.WriteFile(filepath.Join(other, "evil.txt"), []byte("evil"), 0o644)
	exec.Command("git", "-C", other, "add", ".").Run()
	exec.Command("git", "-C", other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "evil").Run()
	otherRepo, err := gitrepo.Open(context.Background(), gitrepo.Options{Dir: other, Index: filepath.Join(t.TempDir(), "i")})
	if err != nil {
		t.Fatal(err)
	}
	tip, _, _, _ := otherRepo.Head(context.Background())
	var bundle bytes.Buffer
	if err := branch.WriteBase(context.Background(), otherRepo, &bundle, tip); err != nil {
		t.Fatal(err)
	}

	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	rig.forge(t, "a", bundle.Bytes(), tip)
	res := <-done
	if res.OK() || !strings.Contains(res.Text, "refused") {
		t.Errorf("a forged result ended the run as %+v; want it refused", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "evil.txt")); !os.IsNotExist(err) {
		t.Errorf("the forged result's file is in the lane: %v", err)
	}
	if !strings.Contains(rig.g.traceTexts(), "was refused") {
		t.Errorf("no violation trace of the refusal:\n%s", rig.g.traceTexts())
	}
}

func TestAStoppingWorkerGivesItsRunBackAtOnce(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	// Heartbeats so slow that only the worker's word can hand the run on
	// within the test's wait.
	rig.e.opts.Heartbeat = time.Minute
	claude := fakeClaude(t)
	stopA := rig.worker(t, "a", claude, "NAP=60")
	tok := rig.g.register("run-0001")
	took := make(chan string, 4)
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `sleep ${NAP:-0}; echo done > done.txt`, tok), nil,
			func(ev agents.Event) {
				if ev.Kind == agents.EventWorker && ev.Detail != "" {
					took <- ev.Detail
				}
			})
	}()
	if w := <-took; w != "a" {
		t.Fatalf("first taken by %q, want a", w)
	}
	stopA()
	rig.worker(t, "b", claude)
	select {
	case w := <-took:
		if w != "b" {
			t.Fatalf("then taken by %q, want b", w)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run a gave back was not taken by b within 30s (well under the heartbeats' 4 minutes)")
	}
	if res := <-done; !res.OK() {
		t.Fatalf("run on b: %+v", res)
	}
	if !strings.Contains(rig.g.traceTexts(), "gave the run back") {
		t.Errorf("no trace says a gave the run back:\n%s", rig.g.traceTexts())
	}
}

func TestCancellingARunStopsItOnItsWorkerAndLandsWhatItLeft(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	ctx, cancel := context.WithCancel(context.Background())
	began := make(chan struct{}, 1)
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(ctx, spec("run-0001", dir, `echo started > started.txt;; sleep 600`, tok), nil,
			func(ev agents.Event) {
				if ev.Kind == "init" {
					began <- struct{}{}
				}
			})
	}()
	<-began // started.txt is written in the worker's clone
	cancel()
	res := <-done
	if res.Ended != agents.EndCancelled {
		t.Errorf("ended %q, want cancelled", res.Ended)
	}
	// Only the worker's outcome brings the file: without the word to stop,
	// the run sleeps on, and the executor gives up after CancelGrace with
	// nothing landed.
	if _, err := os.Stat(filepath.Join(dir, "started.txt")); err != nil {
		t.Errorf("what the cancelled run left did not land: %v", err)
	}
}

func TestARestartedDaemonsWorkersDropTheRunsOfTheOneBefore(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.e.Close()
	// The daemon before: an executor on a connection of its own, which
	// dies with it.
	nc, err := rig.s.connectAsDaemon()
	if err != nil {
		t.Fatal(err)
	}
	opts := ExecutorOptions{
		Gates: rig.g, OpenRepo: func(context.Context, string) (*gitrepo.Repo, error) { return repo, nil },
		Heartbeat: 100 * time.Millisecond, Log: zaptest.NewLogger(t),
	}
	before, err := NewExecutor(context.Background(), nc, rig.s.Subjects(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close() // its goroutines, once its connection is gone
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	began := make(chan struct{}, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		before.Run(context.Background(), spec("run-0001", dir, `true;; sleep 600`, tok), nil, func(ev agents.Event) {
			if ev.Kind == "init" {
				began <- struct{}{}
			}
		})
	}()
	<-began
	nc.Close() // the daemon is killed: it says nothing more
	after, err := NewExecutor(context.Background(), rig.s.Conn(), rig.s.Subjects(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	lanes := filepath.Join(rig.dirs["a"], "lanes")
	if !eventually.Within(30*time.Second, func() bool {
		left, err := os.ReadDir(lanes)
		return err == nil && len(left) == 0
	}) {
		t.Fatal("the worker still runs the run of the daemon before")
	}
	// The worker is free for the new daemon's runs.
	tok2 := rig.g.register("run-0002")
	res := after.Run(context.Background(), spec("run-0002", dir, `echo again > again.txt`, tok2), nil, func(agents.Event) {})
	if !res.OK() {
		t.Fatalf("a run of the new daemon: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "again.txt")); err != nil {
		t.Error(err)
	}
	<-ended // the dead daemon's Run gives up (its connection is closed)
}

// TestWhatAWorkersHooksDecidedAloneReachesTheDaemon: the records a run's
// hooks spooled on its worker while the daemon was out of reach come
// with its outcome and go to the daemon's spool, which it takes in as its
// own hooks' (orchestrator.ingestSpool).
func TestWhatAWorkersHooksDecidedAloneReachesTheDaemon(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	var mu sync.Mutex
	var spooled []spool.Record
	rig.e.opts.Spool = func(recs []spool.Record) {
		mu.Lock()
		spooled = append(spooled, recs...)
		mu.Unlock()
	}
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	job, a, nc := rig.silentWorker(t, "a")
	rec := spool.Record{Event: "pre-tool-use", Run: job.Run, TokenHash: control.TokenHash(tok), Payload: json.RawMessage(`{"tool_name":"Write"}`)}
	rig.ended(t, nc, "a", job, a, Outcome{Spooled: []spool.Record{rec}, Result: succeeded})
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(spooled) != 1 || spooled[0].TokenHash != rec.TokenHash || string(spooled[0].Payload) != string(rec.Payload) {
		t.Errorf("the daemon's spool got %+v, want the worker's record", spooled)
	}
}

// TestAWorkersRunFindsTheLanesDependencies: what an earlier run of the
// lane installed (node_modules, which no bundle carries) is in the
// worker's clone when the next run starts there, as in a local lane's
// work tree.
func TestAWorkersRunFindsTheLanesDependencies(t *testing.T) {
	dir, repo := lane(t)
	if err := os.MkdirAll(filepath.Join(dir, "node_modules/is-number"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "node_modules/is-number/index.js"), []byte("module.exports = 1\n"), 0o644)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	res := rig.e.Run(context.Background(), spec("run-0001", dir, `test -f node_modules/is-number/index.js && echo seen > seen.txt`, tok), nil, func(agents.Event) {})
	if !res.OK() {
		t.Fatalf("run: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "seen.txt")); err != nil {
		t.Errorf("the run on the worker did not find the lane's node_modules: %v", err)
	}
}

// TestAWorkersCloneIsSetUpWithThePersonsCopies: the worker places the
// person's lanes.copy files in its clone and runs the project's setup
// there, before the agent, which finds both; what the setup made comes
// back with the run's dependencies, and the copies do not: no result
// carries them.
func TestAWorkersCloneIsSetUpWithThePersonsCopies(t *testing.T) {
	dir, repo := lane(t)
	person := t.TempDir()
	os.WriteFile(filepath.Join(person, ".env"), []byte("TOKEN=local\n"), 0o600)
	copies, err := lanecopy.Capture(person, []string{".env"}, func(string) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.e.opts.Copies = copies
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	s := spec("run-0001", dir, `test -f node_modules/dep/index.js && grep -qx TOKEN=local .env && grep -qx TOKEN=local node_modules/dep/env && echo seen > seen.txt`, tok)
	s.Setup = `mkdir -p node_modules/dep && echo made > node_modules/dep/index.js && cp .env node_modules/dep/env`
	res := rig.e.Run(context.Background(), s, nil, func(agents.Event) {})
	if !res.OK() || res.SetupFailure != "" {
		t.Fatalf("run: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "seen.txt")); err != nil {
		t.Errorf("the agent on the worker did not find its clone set up with the person's .env: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "node_modules/dep/index.js")); err != nil || string(got) != "made\n" {
		t.Errorf("what the worker's setup made did not come back: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".env")); !os.IsNotExist(err) {
		t.Errorf("the worker's result carried the person's .env into the lane: %v", err)
	}
}

// TestASetupThatFailsOnAWorkerIsNoRunOfTheAgents: the setup's failure in a
// worker's clone ends the run before any agent, as a failure of the setup
// (a person's to fix, never charged) with the step's output and the worker's
// name; nothing of the clone lands.
func TestASetupThatFailsOnAWorkerIsNoRunOfTheAgents(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.worker(t, "a", fakeClaude(t))
	tok := rig.g.register("run-0001")
	s := spec("run-0001", dir, `echo ran > ran.txt`, tok)
	s.Setup = `touch half-made.txt; echo "npm ERR! 404 left-pad-9 is not in the registry" >&2; exit 3`
	res := rig.e.Run(context.Background(), s, nil, func(agents.Event) {})
	f, ok := res.Failure("")
	if !ok || f.Kind != agents.FailSetup || f.Waits() {
		t.Fatalf("the run ended as %+v (failure %+v, %v); want the setup's failure, which a person fixes", res, f, ok)
	}
	for _, want := range []string{"worker a", "exited 3", "left-pad-9 is not in the registry", s.Setup} {
		if !strings.Contains(f.Explain("claude"), want) {
			t.Errorf("the failure does not say %q:\n%s", want, f.Explain("claude"))
		}
	}
	for _, name := range []string{"ran.txt", "half-made.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s is in the lane after a failed setup: %v", name, err)
		}
	}
}

// TestAResultHoldingThePersonsCopyIsRefused: a worker that sends back a
// tree holding a file of lanes.copy (its own .env over the person's, at
// the top or deeper) has its result refused whole.
func TestAResultHoldingThePersonsCopyIsRefused(t *testing.T) {
	for _, name := range []string{".env", "config/local.yaml"} {
		t.Run(name, func(t *testing.T) { testAResultHoldingACopyIsRefused(t, name) })
	}
}

func testAResultHoldingACopyIsRefused(t *testing.T, name string) {
	dir, repo := lane(t)
	person := t.TempDir()
	os.MkdirAll(filepath.Join(person, "config"), 0o755)
	os.WriteFile(filepath.Join(person, ".env"), []byte("TOKEN=local\n"), 0o600)
	os.WriteFile(filepath.Join(person, "config", "local.yaml"), []byte("port: 1\n"), 0o600)
	copies, err := lanecopy.Capture(person, []string{".env", "config/local.yaml"}, func(string) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.e.opts.Copies = copies
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	rig.forgeOn(t, "a", func(base string) ([]byte, string) {
		git := func(env []string, args ...string) string {
			cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("git %v: %v", args, err)
			}
			return strings.TrimSpace(string(out))
		}
		index := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
		git(index, "read-tree", base)
		env := filepath.Join(t.TempDir(), "env")
		os.WriteFile(env, []byte("TOKEN=the-workers\n"), 0o600)
		blob := git(nil, "hash-object", "-w", env)
		git(index, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+name)
		tree := git(index, "write-tree")
		tip := git([]string{"GIT_AUTHOR_NAME=w", "GIT_AUTHOR_EMAIL=w@w", "GIT_COMMITTER_NAME=w", "GIT_COMMITTER_EMAIL=w@w"}, "commit-tree", tree, "-p", base, "-m", "what the run left")
		var bundle bytes.Buffer
		if err := branch.WriteResult(context.Background(), repo, &bundle, base, tip); err != nil {
			t.Fatal(err)
		}
		return bundle.Bytes(), tip
	})
	res := <-done
	if res.OK() || !strings.Contains(res.Text, "lanes.copy") || !strings.Contains(res.Text, name) {
		t.Errorf("a result holding %s ended the run as %+v; want it refused, naming it and lanes.copy", name, res)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); !os.IsNotExist(err) {
		t.Errorf("the worker's %s is in the lane: %v", name, err)
	}
}
