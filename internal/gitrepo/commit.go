package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Signature is who a commit is by, as author and committer. The daemon
// passes it explicitly, so commits never depend on the user.name and
// user.email of whatever configuration is around.
type Signature struct {
	Name, Email string
	When        time.Time // zero: now
}

func (s Signature) check() error {
	for _, f := range []struct{ what, v string }{{"name", s.Name}, {"email", s.Email}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("gitrepo: commit: signature %s is empty", f.what)
		}
		if strings.ContainsAny(f.v, "<>\n\x00") {
			return fmt.Errorf("gitrepo: commit: signature %s %q contains <, > or a newline, which git cannot record", f.what, f.v)
		}
	}
	return nil
}

// env is the identity environment of commit-tree.
func (s Signature) env() []string {
	env := []string{
		"GIT_AUTHOR_NAME=" + s.Name, "GIT_AUTHOR_EMAIL=" + s.Email,
		"GIT_COMMITTER_NAME=" + s.Name, "GIT_COMMITTER_EMAIL=" + s.Email,
	}
	if !s.When.IsZero() {
		date := fmt.Sprintf("%d %s", s.When.Unix(), s.When.Format("-0700"))
		env = append(env, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	}
	return env
}

// Head returns the commit HEAD points at and its tree (no commit and the
// empty tree before the first commit), and the branch HEAD is on
// ("refs/heads/main"), or "" when HEAD is detached.
func (r *Repo) Head(ctx context.Context) (commit string, tree Tree, branch string, err error) {
	branch, err = r.branch(ctx)
	if err != nil {
		return "", "", "", err
	}
	commit, ok, err := r.revParse(ctx, "HEAD^{commit}")
	if err != nil {
		return "", "", "", err
	}
	if !ok {
		return "", r.emptyTree, branch, nil
	}
	id, _, err := r.revParse(ctx, commit+"^{tree}")
	if err != nil {
		return "", "", "", err
	}
	return commit, Tree(id), branch, nil
}

// branch is the ref HEAD refers to, or "" when HEAD is detached.
func (r *Repo) branch(ctx context.Context) (string, error) {
	out, err := r.git(ctx, nil, nil, "symbolic-ref", "-q", "HEAD")
	if exitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// IndexMatchesHead reports whether the user's index has nothing staged: it
// holds HEAD's tree (the empty tree before the first commit).
func (r *Repo) IndexMatchesHead(ctx context.Context) (bool, error) {
	head, err := r.headTree(ctx)
	if err != nil {
		return false, err
	}
	return r.indexMatches(ctx, string(head))
}

// indexMatches reports whether the user's index holds the tree of treeish.
// diff-index --cached reads neither the work tree nor writes the index.
func (r *Repo) indexMatches(ctx context.Context, treeish string) (bool, error) {
	_, err := r.git(ctx, nil, nil, "diff-index", "--cached", "--quiet", treeish, "--")
	switch exitCode(err) {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, err
}

// Commit writes a commit of tree with the given parents (none for a first
// commit), message and signature as author and committer, and returns its
// id. It is commit-tree: no hook runs, nothing is signed, no ref moves.
func (r *Repo) Commit(ctx context.Context, tree Tree, parents []string, message string, sig Signature) (string, error) {
	if err := checkID("tree", string(tree)); err != nil {
		return "", err
	}
	for _, p := range parents {
		if err := checkID("parent", p); err != nil {
			return "", err
		}
	}
	if err := sig.check(); err != nil {
		return "", err
	}
	if strings.TrimSpace(message) == "" {
		return "", errors.New("gitrepo: commit: the message is empty")
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	args := []string{"commit-tree", "--no-gpg-sign", "-F", "-"}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	args = append(args, string(tree))
	out, err := r.git(ctx, sig.env(), strings.NewReader(message), args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// UpdateRef points ref (a full name, "refs/…") at commit, only if it still
// holds old; old "" means the ref must not exist yet. There is no
// unconditional form: the daemon only ever moves a ref from a value it has
// seen, so that whatever somebody else did to it meanwhile is never lost.
// When the ref holds something else the error wraps ErrRefChanged.
func (r *Repo) UpdateRef(ctx context.Context, ref, commit, old string) error {
	return r.updateRef(ctx, ref, commit, old, "ctxgraphd: update-ref")
}

func (r *Repo) updateRef(ctx context.Context, ref, commit, old, reason string) error {
	if !strings.HasPrefix(ref, "refs/") {
		return fmt.Errorf("gitrepo: update-ref %q: give a full ref name (refs/heads/…)", ref)
	}
	if err := checkID("commit", commit); err != nil {
		return err
	}
	if old != "" {
		if err := checkID("old value", old); err != nil {
			return err
		}
	}
	// update-ref compares and swaps under the ref's lock.
	_, err := r.git(ctx, nil, nil, "update-ref", "-m", reason, ref, commit, old)
	if err == nil {
		return nil
	}
	now, exists, rerr := r.revParse(ctx, ref)
	if rerr != nil || now == old {
		return err
	}
	if !exists {
		now = "nothing"
	}
	if old == "" {
		old = "nothing (a new ref)"
	}
	return fmt.Errorf("gitrepo: update %s to %s: %w: it holds %s, not %s", ref, commit, ErrRefChanged, now, old)
}

// DeleteRef deletes ref (a full name, "refs/…"), only if it still holds
// old; when it holds something else the error wraps ErrRefChanged and the
// ref is left as it is.
func (r *Repo) DeleteRef(ctx context.Context, ref, old string) error {
	if !strings.HasPrefix(ref, "refs/") {
		return fmt.Errorf("gitrepo: delete ref %q: give a full ref name (refs/heads/…)", ref)
	}
	if err := checkID("old value", old); err != nil {
		return err
	}
	_, err := r.git(ctx, nil, nil, "update-ref", "-m", "ctxgraphd: delete-ref", "-d", ref, old)
	if err == nil {
		return nil
	}
	if now, exists, rerr := r.revParse(ctx, ref); rerr == nil && now != old {
		if !exists {
			now = "nothing"
		}
		return fmt.Errorf("gitrepo: delete %s: %w: it holds %s, not %s", ref, ErrRefChanged, now, old)
	}
	return err
}

// AdvanceBranch moves the branch HEAD is on from old ("" before the first
// commit) to commit, so that the user sees the daemon's commit as the next
// one on their branch.
//
// The move is a compare-and-swap (update-ref with old's value): a commit the
// user made meanwhile is never lost, the call fails with ErrRefChanged. It
// fails with ErrDetachedHead when HEAD is on no branch. Then, only if the
// user's index held old's tree (nothing was staged), the index is reset to
// commit's tree so that `git status` shows what is really left to commit;
// indexReset says whether it was. The reset is `git reset <commit> -- .`,
// which keeps the stat data of unchanged entries (read-tree would drop them
// all and make the next git status hash every file) and, like read-tree
// without -u, never touches the work tree. Staged changes are never thrown
// away: with anything staged the index is left as it is.
func (r *Repo) AdvanceBranch(ctx context.Context, old, commit string) (indexReset bool, err error) {
	if err := checkID("commit", commit); err != nil {
		return false, err
	}
	branch, err := r.branch(ctx)
	if err != nil {
		return false, err
	}
	if branch == "" {
		return false, fmt.Errorf("gitrepo: advance branch to %s: %w; check out a branch to let the daemon commit on it", commit, ErrDetachedHead)
	}
	head, _, err := r.revParse(ctx, "HEAD^{commit}")
	if err != nil {
		return false, err
	}
	if head != old {
		if head == "" {
			head = "no commit"
		}
		return false, fmt.Errorf("gitrepo: advance %s to %s: %w: it is at %s, not %s", branch, commit, ErrRefChanged, head, old)
	}
	oldTree := string(r.emptyTree)
	if old != "" {
		oldTree = old
	}
	clean, err := r.indexMatches(ctx, oldTree)
	if err != nil {
		return false, err
	}
	if err := r.updateRef(ctx, branch, commit, old, "ctxgraphd: commit"); err != nil {
		return false, err
	}
	if !clean {
		return false, nil
	}
	// Should the user have switched branches in between, the index is theirs
	// to keep.
	if now, err := r.branch(ctx); err != nil || now != branch {
		return false, err
	}
	// The reset refreshes stat data, which can run clean filters.
	env, err := r.filterEnv(ctx)
	if err != nil {
		return false, fmt.Errorf("gitrepo: %s now points at %s, but the index was not reset (run `git reset` to bring it up to date): %w", branch, commit, err)
	}
	if _, err := r.git(ctx, env, nil, "reset", "-q", commit, "--", "."); err != nil {
		return false, fmt.Errorf("gitrepo: %s now points at %s, but resetting the index failed (run `git reset` to bring it up to date): %w", branch, commit, err)
	}
	return true, nil
}

// RefWithTree returns the newest commit, among those the refs under prefix
// (such as "refs/ctxgraphd/tested/") point at, whose tree is tree, and its
// ref; "" when none is.
func (r *Repo) RefWithTree(ctx context.Context, prefix string, tree Tree) (ref, commit string, err error) {
	if !strings.HasPrefix(prefix, "refs/") {
		return "", "", fmt.Errorf("gitrepo: refs under %q: give a full ref name (refs/…)", prefix)
	}
	out, err := r.git(ctx, nil, nil, "for-each-ref", "--sort=-committerdate", "--format=%(refname) %(objectname) %(tree)", prefix)
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == string(tree) {
			return f[0], f[1], nil
		}
	}
	return "", "", nil
}

// Ref returns the commit ref points at, or "" when ref does not exist: the
// old value to give UpdateRef.
func (r *Repo) Ref(ctx context.Context, ref string) (string, error) {
	if !strings.HasPrefix(ref, "refs/") {
		return "", fmt.Errorf("gitrepo: ref %q: give a full ref name (refs/heads/…)", ref)
	}
	id, ok, err := r.revParse(ctx, ref+"^{commit}")
	if err != nil || !ok {
		return "", err
	}
	return id, nil
}
