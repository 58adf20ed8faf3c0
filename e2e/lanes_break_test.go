package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestLanesTwoFeaturesThatBreakEachOther: with limits.parallel 2, two
// features whose work each passes its own test alone, and together breaks
// one of them: F-002's first attempt writes, in its own scope, an override
// (scriptedmodel.BreaksAnother) that F-001's test forbids. F-002's coder
// waits, on that attempt, until F-001 is on the branch (After), so that
// its lane, made from the branch before F-001, is judged after F-001's
// verdict. The claim is judged on the lane's tree merged onto the branch:
// F-001's test fails there because of the override (not because F-001's
// code is missing, as it is on the lane's own tree), the claim is refused
// with breaks_tested naming F-001, and the retry, in a fresh lane, is told
// which test broke and how. Both end tested, F-001's verdict before
// F-002's, and no commit of the branch holds the override.
//
// Judged on the lane's own tree (the candidate merge a no-op), the claim is
// refused too, but for F-001's code being absent there: the sweep's output
// and the retry's diagnosis then do not say the override broke F-001, and
// this test fails.
func TestLanesTwoFeaturesThatBreakEachOther(t *testing.T) {
	night(t, core)
	breaker := feature("F-002", scriptedmodel.BreaksAnother)
	breaker.After = "F-001"
	p := newProject(t, scenario("lanes-break", feature("F-001", scriptedmodel.Pass), breaker))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2")
	log := p.runToEnd()

	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	override, broke := scriptedmodel.BreakingFile("F-002"), scriptedmodel.Overridden("F-001", "F-002")

	// The two were worked at once: F-002's first lane began before F-001
	// was tested, from a branch without F-001.
	runs := p.runs()
	coders := codingRuns(runs, "F-002")
	if len(coders) != 2 || coders[0].Attempt != 1 || coders[1].Attempt != 2 {
		t.Fatalf("F-002's coding runs %+v, want attempts 1 and 2", coders)
	}
	var f1Tester store.Run
	for _, r := range runs {
		if r.Role == "tester-agent" && r.Feature == "F-001" {
			f1Tester = r
		}
	}
	if !coders[0].StartedAt.Before(f1Tester.EndedAt) {
		t.Errorf("F-002's first coder started at %s, after F-001's tester ended (%s): the two were not worked at once",
			coders[0].StartedAt.Format(time.StampMilli), f1Tester.EndedAt.Format(time.StampMilli))
	}

	// The first claim was refused for breaking F-001, and for the
	// override: the daemon's sweep ran F-001's test on the merge.
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	trs, err := st.Traces(store.TraceFilter{Type: control.TraceViolation})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var breaks []control.Trace
	for _, tr := range trs {
		if tr.Code == "breaks_tested" {
			breaks = append(breaks, tr)
		}
	}
	if len(breaks) != 1 || breaks[0].Context.Feature != "F-002" || !strings.Contains(breaks[0].Event.WhatHappened, "F-001") {
		t.Fatalf("breaks_tested violations %+v, want one, of F-002, naming F-001\n%s", breaks, log)
	}
	sweep, err := os.ReadFile(filepath.Join(p.dir, ".claude/progress/evidence/F-002/daemon-sweep-F-001-attempt-1.log"))
	if err != nil || !strings.Contains(string(sweep), broke) {
		t.Errorf("the daemon's run of F-001's test on F-002's first claim: %v\n%s\nwant it to fail with %q: the lane's tree merged onto the branch, which holds F-001", err, sweep, broke)
	}

	// The retry was told which test broke, and why.
	var retry *scriptedmodel.Told
	for _, told := range p.model.Told() {
		if told.Agent == "coding-agent" && told.Feature == "F-002" && told.Attempt == 2 {
			retry = &told
		}
	}
	switch {
	case retry == nil:
		t.Errorf("no command of F-002's retry among %+v", p.model.Told())
	case !strings.Contains(retry.TesterReport, "F-001"):
		t.Errorf("F-002's retry was told %q, want which feature's test its change broke", retry.TesterReport)
	case !strings.Contains(retry.Diagnosis, broke):
		t.Errorf("F-002's retry was diagnosed %s, want F-001's test saying %q", retry.Diagnosis, broke)
	}

	// The branch: F-001's verdict, then F-002's, and no commit with the
	// override; from F-001's verdict on, every commit holds F-001's code,
	// so F-001's test passes on each.
	verdict := func(id string) string {
		c := strings.TrimSpace(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: "+id+"$", "HEAD"))
		if c == "" || strings.Contains(c, "\n") {
			t.Fatalf("%s's verdict commits on the branch: %q, want one\n%s", id, c, p.git("log", "--format=%h %s", "HEAD"))
		}
		return c
	}
	f1, f2 := verdict("F-001"), verdict("F-002")
	if _, err := p.gitTry("merge-base", "--is-ancestor", f1, f2); err != nil || f1 == f2 {
		t.Errorf("F-001's verdict %s does not precede F-002's %s on the branch:\n%s", f1, f2, p.git("log", "--format=%h %s", "HEAD"))
	}
	for _, c := range strings.Fields(p.git("rev-list", "HEAD")) {
		if _, err := p.gitTry("cat-file", "-e", c+":"+override); err == nil {
			t.Errorf("commit %s on the branch holds %s, on which F-001's test fails", c, override)
		}
	}
	for _, c := range strings.Fields(p.git("rev-list", f1+"^.."+"HEAD")) {
		if got := p.git("show", c+":"+p.files("F-001").Source); got != p.files("F-001").Working {
			t.Errorf("commit %s on the branch, since F-001's verdict, holds %q as F-001's code", c, got)
		}
	}
	if _, err := os.Stat(filepath.Join(p.dir, override)); err == nil {
		t.Errorf("the project's work tree holds %s, which breaks F-001", override)
	}
	// The refused attempt's work is kept, not lost.
	if _, err := p.gitTry("cat-file", "-e", "refs/ctxgraphd/lane/F-002:"+override); err != nil {
		t.Errorf("F-002's refused work is not kept under refs/ctxgraphd/lane/F-002: %v", err)
	}
}

// TestLanesABlockedLaneLetsTheOthersGoOn: with limits.parallel 2 and no
// retry, F-001 never passes and is blocked while F-002, worked beside it,
// passes. F-002's coder waits, on its first attempt, until F-001's work is
// kept as blocked (After), so that F-002's lane is still in flight when
// F-001's closes. F-002 ends tested, on the branch; F-001 blocked, its work
// under refs/ctxgraphd/blocked/F-001 and nowhere else: not in any commit
// of the branch, not in the project's work tree.
//
// What it guards: closing a blocked lane is the one way a lane ends
// without a verdict, beside others in flight. Were it to stop or hold the
// session (max_blocked, a lane's limit taken for the session's), F-002
// would not end tested; were it to treat the blocked lane's tree as the
// project's (fast-forward or merge it, as an accepted lane's is), F-001's
// broken code would reach the branch or the work tree; were it to remove
// the lane without keeping its work, the blocked ref would be missing;
// were it to close or rebase the other lanes with it, F-002's coder,
// waiting in its lane, would lose its work.
func TestLanesABlockedLaneLetsTheOthersGoOn(t *testing.T) {
	night(t, extended)
	after := feature("F-002", scriptedmodel.Pass)
	after.After = "F-001"
	p := newProject(t, scenario("lanes-blocked", feature("F-001", scriptedmodel.NeverPass), after))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2", "CTXGRAPHD_LIMITS_MAX_RETRIES=0")
	log := p.runToEnd()

	if got, want := states(p.featureList()), "F-001=blocked F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	runs := p.runs()
	f1, f2 := codingRuns(runs, "F-001"), codingRuns(runs, "F-002")
	if len(f1) != 1 || len(f2) != 1 {
		t.Fatalf("coding runs: F-001 %d, F-002 %d; want one each (no retry, and F-002 passes)", len(f1), len(f2))
	}
	var f1End time.Time
	for _, r := range runs {
		if r.Feature == "F-001" && r.EndedAt.After(f1End) {
			f1End = r.EndedAt
		}
	}
	if !f2[0].StartedAt.Before(f1End) || !f2[0].EndedAt.After(f1End) {
		t.Errorf("F-002's coder ran %s–%s, F-001's last run ended %s: F-002 was not in flight when F-001 was blocked",
			f2[0].StartedAt.Format(time.StampMilli), f2[0].EndedAt.Format(time.StampMilli), f1End.Format(time.StampMilli))
	}

	src := p.files("F-001").Source
	if got, err := p.gitTry("show", "refs/ctxgraphd/blocked/F-001:"+src); err != nil || got != p.files("F-001").Broken {
		t.Errorf("F-001's work under refs/ctxgraphd/blocked/F-001: %q, %v; want its broken code kept", got, err)
	}
	if _, err := os.Stat(filepath.Join(p.dir, src)); err == nil {
		t.Errorf("the project's work tree holds %s, the blocked feature's code", src)
	}
	if touched := strings.TrimSpace(p.git("log", "--format=%h %s", "HEAD", "--", src)); touched != "" {
		t.Errorf("commits of the branch hold the blocked feature's code:\n%s", touched)
	}
	if got := strings.TrimSpace(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: F-002$", "HEAD")); got == "" || got != strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/F-002")) {
		t.Errorf("F-002's commits on the branch: %q, want its verdict's\n%s", got, p.git("log", "--format=%h %s", "HEAD"))
	}
	if got := p.git("show", "HEAD:"+p.files("F-002").Source); got != p.files("F-002").Working {
		t.Errorf("the branch holds %q as F-002's code", got)
	}
	if left, _ := os.ReadDir(filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)); len(left) > 0 {
		t.Errorf("lanes left behind: %v", left)
	}
}
