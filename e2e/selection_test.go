package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// selecting is what a night with selection adds to the environment: a
// full sweep only every 20 sweeps (the default, 50, would do as well;
// said so that a change of the default does not change these nights), so
// that every sweep of these nights is a selected one.
var selecting = "CTXGRAPHD_LIMITS_FULL_SWEEP_EVERY=20"

// sweepsLogged are the "regression sweep ended" lines of a daemon's JSON
// log: how many tests each ran and skipped, and whether it was full, and
// how many a full one did not run because they passed on its tree.
func sweepsLogged(t *testing.T, log string) (ran, skipped, full, passedHere int) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg            string
			Tests, Skipped int
			Full           bool
			PassedHere     int `json:"passed_here"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "the regression sweep ended" {
			continue
		}
		ran += l.Tests
		skipped += l.Skipped
		passedHere += l.PassedHere
		if l.Full {
			full++
		}
	}
	return ran, skipped, full, passedHere
}

// TestANightWithSelectionKeepsTheBranchGreen: six honest features, each
// its own file and test, with selection. The sweeps skip the earlier
// features' tests (no change touches what they read), the session's last
// sweep runs them all on the branch's tip (but the last claim's, which its
// verdict passed there), and every commit of the branch
// passes the test of every feature tested at or before it: the branch is
// always green.
func TestANightWithSelectionKeepsTheBranchGreen(t *testing.T) {
	night(t, extended)
	var fs []scriptedmodel.FeatureScript
	for i := 1; i <= 6; i++ {
		fs = append(fs, feature(fmt.Sprintf("F-%03d", i), scriptedmodel.Pass))
	}
	p := newProject(t, scenario("selection", fs...))
	p.env = append(p.env, selecting, "CTXGRAPHD_LOG_FORMAT=json")
	log := p.runToEnd()
	if got, want := states(p.featureList()), "F-001=tested F-002=tested F-003=tested F-004=tested F-005=tested F-006=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	ran, skipped, full, passedHere := sweepsLogged(t, log)
	// Six claims swept 0+1+…+5 = 15 earlier tests, the last sweep all 6
	// but F-006's, which its verdict passed on the tip.
	if skipped < 15 || full != 1 || ran < 5 || ran+passedHere < 6 || passedHere > 1 {
		t.Errorf("sweeps ran %d tests, skipped %d, %d full, %d passed on the tip already; want the claims' 15 earlier tests skipped and one full sweep (the last) of all 6 but the last claim's own\n%s", ran, skipped, full, passedHere, log)
	}
	if !strings.Contains(log, "a full sweep of the branch's tip before the session ends") {
		t.Errorf("the log does not say the tip was swept before the end\n%s", log)
	}
	p.everyCommitGreen()
}

// everyCommitGreen runs, on a checkout of every feature commit of the
// branch, the test of every feature tested at or before it, and fails
// the test for each that does not pass there.
func (p *project) everyCommitGreen() {
	p.t.Helper()
	list := p.featureList()
	tests := map[string]string{}
	for _, f := range list.Features {
		tests[f.ID] = f.Test
	}
	var tested []string
	commits := strings.Fields(p.git("log", "--reverse", "--first-parent", "--format=%H", "--grep", "^ctxgraphd-feature: ", "HEAD"))
	if len(commits) == 0 {
		p.t.Fatal("no feature commit on the branch")
	}
	for _, c := range commits {
		id := strings.TrimSpace(p.git("log", "-1", "--format=%(trailers:key=ctxgraphd-feature,valueonly)", c))
		if !slices.Contains(tested, id) {
			tested = append(tested, id)
		}
		dir := p.checkoutOf(c)
		for _, f := range tested {
			cmd := exec.Command("sh", "-c", tests[f])
			cmd.Dir, cmd.Env = dir, p.env
			if out, err := cmd.CombinedOutput(); err != nil {
				p.t.Errorf("commit %s (%s) fails %s's test `%s`: %v\n%s", c[:12], id, f, tests[f], err, out)
			}
		}
	}
}

// TestATimeBombSelectionSkipsIsFoundByTheLastSweep: with selection,
// F-001's time bomb (right until a moment after its verdict) is skipped by
// F-002's sweep, since F-002's change touches nothing F-001's test reads.
// The session does not end on it: its last sweep runs every test on the
// branch's tip, finds F-001's failing, and the bisection finds it failing
// on its own landing too (no landing broke it: the clock did). F-001 is
// reopened, charged to none but itself (no breaks_tested, no
// selection_missed), coded again, and both end tested.
//
// Without the last sweep the session ends with F-001 tested on a bomb
// that went off, and this test fails.
func TestATimeBombSelectionSkipsIsFoundByTheLastSweep(t *testing.T) {
	night(t, extended)
	bomb := feature("F-001", scriptedmodel.TimeBomb)
	bomb.Kind = scriptedmodel.Shell
	honest := feature("F-002", scriptedmodel.Pass)
	honest.After = "F-001"
	p := newProject(t, scenario("selection-time-bomb", bomb, honest))
	p.env = append(p.env, selecting, "CTXGRAPHD_LOG_FORMAT=json")
	log := p.runToEnd()
	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	runs := p.runs()
	if c := codingRuns(runs, "F-002"); len(c) != 1 {
		t.Errorf("F-002's coding runs %+v, want one", c)
	}
	if f1 := codingRuns(runs, "F-001"); len(f1) != 2 {
		t.Fatalf("F-001's coding runs %+v, want the bomb's and the reopened one\n%s", f1, log)
	}
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	trs, err := st.Traces(store.TraceFilter{})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	byCode := map[string][]control.Trace{}
	for _, tr := range trs {
		byCode[tr.Code] = append(byCode[tr.Code], tr)
	}
	if n := len(byCode["breaks_tested"]) + len(byCode["selection_missed"]) + len(byCode["not_charged"]); n != 0 {
		t.Errorf("breaks_tested %+v, selection_missed %+v, not_charged %+v: want none (no claim's sweep ran F-001's test)", byCode["breaks_tested"], byCode["selection_missed"], byCode["not_charged"])
	}
	if r := byCode["tested_reopened"]; len(r) != 1 || r[0].Context.Feature != "F-001" || !strings.Contains(r[0].Event.WhatHappened, "the session's last sweep") {
		t.Errorf("tested_reopened traces %+v, want one, of F-001, by the session's last sweep\n%s", r, log)
	}
	p.tipGreen()
}

// tipGreen runs every feature's test on a checkout of the branch's tip
// and fails the test for each that does not pass there.
func (p *project) tipGreen() {
	p.t.Helper()
	dir := p.checkoutOf("HEAD")
	for _, f := range p.featureList().Features {
		cmd := exec.Command("sh", "-c", f.Test)
		cmd.Dir, cmd.Env = dir, p.env
		if out, err := cmd.CombinedOutput(); err != nil {
			p.t.Errorf("the tip fails %s's test `%s`: %v\n%s", f.ID, f.Test, err, out)
		}
	}
}

// checkoutOf writes the tree of commit (a revision) into a new directory,
// as a clone's checkout would hold it, and returns the directory.
func (p *project) checkoutOf(commit string) string {
	p.t.Helper()
	dir := p.t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$0" archive "$1" | tar -x -C "$2"`, p.dir, commit, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		p.t.Fatalf("checking out %s: %v\n%s", commit, err, out)
	}
	return dir
}
