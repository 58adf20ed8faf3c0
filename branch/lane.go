package branch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// CommitLane records a lane's accepted verdict: v.Tree is the candidate
// the daemon's test and sweep ran on (the lane's tree merged onto onto, the
// commit the project's branch was at then: judge.RunEnd.Onto), committed
// on onto, under TestedRef always. When the branch is still at onto, the
// project's index and work tree are brought forward to the commit
// (gitrepo.FastForward, which refuses, writing nothing, where a person's
// uncommitted change is on a path the commit changes) and then the branch
// is moved to it: a person's own commits are never rewritten, and the
// branch only ever holds a tree the daemon tested whole.
func CommitLane(ctx context.Context, repo *gitrepo.Repo, v Verdict, onto string) (Committed, error) {
	c, err := repo.Commit(ctx, v.Tree, []string{onto}, commitMessage(v), Author)
	if err != nil {
		return Committed{}, err
	}
	out := Committed{Commit: c, Ref: TestedRef(v.Feature.ID)}
	if err := setRef(ctx, repo, out.Ref, c); err != nil {
		return out, err
	}
	head, _, branch, err := repo.Head(ctx)
	switch {
	case err != nil:
		return out, err
	case branch == "":
		out.OffBranch = "HEAD is detached"
		return out, nil
	case head != onto:
		out.OffBranch = fmt.Sprintf("%s moved while %s's verdict was judged; merge %s to take it", branchName(branch), v.Feature.ID, out.Ref)
		return out, nil
	}
	if err := repo.FastForward(ctx, head, c); err != nil {
		var dirty *gitrepo.DirtyError
		if errors.As(err, &dirty) {
			out.OffBranch = fmt.Sprintf("uncommitted changes in the work tree are on paths %s changes (%s); commit or stash them, then merge %s",
				v.Feature.ID, strings.Join(dirty.Paths, ", "), out.Ref)
			return out, nil
		}
		return out, err
	}
	if err := repo.UpdateRef(ctx, branch, c, head); err != nil {
		return out, fmt.Errorf("moving %s to %s after bringing the work tree forward: %w", branchName(branch), gitrepo.Short(c), err)
	}
	out.Branch = branchName(branch)
	return out, nil
}

// Clone makes feature's lane at dir: a clone of repo that shares its
// objects (gitrepo.AddClone), on the lane's branch (LaneBranch), made from
// commit.
func Clone(ctx context.Context, repo *gitrepo.Repo, dir, feature, commit string) error {
	return repo.AddClone(ctx, dir, LaneBranch(feature), commit)
}

// KeepLane keeps a lane's work, tree (the lane's tree as it is when it
// closes), under ref in repo, as a commit on baseHead, the commit the lane
// was made from. It keeps nothing, and returns "", when tree is baseHead's:
// the lane did no work.
func KeepLane(ctx context.Context, repo *gitrepo.Repo, feature, ref string, tree gitrepo.Tree, baseHead string) (string, error) {
	_, baseTree, err := repo.Resolve(ctx, baseHead)
	if err != nil || tree == baseTree {
		return "", err
	}
	msg := fmt.Sprintf("ctxgraphd: %s's work, kept when its lane closed\n\nctxgraphd-feature: %s\n", feature, feature)
	c, err := repo.Commit(ctx, tree, []string{baseHead}, msg, Author)
	if err != nil {
		return "", err
	}
	if err := setRef(ctx, repo, ref, c); err != nil {
		return "", err
	}
	return c, nil
}
