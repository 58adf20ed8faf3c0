package judge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// WriteEvidence keeps the daemon's own run of a feature's test in the
// feature's evidence directory, and returns its project-relative path. It
// is the evidence a verdict rests on; what a tester saved is extra.
//
// It is always the project's own directory, whichever work tree the run
// was judged in: evidence is the daemon's record, not the run's work.
// .claude/progress is in no change set, so nothing carries it from a
// lane's work tree into the project, and it would go with the work tree
// when the lane ends; ctl why reads it from the project, and the
// feature's evidence list (the canonical one, the project's) names it by
// this path.
func (j *Judge) WriteEvidence(feature string, attempt int, what string, r TestResult) (string, error) {
	rel := fmt.Sprintf(".claude/progress/%s/%s/daemon-%s-attempt-%d.log", progress.EvidenceDir, feature, what, attempt)
	var b strings.Builder
	fmt.Fprintf(&b, "# ctxgraphd ran the test of %s itself (%s, attempt %d)\n", feature, what, attempt)
	fmt.Fprintf(&b, "$ %s\n", r.Command)
	b.WriteString(r.Output)
	if !strings.HasSuffix(r.Output, "\n") && r.Output != "" {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# %s\n", r.Summary())
	// Agents write the evidence directory: never through a link there.
	if err := treefile.WriteFile(j.opts.Project.Dir, rel, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return rel, nil
}

// RunEnd is a run that ended by itself, to be judged by its outcome.
type RunEnd struct {
	Actor   gates.Actor
	Attempt int
	// Root is the work tree the run worked in (zero: the project's own):
	// its change set is judged there, and put back there.
	Root Root
	// Base is the work tree when the run started.
	Base gitrepo.Tree
	// List is the canonical feature list: the feature's scope and test.
	List *progress.List
	// Rerun asks for the daemon's own run of the feature's test: a
	// tester's tested: true whose own record holds.
	Rerun bool
	// Sweep asks, when that run passes, for the frozen tests of every
	// feature the list says is tested to be run on the same tree (the
	// regression sweep): a feature is accepted only on a tree where every
	// feature tested before it still passes.
	Sweep bool
	// Onto and OntoBase are, for a claim of a lane's run, the commit the
	// project's branch is at and the one the lane was made from: the
	// claim is judged on the candidate (the lane's tree merged onto Onto
	// over OntoBase: gitrepo.MergeTrees), which the test and the sweep run
	// on and a verdict would commit. A merge with conflicts is no
	// candidate (Judgement.Conflicts): nothing runs. Empty: the run's own
	// tree is the candidate.
	Onto, OntoBase string
	// Alone is, for a claim with a sweep, the tree without the claim's
	// change: the branch head's (a lane's claim: Onto's tree) or the work
	// tree when the feature's work began. An earlier feature's test that
	// fails on the candidate is run there too before the claim is charged
	// with it (Regression.Blame). Empty: every failing test is the claim's.
	Alone gitrepo.Tree
}

// Regression is a feature tested before whose frozen test fails on the
// tree a run left.
type Regression struct {
	Feature string
	Test    TestResult // on the candidate
	// Alone is the test's run on RunEnd.Alone, made when it failed on the
	// candidate; Again its second run on the candidate, made when it
	// passed alone. nil: not made.
	Alone, Again *TestResult
	// Miss is, for a test that fails on the branch without the claim's
	// change too, the landing that broke it, as the bisection found it
	// (backstop.go); nil when there was nothing to bisect (the test ran
	// at the landing before) or no record to start from.
	Miss *Miss
	// lastPass is the tree the test last passed on, from its record, ""
	// when none.
	lastPass gitrepo.Tree
}

// Blame is whose a failing frozen test of a feature tested before is.
type Blame int

// The blames.
const (
	// BlameClaim: it passes without the claim's change and fails with it,
	// twice (or there was no tree without the change to run it on): the
	// claim broke it, and is charged.
	BlameClaim Blame = iota
	// BlameBranch: it fails without the claim's change too. The test no
	// longer passes on the branch (a time-dependent test, a flaky one, a
	// change in the environment): the earlier feature's verdict did not
	// hold, and the claim is not charged.
	BlameBranch
	// BlameFlaky: it failed and then passed on the same tree, the
	// candidate: the test is flaky, and whoever ran it last is not charged.
	BlameFlaky
)

// Blame says whose r is.
func (r Regression) Blame() Blame {
	switch {
	case r.Alone == nil:
		return BlameClaim
	case !r.Alone.Passed():
		return BlameBranch
	case r.Again != nil && r.Again.Passed():
		return BlameFlaky
	}
	return BlameClaim
}

// Judgement is what a run came to, judged by its outcome.
type Judgement struct {
	// Changes is everything the run changed in the project, by any route.
	Changes []gitrepo.Change
	// Findings are the changes a gate does not let stand. Those of an
	// enforced gate were restored as they were before the run.
	Findings []gates.Finding
	Restored []string
	// Tree is the work tree after the run, once restored: what the test
	// ran on, and what a commit of the verdict holds. TreeAt is when it
	// was recorded.
	Tree   gitrepo.Tree
	TreeAt time.Time
	// Test is the daemon's own run of the feature's test, when asked.
	Test *TestResult
	// Regressions are the features tested before whose frozen tests fail
	// on the candidate because of the claim (BlameClaim), when a sweep was
	// asked and Test passed; Reopen those whose failure is not the
	// claim's (BlameBranch, BlameFlaky): their own verdicts did not hold.
	Regressions []Regression
	Reopen      []Regression
	// Swept is what the sweep ran of the frozen tests due, when one ran:
	// the tests run and skipped (selection.go), and whether it was full.
	Swept *Swept
	// Controls are the repository's hooks and configuration files that
	// changed while the run was in flight (gitrepo.Controls), and Held
	// the hooks among them made not to run, where they are now: no route
	// of an agent's to them is one the gates let through, and what git
	// runs for a person must not be an agent's. Empty when nothing
	// changed, or when what they were at the run's start is not known (a
	// run of a daemon that restarted since).
	Controls, Held []string
	// Candidate is the tree the claim was judged on and a verdict commits
	// (RunEnd.Onto): the run's tree, or it merged onto the branch;
	// Conflicts are the paths where that merge met another change.
	Candidate gitrepo.Tree
	Conflicts []string
	// Err: the outcome could not be judged (the repository failed). The
	// run's claims are not taken.
	Err error
}

// runsRefused are the paths git cannot record that the run made: those of
// the snapshot after it that the snapshot of its base did not have. When
// the base's are not known (a base recorded before the daemon kept them),
// none is charged: a person's nested repository must never be removed.
func runsRefused(repo *gitrepo.Repo, base gitrepo.Tree, now []gitrepo.Refused) []gates.Change {
	before, known := repo.RefusedAt(base)
	if !known {
		return nil
	}
	had := map[string]bool{}
	for _, r := range before {
		had[r.Path] = true
	}
	var out []gates.Change
	for _, r := range now {
		if !had[r.Path] {
			out = append(out, gates.Change{Path: r.Path, Kind: "added", Refused: r.Why})
		}
	}
	return out
}

// dropSandboxLeftovers removes from the work tree at dir what the run's
// sandbox left there, not the run, and returns the paths it removed.
// Bubblewrap denies a path by mounting over it, and where the path does
// not exist it first makes an empty file there to mount on, which outlives
// the run: an added, empty, regular file at exactly a path denied to the
// run (denied: slash paths relative to dir, deniedIn) is that, and
// charging it would fail an attempt that did nothing. Anything else at a
// denied path is the run's and is judged as ever: a file with content, a
// link, a file that was there before the run, a path below a denied
// directory. A leftover that cannot be removed stays, and is judged too.
func dropSandboxLeftovers(dir string, changes []gitrepo.Change, denied []string) (removed []string, err error) {
	if len(denied) == 0 {
		return nil, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var errs []error
	for _, c := range changes {
		if c.Kind != gitrepo.Added || !slices.Contains(denied, c.Path) {
			continue
		}
		rel := filepath.FromSlash(c.Path)
		if fi, err := root.Lstat(rel); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			continue
		}
		if err := root.Remove(rel); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, c.Path)
	}
	return removed, errors.Join(errs...)
}

// deniedIn is what the sandbox of run denies it (Confine, Relocate), as
// slash paths relative to the work tree it runs in, there or on its
// worker; nil when that is not known (a run of a daemon that restarted
// since, or one that is not confined).
func (j *Judge) deniedIn(runID string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.byRun(runID)
	if r == nil {
		return nil
	}
	var out []string
	for _, d := range r.denied {
		if rel, err := filepath.Rel(r.root.Dir, d); err == nil && rel != "." && within(d, r.root.Dir) {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// evidenceNotFiles are the links and special files in feature's evidence
// directory of the work tree at dir, which is in no change set: the
// daemon reads and copies evidence, and a link there would lead it to a
// file of the agent's choosing. Each is a change git cannot record
// (gates.NotAFile), a finding against the run, and goes. A directory there
// that cannot be read (a chmod 000 that would hide a link) is opened and
// looked into, as its owner may; one that still cannot be is a finding
// itself, as is a walk that fails: nothing there is taken unseen.
func evidenceNotFiles(dir, feature string) []gates.Change {
	if feature == "" {
		return nil
	}
	ev := path.Join(paths.ProgressDir, paths.EvidenceDir, feature)
	found, unreadable, err := treefile.NotFiles(dir, ev)
	for tries := 0; len(unreadable) > 0 && err == nil && tries < 16; tries++ {
		for _, u := range unreadable {
			treefile.Open(dir, u)
		}
		found, unreadable, err = treefile.NotFiles(dir, ev)
	}
	if err != nil {
		found = []string{ev}
	}
	found = append(found, unreadable...)
	out := make([]gates.Change, len(found))
	for i, p := range found {
		out[i] = gates.Change{Path: p, Kind: "added", Refused: gates.NotAFile}
	}
	return out
}

// Blocks reports whether an enforced gate refused part of what the run did.
func (jd Judgement) Blocks() bool {
	for _, f := range jd.Findings {
		if f.Mode == gates.Enforce {
			return true
		}
	}
	return false
}

// holdControls compares the repository's hooks and configuration with
// what they were at the run's start, and makes every hook that appeared or
// changed meanwhile not run (gitrepo.HoldHook).
func (j *Judge) holdControls(repo *gitrepo.Repo, runID string) (changed, held []string, err error) {
	j.mu.Lock()
	var before gitrepo.Controls
	if r := j.byRun(runID); r != nil {
		before = r.controls
	}
	j.mu.Unlock()
	if before == nil {
		return nil, nil, nil
	}
	now, err := repo.Controls()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the repository's hooks and configuration after %s: %w", runID, err)
	}
	changed = before.Changed(now)
	for _, name := range changed {
		if _, exists := now[name]; !exists || !strings.HasPrefix(name, "hooks/") {
			continue
		}
		p, err := repo.HoldHook(name)
		if err != nil {
			return changed, held, fmt.Errorf("holding the hook %s that changed while %s was in flight: %w", name, runID, err)
		}
		held = append(held, p)
	}
	if len(changed) > 0 {
		j.log.Warn("the repository's hooks or configuration changed while a run was in flight", zap.String("run", runID), zap.Strings("changed", changed), zap.Strings("held", held))
	}
	return changed, held, nil
}

// JudgeRun judges what a run produced. Every process of the run must be
// gone: what the tree holds now is all the run did, but for the empty
// files its sandbox left where it denied a path (dropSandboxLeftovers),
// which go first. The run's change set (its base to now) meets the rules
// for its role (gates.JudgeChanges); what an enforced gate refuses is
// restored as it was at the run's start; then, when asked, the daemon runs
// the feature's test on the tree as it is. All of it happens in the run's
// work tree (in.Root), and its tests are lent that tree's dependencies
// (RunTestIn).
func (j *Judge) JudgeRun(ctx context.Context, in RunEnd) Judgement {
	var jd Judgement
	root := j.root(in.Root)
	repo := root.Repo
	if repo == nil {
		jd.Err = fmt.Errorf("judging %s: no repository for its work tree %s", in.Actor.Run, root.Dir)
		return jd
	}
	var err error
	if jd.Controls, jd.Held, err = j.holdControls(repo, in.Actor.Run); err != nil {
		jd.Err = err
		return jd
	}
	var after gitrepo.Tree
	var refused []gitrepo.Refused
	outcome := func() error {
		if after, refused, err = repo.SnapshotRefused(ctx); err != nil {
			return fmt.Errorf("snapshot after %s: %w", in.Actor.Run, err)
		}
		jd.TreeAt = time.Now()
		if jd.Changes, err = repo.Changes(ctx, in.Base, after); err != nil {
			return fmt.Errorf("changes of %s: %w", in.Actor.Run, err)
		}
		return nil
	}
	if jd.Err = outcome(); jd.Err != nil {
		return jd
	}
	// The empty files the run's sandbox left are not the run's: they go
	// before anything is judged, and the outcome is taken again without.
	left, err := dropSandboxLeftovers(root.Dir, jd.Changes, j.deniedIn(in.Actor.Run))
	if err != nil {
		j.log.Warn("an empty file the sandbox left where it denied a path could not be removed; it is judged as the run's", zap.String("run", in.Actor.Run), zap.Error(err))
	}
	if len(left) > 0 {
		j.log.Info("removed the empty files the sandbox left where it denied a path that was not there", zap.String("run", in.Actor.Run), zap.Strings("paths", left))
		if jd.Err = outcome(); jd.Err != nil {
			return jd
		}
	}
	j.mu.Lock()
	state := j.state(nil)
	guards := slices.Clone(j.guards)
	j.mu.Unlock()
	state.ProjectDir, state.List = root.Dir, in.List
	changes := make([]gates.Change, len(jd.Changes))
	for i, c := range jd.Changes {
		changes[i] = gates.Change{Path: c.Path, Kind: c.Kind.String()}
		if c.Kind != gitrepo.Deleted {
			if fi, err := os.Lstat(filepath.Join(root.Dir, filepath.FromSlash(c.Path))); err == nil {
				changes[i].Size = fi.Size()
			}
		}
	}
	changes = append(changes, runsRefused(repo, in.Base, refused)...)
	changes = append(changes, evidenceNotFiles(root.Dir, in.Actor.Feature)...)
	jd.Findings = gates.JudgeChanges(j.opts.Modes, in.Actor, state, changes)
	// The project's guards that hold a file hold it whatever wrote it.
	jd.Findings = append(jd.Findings, gates.GuardChanges(guards, in.Actor, changes, jd.Findings)...)
	for _, f := range jd.Findings {
		if f.Mode == gates.Enforce {
			jd.Restored = append(jd.Restored, f.Path)
		}
	}
	jd.Tree = after
	if len(jd.Restored) > 0 {
		// What git cannot record (a nested .git, a name git refuses) was
		// not there when the run began: it goes, whole.
		var remove, restore []string
		for _, f := range jd.Findings {
			switch {
			case f.Mode != gates.Enforce:
			case f.Refused != "":
				remove = append(remove, f.Path)
			default:
				restore = append(restore, f.Path)
			}
		}
		if err := repo.RemoveRefused(remove); err != nil {
			jd.Err = fmt.Errorf("removing what %s made that git cannot record: %w", in.Actor.Run, err)
			return jd
		}
		if err := repo.Restore(ctx, in.Base, restore); err != nil {
			jd.Err = fmt.Errorf("restoring what %s must not have changed: %w", in.Actor.Run, err)
			return jd
		}
		if jd.Tree, err = repo.Snapshot(ctx); err != nil {
			jd.Err = fmt.Errorf("snapshot after restoring: %w", err)
			return jd
		}
		jd.TreeAt = time.Now()
	}
	jd.Candidate = jd.Tree
	if in.Onto != "" && in.Onto != in.OntoBase && !jd.Blocks() {
		// The branch moved on since the lane was made (another lane's
		// feature, a person's commit): what would be committed is the
		// lane's change on top of it, and that is what is judged.
		jd.Candidate, jd.Conflicts, err = j.opts.Repo.MergeTrees(ctx, in.OntoBase, in.Onto, string(jd.Tree))
		if err != nil {
			jd.Err = fmt.Errorf("merging %s's tree onto %s: %w", in.Actor.Run, gitrepo.Short(in.Onto), err)
			return jd
		}
		if len(jd.Conflicts) > 0 {
			jd.Candidate = ""
			return jd
		}
	}
	if in.Rerun && !jd.Blocks() {
		test := ""
		if f := in.List.Feature(in.Actor.Feature); f != nil {
			test = f.Test
		}
		r := j.RunTestIn(ctx, root, jd.Candidate, test)
		jd.Test = &r
		if in.Sweep && r.Passed() {
			broken, swept := j.sweep(ctx, root, in.List, in.Actor.Feature, jd.Candidate)
			jd.Swept = &swept
			jd.Regressions, jd.Reopen = j.blame(ctx, root, in, jd.Candidate, broken)
		}
	}
	return jd
}

// sweep runs the frozen test of every feature of l marked tested, but
// except, on tree of root's work tree (RunTestsIn), and returns those that
// do not pass there, in the list's order. It runs those selectTests
// selects: every one at a full sweep, otherwise those the change since
// their last passing run can affect. It stops at a cancellation (the
// caller sees ctx's error).
func (j *Judge) sweep(ctx context.Context, root Root, l *progress.List, except string, tree gitrepo.Tree) ([]Regression, Swept) {
	var due []progress.Feature
	var tests []string
	for _, f := range l.Features {
		if f.Tested && f.ID != except && strings.TrimSpace(f.Test) != "" {
			due = append(due, f)
			tests = append(tests, f.Test)
		}
	}
	start, cpu := time.Now(), processCPU()
	sel := j.selectTests(ctx, root, tree, tests)
	run := make([]string, len(sel.run))
	for k, i := range sel.run {
		run[k] = tests[i]
	}
	results := j.RunTestsIn(ctx, root, tree, run)
	var broken []Regression
	var took time.Duration
	complete := ctx.Err() == nil && sel.skipped == 0
	for k, r := range results {
		took += r.Took
		complete = complete && r.Passed()
		if !r.Passed() && !r.Interrupted {
			broken = append(broken, Regression{Feature: due[sel.run[k]].ID, Test: r, lastPass: sel.lastPass[sel.run[k]]})
		}
	}
	j.noteSwept(tree, complete)
	// Its test runs are logged one by one too (the last ones before this
	// line); make bench tells them from the feature's own by it. tests_took
	// is their sum, took the sweep's wall time: with limits.parallel above
	// 1 the first is the larger. cpu is the whole sweep's, checkouts and
	// jails included: while a verdict is judged no run is in flight, and
	// nothing else of the daemon's costs more than its answers to the
	// control socket.
	j.log.Info("the regression sweep ended", zap.String("feature", except), zap.Int("tests", len(run)), zap.Int("skipped", sel.skipped),
		zap.Bool("full", sel.full), zap.Int("passed_here", sel.passedHere), zap.Int("broken", len(broken)),
		zap.Int("parallel", j.parallel()), zap.Duration("took", time.Since(start)), zap.Duration("tests_took", took), zap.Duration("cpu", processCPU()-cpu))
	return broken, Swept{Ran: len(run), Skipped: sel.skipped, Full: sel.full, PassedHere: sel.passedHere}
}

// Swept is what a regression sweep ran of the frozen tests due: Ran of
// them, Skipped by selection; a Full one skips none but the PassedHere
// that the daemon's runs passed on the sweep's tree already.
type Swept struct {
	Ran, Skipped int
	Full         bool
	PassedHere   int
}

// blame tells the claim's regressions from the earlier features' own
// failures: each failing test is run on the tree without the claim's
// change (in.Alone) and, where it passes there, once more on the
// candidate. Only a test that passes without the change and fails twice
// with it is charged to the claim; the branch's time bomb, a flaky test
// or a change in the environment are not its doing.
func (j *Judge) blame(ctx context.Context, root Root, in RunEnd, candidate gitrepo.Tree, broken []Regression) (claims, others []Regression) {
	if in.Alone == "" || len(broken) == 0 {
		return broken, nil
	}
	tests := make([]string, len(broken))
	for i, b := range broken {
		tests[i] = b.Test.Command
	}
	var again []int
	for i, r := range j.RunTestsIn(ctx, root, in.Alone, tests) {
		broken[i].Alone = &r
		if r.Passed() {
			again = append(again, i)
		}
	}
	retests := make([]string, len(again))
	for k, i := range again {
		retests[k] = tests[i]
	}
	for k, r := range j.RunTestsIn(ctx, root, candidate, retests) {
		broken[again[k]].Again = &r
	}
	for _, b := range broken {
		switch b.Blame() {
		case BlameClaim:
			claims = append(claims, b)
		case BlameBranch:
			// It fails on the branch: a landing since it last ran may
			// have broken it, which selection let through.
			b.Miss = j.bisect(ctx, root, b, in.Alone)
			others = append(others, b)
		default:
			others = append(others, b)
		}
	}
	j.log.Info("the sweep's failures were run without the claim's change", zap.String("feature", in.Actor.Feature),
		zap.Int("broken", len(broken)), zap.Int("claims", len(claims)), zap.Int("not_the_claims", len(others)))
	return claims, others
}

// RunTests runs each of tests on tree of the project's own work tree:
// RunTestsIn(ctx, Root{}, tree, tests).
func (j *Judge) RunTests(ctx context.Context, tree gitrepo.Tree, tests []string) []TestResult {
	return j.RunTestsIn(ctx, Root{}, tree, tests)
}

// RunTestsIn runs each of tests on tree of root's work tree as RunTestIn
// does, up to Options.Parallel at once, each on a checkout and in a jail
// of its own, so that a slow test holds up no slot but its own; the
// results are in tests' order. At a cancellation what had not started
// does not: its result is Interrupted.
func (j *Judge) RunTestsIn(ctx context.Context, root Root, tree gitrepo.Tree, tests []string) []TestResult {
	results := make([]TestResult, len(tests))
	slots := make(chan struct{}, j.parallel())
	var wg sync.WaitGroup
	for i, test := range tests {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i] = TestResult{Command: test, ExitCode: -1, Tree: tree, Interrupted: true}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			results[i] = j.RunTestIn(ctx, root, tree, test)
		})
	}
	wg.Wait()
	return results
}

// parallel is how many of a sweep's tests run at once.
func (j *Judge) parallel() int { return max(j.opts.Parallel, 1) }
