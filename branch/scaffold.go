package branch

import (
	"context"
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// CommitScaffold commits the initializer's work, tree, on the branch, so
// that the features' commits start from a clean tree: only when the work
// tree held nothing but HEAD before the initializer ran (before is the tree
// then) and HEAD is on a branch. It commits nothing, and returns "",
// otherwise: a person's work was in the tree, and it is not ours to commit.
// run is the initializer's run, features the number of features its list
// has.
func CommitScaffold(ctx context.Context, repo *gitrepo.Repo, tree, before gitrepo.Tree, run string, features int) (string, error) {
	head, headTree, branch, err := repo.Head(ctx)
	if err != nil {
		return "", err
	}
	if branch == "" || headTree != before {
		return "", nil
	}
	var parents []string
	if head != "" {
		parents = []string{head}
	}
	msg := fmt.Sprintf("ctxgraphd: the feature list's acceptance tests and scaffolding\n\nWritten by the initializer (%s) for %d features.\n\nctxgraphd-run: %s\n", run, features, run)
	c, err := repo.Commit(ctx, tree, parents, msg, Author)
	if err != nil {
		return "", err
	}
	if _, err := repo.AdvanceBranch(ctx, head, c); err != nil {
		return "", err
	}
	return c, nil
}
