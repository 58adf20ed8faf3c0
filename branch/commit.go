package branch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Verdict is an accepted verdict, to be committed.
type Verdict struct {
	Feature *progress.Feature
	Attempt int
	Run     string // the tester's run
	Trace   string // the approval trace
	// Tree is exactly what the daemon's run of the test saw.
	Tree gitrepo.Tree
	// Base is the work tree when the feature's first attempt started, and
	// BaseHead the commit HEAD was at then: the branch takes the commit
	// only when the tree held nothing but HEAD then, so that nobody's
	// uncommitted work is committed under the feature's name.
	Base     gitrepo.Tree
	BaseHead string
}

// Committed says where a verdict's commit went.
type Committed struct {
	Commit string
	Ref    string // TestedRef
	Branch string // the branch that took it, "" when none did
	// OffBranch says why the branch did not take it (store.FeatureCounters.OffBranch).
	OffBranch string
}

// Commit records exactly the tested tree as a commit on HEAD: under
// TestedRef always, and on the current branch when the work tree held
// nothing but HEAD when the feature's work began and the tested tree is
// HEAD's tree and the feature's change alone: HEAD has not moved since,
// or a person's commits moved it forward and the feature changed nothing
// they did (onMovedBranch). The user's index follows the branch only when
// nothing was staged; the work tree is never touched.
func Commit(ctx context.Context, repo *gitrepo.Repo, v Verdict) (Committed, error) {
	head, headTree, branch, err := repo.Head(ctx)
	if err != nil {
		return Committed{}, err
	}
	onRef, on, err := testedBase(ctx, repo, v.Base, v.BaseHead, head, headTree)
	if err != nil {
		return Committed{}, err
	}
	parents := parentOf(head, on)
	c, err := repo.Commit(ctx, v.Tree, parents, commitMessage(v), Author)
	if err != nil {
		return Committed{}, err
	}
	out := Committed{Commit: c, Ref: TestedRef(v.Feature.ID)}
	if err := setRef(ctx, repo, out.Ref, c); err != nil {
		return out, err
	}
	switch {
	case on != "":
		out.OffBranch = fmt.Sprintf("%s's work began on %s's tested commit %s, which the branch does not hold; its commit sits on that one: merge %s to take both",
			v.Feature.ID, strings.TrimPrefix(onRef, testedRefs), gitrepo.Short(on), out.Ref)
	case branch == "":
		out.OffBranch = "HEAD is detached"
	case head != v.BaseHead:
		why, err := onMovedBranch(ctx, repo, v, head, headTree, branchName(branch))
		if err != nil {
			return out, err
		}
		if why != "" {
			out.OffBranch = why
			return out, nil
		}
		return advance(ctx, repo, out, head, c, branch)
	case v.Base != headTree:
		out.OffBranch = uncommittedAtStart(v.Feature.ID, branchName(branch))
	default:
		return advance(ctx, repo, out, head, c, branch)
	}
	return out, nil
}

// advance moves branch from head to the verdict's commit c.
func advance(ctx context.Context, repo *gitrepo.Repo, out Committed, head, c, branch string) (Committed, error) {
	if _, err := repo.AdvanceBranch(ctx, head, c); err != nil {
		if errors.Is(err, gitrepo.ErrRefChanged) {
			out.OffBranch = fmt.Sprintf("%s moved meanwhile", branchName(branch))
			return out, nil
		}
		return out, err
	}
	out.Branch = branchName(branch)
	return out, nil
}

func uncommittedAtStart(feature, branch string) string {
	return fmt.Sprintf("the work tree held uncommitted changes that are not %s's when its work began; commit or stash them to get commits on %s", feature, branch)
}

// testedBase is the tested commit, and its ref, that a feature's work
// began on when that is what the work tree held beyond the commit HEAD
// was at (a feature before it, tested but kept off the branch, whose code
// stayed in the work tree); "" when the work began on that commit alone,
// or on a person's uncommitted work. The feature's commit then goes on
// that tested commit, so that it holds its own change and nothing of the
// one before, and merging it takes both.
func testedBase(ctx context.Context, repo *gitrepo.Repo, base gitrepo.Tree, baseHead, head string, headTree gitrepo.Tree) (ref, commit string, err error) {
	began := headTree
	switch {
	case baseHead == head:
	case baseHead == "":
		began = repo.EmptyTree()
	default:
		if _, began, err = repo.Resolve(ctx, baseHead); err != nil {
			return "", "", err
		}
	}
	if base == began || baseHead == "" {
		return "", "", nil // (without a commit to begin from, no history to grow from either)
	}
	ref, commit, err = repo.RefWithTree(ctx, testedRefs, base)
	if err != nil || commit == "" {
		return "", "", err
	}
	// Only a tested commit the branch does not hold, made on the history
	// the feature's work began from: one the branch holds is HEAD's past,
	// and one of a history a person rewrote or left would bring it back.
	if head != "" {
		if held, err := repo.IsAncestor(ctx, commit, head); err != nil || held {
			return "", "", err
		}
	}
	if from, err := repo.IsAncestor(ctx, baseHead, commit); err != nil || !from {
		return "", "", err
	}
	return ref, commit, nil
}

// onMovedBranch says why the tested tree cannot go on a branch that a
// person's commits moved while the feature was worked on, or "" when it
// can: when the branch moved forward (the feature's BaseHead is in its
// history), the work tree held nothing but BaseHead when the feature
// began, and every path where the tested tree differs from the branch's is
// one those commits did not touch. The tested tree is then the branch's
// tree with the feature's change on top and nothing else: committed on
// the branch's head, it keeps the person's commits as they are, under it,
// and it is exactly what the daemon tested. A change of theirs the tested
// tree does not hold as they committed it (their commit made elsewhere
// than in the work tree, or a file the agent wrote over) keeps the branch
// where it is: the feature's commit would undo it.
func onMovedBranch(ctx context.Context, repo *gitrepo.Repo, v Verdict, head string, headTree gitrepo.Tree, branch string) (string, error) {
	if v.BaseHead == "" {
		return fmt.Sprintf("%s got its first commit while %s was worked on", branch, v.Feature.ID), nil
	}
	baseHeadTree, forward, err := movedForward(ctx, repo, v.BaseHead, head)
	if err != nil {
		return "", err
	}
	if !forward {
		return fmt.Sprintf("%s was moved back or rewritten while %s was worked on", branch, v.Feature.ID), nil
	}
	if v.Base != baseHeadTree {
		return uncommittedAtStart(v.Feature.ID, branch), nil
	}
	// Every path of the repository, not only those the daemon judges (a
	// commit of theirs to .claude/ or outside the project directory is
	// one the tested tree holds as HEAD was when the feature began), and
	// every path any of their commits touched, not only those that end
	// changed (a change they made, then reverted after the test, is one
	// the tested tree holds as it was in between).
	moved, err := repo.TouchedSince(ctx, v.BaseHead, head)
	if err != nil {
		return "", err
	}
	theirs := make(map[string]bool, len(moved))
	for _, p := range moved {
		theirs[p] = true
	}
	ours, err := repo.ChangedPaths(ctx, headTree, v.Tree)
	if err != nil {
		return "", err
	}
	for _, p := range ours {
		if theirs[p] {
			return fmt.Sprintf("%s moved while %s was worked on, and the tested tree does not hold %s as the new commits do", branch, v.Feature.ID, p), nil
		}
	}
	return "", nil
}

// Preserve keeps a blocked feature's work under BlockedRef and puts the
// work tree back as it was when the feature's work began (base, when HEAD
// was at baseHead), so that the next feature starts from a tree that holds
// only what was tested. Only the paths the feature changed are put back;
// nothing is lost (the ref keeps them). The kept work sits on HEAD, or on
// the tested commit the feature's work began on (as Commit's does).
//
// A person's commits since (or an amend, a rebase, a reset: HEAD is not
// baseHead any more) are theirs: a path they changed goes back as HEAD has
// it, not as it was before, unless the work tree held uncommitted work of
// theirs on it when the feature began, which neither HEAD nor base alone
// holds; that path is left as it is (the ref keeps it too).
func Preserve(ctx context.Context, repo *gitrepo.Repo, feature, why string, base gitrepo.Tree, baseHead string) (commit string, restored []string, err error) {
	now, err := repo.Snapshot(ctx)
	if err != nil {
		return "", nil, err
	}
	changes, err := repo.Changes(ctx, base, now)
	if err != nil || len(changes) == 0 {
		return "", nil, err
	}
	head, headTree, _, err := repo.Head(ctx)
	if err != nil {
		return "", nil, err
	}
	// Everything that can fail is asked before anything is written: a
	// Preserve that fails keeps nothing aside and puts nothing back.
	theirs, mixed, err := committedSince(ctx, repo, base, baseHead, head, headTree)
	if err != nil {
		return "", nil, err
	}
	_, on, err := testedBase(ctx, repo, base, baseHead, head, headTree)
	if err != nil {
		return "", nil, err
	}
	parents := parentOf(head, on)
	msg := fmt.Sprintf("%s: blocked, work kept by ctxgraphd\n\n%s\n\nctxgraphd-feature: %s\nctxgraphd-verdict: blocked\n", feature, why, feature)
	commit, err = repo.Commit(ctx, now, parents, msg, Author)
	if err != nil {
		return "", nil, err
	}
	if err := setRef(ctx, repo, BlockedRef(feature), commit); err != nil {
		return "", nil, err
	}
	var toBase, toHead []string
	for _, c := range changes {
		switch {
		case c.FromMode == gitrepo.ModeGitlink || c.ToMode == gitrepo.ModeGitlink:
			continue // a repository of its own inside the project: not ours to put back
		case mixed[c.Path]:
			continue
		case theirs[c.Path]:
			toHead = append(toHead, c.Path)
		default:
			toBase = append(toBase, c.Path)
		}
		restored = append(restored, c.Path)
	}
	if err := repo.Restore(ctx, base, toBase); err != nil {
		return commit, restored, err
	}
	return commit, restored, repo.Restore(ctx, headTree, toHead)
}

// movedForward says whether the branch moved forward from baseHead to head
// (baseHead is in head's history: commits were added, none taken away),
// and baseHead's tree.
func movedForward(ctx context.Context, repo *gitrepo.Repo, baseHead, head string) (baseHeadTree gitrepo.Tree, forward bool, err error) {
	if forward, err = repo.IsAncestor(ctx, baseHead, head); err != nil || !forward {
		return "", false, err
	}
	_, baseHeadTree, err = repo.Resolve(ctx, baseHead)
	return baseHeadTree, err == nil, err
}

// committedSince says which of the project's paths HEAD's tree holds
// otherwise than the commit the feature's work began on (theirs: a
// person's commits, amends, rebases and resets since), and, of those, the
// ones on which the work tree held uncommitted work when the feature began
// (mixed). Both are empty when HEAD is still baseHead.
func committedSince(ctx context.Context, repo *gitrepo.Repo, base gitrepo.Tree, baseHead, head string, headTree gitrepo.Tree) (theirs, mixed map[string]bool, err error) {
	if baseHead == head {
		return nil, nil, nil
	}
	baseHeadTree := repo.EmptyTree()
	if baseHead != "" {
		if _, baseHeadTree, err = repo.Resolve(ctx, baseHead); err != nil {
			return nil, nil, err
		}
	}
	changed, err := repo.Changes(ctx, baseHeadTree, headTree)
	if err != nil {
		return nil, nil, err
	}
	uncommitted, err := repo.Changes(ctx, baseHeadTree, base)
	if err != nil {
		return nil, nil, err
	}
	atStart := make(map[string]bool, len(uncommitted))
	for _, c := range uncommitted {
		atStart[c.Path] = true
	}
	theirs, mixed = make(map[string]bool, len(changed)), map[string]bool{}
	for _, c := range changed {
		theirs[c.Path] = true
		if atStart[c.Path] {
			mixed[c.Path] = true
		}
	}
	return theirs, mixed, nil
}

func commitMessage(v Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", v.Feature.ID, v.Feature.Title)
	fmt.Fprintf(&b, "Tested by ctxgraphd: on attempt %d, the daemon's own run of `%s` passed on exactly this tree.\n\n", v.Attempt, v.Feature.Test)
	fmt.Fprintf(&b, "ctxgraphd-feature: %s\nctxgraphd-attempt: %d\nctxgraphd-run: %s\nctxgraphd-verdict: %s\n", v.Feature.ID, v.Attempt, v.Run, v.Trace)
	return b.String()
}

// parentOf is the parent a verdict's commit is made on: the tested commit
// the feature's work began on, when it began on one (on), else the
// branch's head; none on an unborn branch.
func parentOf(head, on string) []string {
	if on != "" {
		return []string{on}
	}
	if head != "" {
		return []string{head}
	}
	return nil
}
