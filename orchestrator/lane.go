package orchestrator

// A lane: a work tree where a feature's runs work and are judged, with
// its run in flight, its check of its test and its tester's pending claim.
// What a lane does in its own tree is a method of the lane, with what it
// needs of the daemon handed in (laneDeps); what it finds for the
// session (a changed list, violations) it returns, and the loop applies.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// laneDeps is what a lane needs of the daemon, handed to it when it is
// made, never the Orchestrator: what it asks of the judge (laneJudge),
// the project's repository (where a lane's work is kept and its branch
// read), the project's directory (where its evidence is copied), the
// trace sink and the log. It is the seam of a lane (docs/architecture.md):
// what a lane run elsewhere would be given.
type laneDeps struct {
	judge      laneJudge
	runs       laneRuns
	repo       *gitrepo.Repo
	projectDir string
	trace      func(control.Trace) control.Trace
	log        *zap.Logger
}

// laneJudge is what a lane's own methods ask of the judge: its gates'
// modes, the hooks' record of a run's commands and whether they reached
// it (lane.watchHooks), the keeping of a test run's output as evidence, a
// test run on a tree of the lane's, and the judging of a run that ended
// (its jobs off the loop: lane.runCheck, lane.judge). *judge.Judge is
// one; the lane is given no more of it than this.
type laneJudge interface {
	Modes() gates.Modes
	Commands(runID string) []control.CommandRecord
	WriteEvidence(feature string, attempt int, what string, r judge.TestResult) (string, error)
	RunTestIn(ctx context.Context, root judge.Root, tree gitrepo.Tree, test string) judge.TestResult
	JudgeRun(ctx context.Context, in judge.RunEnd) judge.Judgement
	IsLive(runID string) bool
}

var _ laneJudge = (*judge.Judge)(nil)

// laneRuns is what a lane asks of the judge's register of the runs in
// flight, whose tokens open the control socket's hooks: a run made known
// at its spawn (lane.register), its process at its start, what its Stop
// hook said at its end, and its forgetting. *judge.Judge is one.
type laneRuns interface {
	RegisterIn(actor gates.Actor, root judge.Root) string
	Confine(token string, denied []string)
	GiveList(token string, l *progress.List)
	Started(runID string, pid int)
	StopFailure(runID string) string
	Forget(runID string)
}

var _ laneRuns = (*judge.Judge)(nil)

// lane is where a feature's runs work and are judged, with what the loop
// knows of them between events: the run in flight and its tester's
// pending claim. The loop owns its lanes and drives them by events, each
// handler given the lane it works in; a lane is state, never a goroutine
// of its own (the one-goroutine rule holds). The project's own work tree
// is a lane (laneSet.home), and with limits.parallel above 1 each
// feature has one of its own, a clone (lanes.go).
type lane struct {
	deps   *laneDeps
	dir    string        // its work tree
	repo   *gitrepo.Repo // that work tree's repository
	active *activeRun    // its run in flight, if any
	claim  *claim        // its tester's tested: true, pending the verdict; nil when none
	// project: this is the project's own work tree, not a clone. Its list
	// is the project's file (Orchestrator.syncList), its runs are judged where the
	// project's are (judge.Root{}), and it is never closed; set when the
	// lane is made.
	project bool
	// commits is how an accepted claim of l's is committed, chosen when
	// the lane is made: the project's tree as its test ran on it
	// (commitTree), or a clone's candidate onto the branch
	// (commitCandidate).
	commits func(l *lane, ctx context.Context, c *claim, f *progress.Feature, trace string) (branch.Committed, error)
	// record is where the store keeps its run in flight: the project's
	// own lane's is Session.Run, a clone's is run.
	record **store.Run
	// A lane of its own (lanes.go) works one feature in a clone on
	// branch, made from the commit baseHead; run is its run in flight as
	// the store keeps it, and given the feature list as the daemon last
	// wrote it there.
	feature, branch, baseHead string
	run                       *store.Run
	given                     *progress.List
	// check is its feature's test, run before the first coding attempt
	// (gate red-before-green): on the lane's own tree, so beside the
	// daemon's other work, unlike the jobs that judge and move the
	// branch (laneSet.job).
	check *job
	// recent is its work tree as recorded while the loop handles the
	// event in flight, if it was (see Orchestrator.startTree); nil
	// between events. Only the project's own lane's is ever held: a
	// clone is closed and opened anew under the handler.
	recent *recentTree
	// setupDone is the fingerprint of the setup that last succeeded in
	// its tree (setupPrint), "" before any.
	setupDone string
	// setupScript is the tree's setup as its last check found it, which a
	// run in a clone of the tree (a worker's) runs there first.
	setupScript string
	// port is the lane's own PORT, given to its agents' runs where they
	// share the machine's network (sandbox off), so that two lanes'
	// servers do not collide; 0: none.
	port int
}

type activeRun struct {
	run    store.Run
	cancel context.CancelFunc
	hooks  *hooksWatch // its calls of gated tools, for hooks-live
	// interrupt is why the daemon cancelled the run, "" if it ends by itself.
	interrupt string
	// silent: the run did gated work without its hooks ever checking in
	// (however it ended), or was killed for it (hooksKilled).
	silent      bool
	hooksKilled bool
	// failure is why the run ended when it was not its agent's doing.
	failure *agents.Failure
	// cappedBy is the budget key whose rest capped the run ("" when its
	// own budget.run_usd did): a run that reaches such a cap has spent
	// that budget, which is not its agent's doing.
	cappedBy string
	// capUSD is the run's --max-budget-usd (0: none): what runs in flight
	// together may still spend (statemachine.Input.InFlightCapUSD).
	capUSD float64
	// env is what of the machine or the confinement kept the feature's
	// test from running (a tester's run of it, or the daemon's): not the
	// agent's doing either, and only a person can fix it.
	env *diagnose.Environment
	// controls is why the session stops for a person: the repository's
	// hooks or configuration changed while the run was in flight
	// (recordControls).
	controls string
}

// job is the daemon's own work on the loop's behalf, off the loop: a
// feature's test run before its first attempt, or the judging of a run that
// ended. While one is in flight nothing new starts; ctl stop and a shutdown
// cancel it, which ends its process group.
type job struct {
	what    string // for ctl status and the logs
	feature string
	lane    *lane // the lane it works for
	cancel  context.CancelFunc
	// interrupt is why the daemon cancelled it.
	interrupt string
}

// root is l's work tree, as the judge knows it (zero: the project's).
func (l *lane) root() judge.Root {
	if l.project {
		return judge.Root{}
	}
	return judge.Root{Dir: l.dir, Repo: l.repo}
}

// commit commits c, l's claim, accepted for f with the approval trace,
// in the project's repository.
func (l *lane) commit(ctx context.Context, c *claim, f *progress.Feature, trace string) (branch.Committed, error) {
	return l.commits(l, ctx, c, f, trace)
}

// commitTree commits the tree the daemon's test ran on, the project's own,
// where its work was judged in place (branch.Commit).
func (l *lane) commitTree(ctx context.Context, c *claim, f *progress.Feature, trace string) (branch.Committed, error) {
	return branch.Commit(ctx, l.deps.repo, c.verdict(f, trace, c.jd.Tree))
}

// commitCandidate commits a clone's candidate, its tree merged onto the
// branch as it was judged (the claim's onto, or the commit the lane was
// made from), and moves the branch to it if it is still there
// (branch.CommitLane).
func (l *lane) commitCandidate(ctx context.Context, c *claim, f *progress.Feature, trace string) (branch.Committed, error) {
	return branch.CommitLane(ctx, l.deps.repo, c.verdict(f, trace, c.jd.Candidate), firstNonEmpty(c.onto, l.baseHead))
}

// runRecord is the store's record of l's run in flight, nil when none.
func (l *lane) runRecord() *store.Run { return *l.record }

// setRunRecord sets it.
func (l *lane) setRunRecord(r *store.Run) { *l.record = r }

// withClaim is list as it should read in l's tree: with l's tester's
// pending tested: true shown, until the verdict takes it or drops it.
func (l *lane) withClaim(list *progress.List) *progress.List {
	shown := list.Clone()
	if l.claim != nil {
		if f := shown.Feature(l.claim.feature()); f != nil {
			f.Tested = true
		}
	}
	return shown
}

// register makes actor's run known to the gates as a run of l, and
// returns its token: where it works (l.root), what its sandbox denies it,
// and on a clone the list it is given there, written into the lane first
// (the run sees the list as it is now, and what it changes there is read
// against that, by the hooks too).
func (l *lane) register(actor gates.Actor, denied []string, canonical *progress.List) (token string) {
	if !l.project {
		l.giveList(canonical)
	}
	token = l.deps.runs.RegisterIn(actor, l.root())
	l.deps.runs.Confine(token, denied)
	if !l.project && l.given != nil {
		l.deps.runs.GiveList(token, l.given)
	}
	return token
}

// giveList writes canonical into l's clone, as l's runs are to see it
// (with its tester's pending claim), and remembers it: what the lane's
// runs change is read against it.
func (l *lane) giveList(canonical *progress.List) {
	if canonical == nil {
		return
	}
	shown := l.withClaim(canonical)
	if _, err := progress.WriteFeatureList(filepath.Join(l.dir, paths.ProgressDir), shown); err != nil {
		l.deps.log.Error("could not write a lane's feature list", zap.String("feature", l.feature), zap.Error(err))
	}
	l.given = shown
}

// listViolation is one change of the list a gate refused (code
// "reverted", refused) or, in warn mode, let through
// (Orchestrator.violationMode).
type listViolation struct {
	gate, code, what string
	refused          bool
}

// runChanges folds into merged, a copy of the canonical list, what l's run
// in flight changed in disk, the list in its tree, against base, the list
// as it was given it, by the rules of gates.ListChange (the hook's): its
// own feature's status, or tested and evidence; tested: true is its
// tester's claim, kept in l for the verdict, never canonical here. It
// returns the changes it refused (left out, so written back) or let
// through in warn mode, in order: the one rule for the project's own tree
// and a clone (Orchestrator.merge).
func (l *lane) runChanges(base, disk, merged *progress.List) []listViolation {
	act := l.active
	run := act.run
	actor := gates.Actor{Role: run.Role, Feature: run.Feature, Run: run.ID}
	var found []listViolation
	refuse := func(gate, code, what string, refused bool) {
		found = append(found, listViolation{gate: gate, code: code, what: what, refused: refused})
	}
	modes := l.deps.judge.Modes()
	for _, c := range progress.Diff(base, disk) {
		fd, isField := progress.FieldByKey(c.Field)
		if c.Kind != progress.Modified || !isField {
			refuse(revertGate(act, c), "reverted", describeChange(act.actor(), c), true) // structure: written back
			continue
		}
		d := gates.ListChange(modes, actor, c)
		if d.Blocks() {
			refuse(d.Gate, "reverted", describeChange(act.actor(), c), true)
			continue
		}
		if d != nil {
			refuse(d.Gate, d.Code, describeChange(act.actor(), c)+" (warn mode: kept)", false)
		}
		if c.Field == "tested" {
			switch now, _ := c.New.(bool); {
			case now && actor.Role == gates.Tester && d == nil:
				l.claim = &claim{run: run}
			case !now && l.claim != nil && l.claim.feature() == c.FeatureID:
				l.claim = nil
			}
			continue
		}
		if m, df := merged.Feature(c.FeatureID), disk.Feature(c.FeatureID); m != nil && df != nil {
			fd.Copy(m, df)
		}
	}
	return found
}

// claimProblem says why a tester's tested: true for f is not backed by its
// own recorded test runs and evidence, or "" when it is. The run's record
// is gates.RanTest's, as the hook reads it: a run whose outcome its status
// did not tell goes on to the daemon's own run of the test, which decides.
func (l *lane) claimProblem(f *progress.Feature, runID string) string {
	if f == nil {
		return ""
	}
	id := f.ID
	if strings.TrimSpace(f.Test) == "" && l.deps.judge.Modes().Of(gates.RedBeforeGreen) == gates.Enforce {
		return fmt.Sprintf("%s has no test command, and a feature without one cannot be accepted as tested", id)
	}
	if len(f.Evidence) == 0 {
		return fmt.Sprintf("tested: true for %s came without evidence", id)
	}
	runs := gates.RanTest(l.deps.judge.Commands(runID), f.Test, l.dir)
	switch {
	case !runs.Ran:
		return fmt.Sprintf("tested: true for %s, but its tester run never ran %s (as recorded by its hooks)", id, gates.TestName(f.Test))
	case !runs.Claimable():
		return fmt.Sprintf("tested: true for %s, but %s failed in its tester run", id, gates.TestName(f.Test))
	}
	return ""
}

// keepWork keeps l's work, its tree as it is now on the commit it was made
// from, at ref in the project's repository (branch.KeepLane), and returns
// the commit; "" when there was nothing to keep or it could not be kept.
func (l *lane) keepWork(ref string) (kept string) {
	if l.repo == nil {
		return ""
	}
	ctx := context.Background()
	tree, err := l.repo.Snapshot(ctx)
	if err != nil {
		l.deps.log.Warn("could not keep a lane's work", zap.String("feature", l.feature), zap.Error(err))
		return ""
	}
	if c, err := branch.KeepLane(ctx, l.deps.repo, l.feature, ref, tree, l.baseHead); err == nil {
		kept = c
	}
	return kept
}

// copyEvidence copies what l's tester left under its feature's evidence
// directory into the project's, where the feature list names it and
// people read it. Neither side's links are followed (treefile): the lane's
// regular files are copied, and a link, or anything but a directory, on
// the way to a file of the project's evidence (one a run of an earlier
// session left) keeps that file out, as a violation; a link in a file's
// own place is replaced by the file.
func (l *lane) copyEvidence(feature string) {
	rel := path.Join(paths.ProgressDir, progress.EvidenceDir, feature)
	root, err := os.OpenRoot(filepath.Join(l.dir, filepath.FromSlash(rel)))
	if err != nil {
		return // nothing left
	}
	defer root.Close()
	var refused []string
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err // links and the like are not evidence
		}
		data, err := treefile.ReadFile(filepath.Join(l.dir, filepath.FromSlash(rel)), name)
		if err != nil {
			return err
		}
		if err := treefile.WriteFile(l.deps.projectDir, path.Join(rel, name), data, 0o644); treefile.IsNotFile(err) {
			refused = append(refused, err.Error())
			return nil
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		l.deps.log.Warn("could not copy a lane's evidence into the project", zap.String("feature", feature), zap.Error(err))
	}
	if len(refused) > 0 {
		l.deps.log.Warn("a lane's evidence was not copied through a link in the project's evidence directory", zap.String("feature", feature), zap.Strings("refused", refused))
		l.deps.trace(control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.RoleWritePolicy, Code: "evidence_not_a_file",
			Context: control.TraceContext{Feature: feature},
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("the project's evidence directory of %s holds a link or a special file on the way to a file of the lane's evidence; it was not followed, and the file was not copied: %s", feature, strings.Join(refused, "; ")),
				WhatWasCorrect: "evidence is regular files in real directories", Why: "the daemon writes evidence unconfined: a link would lead its write to a file of an agent's choosing"}})
	}
}
