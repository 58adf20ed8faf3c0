package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// claimsJudge is what a lane asks of the judge, answered from a table: the
// gate's mode for a tester's claim, and the hooks' record of the run's
// commands. A lane that asks it for a test run or a judgement fails the
// test (a nil laneJudge).
type claimsJudge struct {
	laneJudge
	mode     gates.Mode
	commands []control.CommandRecord
}

func (j claimsJudge) Modes() gates.Modes {
	return gates.Modes{gates.TestedNeedsEvidence: j.mode, gates.RedBeforeGreen: gates.Enforce}
}
func (j claimsJudge) Commands(string) []control.CommandRecord { return j.commands }
func (j claimsJudge) WriteEvidence(string, int, string, judge.TestResult) (string, error) {
	return "", nil
}

// committedRepo is a repository at dir with one commit on main: its id and
// tree.
func committedRepo(t *testing.T, dir string) (*gitrepo.Repo, string, gitrepo.Tree) {
	t.Helper()
	ctx := context.Background()
	if _, err := gitrepo.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("the branch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := gitrepo.Open(ctx, gitrepo.Options{Dir: dir, Index: filepath.Join(t.TempDir(), "index")})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.Commit(ctx, tree, nil, "the branch", branch.Author)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ref, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateRef(ctx, ref, c, ""); err != nil {
		t.Fatal(err)
	}
	return repo, c, tree
}

// TestAClaimIsJudgedOnWhatItCarries: a tester's claim is judged with the
// run that made it and no other, on what it was given when its run ended:
// its run's own record of the test (refused in enforce mode, judged all
// the same in warn mode), and with its sweep, for a clone, the candidate
// merged onto the branch's head as it is then, run without the claim's
// change on that head's tree; for the project's own tree, without it on
// the tree where the feature's work began, not the tree the tester's run
// began from (which holds the coder's change).
func TestAClaimIsJudgedOnWhatItCarries(t *testing.T) {
	repo, head, headTree := committedRepo(t, t.TempDir())
	const (
		began     = gitrepo.Tree("1111111111111111111111111111111111111111") // where F-001's work began
		testerRan = gitrepo.Tree("2222222222222222222222222222222222222222") // the tester's run began, the coder's change in it
		laneHead  = "3333333333333333333333333333333333333333"               // the commit the clone was made from
	)
	list := &progress.List{Version: 1, Features: []progress.Feature{{ID: "F-001", Title: "one", Test: "sh tests/F-001.sh", Evidence: []string{".claude/progress/evidence/F-001/run.txt"}}}}
	tester := store.Run{ID: "run-000007", Role: string(role.Tester), Feature: "F-001", Attempt: 1, BaseTree: string(testerRan)}
	passed := []control.CommandRecord{{Run: tester.ID, Command: "sh tests/F-001.sh", ExitCode: 0}}
	failed := []control.CommandRecord{{Run: tester.ID, Command: "sh tests/F-001.sh", ExitCode: 1}}

	for _, tc := range []struct {
		name     string
		clone    bool
		claimBy  string // the run that made the lane's claim; "" none
		mode     gates.Mode
		commands []control.CommandRecord

		claimed, rerun, sweep bool
		problem               bool
		onto, ontoBase        string
		alone                 gitrepo.Tree
	}{
		{name: "the project's tree", claimBy: tester.ID, mode: gates.Enforce, commands: passed,
			claimed: true, rerun: true, sweep: true, alone: began},
		{name: "a clone", clone: true, claimBy: tester.ID, mode: gates.Enforce, commands: passed,
			claimed: true, rerun: true, sweep: true, onto: head, ontoBase: laneHead, alone: headTree},
		{name: "no claim", mode: gates.Enforce, commands: passed, rerun: true},
		{name: "another run's claim", claimBy: "run-000005", mode: gates.Enforce, commands: passed, rerun: true},
		{name: "another run's claim in a clone", clone: true, claimBy: "run-000005", mode: gates.Enforce, commands: passed, rerun: true},
		{name: "a claim its run's record does not back", claimBy: tester.ID, mode: gates.Enforce, commands: failed,
			claimed: true, problem: true, rerun: true},
		{name: "the same in warn mode", clone: true, claimBy: tester.ID, mode: gates.Warn, commands: failed,
			claimed: true, problem: true},
		{name: "the gate off", clone: true, claimBy: tester.ID, mode: gates.Off, commands: passed, claimed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lane{deps: &laneDeps{judge: claimsJudge{mode: tc.mode, commands: tc.commands}, repo: repo, log: zap.NewNop()},
				dir: t.TempDir(), project: !tc.clone}
			if tc.clone {
				l.feature, l.baseHead = "F-001", laneHead
			}
			if tc.claimBy != "" {
				by := tester
				by.ID = tc.claimBy
				l.claim = &claim{run: by}
			}
			jg := l.judging(&activeRun{run: tester}, agents.Result{}, statemachine.Outcome{Role: statemachine.Tester, Feature: "F-001"}, list,
				store.FeatureCounters{Base: string(began), BaseHead: laneHead})
			in, c := jg.in, jg.ev.claim
			if (c != nil) != tc.claimed {
				t.Fatalf("judged with a claim: %v, want %v", c != nil, tc.claimed)
			}
			if c != nil {
				if c.run.ID != tester.ID {
					t.Errorf("the claim judged is %s's, not the ended run's (%s)", c.run.ID, tester.ID)
				}
				if (c.problem != "") != tc.problem {
					t.Errorf("the claim's problem is %q; want one: %v", c.problem, tc.problem)
				}
				if c.base != began || c.baseHead != laneHead {
					t.Errorf("the claim's base is %s at %s, not where the feature's work began (%s at %s)", c.base, c.baseHead, began, laneHead)
				}
			}
			if in.Rerun != tc.rerun || in.Sweep != tc.sweep {
				t.Errorf("rerun %v, sweep %v; want %v, %v", in.Rerun, in.Sweep, tc.rerun, tc.sweep)
			}
			if in.Onto != tc.onto || in.OntoBase != tc.ontoBase || in.Alone != tc.alone {
				t.Errorf("judged onto %q over %q, alone on %q; want %q over %q, alone on %q", in.Onto, in.OntoBase, in.Alone, tc.onto, tc.ontoBase, tc.alone)
			}
		})
	}
}

// TestAClaimTellsTheBranchWhatItWasJudgedOn: the verdict a claim gives the
// branch is its own run's, its feature's base, and the tree it is given.
func TestAClaimTellsTheBranchWhatItWasJudgedOn(t *testing.T) {
	c := &claim{run: store.Run{ID: "run-000009", Feature: "F-002", Attempt: 3}, base: "4444444444444444444444444444444444444444", baseHead: "5555555555555555555555555555555555555555"}
	f := &progress.Feature{ID: "F-002"}
	v := c.verdict(f, "trace-1", "6666666666666666666666666666666666666666")
	want := branch.Verdict{Feature: f, Attempt: 3, Run: "run-000009", Trace: "trace-1", Tree: "6666666666666666666666666666666666666666",
		Base: "4444444444444444444444444444444444444444", BaseHead: "5555555555555555555555555555555555555555"}
	if v != want {
		t.Errorf("verdict %+v, want %+v", v, want)
	}
}

// TestARunsWriteOfTestedMakesOrDropsItsClaim: the claim is made by its
// feature's tester setting tested: true, with that run, and dropped when
// the tester sets it back to false; nobody else's write of tested makes
// one (a coder's is refused), and nothing else drops it.
func TestARunsWriteOfTestedMakesOrDropsItsClaim(t *testing.T) {
	tester := store.Run{ID: "run-000004", Role: string(role.Tester), Feature: "F-001", Attempt: 2}
	coder := store.Run{ID: "run-000003", Role: string(role.Coder), Feature: "F-001", Attempt: 2}
	lists := func(was, now map[string]bool) (base, disk *progress.List) {
		base, disk = &progress.List{Version: 1}, &progress.List{Version: 1}
		for _, id := range []string{"F-001", "F-002"} {
			base.Features = append(base.Features, progress.Feature{ID: id, Title: id, Test: "sh tests/" + id + ".sh", Status: progress.Completed, Tested: was[id]})
			disk.Features = append(disk.Features, progress.Feature{ID: id, Title: id, Test: "sh tests/" + id + ".sh", Status: progress.Completed, Tested: now[id]})
		}
		return base, disk
	}
	for _, tc := range []struct {
		name     string
		run      store.Run
		held     bool // the lane holds the run's claim already
		was, now map[string]bool
		claimed  bool
	}{
		{"the tester sets tested", tester, false, nil, map[string]bool{"F-001": true}, true},
		{"the tester sets tested again", tester, true, map[string]bool{"F-001": true}, map[string]bool{"F-001": true}, true},
		{"the tester takes it back", tester, true, map[string]bool{"F-001": true}, nil, false},
		{"the tester changes another feature's", tester, true, map[string]bool{"F-001": true, "F-002": true}, map[string]bool{"F-001": true}, true},
		{"the coder sets tested", coder, false, nil, map[string]bool{"F-001": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lane{deps: &laneDeps{judge: claimsJudge{mode: gates.Enforce}, log: zap.NewNop()}, dir: t.TempDir(), project: true,
				active: &activeRun{run: tc.run}}
			if tc.held {
				l.claim = &claim{run: tc.run}
			}
			base, disk := lists(tc.was, tc.now)
			l.runChanges(base, disk, base.Clone())
			switch {
			case tc.claimed && l.claim == nil:
				t.Fatal("no claim")
			case !tc.claimed && l.claim != nil:
				t.Fatalf("a claim of %s's (%s)", l.claim.run.ID, l.claim.feature())
			case tc.claimed && (l.claim.run.ID != tc.run.ID || l.claim.feature() != "F-001"):
				t.Errorf("the claim is %s's for %s, not %s's for F-001", l.claim.run.ID, l.claim.feature(), tc.run.ID)
			}
		})
	}
}
