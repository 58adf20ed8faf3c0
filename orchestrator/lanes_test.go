package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// meeting lets scripts of runs wait for each other: a run that must see
// another at work at once.
type meeting struct {
	mu      sync.Mutex
	here    map[string]bool
	arrived chan struct{} // closed, and replaced, when someone arrives
}

// meet records who and waits, up to d, until want are all there; it
// reports whether they were.
func (m *meeting) meet(who string, want []string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	m.mu.Lock()
	if m.here == nil {
		m.here = map[string]bool{}
	}
	m.here[who] = true
	if m.arrived != nil {
		close(m.arrived)
	}
	m.arrived = make(chan struct{})
	for {
		all := true
		for _, w := range want {
			all = all && m.here[w]
		}
		arrived := m.arrived
		m.mu.Unlock()
		if all {
			return true
		}
		select {
		case <-arrived:
		case <-deadline.C:
			return false
		}
		m.mu.Lock()
	}
}

// With limits.parallel 2, two features whose scopes do not overlap are
// worked at once, each in a lane of its own beside the state
// directory; each lands on the branch on a tree where both tests pass
// once both are tested, the project's work tree holds both, and no
// lane is left.
func TestLanesWorkFeaturesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	var m meeting
	var dirs sync.Map
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		dirs.Store(spec.FeatureID, spec.Dir)
		// The lane holds what the project's progress folder does, at the
		// same paths: the list (its own copy) and the goal.
		if _, err := os.Stat(filepath.Join(spec.Dir, ".claude/progress/goal.md")); err != nil {
			h.t.Errorf("%s's lane has no goal: %v", spec.FeatureID, err)
		}
		if !m.meet(spec.FeatureID, []string{"F-001", "F-002"}, 20*time.Second) {
			h.t.Errorf("%s's coder did not see the other at work at once", spec.FeatureID)
		}
		// ctl status and ctl features show both lanes meanwhile.
		st, _ := h.current.Status(ctx)
		if len(st.Lanes) != 2 || st.Current != nil {
			h.t.Errorf("status while both lanes work: lanes %+v, current %+v", st.Lanes, st.Current)
		}
		// So does session-state.json, the mirror a person reads.
		var mirror progress.SessionState
		if data, err := os.ReadFile(filepath.Join(h.proj.Progress(), progress.SessionStateFile)); err != nil || json.Unmarshal(data, &mirror) != nil {
			h.t.Errorf("session-state.json: %v", err)
		} else if !slices.ContainsFunc(mirror.Lanes, func(l progress.LaneState) bool {
			return l.FeatureID == spec.FeatureID && l.Dir == spec.Dir && l.Run != nil && l.Run.FeatureID == spec.FeatureID
		}) {
			h.t.Errorf("session-state.json does not show %s's lane at work: %+v", spec.FeatureID, mirror.Lanes)
		}
		fs, _ := h.current.Features(ctx)
		for _, f := range fs {
			if f.Lane != spec.Dir && f.ID == spec.FeatureID {
				h.t.Errorf("ctl features shows %s's lane as %q, want %s", f.ID, f.Lane, spec.Dir)
			}
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	// Neither claim was held against a tree without the other feature,
	// tested first: the second was judged on its tree merged onto the
	// branch, which held the first by then.
	st := h.session()
	for _, id := range []string{"F-001", "F-002"} {
		if c := st.Counters[id]; c.Failures != 0 {
			t.Errorf("%s failed %d times (%s): want none", id, c.Failures, c.LastFailure)
		}
	}
	for _, id := range []string{"F-001", "F-002"} {
		d, _ := dirs.Load(id)
		dir, _ := d.(string)
		if dir == "" || dir == h.proj.Dir || !strings.HasPrefix(dir, filepath.Join(filepath.Dir(h.proj.StateDir), "lanes", h.proj.ID)+string(filepath.Separator)) {
			t.Errorf("%s was coded in %q, want a lane of its own beside the state directory", id, dir)
		}
		if got := strings.TrimSpace(h.read("src/" + id + ".txt")); got != id+" works" {
			t.Errorf("the project's work tree holds src/%s.txt = %q", id, got)
		}
	}
	// The store keeps where each run worked: the lane's clone, the
	// project's own tree ("") for the initializer.
	runs, err := h.st.Runs()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		d, _ := dirs.Load(r.Feature)
		if want, _ := d.(string); r.Dir != want {
			t.Errorf("run %s (%s %s) is stored as worked in %q, want %q", r.ID, r.Role, r.Feature, r.Dir, want)
		}
	}
	// The branch holds both, one commit each, on top of the initializer's.
	log, _ := h.git("log", "--format=%s", "HEAD")
	if n := strings.Count(log, "\n") + 1; n != 3 {
		t.Errorf("the branch holds %d commits, want 3:\n%s", n, log)
	}
	for _, c := range strings.Fields(mustGit(t, h, "rev-list", "HEAD~2..HEAD")) {
		files := mustGit(t, h, "ls-tree", "-r", "--name-only", c)
		if !strings.Contains(files, "src/F-00") {
			t.Errorf("commit %s holds no feature's code:\n%s", c, files)
		}
	}
	noLanesLeft(t, h)
}

// Two features whose scopes overlap are never worked at once.
func TestLanesHoldFeaturesWhoseScopesOverlap(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	core, logs := observer.New(zap.DebugLevel)
	h.logOpts = []zap.Option{zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })}
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": "grep -qx 'F-001 works' src/F-001.txt\n",
		"tests/F-002.sh": "grep -qx 'F-002 works' src/F-002.txt\n",
	}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh", Scope: []string{"src/**"}},
		progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", Scope: []string{"src/F-002.txt"}})
	// heldFor reports whether the loop said it keeps waiting from starting
	// because of inFlight, whose scope overlaps its own: what waits on
	// what, as statemachine.Decide names it.
	heldFor := func(waiting, inFlight string) bool {
		want := fmt.Sprintf("%s waits for %s (in flight): their scopes overlap", waiting, inFlight)
		for _, e := range logs.All() {
			for _, v := range e.ContextMap() {
				if s, ok := v.(string); ok && strings.Contains(s, want) {
					return true
				}
			}
		}
		return false
	}
	tested := func(ctx context.Context, id string) bool {
		fs, _ := h.current.Features(ctx)
		return slices.ContainsFunc(fs, func(f control.Feature) bool { return f.ID == id && f.Tested })
	}
	var mu sync.Mutex
	inFlight, most := 0, 0
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		// This coder stays at work until the loop has shown that it holds
		// the other feature for it (or the other is tested already), so
		// that a second coder wrongly started beside it is counted however
		// late it starts: its test is checked first, in a lane of its own.
		// That second coder ends the wait too.
		other := map[string]string{"F-001": "F-002", "F-002": "F-001"}[spec.FeatureID]
		if !eventually.Within(20*time.Second, func() bool {
			mu.Lock()
			two := inFlight > 1
			mu.Unlock()
			return two || heldFor(other, spec.FeatureID) || tested(ctx, other)
		}) {
			h.t.Errorf("%s was neither held for %s nor started beside it", other, spec.FeatureID)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	if most != 1 {
		t.Errorf("%d coders at once, want 1: their scopes overlap", most)
	}
}

// noLanesLeft fails t when anything of a lane is left: every lane is a
// directory of the daemon's lanes directory (lanesDir), and nothing of it
// is in the project's repository.
func noLanesLeft(t *testing.T, h *harness) {
	t.Helper()
	if left, _ := os.ReadDir(h.current.lanesDir()); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("lanes left behind: %v", names)
	}
}

func mustGit(t *testing.T, h *harness, args ...string) string {
	t.Helper()
	out, ok := h.git(args...)
	if !ok {
		t.Fatalf("git %v failed", args)
	}
	return out
}

// Two features whose code passes alone and breaks each other's test: the
// second's claim is judged on its tree merged onto the branch, which holds
// the first by then; the sweep finds the first's test failing there, the
// second is sent back to a fresh lane from the branch with the reason,
// and fixed; no commit of the branch fails a test of a feature tested
// before it.
func TestLanesSendBackWhatBreaksTheBranch(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": "grep -qx 'F-001 works' src/a/F-001.txt && ! test -e src/b/breaks-a\n",
		"tests/F-002.sh": "grep -qx 'F-002 works' src/b/F-002.txt\n",
	}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh", Scope: []string{"src/a/**"}},
		progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", Scope: []string{"src/b/**"}})
	var told []string
	var mu sync.Mutex
	h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		dir := map[string]string{"F-001": "src/a/", "F-002": "src/b/"}[spec.FeatureID]
		h.writeIn(spec, dir+spec.FeatureID+".txt", spec.FeatureID+" works\n")
		if spec.FeatureID == "F-002" {
			if spec.Attempt == 1 {
				h.writeIn(spec, "src/b/breaks-a", "x\n")
			} else {
				mu.Lock()
				told = append(told, spec.Prompt)
				mu.Unlock()
			}
		}
		h.editIn(spec, func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
		return agents.Result{Summary: "implemented", NumTurns: 3}
	}
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == "F-002" {
			// F-001 is on the branch before F-002's claim is judged.
			eventually.Within(20*time.Second, func() bool {
				f := h.list().Feature("F-001")
				return f != nil && f.Tested
			})
		}
		return testerClaims(true)(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], "F-001") {
		t.Errorf("F-002's retry was told %q, want which feature's test its change broke", told)
	}
	// Every commit since F-001's holds a tree on which F-001's test passes.
	for _, c := range strings.Fields(mustGit(t, h, "rev-list", "refs/ctxgraphd/tested/F-001^..HEAD")) {
		if files := mustGit(t, h, "ls-tree", "-r", "--name-only", c); strings.Contains(files, "src/b/breaks-a") {
			t.Errorf("commit %s on the branch breaks F-001's test:\n%s", c, files)
		}
	}
	if _, err := os.Stat(filepath.Join(h.proj.Dir, "src/b/breaks-a")); err == nil {
		t.Error("the project's work tree holds what broke F-001")
	}
	st := h.session()
	if c := st.Counters["F-002"]; c.Failures != 1 {
		t.Errorf("F-002 counters %+v, want the breaking attempt charged once", c)
	}
}

// A daemon that is shut down with runs in flight in two lanes removes
// their clones as it exits, keeping each lane's work under its ref; the
// next one works the features again from fresh lanes, charges nothing for
// the runs cut short, and leaves no lane behind. (One that dies, kill -9,
// leaves its lanes for the next start to remove: e2e/lanes_test.go.)
func TestLanesAfterARestart(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	var m meeting
	first := true
	var mu sync.Mutex
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		mu.Lock()
		hang := first
		mu.Unlock()
		if hang {
			h.writeIn(spec, "src/"+spec.FeatureID+".txt", "half of "+spec.FeatureID+"\n")
			m.meet(spec.FeatureID, []string{"F-001", "F-002"}, 20*time.Second)
			<-ctx.Done() // the daemon goes down with both in flight
			return agents.Result{Ended: agents.EndCancelled}
		}
		return coderCompletes(ctx, spec, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.orchestrator(true).Run(ctx) }()
	if !m.meet("test", []string{"F-001", "F-002"}, 30*time.Second) {
		t.Fatal("the two coders were never in flight at once")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := h.session()
	if len(st.Session.Lanes) != 0 {
		t.Errorf("the store keeps %d lanes after the shutdown, want none", len(st.Session.Lanes))
	}
	noLanesLeft(t, h)
	for _, id := range []string{"F-001", "F-002"} {
		if got, _ := h.git("show", branch.LaneRef(id)+":src/"+id+".txt"); got != "half of "+id {
			t.Errorf("%s's lane's work is not kept at %s: %q", id, branch.LaneRef(id), got)
		}
	}

	mu.Lock()
	first = false
	mu.Unlock()
	h.reopen()
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	st = h.session()
	for _, id := range []string{"F-001", "F-002"} {
		if c := st.Counters[id]; c.Failures != 0 {
			t.Errorf("%s counters %+v: a run the daemon cut short was charged", id, c)
		}
	}
	if len(st.Session.Lanes) != 0 {
		t.Errorf("lanes still recorded: %+v", st.Session.Lanes)
	}
	noLanesLeft(t, h)
}

// A rate limit met by one lane holds every lane: the other lane's run in
// flight is stopped (not charged, redone after the wait), so that no lane
// goes on calling the API while the session waits; then both features
// are done.
func TestLanesARateLimitHoldsEveryLane(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	h.cfg.Limits.Backoff, h.cfg.Limits.BackoffMax = 50*time.Millisecond, 50*time.Millisecond
	var m meeting
	var mu sync.Mutex
	limited, held := false, false
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		mu.Lock()
		first := !limited
		mu.Unlock()
		if first && m.meet(spec.FeatureID, []string{"F-001", "F-002"}, 20*time.Second) {
			if spec.FeatureID == "F-001" {
				mu.Lock()
				limited = true
				mu.Unlock()
				return apiFailure("rate_limit", 429, "API Error: Request rejected (429)")
			}
			select {
			case <-ctx.Done(): // held by F-001's limit
				mu.Lock()
				held = true
				mu.Unlock()
				return agents.Result{Ended: agents.EndCancelled}
			case <-time.After(20 * time.Second):
				h.t.Error("F-002's run went on while the session waited on F-001's rate limit")
			}
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEndWithin(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !held {
		t.Error("F-002's run was not stopped by F-001's rate limit")
	}
	st := h.session()
	for _, id := range []string{"F-001", "F-002"} {
		if c := st.Counters[id]; c.Failures != 0 {
			t.Errorf("%s was charged: %+v", id, c)
		}
	}
}

// A lane whose feature never passes is blocked, its work kept under its
// blocked ref, while the other lane's feature goes on to be tested; the
// project's work tree never holds the blocked feature's code.
func TestLanesABlockedLaneLetsTheOthersGoOn(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == "F-001" {
			h.writeIn(spec, "src/F-001.txt", "F-001 is broken\n") // its test never passes
			h.editIn(spec, func(l *progress.List) { l.Feature("F-001").Status = progress.Completed })
			return agents.Result{Summary: "implemented", NumTurns: 3}
		}
		return coderCompletes(ctx, spec, h)
	}
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		return testerClaims(spec.FeatureID != "F-001")(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=blocked F-002=tested" {
		t.Fatalf("features = %s, want F-001 blocked and F-002 tested", got)
	}
	if kept := mustGit(t, h, "show", "refs/ctxgraphd/blocked/F-001:src/F-001.txt"); kept != "F-001 is broken" {
		t.Errorf("F-001's blocked work holds %q", kept)
	}
	if _, err := os.Stat(filepath.Join(h.proj.Dir, "src/F-001.txt")); err == nil {
		t.Error("the project's work tree holds the blocked feature's code")
	}
	if got := strings.TrimSpace(h.read("src/F-002.txt")); got != "F-002 works" {
		t.Errorf("the project's work tree holds src/F-002.txt = %q", got)
	}
}

// ctl pause with two lanes at work: each run finishes and is judged, and
// the outcome of one that ends while the session is paused is kept like
// any other. Both coders fail their first attempt, one before the pause
// takes effect and one after; after ctl resume each is retried once,
// at attempt 2 and told why, and both are tested.
func TestLanesPauseKeepsTheOutcomesOfRunsInFlight(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	var m meeting
	var mu sync.Mutex
	told := map[string]bool{}
	paused := func(st control.Status) bool { return st.State == "paused" }
	again := stopsWhenRedone(h)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if again(spec) {
			return agents.Result{}
		}
		if spec.Attempt > 1 {
			mu.Lock()
			told[spec.FeatureID] = strings.Contains(spec.Prompt, "fix_feature") && strings.Contains(spec.Prompt, "no luck with "+spec.FeatureID)
			mu.Unlock()
			return coderCompletes(ctx, spec, h)
		}
		if !m.meet(spec.FeatureID, []string{"F-001", "F-002"}, 20*time.Second) {
			h.t.Errorf("%s's coder did not see the other at work at once", spec.FeatureID)
		}
		if spec.FeatureID == "F-001" {
			if err := h.current.Pause(ctx); err != nil {
				h.t.Errorf("pause: %v", err)
			}
		} else {
			// F-002 ends once the session is paused, by F-001's end.
			if !statusWithin(h.current, 20*time.Second, paused) {
				h.t.Errorf("the session did not pause when F-001's run ended")
			}
			go func() {
				// Resumed once F-002's end is taken, with no lane at work.
				statusWithin(h.current, 20*time.Second, func(st control.Status) bool {
					return st.State == "paused" && len(st.Lanes) == 0 && st.Working == ""
				})
				if err := h.current.Resume(context.Background()); err != nil {
					h.t.Errorf("resume: %v", err)
				}
			}()
		}
		return agents.Result{Summary: "no luck with " + spec.FeatureID, NumTurns: 3, CostUSD: 0.01}
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	st := h.session()
	for _, id := range []string{"F-001", "F-002"} {
		if c := st.Counters[id]; c.Failures != 1 {
			t.Errorf("%s: %d failed attempts, want 1: a failure while paused is a failure", id, c.Failures)
		}
		if !told[id] {
			t.Errorf("%s's retry was not a fix_feature told why its first attempt failed", id)
		}
	}
	noLanesLeft(t, h)
}

// The lanes' checks of their tests, before any code, run beside each
// other: a lane's check reads its own tree only, so one lane's slow test
// does not hold the next lane's start. Each test, before its feature
// exists, waits (up to 10 s) for the other's to be running, and says
// whether it was.
func TestLanesCheckTheirTestsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	meet := t.TempDir()
	body := func(id, other string) string {
		return fmt.Sprintf(`if [ ! -e src/%[1]s.txt ]; then
  touch %[3]s/%[1]s
  for i in $(seq 200); do
    if [ -e %[3]s/%[2]s ]; then touch %[3]s/%[1]s.met; break; fi
    sleep 0.05
  done
fi
grep -qx '%[1]s works' src/%[1]s.txt
`, id, other, meet)
	}
	h.runner.script[role.Initializer] = initializerWithTests(body("F-001", "F-002"), body("F-002", "F-001"))
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	for _, id := range []string{"F-001", "F-002"} {
		if _, err := os.Stat(filepath.Join(meet, id+".met")); err != nil {
			t.Errorf("%s's check before any code never ran beside the other's: the lanes' checks went one at a time", id)
		}
	}
	noLanesLeft(t, h)
}

// A lane's check that ends while another lane's verdict is judged (the
// one job that moves the branch) leaves its lane idle for that long only:
// once the verdict is in, the lane's coder starts. The tests meet through
// files: F-002's check (its test before its code exists) waits for F-001's
// verdict (the only run of F-001's test with its code: the scripted tester
// does not run it) to begin, then ends; the verdict waits for that, and a
// moment more.
func TestLanesACheckThatEndsDuringAVerdictGoesOn(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	meet := t.TempDir()
	waitFor := func(name string) string {
		return fmt.Sprintf("for i in $(seq 200); do [ -e %s/%s ] && break; sleep 0.05; done", meet, name)
	}
	h.runner.script[role.Initializer] = initializerWithTests(
		fmt.Sprintf("if [ -e src/F-001.txt ]; then touch %s/verdict; %s; sleep 0.3; fi\ngrep -qx 'F-001 works' src/F-001.txt\n", meet, waitFor("checked")),
		fmt.Sprintf("if [ ! -e src/F-002.txt ]; then %s; touch %s/checked; fi\ngrep -qx 'F-002 works' src/F-002.txt\n", waitFor("verdict"), meet),
	)
	if err := h.runToEndWithin(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s: a lane whose check ended during a verdict was left idle", got)
	}
	for _, f := range []string{"verdict", "checked"} {
		if _, err := os.Stat(filepath.Join(meet, f)); err != nil {
			t.Errorf("%s: F-002's check did not end during F-001's verdict; this test no longer holds what it says", f)
		}
	}
	noLanesLeft(t, h)
}

// TestLanesLandTheirDependenciesInTheProject: what a lane installed
// (node_modules, which git does not carry) goes with its work into the
// project's work tree when it lands, so that a later claim's regression
// sweep, in a lane that installed nothing, finds the earlier feature's
// dependency and does not reopen it; and the person's tree holds it in
// the morning.
func TestLanesLandTheirDependenciesInTheProject(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	// The person's .gitignore names node_modules, committed before the
	// night (docs/operations.md).
	h.write(".gitignore", "node_modules/\n")
	mustGit(t, h, "add", ".gitignore")
	mustGit(t, h, "-c", "user.name=person", "-c", "user.email=person@example.com", "commit", "-q", "-m", "ignore node_modules")
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": "grep -qx 'F-001 works' src/F-001.txt && grep -qx dep node_modules/dep/index.js\n",
		"tests/F-002.sh": "grep -qx 'F-002 works' src/F-002.txt\n",
	}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh", Scope: []string{"src/F-001.txt"}},
		progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", Scope: []string{"src/F-002.txt"}})
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == "F-001" {
			h.writeIn(spec, "node_modules/dep/index.js", "dep\n") // as npm install writes it
		}
		return coderCompletes(ctx, spec, h)
	}
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == "F-002" {
			// F-001 is on the branch before F-002's claim is judged, its
			// frozen test swept on F-002's tree.
			eventually.Within(20*time.Second, func() bool {
				f := h.list().Feature("F-001")
				return f != nil && f.Tested
			})
		}
		return testerClaims(true)(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	st := h.session()
	for _, id := range []string{"F-001", "F-002"} {
		if c := st.Counters[id]; c.Failures != 0 || c.Runs != 2 {
			t.Errorf("%s counters %+v: want tested at its first attempt (a coder, a tester), nothing reopened", id, c)
		}
	}
	if got := strings.TrimSpace(h.read("node_modules/dep/index.js")); got != "dep" {
		t.Errorf("the project's work tree holds node_modules/dep/index.js = %q, want what F-001's lane installed", got)
	}
	if out := mustGit(t, h, "status", "--porcelain", "--", ".", ":!.claude"); out != "" {
		t.Errorf("the project's work tree is not the branch's last commit:\n%s", out)
	}
	noLanesLeft(t, h)
}
