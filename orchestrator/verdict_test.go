package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// initializerWith writes files and a list of features (pending, titled).
func initializerWith(files map[string]string, features ...progress.Feature) script {
	return func(_ context.Context, _ agents.Spec, h *harness) agents.Result {
		for p, content := range files {
			h.write(p, content)
		}
		l := &progress.List{Version: 1}
		for _, f := range features {
			f.Title, f.Status = "feature "+f.ID, progress.Pending
			l.Features = append(l.Features, f)
		}
		progress.WriteFeatureList(h.proj.Progress(), l)
		return agents.Result{Summary: "wrote the list", NumTurns: 2}
	}
}

// initializerWithTests writes one feature per test script, F-001 first,
// whose test is `sh tests/<id>.sh` and whose scope is src/<id>.txt.
func initializerWithTests(bodies ...string) script {
	files := map[string]string{}
	var fs []progress.Feature
	for i, body := range bodies {
		id := fmt.Sprintf("F-%03d", i+1)
		files["tests/"+id+".sh"] = body
		fs = append(fs, progress.Feature{ID: id, Test: "sh tests/" + id + ".sh", Scope: []string{"src/" + id + ".txt"}})
	}
	return initializerWith(files, fs...)
}

// hangingTest is a test script that starts a grandchild, leaves the pids of
// both (the grandchild's, then its own) in dir/pids, and never ends.
func hangingTest(dir string) string {
	return "sleep 600 & echo $! $$ > " + dir + "/pids.tmp; mv " + dir + "/pids.tmp " + dir + "/pids; wait\n"
}

// waitForPids waits for the pids a test script leaves in dir/pids.
func waitForPids(t *testing.T, dir string) []int {
	t.Helper()
	var data []byte
	eventually.True(t, 10*time.Second, func() bool {
		var err error
		data, err = os.ReadFile(filepath.Join(dir, "pids"))
		return err == nil
	}, "the test's pids in %s", dir)
	var out []int
	for _, w := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(w)
		if err != nil {
			t.Fatalf("pid %q: %v", w, err)
		}
		out = append(out, n)
	}
	if len(out) != 2 {
		t.Fatalf("pids %q, want two", data)
	}
	return out
}

// theTest is what initializerWrites writes as tests/F-001.sh.
const theTest = "#!/bin/sh\ngrep -qx 'F-001 works' src/F-001.txt\n"

// git runs git in the project and returns its trimmed output and whether
// it succeeded.
func (h *harness) git(args ...string) (string, bool) {
	h.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = h.proj.Dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err == nil
}

func (h *harness) read(rel string) string {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.proj.Dir, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return string(data)
}

func (h *harness) violations() []control.Trace {
	h.t.Helper()
	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		h.t.Fatal(err)
	}
	return trs
}

// gateCodes renders traces as "gate/code" in order.
func gateCodes(trs []control.Trace) []string {
	var out []string
	for _, tr := range trs {
		out = append(out, tr.Gate+"/"+tr.Code)
	}
	return out
}

// Every run is in the store, with the tree it starts from and the hash of
// its token, and its transition committed, before its process starts: a
// crash at any point finds it there.
func TestRunIsPersistedBeforeItStarts(t *testing.T) {
	h := newHarness(t)
	wantState := map[role.Role]string{role.Initializer: "init", role.Coder: "code", role.Tester: "test"}
	var checked []string
	h.runner.onRun = func(spec agents.Spec) {
		checked = append(checked, spec.RunID)
		st, err := h.st.Load()
		if err != nil {
			t.Errorf("%s: load: %v", spec.RunID, err)
			return
		}
		r := st.Session.Run
		if r == nil || r.ID != spec.RunID || r.Role != string(spec.Role) || r.Feature != spec.FeatureID || r.SessionID != spec.SessionID ||
			r.BaseTree == "" || r.TokenHash == "" || r.TokenHash != control.TokenHash(spec.Token) || r.Outcome != "" {
			t.Errorf("%s: the stored run in flight is %+v, want this run with its base tree and token hash", spec.RunID, r)
		}
		if st.Session.State != wantState[spec.Role] || st.LastRunSeq == 0 {
			t.Errorf("%s: stored state %q, want %q", spec.RunID, st.Session.State, wantState[spec.Role])
		}
		runs, err := h.st.Runs()
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == spec.RunID }); i < 0 || runs[i].BaseTree == "" || runs[i].TokenHash != control.TokenHash(spec.Token) {
			t.Errorf("%s: not in the store's runs with its base tree and token hash", spec.RunID)
		}
		trs, err := h.st.Transitions()
		if err != nil {
			t.Fatal(err)
		}
		if last := trs[len(trs)-1]; last.Run != spec.RunID || last.To != wantState[spec.Role] {
			t.Errorf("%s: the last stored transition is %+v, want this run's, to %s", spec.RunID, last, wantState[spec.Role])
		}
		if spec.Role == role.Coder {
			if c := st.Counters[spec.FeatureID]; c.Base == "" || c.CoderSession != spec.SessionID || c.Runs == 0 {
				t.Errorf("%s: stored counters %+v, want the feature's base and coding session", spec.RunID, c)
			}
		}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if len(checked) != 5 {
		t.Errorf("checked %d runs, want 5", len(checked))
	}
}

// The daemon's own run of the test decides a verdict: a tester that claims
// tested with a passing record of its own while the code fails its test is
// refused, and each retry resumes the coding session; when the code passes,
// the verdict is accepted and a commit holds the coder's work.
func TestDaemonRerunDecidesTheVerdict(t *testing.T) {
	t.Run("the code fails its test", func(t *testing.T) {
		h := newHarness(t)
		h.runner.script[role.Initializer] = initializerWrites(1)
		h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
			h.write("src/F-001.txt", "F-001 almost works\n")
			h.edit(func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
			return agents.Result{Summary: "implemented", NumTurns: 3}
		}
		h.runner.script[role.Tester] = testerClaims(true)
		if err := h.runToEnd(); err != nil {
			t.Fatal(err)
		}
		specs := h.runner.runs()
		if got, want := roles(specs), "initializer coding:F-001 tester:F-001 coding:F-001 tester:F-001 coding:F-001 tester:F-001"; got != want {
			t.Fatalf("runs = %s, want %s", got, want)
		}
		if f := h.list().Feature("F-001"); f.Tested || f.Status != progress.Blocked {
			t.Errorf("F-001 = %s tested=%v, want blocked and not tested", f.Status, f.Tested)
		}
		var rejected int
		for _, tr := range h.violations() {
			if tr.Gate == gates.TestedNeedsEvidence && tr.Code == "verdict_rejected" {
				rejected++
				if !strings.Contains(tr.Event.WhatHappened, "did not pass") || tr.Context.Feature != "F-001" || tr.Context.Agent != string(role.Tester) {
					t.Errorf("rejection traced as %+v", tr)
				}
			}
		}
		if rejected != 3 {
			t.Errorf("%d verdict_rejected violations, want one per claim (3): %q", rejected, gateCodes(h.violations()))
		}
		// The retries resume the first coding run's session.
		first := specs[1]
		for _, retry := range []agents.Spec{specs[3], specs[5]} {
			if !retry.Resume || retry.SessionID != first.SessionID {
				t.Errorf("retry %s (attempt %d): resume=%v session %s, want a resume of %s", retry.RunID, retry.Attempt, retry.Resume, retry.SessionID, first.SessionID)
			}
		}
		if first.Resume {
			t.Error("the first coding run resumes a session")
		}
		// The daemon's output is kept as evidence; nothing is committed as
		// tested; the blocked feature's work is kept aside and the tree put back.
		if log := h.read(".claude/progress/evidence/F-001/daemon-verdict-attempt-1.log"); !strings.Contains(log, "failed (exit 1)") {
			t.Errorf("the daemon's verdict log: %q", log)
		}
		if _, ok := h.git("rev-parse", "-q", "--verify", "refs/ctxgraphd/tested/F-001"); ok {
			t.Error("a refused feature has a tested ref")
		}
		kept, ok := h.git("show", "refs/ctxgraphd/blocked/F-001:src/F-001.txt")
		if !ok || kept != "F-001 almost works" {
			t.Errorf("blocked ref holds %q (%v), want the coder's work", kept, ok)
		}
		if got := h.read("src/F-001.txt"); got != "<absent>" {
			t.Errorf("src/F-001.txt = %q after the block, want the tree put back", got)
		}
	})

	t.Run("the code passes, with HEAD detached meanwhile", func(t *testing.T) {
		h := newHarness(t)
		h.runner.script[role.Initializer] = initializerWrites(1)
		h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
			if _, ok := h.git("checkout", "-q", "--detach"); !ok {
				t.Error("could not detach HEAD")
			}
			return coderCompletes(ctx, spec, h)
		}
		h.runner.script[role.Tester] = testerClaims(true)
		if err := h.runToEnd(); err != nil {
			t.Fatal(err)
		}
		st := h.session()
		// Kept under its ref, and why is kept with it for ctl why and the
		// report.
		if c := st.Counters["F-001"]; c.Commit == "" || c.Branch != "" || c.OffBranch != "HEAD is detached" {
			t.Fatalf("counters %+v, want the commit off the branch, saying why", c)
		}
	})

	t.Run("the code passes", func(t *testing.T) {
		h := newHarness(t)
		h.runner.script[role.Initializer] = initializerWrites(1)
		h.runner.script[role.Tester] = testerClaims(true)
		if err := h.runToEnd(); err != nil {
			t.Fatal(err)
		}
		if got := summary(h.list()); got != "F-001=tested" {
			t.Fatalf("features = %s", got)
		}
		st := h.session()
		c := st.Counters["F-001"]
		if c.Commit == "" || c.Branch == "" {
			t.Fatalf("counters %+v, want the verdict's commit on the branch", c)
		}
		if got, _ := h.git("show", c.Commit+":src/F-001.txt"); got != "F-001 works" {
			t.Errorf("the commit holds src/F-001.txt = %q, want the coder's file", got)
		}
		if got, _ := h.git("show", c.Commit+":tests/F-001.sh"); got+"\n" != theTest {
			t.Errorf("the commit holds tests/F-001.sh = %q", got)
		}
		if got, _ := h.git("rev-parse", "refs/ctxgraphd/tested/F-001"); got != c.Commit {
			t.Errorf("tested ref at %q, want %s", got, c.Commit)
		}
		if got, _ := h.git("rev-parse", "HEAD"); got != c.Commit {
			t.Errorf("HEAD at %q, want %s", got, c.Commit)
		}
		if msg, _ := h.git("log", "-1", "--format=%B", c.Commit); !strings.Contains(msg, "ctxgraphd-feature: F-001") {
			t.Errorf("commit message %q", msg)
		}
		runs, err := h.st.Runs()
		if err != nil {
			t.Fatal(err)
		}
		if last := runs[len(runs)-1]; last.Role != string(role.Tester) || last.Commit != c.Commit || last.Outcome != "ok" {
			t.Errorf("the tester's run record %+v, want ok with the commit", last)
		}
		if trs, _ := h.st.Traces(store.TraceFilter{Type: control.TraceApproval}); len(trs) != 1 {
			t.Errorf("%d approvals, want 1", len(trs))
		}
		if v := h.violations(); len(v) != 0 {
			t.Errorf("violations %q", gateCodes(v))
		}
	})
}

// A test that passes before any code, or that cannot run, makes nothing
// tested: the feature is blocked before any coding run, without counting
// against max_blocked (it is the list's problem, not the coders'). (A
// runner missing from the machine's PATH is the machine's problem, not
// the list's: see TestRunnerMissingBeforeAnyCodeStopsForAPerson.)
func TestRedBeforeGreenBlocksUnworkableTests(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxBlocked = 3
	h.runner.script[role.Initializer] = initializerWith(
		map[string]string{"tests/F-001.sh": "exit 0\n", "tests/F-003.sh": "./no-such-program-ctxgraphd --check\n"},
		progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh"},   // vacuous
		progress.Feature{ID: "F-002", Test: "sh tests/missing.sh"}, // names a missing file
		progress.Feature{ID: "F-003", Test: "sh tests/F-003.sh"},   // exit 127
	)
	if err := h.runToEnd(); err != nil {
		t.Fatalf("loop: %v; want the session done", err)
	}
	if got := roles(h.runner.runs()); got != "initializer" {
		t.Errorf("runs = %s, want no coding run", got)
	}
	if got := summary(h.list()); got != "F-001=blocked F-002=blocked F-003=blocked" {
		t.Errorf("features = %s", got)
	}
	st := h.session()
	if st.Session.State != "done" || st.Session.BlockedInSession != 0 {
		t.Errorf("session %s with %d blocked in session, want done with none counted", st.Session.State, st.Session.BlockedInSession)
	}
	wantRed := map[string]string{"F-001": "passes", "F-002": "cannot_run", "F-003": "cannot_run"}
	for id, red := range wantRed {
		if c := st.Counters[id]; c.Red != red || c.RedDetail == "" || c.Failures != 0 {
			t.Errorf("%s counters %+v, want red %s with a detail and no failure", id, c, red)
		}
	}
	want := []string{"red-before-green/vacuous_test", "red-before-green/test_cannot_run", "red-before-green/test_cannot_run"}
	if got := gateCodes(h.violations()); !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}
	if c := st.Counters["F-002"]; !strings.Contains(c.RedDetail, "tests/missing.sh does not exist") {
		t.Errorf("F-002's detail %q does not name the missing file", c.RedDetail)
	}
}

// With red-before-green in warn mode a vacuous test is reported and the
// feature worked all the same.
func TestRedBeforeGreenWarnWorksTheFeature(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates[gates.RedBeforeGreen] = config.Warn
	h.runner.script[role.Initializer] = initializerWithTests("exit 0\n")
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 tester:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	if got := gateCodes(h.violations()); !slices.Equal(got, []string{"red-before-green/vacuous_test"}) {
		t.Errorf("violations %q, want the vacuous test reported", got)
	}
}

// A coder that changes its feature's frozen test, by whatever route, has
// the change put back and its attempt failed: the tester is not spawned
// for it, and the violation is traced.
func TestCoderChangingItsFrozenTestIsRestored(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := coderCompletes(ctx, spec, h)
		if spec.Attempt == 1 {
			h.write("tests/F-001.sh", "exit 0\n") // as `echo 'exit 0' > tests/F-001.sh` would
		}
		return res
	}
	var testAtTester string
	h.runner.onRun = func(spec agents.Spec) {
		if spec.Role == role.Tester {
			testAtTester = h.read("tests/F-001.sh")
		}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	specs := h.runner.runs()
	if got, want := roles(specs), "initializer coding:F-001 coding:F-001 tester:F-001"; got != want {
		t.Fatalf("runs = %s, want %s", got, want)
	}
	if got := h.read("tests/F-001.sh"); got != theTest {
		t.Errorf("tests/F-001.sh = %q, want it put back", got)
	}
	if testAtTester != theTest {
		t.Errorf("the tester ran on tests/F-001.sh = %q", testAtTester)
	}
	v := h.violations()
	if got := gateCodes(v); !slices.Equal(got, []string{"frozen-tests/frozen_test"}) {
		t.Fatalf("violations %q, want one frozen_test", got)
	}
	if c := v[0].Context; c.Run != specs[1].RunID || c.Agent != string(role.Coder) || c.Feature != "F-001" || v[0].Source != control.SourceAuto {
		t.Errorf("violation %+v, want the first coding run's", v[0])
	}
	if retry := specs[2]; !retry.Resume || retry.SessionID != specs[1].SessionID || retry.Attempt != 2 {
		t.Errorf("the retry: attempt %d resume=%v session %s, want attempt 2 resuming %s", retry.Attempt, retry.Resume, retry.SessionID, specs[1].SessionID)
	}
	st := h.session()
	if c := st.Counters["F-001"]; !strings.Contains(c.LastFailure, "tests/F-001.sh") || c.Failures != 1 {
		t.Errorf("counters %+v, want one failure naming the test", c)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	if got, _ := h.git("show", "refs/ctxgraphd/tested/F-001:tests/F-001.sh"); got+"\n" != theTest {
		t.Errorf("the tested commit holds tests/F-001.sh = %q", got)
	}
}

// A person's change to a frozen test while no run is in flight (here while
// the daemon was down, between two runs) is theirs: the record follows it,
// and nothing is put back.
func TestPersonsChangeToAFrozenTestIsAdopted(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	h.runner.script[role.Initializer] = initializerWithTests(hangingTest(dir))
	ctx, cancel := context.WithCancel(context.Background())
	o := h.orchestrator(true)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	waitForPids(t, dir) // the daemon checks the test before any code
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	const fixed = "grep -q 'F-001 works' src/F-001.txt\n"
	h.write("tests/F-001.sh", fixed) // the person's fix
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 tester:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	if got := h.read("tests/F-001.sh"); got != fixed {
		t.Errorf("tests/F-001.sh = %q, want the person's version kept", got)
	}
	if v := h.violations(); len(v) != 0 {
		t.Errorf("violations %q for a person's change", gateCodes(v))
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	blob, _ := h.git("hash-object", "tests/F-001.sh")
	if got := h.current.opts.Judge.Frozen().Files["tests/F-001.sh"]; got != blob {
		t.Errorf("frozen record of tests/F-001.sh is %s, want the person's version %s", got, blob)
	}
	st := h.session()
	if !strings.Contains(string(st.Frozen), blob) {
		t.Errorf("the stored record %s does not hold the person's version", st.Frozen)
	}
	trs, _ := h.st.Traces(store.TraceFilter{Type: control.TraceDecision, Text: "frozen tests changed while no agent ran"})
	if len(trs) != 1 {
		t.Errorf("%d decisions that the record followed the person, want 1", len(trs))
	}
}

// A run lost in a crash (its daemon gone, its processes left to finish)
// is judged by what it left in the tree when the next daemon starts: what
// it must not have changed is put back and traced before the run is redone.
func TestRecoverJudgesWhatALostRunLeft(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	started := make(chan agents.Spec, 1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, _ *harness) agents.Result {
		started <- spec
		<-ctx.Done()
		return agents.Result{Ended: agents.EndCancelled}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := h.orchestrator(true)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	lost := <-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := h.session()
	if r := st.Session.Run; r == nil || r.ID != lost.RunID || r.BaseTree == "" {
		t.Fatalf("stored run in flight %+v, want the lost coding run with its base", r)
	}
	// What the run's processes did after the daemon was gone.
	h.write("tests/F-001.sh", "exit 0\n")
	h.write("src/F-001.txt", "F-001 works\n")

	h.runner.script[role.Coder] = coderCompletes
	var atRedo string
	var violationsAtRedo []string
	h.runner.onRun = func(spec agents.Spec) {
		if spec.Role == role.Coder {
			atRedo = h.read("tests/F-001.sh")
			violationsAtRedo = gateCodes(h.violations())
		}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if atRedo != theTest {
		t.Errorf("the redo started with tests/F-001.sh = %q, want it put back", atRedo)
	}
	if !slices.Equal(violationsAtRedo, []string{"frozen-tests/frozen_test"}) {
		t.Errorf("violations when the redo started: %q, want the lost run's frozen_test", violationsAtRedo)
	}
	v := h.violations()
	if len(v) != 1 || v[0].Context.Run != lost.RunID {
		t.Errorf("violations %+v, want one, of the lost run %s", v, lost.RunID)
	}
	if got, want := roles(h.runner.runs()), "initializer coding:F-001 coding:F-001 tester:F-001"; got != want {
		t.Errorf("runs = %s, want %s", got, want)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("features = %s", got)
	}
	runs, err := h.st.Runs()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == lost.RunID }); i < 0 || runs[i].Outcome != "interrupted" || runs[i].Ended != "lost" {
		t.Errorf("the lost run's record: %+v", runs[i])
	}
}

// With frozen-tests in warn mode a coder's change to its test is let
// through and reported; it stays the agent's change: the record of the
// frozen tests follows a person, never an agent, and the change is not
// taken for a person's at the next run.
func TestWarnModeFrozenChangeIsNotTakenForAPersons(t *testing.T) {
	h := newHarness(t)
	h.cfg.Gates[gates.FrozenTests] = config.Warn
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		res := coderCompletes(ctx, spec, h)
		h.write("tests/F-001.sh", "exit 0\n")
		return res
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := gateCodes(h.violations()); !slices.Equal(got, []string{"frozen-tests/frozen_test"}) {
		t.Errorf("violations %q, want the warned frozen_test", got)
	}
	if got := h.read("tests/F-001.sh"); got != "exit 0\n" {
		t.Errorf("tests/F-001.sh = %q: warn mode put it back", got)
	}
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Dir, cmd.Stdin = h.proj.Dir, strings.NewReader(theTest)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.current.opts.Judge.Frozen().Files["tests/F-001.sh"], strings.TrimSpace(string(out)); got != want {
		t.Errorf("the frozen record of tests/F-001.sh is %s, want the accepted version %s: it followed the agent", got, want)
	}
	if trs, _ := h.st.Traces(store.TraceFilter{Type: control.TraceDecision, Text: "while no agent ran"}); len(trs) != 0 {
		t.Errorf("the coder's change was recorded as a person's: %q", trs[0].Event.WhatHappened)
	}
}

// A tester's tested: true that no verdict judged does not stay on disk
// when the daemon shuts down with the tester's run in flight.
func TestShutdownTakesAnUnjudgedClaimOffTheDisk(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	claimed := make(chan struct{})
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		testerClaims(true)(ctx, spec, h)
		close(claimed)
		<-ctx.Done()
		return agents.Result{Ended: agents.EndCancelled}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := h.orchestrator(true)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	<-claimed
	// The daemon has taken the claim (the watcher saw the write) before
	// it shuts down; asked on the loop's own goroutine.
	eventually.True(t, 10*time.Second, func() bool {
		var claim string
		o.do(ctx, func() error {
			if c := o.lanes.home.claim; c != nil {
				claim = c.feature()
			}
			return nil
		})
		return claim == "F-001"
	}, "the daemon holding F-001's claim")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.list().Feature("F-001").Tested {
		t.Error("feature-list.json says F-001 is tested after a shutdown, though no verdict judged the tester's claim")
	}
}

// TestClaimWithoutEvidenceIsRejected: a tester whose test run passed, on
// code that passes, but that lists no evidence, is not taken at its word.
func TestClaimWithoutEvidenceIsRejected(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.MaxRetries = 0
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Tester] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		h.hook("post-tool-use", spec, map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "sh tests/" + spec.FeatureID + ".sh"}, "tool_response": map[string]any{"stdout": "", "stderr": ""}})
		h.edit(func(l *progress.List) { l.Feature(spec.FeatureID).Tested = true })
		return agents.Result{Summary: "passed", NumTurns: 2}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=blocked" {
		t.Fatalf("features = %s, want F-001=blocked: a claim without evidence must not make it tested", got)
	}
	var found bool
	for _, tr := range h.violations() {
		if tr.Code == "verdict_rejected" && strings.Contains(tr.Event.WhatHappened, "without evidence") {
			found = true
		}
	}
	if !found {
		t.Errorf("no verdict_rejected violation for the missing evidence: %v", gateCodes(h.violations()))
	}
}

// TestRunPolicyConfinesWhatRunsMayTouch: the sandbox of a run denies every
// file the daemon owns, every frozen test and, once the list is accepted,
// whole test directories; and it lets the tester write its own evidence.
func TestRunPolicyConfinesWhatRunsMayTouch(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(2)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	o := h.orchestrator(false)
	in := func(rel string) string { return filepath.Join(h.proj.Dir, rel) }
	coder := o.policy(o.lanes.home, role.Coder, "F-001")
	for _, p := range []string{
		in(".claude/progress/feature-list.json"), in(".claude/progress/session-state.json"), in(".claude/progress/goal.md"),
		in(".claude/ctxgraphd.yaml"), in(".claude/ctxgraphd"), in(".claude/settings.json"), in(".claude/settings.local.json"),
		in(".mcp.json"), in(".git"), in("CLAUDE.md"), in("CLAUDE.local.md"), in("tests/F-001.sh"), in("tests/F-002.sh"), in("tests"),
		h.proj.StateDir, h.proj.Socket,
	} {
		if !slices.Contains(coder.DenyWrite, p) {
			t.Errorf("a coder's sandbox may write %s", p)
		}
	}
	for _, p := range []string{h.proj.StateDir, h.proj.Socket} {
		if !slices.Contains(coder.DenyRead, p) {
			t.Errorf("a coder's sandbox may read %s", p)
		}
	}
	evidence := in(".claude/progress/evidence/F-001")
	if slices.Contains(coder.AllowWrite, evidence) {
		t.Errorf("a coder's sandbox may write the evidence")
	}
	if tester := o.policy(o.lanes.home, role.Tester, "F-001"); !slices.Contains(tester.AllowWrite, evidence) {
		t.Errorf("the tester's sandbox may not write its evidence: %v", tester.AllowWrite)
	}
	if p := o.policy(o.lanes.home, role.Initializer, ""); slices.Contains(p.DenyWrite, in("tests")) {
		t.Errorf("the initializer's sandbox denies tests/, which it must write")
	}
	settings, err := o.runSettings(role.Coder, "F-001")
	if err != nil || !strings.Contains(settings, `"failIfUnavailable":true`) || !strings.Contains(settings, `"hooks"`) {
		t.Errorf("settings = %s, %v", settings, err)
	}
	h.cfg.Sandbox.Enabled = false
	if settings, _ := o.runSettings(role.Coder, "F-001"); strings.Contains(settings, `"sandbox"`) {
		t.Errorf("confinement off, the settings still carry a sandbox: %s", settings)
	}
}

// The regression sweep: a feature whose own test passes on a tree where a
// feature tested before it fails its frozen test is not accepted; its coder
// is told which test broke and how, and the branch never holds a commit on
// which a tested feature's test fails.
func TestClaimThatBreaksATestedFeatureIsRejected(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": "grep -qx 'F-001 works' src/F-001.txt\n",
		"tests/F-002.sh": "grep -qx 'F-002 works' src/F-002.txt\n",
	}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh"}, progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", DependsOn: []string{"F-001"}})
	var told []string
	h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		h.write("src/"+spec.FeatureID+".txt", spec.FeatureID+" works\n")
		if spec.FeatureID == "F-002" {
			if spec.Attempt == 1 {
				h.write("src/F-001.txt", "F-001 replaced by F-002\n") // breaks F-001, which has no scope to protect it
			} else {
				told = append(told, spec.Prompt)
				h.write("src/F-001.txt", "F-001 works\n")
			}
		}
		h.edit(func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
		return agents.Result{Summary: "implemented", NumTurns: 3}
	}
	h.runner.script[role.Tester] = testerClaims(true)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	var breaks []control.Trace
	for _, tr := range h.violations() {
		if tr.Code == "breaks_tested" {
			breaks = append(breaks, tr)
		}
	}
	if len(breaks) != 1 || breaks[0].Context.Feature != "F-002" || !strings.Contains(breaks[0].Event.WhatHappened, "frozen test of F-001") {
		t.Errorf("breaks_tested violations %+v, want one on F-002 naming F-001", breaks)
	}
	if len(told) != 1 || !strings.Contains(told[0], "breaks the frozen test of F-001") || !strings.Contains(told[0], "sh tests/F-001.sh") {
		t.Errorf("the retry of F-002 was told %q, want which feature's test broke and how", told)
	}
	// Every commit on the branch holds a tree on which F-001 passes, once
	// F-001 is tested.
	log, _ := h.git("log", "--format=%H", "refs/ctxgraphd/tested/F-001^..HEAD")
	for _, c := range strings.Fields(log) {
		if got, _ := h.git("show", c+":src/F-001.txt"); got != "F-001 works" {
			t.Errorf("commit %s holds src/F-001.txt = %q: F-001's test fails on the branch", c, got)
		}
	}
	st := h.session()
	if c := st.Counters["F-002"]; c.Failures != 1 {
		t.Errorf("F-002 counters %+v, want the broken attempt charged once", c)
	}
}

// A hook that appears in the repository's own directory while a run is in
// flight (no route of an agent's to it is one the gates let through) is
// held so that git does not run it for a person, traced, and the session
// stops for them, the run not charged; after a resume the night goes on.
func TestAHookWrittenDuringARunIsHeldForAPerson(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWith(map[string]string{"tests/F-001.sh": "grep -qx 'F-001 works' src/F-001.txt\n"},
		progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh"})
	hook := filepath.Join(h.proj.Dir, ".git", "hooks", "post-checkout")
	coded := 0
	h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		coded++
		if coded == 1 {
			os.WriteFile(hook, []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755)
		}
		h.write("src/F-001.txt", "F-001 works\n")
		h.edit(func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
		return agents.Result{Summary: "implemented", NumTurns: 3}
	}
	h.runner.script[role.Tester] = testerClaims(true)
	err := h.runToEnd()
	if !errors.Is(err, ErrSessionStopped) || !strings.Contains(err.Error(), "hooks/post-checkout changed while run-") {
		t.Fatalf("the loop ended with %v, want stopped for a person, naming the hook", err)
	}
	if _, err := os.Lstat(hook); !os.IsNotExist(err) {
		t.Errorf("the hook is still where git runs it: %v", err)
	}
	if fi, err := os.Stat(hook + gitrepo.HeldSuffix); err != nil || fi.Mode().Perm()&0o111 != 0 {
		t.Errorf("held hook: %v %v, want a file that does not run", fi, err)
	}
	var traced bool
	for _, tr := range h.violations() {
		traced = traced || (tr.Code == "git_internals" && tr.Path == ".git/hooks/post-checkout" && tr.Context.Feature == "F-001")
	}
	if !traced {
		t.Errorf("no git_internals violation on .git/hooks/post-checkout: %+v", h.violations())
	}
	st := h.session()
	if c := st.Counters["F-001"]; c.Failures != 0 {
		t.Errorf("F-001 was charged for it: %+v", c)
	}

	// The person looked (and leaves the held file aside): the night goes on.
	h.reopen()
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested" {
		t.Errorf("after a resume: %s", got)
	}
}
