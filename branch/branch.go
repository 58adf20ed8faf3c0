// Package branch writes the project's history: a tested feature's commit
// (under its tested ref always, on the branch when the branch can take it),
// a lane's landing, the work of a blocked feature or of a closed lane kept
// under a ref, the initializer's scaffold commit, the lanes' clones on
// branches of their own, and the bundles that carry a lane to a worker and
// its result back (checked in quarantine before anything uses it).
//
// The judge decides; this package writes what it decided. It is the one
// place that names the daemon's refs (refs/ctxgraphd/tested/, blocked/,
// lane/ and quarantine/) and the lanes' branches (ctxgraphd/<id>), so that
// what reads them (ctxgraphd verify, the report) reads them here, without
// the judge. The
// repository itself is internal/gitrepo's, which moves a ref only if it
// still holds what the caller saw.
package branch

import (
	"context"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// Author is who the daemon's commits name: the tool that verified them.
var Author = gitrepo.Signature{Name: "ctxgraphd", Email: "ctxgraphd@localhost"}

// TestedRef is where the commit of a tested feature is kept, whether or not
// the branch could take it: "tested" always names a commit.
func TestedRef(feature string) string { return testedRefs + feature }

// testedRefs is where the tested refs live.
const testedRefs = "refs/ctxgraphd/tested/"

// BlockedRef keeps the work of a blocked feature when the work tree is put
// back for the next one.
func BlockedRef(feature string) string { return "refs/ctxgraphd/blocked/" + feature }

// LaneRef keeps a lane's work when its feature starts again from the
// branch in a fresh lane, or when the daemon stops with the lane open.
func LaneRef(feature string) string { return "refs/ctxgraphd/lane/" + feature }

// QuarantineRef holds the result a worker sent for run (ImportResult) from
// the moment its objects are in the repository until the caller is done
// with it (ReleaseResult): checked, or being checked, and nothing else.
func QuarantineRef(run string) string { return "refs/ctxgraphd/quarantine/" + run }

// LaneBranch is the branch of feature's lane, in the lane's own clone.
func LaneBranch(feature string) string { return "ctxgraphd/" + feature }

// setRef points one of the daemon's own refs at commit, from whatever it
// held: a feature tested again (after a person's retry) gets its new commit.
func setRef(ctx context.Context, repo *gitrepo.Repo, ref, commit string) error {
	old, err := repo.Ref(ctx, ref)
	if err != nil {
		return err
	}
	return repo.UpdateRef(ctx, ref, commit, old)
}

func branchName(ref string) string { return strings.TrimPrefix(ref, "refs/heads/") }
