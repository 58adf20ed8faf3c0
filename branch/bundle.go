package branch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// A lane run by a worker shares no file system with the daemon: its base
// goes out as a bundle of the whole history (WriteBase), of which the
// worker makes a clone of its own (CloneBase); its result comes back as a
// bundle of the base's descendants (WriteResult), which the daemon takes
// into a quarantine ref and checks before anything else may use it
// (ImportResult). The worker's bundle is an agent's work that crossed a
// network: nothing in it is taken on its word.

// WriteBase writes to w the bundle a worker clones a lane from: commit and
// its whole history.
func WriteBase(ctx context.Context, repo *gitrepo.Repo, w io.Writer, commit string) error {
	return repo.WriteBundle(ctx, w, "", commit)
}

// CloneBase makes, on the worker, feature's lane at dir from a bundle
// WriteBase wrote of commit, read from rd (at most limit bytes): a
// repository of its own on the lane's branch (LaneBranch), commit's files
// checked out.
func CloneBase(ctx context.Context, rd io.Reader, limit int64, dir, feature, commit string) error {
	b, err := gitrepo.ReadBundle(rd, limit)
	if err != nil {
		return fmt.Errorf("cloning %s's lane at %s: %w", feature, dir, err)
	}
	return gitrepo.CloneBundle(ctx, b, dir, LaneBranch(feature), commit)
}

// WriteResult writes to w, on the worker, the lane's result: the bundle of
// base..tip of the lane's clone, base its one prerequisite.
func WriteResult(ctx context.Context, clone *gitrepo.Repo, w io.Writer, base, tip string) error {
	return clone.WriteBundle(ctx, w, base, tip)
}

// Result is what the daemon knows of a worker's result before reading it.
type Result struct {
	// Run is the run whose result it is; it names the quarantine ref.
	Run string
	// Base is the commit the lane was made from (the bundle's one
	// prerequisite, and an ancestor of its tip).
	Base string
	// MaxBytes bounds the bundle's size.
	MaxBytes int64
	// The rules of a local lane's change set (gates.JudgeChanges): the
	// run's gate modes, its actor (an agent's role: a worker's result is
	// never a person's) and the gates' state, sandbox.max_file_mb
	// (State.MaxFileSize) included.
	Modes gates.Modes
	Actor gates.Actor
	State gates.State
}

// Imported is a worker's result the checks let stand.
type Imported struct {
	Commit string       // the result's tip
	Tree   gitrepo.Tree // its tree: the lane's tree, for the judge
	Ref    string       // QuarantineRef(Run), at Commit until ReleaseResult
	// Warnings are the findings of gates in warn mode: let through, and
	// to be recorded as a local lane's are.
	Warnings []gates.Finding
}

// ErrRefused means a worker's result was refused; see RefusedError.
var ErrRefused = errors.New("result refused")

// RefusedError says why a worker's result was refused: the run, the path
// at fault ("" when the fault is the bundle's as a whole) and why. The
// quarantine ref is gone.
type RefusedError struct {
	Run, Path, Why string
	// Findings are the enforced gates' findings, when the rules of a
	// change set refused it.
	Findings []gates.Finding
}

func (e *RefusedError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s's result refused: %s", e.Run, e.Why)
	}
	return fmt.Sprintf("%s's result refused: %s: %s", e.Run, e.Path, e.Why)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

// ImportResult reads a worker's result bundle from rd into
// QuarantineRef(res.Run) and checks it before anything else may use it:
//
//   - the bundle is at most res.MaxBytes, and each of its objects passes
//     git's checks (gitrepo.Unbundle);
//   - it has exactly one tip, and needs no commit but res.Base;
//   - res.Base is an ancestor of the tip;
//   - every path the tip changes against res.Base is the project's, and
//     passes the rules of a local lane's change set (gates.JudgeChanges:
//     refused paths, .git in any case, a nested repository, a file past
//     sandbox.max_file_mb).
//
// The names the bundle gives its tip are never used: no ref moves but the
// quarantine ref. A symlink is a change like any other (its path judged,
// its size its target's length, as a local lane's on disk); the import
// never checks the tree out, and what a link points at is met by the
// judge's confined test run on its own checkout, as a local lane's is.
//
// A refused result is a *RefusedError and leaves no quarantine ref; an
// accepted one keeps the ref at its tip until ReleaseResult. A failure of
// the daemon's own (a Result it got wrong, its repository, ctx) is another
// error, except that git failing to read the bundle is a refusal: a pack
// git cannot read is not told from a bad one.
func ImportResult(ctx context.Context, repo *gitrepo.Repo, rd io.Reader, res Result) (Imported, error) {
	if err := checkResult(res); err != nil {
		return Imported{}, err
	}
	base, baseTree, err := repo.Resolve(ctx, res.Base)
	if err != nil || base != res.Base {
		return Imported{}, fmt.Errorf("importing %s's result: its base %q is not a commit id of the project (%v)", res.Run, res.Base, err)
	}
	ref := QuarantineRef(res.Run)
	if held, err := repo.Ref(ctx, ref); err != nil {
		return Imported{}, err
	} else if held != "" {
		return Imported{}, fmt.Errorf("importing %s's result: %s already holds %s; release it (ReleaseResult) first", res.Run, ref, gitrepo.Short(held))
	}
	refuse := func(path, why string) (Imported, error) {
		return Imported{}, &RefusedError{Run: res.Run, Path: path, Why: why}
	}
	b, err := gitrepo.ReadBundle(rd, res.MaxBytes)
	if err != nil {
		return refuse("", err.Error())
	}
	if len(b.Tips) != 1 {
		names := make([]string, len(b.Tips))
		for i, t := range b.Tips {
			names[i] = t.Name
		}
		return refuse("", fmt.Sprintf("the bundle has %d tips (%s); a result has one", len(b.Tips), strings.Join(names, ", ")))
	}
	for _, p := range b.Prerequisites {
		if p != res.Base {
			return refuse("", fmt.Sprintf("the bundle needs commit %s; a result needs none but its base %s", p, gitrepo.Short(res.Base)))
		}
	}
	if err := repo.Unbundle(ctx, b); err != nil {
		if ctx.Err() != nil {
			return Imported{}, err
		}
		return refuse("", err.Error())
	}
	tip := b.Tips[0].Commit
	if err := repo.UpdateRef(ctx, ref, tip, ""); err != nil {
		return Imported{}, err
	}
	out, refused, err := checkTip(ctx, repo, res, baseTree, tip)
	if refused == nil && err == nil {
		out.Commit, out.Ref = tip, ref
		return out, nil
	}
	if derr := repo.DeleteRef(ctx, ref, tip); derr != nil {
		return Imported{}, errors.Join(err, derr)
	}
	if err != nil {
		return Imported{}, err
	}
	return Imported{}, refused
}

// checkResult refuses a Result the daemon itself got wrong.
func checkResult(res Result) error {
	switch {
	case !IsRunName(res.Run):
		return fmt.Errorf("importing a result: run %q is not a run's id (letters, digits, '.', '_', '-')", res.Run)
	case res.MaxBytes <= 0:
		return fmt.Errorf("importing %s's result: MaxBytes is %d; give the bound on a result bundle", res.Run, res.MaxBytes)
	case res.Actor.Role == "":
		return fmt.Errorf("importing %s's result: no actor role; a worker's result is an agent's, judged by its role's rules", res.Run)
	}
	return nil
}

// IsRunName reports whether run makes a quarantine ref of one component
// (and a file name): letters, digits, '.', '_' and '-', no "..".
func IsRunName(run string) bool {
	if run == "" || strings.HasPrefix(run, ".") || strings.HasSuffix(run, ".lock") || strings.Contains(run, "..") {
		return false
	}
	for _, c := range run {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkTip checks the result's tip, in the repository now, against its
// base: refused is why it may not stand, err a failure of the daemon's.
func checkTip(ctx context.Context, repo *gitrepo.Repo, res Result, baseTree gitrepo.Tree, tip string) (out Imported, refused *RefusedError, err error) {
	refuse := func(path, why string, findings ...gates.Finding) (Imported, *RefusedError, error) {
		return Imported{}, &RefusedError{Run: res.Run, Path: path, Why: why, Findings: findings}, nil
	}
	if ok, err := repo.IsAncestor(ctx, res.Base, tip); err != nil {
		return Imported{}, nil, err
	} else if !ok {
		return refuse("", fmt.Sprintf("its tip %s does not descend from the lane's base %s", gitrepo.Short(tip), gitrepo.Short(res.Base)))
	}
	_, tree, err := repo.Resolve(ctx, tip)
	if err != nil {
		return Imported{}, nil, err
	}
	unowned, err := repo.Unowned(ctx, baseTree, tree)
	if err != nil {
		return Imported{}, nil, err
	}
	if len(unowned) > 0 {
		return refuse(unowned[0], "it is not the project's to change (outside the project directory, or a path the daemon keeps itself)")
	}
	changes, err := changeSet(ctx, repo, baseTree, tree)
	if err != nil {
		return Imported{}, nil, err
	}
	var enforced []gates.Finding
	for _, f := range gates.JudgeChanges(res.Modes, res.Actor, res.State, changes) {
		if f.Blocks() {
			enforced = append(enforced, f)
		} else {
			out.Warnings = append(out.Warnings, f)
		}
	}
	if len(enforced) > 0 {
		return refuse(enforced[0].Path, enforced[0].Message, enforced...)
	}
	out.Tree = tree
	return out, nil, nil
}

// nestedRepository is gates.Change.Refused for a gitlink: git records a
// nested repository as a commit id, not its files.
const nestedRepository = "a nested repository (a gitlink): a commit would hold its commit id, not its files"

// changeSet is the tip's change set against its base as a local lane's
// is made: each path's kind, and its size as the file would be on disk.
func changeSet(ctx context.Context, repo *gitrepo.Repo, from, to gitrepo.Tree) ([]gates.Change, error) {
	diff, err := repo.Changes(ctx, from, to)
	if err != nil {
		return nil, err
	}
	changes := make([]gates.Change, len(diff))
	var blobs []string
	var at []int
	for i, c := range diff {
		changes[i] = gates.Change{Path: c.Path, Kind: c.Kind.String()}
		switch {
		case c.ToMode == gitrepo.ModeGitlink:
			changes[i].Refused = nestedRepository
		case c.Kind != gitrepo.Deleted:
			blobs, at = append(blobs, c.To), append(at, i)
		}
	}
	sizes, err := repo.ObjectSizes(ctx, blobs)
	if err != nil {
		return nil, err
	}
	for j, size := range sizes {
		changes[at[j]].Size = size
	}
	return changes, nil
}

// ReleaseResult deletes run's quarantine ref, if it is still at commit
// (the Imported's): the caller is done with the result.
func ReleaseResult(ctx context.Context, repo *gitrepo.Repo, run, commit string) error {
	return repo.DeleteRef(ctx, QuarantineRef(run), commit)
}
