package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestLanesATimeBombIsNotChargedToTheNextFeature: with limits.parallel 2,
// F-001's first attempt writes code that is right until a moment after it
// was written (scriptedmodel.TimeBomb: its fuse, scriptedmodel.Fuse), so
// it is tested and lands on the branch; F-002, honest, worked beside it,
// waits until F-001 has landed and its fuse has burnt (After), and claims.
// F-002's sweep finds F-001's test failing on its candidate, and on the
// branch head alone too: F-002 is not charged (tested at its first
// attempt, a not_charged decision on its run, no breaks_tested), F-001 is
// reopened (tested_reopened naming F-002, its output kept as evidence) and
// worked again, told why, and both end tested, the branch holding F-001's
// honest code.
//
// Without the run on the branch head alone, F-002 is charged with the
// bomb (breaks_tested, three attempts, blocked) and this test fails.
func TestLanesATimeBombIsNotChargedToTheNextFeature(t *testing.T) {
	night(t, extended)
	bomb := feature("F-001", scriptedmodel.TimeBomb)
	bomb.Kind = scriptedmodel.Shell
	honest := feature("F-002", scriptedmodel.Pass)
	honest.After = "F-001"
	p := newProject(t, scenario("lanes-time-bomb", bomb, honest))
	// Every sweep full: the claim's own sweep is to find the bomb (with
	// selection, the session's last sweep does:
	// TestATimeBombSelectionSkipsIsFoundByTheLastSweep).
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2", "CTXGRAPHD_LIMITS_FULL_SWEEP_EVERY=1")
	log := p.runToEnd()

	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	runs := p.runs()
	if c := codingRuns(runs, "F-002"); len(c) != 1 {
		t.Errorf("F-002's coding runs %+v, want one: the bomb is not its doing", c)
	}
	f1 := codingRuns(runs, "F-001")
	if len(f1) != 2 || f1[1].Attempt != 2 {
		t.Fatalf("F-001's coding runs %+v, want attempts 1 (the bomb) and 2 (reopened)\n%s", f1, log)
	}

	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	trs, err := st.Traces(store.TraceFilter{})
	state, lerr := st.Load()
	st.Close()
	if err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	byCode := map[string][]control.Trace{}
	for _, tr := range trs {
		byCode[tr.Code] = append(byCode[tr.Code], tr)
	}
	if b := byCode["breaks_tested"]; len(b) != 0 {
		t.Errorf("breaks_tested charged: %+v", b)
	}
	if r := byCode["tested_reopened"]; len(r) != 1 || r[0].Context.Feature != "F-001" || !strings.Contains(r[0].Event.WhatHappened, "without F-002's change") {
		t.Errorf("tested_reopened traces %+v, want one, of F-001, naming F-002\n%s", r, log)
	}
	if n := byCode["not_charged"]; len(n) != 1 || n[0].Context.Feature != "F-002" || n[0].Context.Run == "" {
		t.Errorf("not_charged traces %+v, want one on F-002's run", n)
	}
	if c := state.Counters["F-002"]; c.Failures != 0 {
		t.Errorf("F-002's counters %+v: charged", c)
	}
	// The bomb went off: its code, as its first verdict committed it,
	// says so now, and its test failed on the branch head alone.
	first := strings.Fields(p.git("log", "--reverse", "--format=%H", "--grep", "^ctxgraphd-feature: F-001$", "HEAD"))
	if len(first) != 2 {
		t.Fatalf("F-001's verdict commits on the branch: %q, want two (the bomb's, the honest one's)", first)
	}
	went := scriptedmodel.WentOff("F-001")
	bombed := filepath.Join(t.TempDir(), "bomb.sh")
	os.WriteFile(bombed, []byte(p.git("show", first[0]+":"+p.files("F-001").Source)+"\n"), 0o644)
	if out, _ := exec.Command("sh", bombed).Output(); strings.TrimSpace(string(out)) != went {
		t.Errorf("F-001's first verdict's code says %q now, want %q", out, went)
	}
	alone, err := os.ReadFile(filepath.Join(p.dir, ".claude/progress/evidence/F-001/daemon-without-F-002-attempt-1.log"))
	if err != nil || !strings.Contains(string(alone), "$ "+p.files("F-001").Command) || !strings.Contains(string(alone), "failed (exit 1)") {
		t.Errorf("the daemon's run of F-001's test on the branch head alone: %v\n%s\nwant it failed", err, alone)
	}

	// The reopened feature's next attempt was told why.
	var retry *scriptedmodel.Told
	for _, told := range p.model.Told() {
		if told.Agent == "coding-agent" && told.Feature == "F-001" && told.Attempt == 2 {
			retry = &told
		}
	}
	switch {
	case retry == nil:
		t.Errorf("no command of F-001's second attempt among %+v", p.model.Told())
	case !strings.Contains(retry.TesterReport, "no longer passes on the branch"):
		t.Errorf("F-001's second attempt was told %q, want why it was reopened", retry.TesterReport)
	case !strings.Contains(retry.Diagnosis, p.files("F-001").Command):
		t.Errorf("F-001's second attempt was diagnosed %s, want its test's failure", retry.Diagnosis)
	}

	// The branch ends on F-001's honest code.
	if got := p.git("show", "HEAD:"+p.files("F-001").Source); got != p.files("F-001").Working {
		t.Errorf("the branch holds %q as F-001's code, want its honest code", got)
	}
}
