package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Blaming the right feature. An earlier feature E's frozen test fails on
// a later claim's candidate, for one of three reasons:
//
//   - bomb: E's code was right until a moment after its verdict (a file
//     outside the project stands for the clock): its test fails on the
//     branch without the claim's change too. E is reopened and worked again,
//     told why; the claim is accepted, not charged.
//   - flaky: E's test fails once, then passes, on the same tree: reported
//     as flaky, E reopened, the claim accepted, not charged.
//   - breaks: the claim's change really breaks E's test (it passes without
//     the change, fails twice with it): the claim is refused and charged
//     once, E stays tested.
//
// Each in the project's own tree and in lanes, with E first or second in
// the list (in lanes whichever lane starts, E's lands first).
func TestBlameTheRightFeature(t *testing.T) {
	for _, kind := range []string{"bomb", "flaky", "breaks"} {
		for _, parallel := range []int{1, 2} {
			for _, earlierFirst := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/parallel-%d/earlier-first-%v", kind, parallel, earlierFirst), func(t *testing.T) {
					blameCase(t, kind, parallel, earlierFirst, 2)
				})
			}
		}
	}
}

// A feature whose verdicts keep not holding is not worked for ever: one
// reopened with its retries used up (limits.max_retries 0 here) is blocked
// for a person, with the reason; the claimant is still not charged.
func TestAReopenedFeatureWithoutRetriesIsBlocked(t *testing.T) {
	for _, parallel := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallel-%d", parallel), func(t *testing.T) {
			blameCase(t, "bomb", parallel, true, 0)
		})
	}
}

func blameCase(t *testing.T, kind string, parallel int, earlierFirst bool, maxRetries int) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = parallel
	h.cfg.Limits.MaxRetries = maxRetries
	outside := t.TempDir()
	bomb, once := filepath.Join(outside, "the-moment-passed"), filepath.Join(outside, "fail-once")
	// E is the earlier feature, C the claimant, whatever their ids.
	e, c := "F-001", "F-002"
	if !earlierFirst {
		e, c = "F-002", "F-001"
	}
	testE := fmt.Sprintf("if [ -e %s ]; then rm -f %s; exit 1; fi\ntest \"$(sh src/%s/code.sh)\" = '%s works' && ! test -e src/%s/breaks\n", once, once, e, e, c)
	testC := fmt.Sprintf("grep -qx '%s works' src/%s/code.txt\n", c, c)
	fe := progress.Feature{ID: e, Test: "sh tests/" + e + ".sh", Scope: []string{"src/" + e + "/**"}}
	fc := progress.Feature{ID: c, Test: "sh tests/" + c + ".sh", Scope: []string{"src/" + c + "/**"}}
	if parallel == 1 {
		fc.DependsOn = []string{e} // worked one at a time: E first
	}
	features := []progress.Feature{fe, fc}
	if !earlierFirst {
		features = []progress.Feature{fc, fe}
	}
	h.runner.script[role.Initializer] = initializerWith(map[string]string{"tests/" + e + ".sh": testE, "tests/" + c + ".sh": testC}, features...)
	var mu sync.Mutex
	var retold []string
	h.runner.script[role.Coder] = func(_ context.Context, spec agents.Spec, h *harness) agents.Result {
		switch spec.FeatureID {
		case e:
			code := fmt.Sprintf("if [ -e %s ]; then echo late; else echo '%s works'; fi\n", bomb, e)
			if spec.Attempt > 1 {
				code = fmt.Sprintf("echo '%s works'\n", e)
				mu.Lock()
				retold = append(retold, spec.Prompt)
				mu.Unlock()
			}
			h.writeIn(spec, "src/"+e+"/code.sh", code)
		case c:
			h.writeIn(spec, "src/"+c+"/code.txt", c+" works\n")
			if kind == "breaks" && spec.Attempt == 1 {
				h.writeIn(spec, "src/"+c+"/breaks", "x\n")
			} else {
				os.Remove(filepath.Join(spec.Dir, "src/"+c+"/breaks")) // told, it undoes what broke E
			}
		}
		h.editIn(spec, func(l *progress.List) { l.Feature(spec.FeatureID).Status = progress.Completed })
		return agents.Result{Summary: "implemented", NumTurns: 3}
	}
	triggered := false
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == c && !triggered {
			// E is on the branch before C's claim is judged; then the
			// moment passes, or the flake is armed.
			// (Its commit, not the list a lane's claim shows while it is
			// judged.)
			landed := func() bool {
				_, ok := h.git("rev-parse", "--verify", "-q", "refs/ctxgraphd/tested/"+e)
				return ok
			}
			if !eventually.Within(20*time.Second, landed) {
				h.t.Errorf("%s was not tested before %s's claim", e, c)
			}
			triggered = true
			switch kind {
			case "bomb":
				os.WriteFile(bomb, nil, 0o644)
			case "flaky":
				os.WriteFile(once, nil, 0o644)
			}
		}
		return testerClaims(true)(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	want := "F-001=tested F-002=tested"
	if maxRetries == 0 {
		want = map[string]string{"F-001": "F-001=blocked F-002=tested", "F-002": "F-001=tested F-002=blocked"}[e]
	}
	if got := summary(h.list()); got != want {
		t.Fatalf("features = %s, want %s", got, want)
	}
	st := h.session()
	if maxRetries == 0 {
		if n := st.Counters[c].Failures; n != 0 {
			t.Errorf("%s, the claimant, was charged %d times: want none", c, n)
		}
		if why := st.Counters[e].LastFailure; !strings.Contains(why, "1 of 1 attempts failed") || !strings.Contains(why, "no longer passes on the branch") {
			t.Errorf("%s blocked with %q, want its retries used up and why its verdict did not hold", e, why)
		}
		return
	}
	byCode := map[string][]control.Trace{}
	trs, err := h.st.Traces(store.TraceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trs {
		byCode[tr.Code] = append(byCode[tr.Code], tr)
	}
	mu.Lock()
	defer mu.Unlock()
	switch kind {
	case "bomb", "flaky":
		code := map[string]string{"bomb": codeReopened, "flaky": codeFlaky}[kind]
		if n := st.Counters[c].Failures; n != 0 {
			t.Errorf("%s, the claimant, was charged %d times (%s): want none", c, n, st.Counters[c].LastFailure)
		}
		if n := st.Counters[e].Failures; n != 1 {
			t.Errorf("%s, whose verdict did not hold, has %d failures: want 1", e, n)
		}
		if len(byCode["breaks_tested"]) != 0 {
			t.Errorf("breaks_tested charged: %+v", byCode["breaks_tested"])
		}
		got := byCode[code]
		if len(got) != 1 || got[0].Type != control.TraceViolation || got[0].Context.Feature != e || !strings.Contains(got[0].Event.WhatHappened, c+"'s candidate") {
			t.Errorf("%s traces %+v, want one violation on %s naming %s", code, got, e, c)
		}
		nc := byCode[codeNotCharged]
		if len(nc) != 1 || nc[0].Context.Feature != c || nc[0].Context.Run == "" {
			t.Errorf("not_charged traces %+v, want one on %s's run", nc, c)
		}
		if len(retold) != 1 || !strings.Contains(retold[0], "no longer passes on the branch") {
			t.Errorf("%s's second attempt was told %q, want why it was reopened", e, retold)
		}
		// The report says so.
		rep, err := report.Build(h.st, h.proj.ID, h.proj.Dir, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rep.Refusals {
			found = found || (r.Feature == e && r.Code == code)
		}
		if !found {
			t.Errorf("the report's refusals %+v do not say that %s was reopened", rep.Refusals, e)
		}
	case "breaks":
		if n := st.Counters[c].Failures; n != 1 {
			t.Errorf("%s, which broke %s's test, has %d failures: want 1", c, e, n)
		}
		if n := st.Counters[e].Failures; n != 0 {
			t.Errorf("%s, broken by %s, has %d failures: want none", e, c, n)
		}
		if b := byCode["breaks_tested"]; len(b) != 1 || b[0].Context.Feature != c {
			t.Errorf("breaks_tested %+v, want one on %s", b, c)
		}
		if n := len(byCode[codeReopened]) + len(byCode[codeFlaky]) + len(byCode[codeNotCharged]); n != 0 {
			t.Errorf("%d reopening traces, want none: %+v %+v", n, byCode[codeReopened], byCode[codeFlaky])
		}
	}
	// The branch ends on a tree where both tests pass, the moment past.
	if got, _ := h.git("show", "HEAD:src/"+e+"/code.sh"); kind == "bomb" && strings.Contains(got, "late") {
		t.Errorf("the branch still holds %s's time bomb:\n%s", e, got)
	}
	if got, ok := h.git("ls-tree", "-r", "--name-only", "HEAD"); !ok || strings.Contains(got, "src/"+c+"/breaks") {
		t.Errorf("the branch holds what broke %s:\n%s", e, got)
	}
}

// A change in the environment is no one's failure. F-001's test runs a
// program that leaves the machine after F-001 is tested: F-002's sweep
// finds its test failing on the branch head alone, for want of the
// program. F-001 is reopened but not charged, nor is F-002 (tested at
// once); F-001's next verdict stops the session for a person, naming the
// program; once it is back, a resume ends both tested, none charged.
func TestAReopeningForTheMachineChargesNoOne(t *testing.T) {
	h := newHarness(t)
	gone := filepath.Join(t.TempDir(), "runner-uninstalled")
	runner := fmt.Sprintf("if [ -e %s ]; then ctxgraphd-test-runner-not-installed; exit 127; fi\n", gone)
	h.runner.script[role.Initializer] = initializerWith(map[string]string{
		"tests/F-001.sh": runner + "grep -qx 'F-001 works' src/F-001.txt\n",
		"tests/F-002.sh": "grep -qx 'F-002 works' src/F-002.txt\n",
	}, progress.Feature{ID: "F-001", Test: "sh tests/F-001.sh"}, progress.Feature{ID: "F-002", Test: "sh tests/F-002.sh", DependsOn: []string{"F-001"}})
	h.runner.script[role.Tester] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		if spec.FeatureID == "F-002" {
			os.WriteFile(gone, nil, 0o644) // F-001 is tested: the program leaves
		}
		return testerClaims(true)(ctx, spec, h)
	}
	o := h.orchestrator(false)
	ctx := running(t, o)

	why := stoppedFor(t, o)
	if !strings.Contains(why, "F-001's test could not run") || !strings.Contains(why, "ctxgraphd-test-runner-not-installed") {
		t.Errorf("the session stopped saying %q; want F-001's test and the program named", why)
	}
	reopened := 0
	for _, tr := range h.violations() {
		if tr.Code == codeReopened && tr.Context.Feature == "F-001" {
			reopened++
		}
	}
	if reopened != 1 {
		t.Errorf("%d tested_reopened traces of F-001, want one", reopened)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := o.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, o)
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Errorf("features = %s once the program is back", got)
	}
	for id, c := range h.session().Counters {
		if c.Failures != 0 {
			t.Errorf("%s was charged %d times (%s): the machine's failure is no one's", id, c.Failures, c.LastFailure)
		}
	}
}
