package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Lanes: the daemon works on several features at once, each in a clone
// of its own that shares the repository's objects (AddClone), and
// integrates them one after the other: MergeTrees makes the candidate
// (the project's branch with the lane's tree merged on top), the
// candidate is tested, FastForward brings the person's work tree along and
// the branch moves (UpdateRef).

// realCommonDir is the repository's git directory (the main .git, also
// from a linked work tree), real.
func (r *Repo) realCommonDir(ctx context.Context) (string, error) {
	out, err := r.git(ctx, nil, nil, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(string(out), "\n")
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.top, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("gitrepo: the git directory %s: %w", p, err)
	}
	return real, nil
}

// checkOutside refuses a lane's directory inside the repository's work
// tree (a snapshot would take its files in as a nested repository's) or
// its git directory.
func (r *Repo) checkOutside(ctx context.Context, dir string) error {
	common, err := r.realCommonDir(ctx)
	if err != nil {
		return err
	}
	for _, d := range []string{r.top, common} {
		if within(dir, d) || within(d, dir) {
			return fmt.Errorf("it is inside or holds %s; put lanes beside the daemon's state directory", d)
		}
	}
	return nil
}

// within reports whether p is dir or inside it (both clean and absolute).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel) // "." is local
}

// realPathLenient is the absolute path of p with symlinks resolved, as
// far as it exists: a lane's directory is made below it.
func realPathLenient(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for cur := abs; ; cur = filepath.Dir(cur) {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(cur) == cur {
			return "", err
		}
		rest = append(rest, filepath.Base(cur))
	}
}

// checkBranch refuses what is no branch name git would take, and what it
// would take as an option or a full ref name.
func (r *Repo) checkBranch(ctx context.Context, branch string) error {
	if branch == "" || branch == "HEAD" || strings.HasPrefix(branch, "-") || strings.HasPrefix(branch, "refs/") {
		return fmt.Errorf("gitrepo: branch %q: give a branch's short name, such as ctxgraphd/F-003", branch)
	}
	_, err := r.git(ctx, nil, nil, "check-ref-format", "refs/heads/"+branch)
	if exitCode(err) == 1 {
		return fmt.Errorf("gitrepo: branch %q is not a name git allows (see git check-ref-format): no space, ~, ^, :, ?, *, [, \\, \"..\", \"@{\" or component starting with \".\" or ending in \".lock\"", branch)
	}
	return err
}

// DirtyError is ErrDirty with the paths in the way.
type DirtyError struct {
	Dir      string   // the work tree
	From, To string   // the commits of the move
	Paths    []string // project-relative ("../" leads out of the project), sorted
}

func (e *DirtyError) Error() string {
	paths := e.Paths
	more := ""
	if len(paths) > 20 {
		paths, more = paths[:20], fmt.Sprintf(" and %d more", len(e.Paths)-20)
	}
	return fmt.Sprintf("gitrepo: bring %s from %s to %s: %v: %s%s; commit, stash or undo the changes to these paths, then try again",
		e.Dir, Short(e.From), Short(e.To), ErrDirty, strings.Join(paths, ", "), more)
}

func (e *DirtyError) Unwrap() error { return ErrDirty }

// FastForward brings the work tree and the user's index from commit from
// to commit to, as git merge --ff-only would: the paths that differ
// between the two take to's version (git read-tree -m -u from to), with
// the conversions and filters of the user's own configuration (not those
// the repository's configuration defines, see filterEnv); nothing else is
// touched, so a person's uncommitted changes, staged or not, to the other
// paths stay exactly as they are.
//
// It refuses with a *DirtyError (ErrDirty) when a path the move touches has
// uncommitted changes (the user's index differs from from there, the work
// tree differs from the index, or an untracked file stands where to adds
// one) or a merge is in progress; then nothing is written, the user's
// index included. HEAD must be at from or at to (ErrRefChanged otherwise):
// the branch is moved by the caller, with UpdateRef(branch, to, from).
//
// Call it before moving the branch. A refusal then leaves everything as it
// was; called after, a refusal leaves the branch at to with the index and
// work tree at from, which git status shows as staged changes undoing the
// move, so the caller must move the branch back. Do not move the branch
// with AdvanceBranch: it resets the index to to, which is then not at from.
func (r *Repo) FastForward(ctx context.Context, from, to string) error {
	if err := checkID("commit", from); err != nil {
		return err
	}
	if err := checkID("commit", to); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	head, _, err := r.revParse(ctx, "HEAD^{commit}")
	if err != nil {
		return err
	}
	if head != from && head != to {
		if head == "" {
			head = "no commit"
		}
		return fmt.Errorf("gitrepo: bring %s from %s to %s: %w: HEAD is at %s; somebody moved it, nothing written", r.top, Short(from), Short(to), ErrRefChanged, head)
	}
	dirty, err := r.inTheWay(ctx, from, to)
	if err != nil {
		return err
	}
	if len(dirty) > 0 {
		return &DirtyError{Dir: r.top, From: from, To: to, Paths: dirty}
	}
	env, err := r.filterEnv(ctx)
	if err != nil {
		return err
	}
	// read-tree -m -u refuses an entry whose stat data is stale as if it
	// were changed: refresh it first, as git merge does. The refresh
	// changes no entry's content.
	if _, err := r.git(ctx, env, nil, "update-index", "-q", "--refresh"); err != nil && exitCode(err) != 1 {
		return fmt.Errorf("gitrepo: bring %s from %s to %s: refreshing the index: %w; nothing written", r.top, Short(from), Short(to), err)
	}
	if _, err := r.git(ctx, env, nil, "read-tree", "-m", "-u", from, to); err != nil {
		// A change made since inTheWay looked: read-tree checks everything
		// before it writes anything.
		if paths := readTreeRefused(err); len(paths) > 0 {
			for i, p := range paths {
				paths[i] = r.projectRel(p)
			}
			return &DirtyError{Dir: r.top, From: from, To: to, Paths: paths}
		}
		return fmt.Errorf("gitrepo: bring %s from %s to %s: %w; check git status there", r.top, Short(from), Short(to), err)
	}
	return nil
}

// inTheWay lists the paths (project-relative, sorted) where the move from
// from to to would overwrite uncommitted changes, and every unmerged path
// (read-tree -m refuses an index in the middle of a merge). Nothing is
// written: git status runs without its optional index refresh.
func (r *Repo) inTheWay(ctx context.Context, from, to string) ([]string, error) {
	out, err := r.git(ctx, nil, nil, "diff-tree", "-r", "-z", "--no-renames", from, to, "--")
	if err != nil {
		return nil, err
	}
	diffs, err := parseRaw(out)
	if err != nil {
		return nil, fmt.Errorf("gitrepo: diff-tree %s %s: %w", from, to, err)
	}
	touched := make(map[string]bool, len(diffs))
	for _, d := range diffs {
		touched[d.path] = true
	}
	dirty := map[string]bool{}
	// The index against from.
	out, err = r.git(ctx, nil, nil, "diff-index", "--cached", "-z", "--name-only", "--no-renames", from, "--")
	if err != nil {
		return nil, err
	}
	staged := map[string]bool{}
	for _, p := range splitNUL(out) {
		staged[p] = true
		if touched[p] {
			dirty[p] = true
		}
	}
	// The work tree against the index; status compares content where the
	// stat data differ, through the filters of the user's configuration.
	env, err := r.filterEnv(ctx)
	if err != nil {
		return nil, err
	}
	out, err = r.git(ctx, env, nil, "status", "--porcelain=v2", "-z", "--untracked-files=no", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	for _, rec := range splitNUL(out) {
		switch {
		case strings.HasPrefix(rec, "1 "):
			f := strings.SplitN(rec, " ", 9)
			if len(f) == 9 && f[1][1] != '.' && touched[f[8]] {
				dirty[f[8]] = true
			}
		case strings.HasPrefix(rec, "u "):
			if f := strings.SplitN(rec, " ", 11); len(f) == 11 {
				dirty[f[10]] = true
			}
		}
	}
	// Untracked files where to adds one. (Subtler obstacles, such as an
	// untracked file where to adds a directory, read-tree itself refuses.)
	for _, d := range diffs {
		if d.status == 'A' && !staged[d.path] {
			if _, ok := r.lstatInWorkTree(d.path); ok {
				dirty[d.path] = true
			}
		}
	}
	paths := make([]string, 0, len(dirty))
	for p := range dirty {
		paths = append(paths, r.projectRel(p))
	}
	sort.Strings(paths)
	return paths, nil
}

// readTreeRefused are the paths read-tree named when it refused to
// overwrite something: "Entry 'p' not uptodate.", "Entry 'p' would be
// overwritten by merge.", "Untracked working tree file 'p' would be
// overwritten by merge.", "Updating 'p' would lose untracked files in it".
func readTreeRefused(err error) []string {
	var ge *gitError
	if !errors.As(err, &ge) {
		return nil
	}
	var paths []string
	for line := range strings.SplitSeq(ge.stderr, "\n") {
		if !strings.Contains(line, "not uptodate") && !strings.Contains(line, "would be overwritten") && !strings.Contains(line, "would lose untracked") {
			continue
		}
		if _, rest, ok := strings.Cut(line, "'"); ok {
			if p, _, ok := strings.Cut(rest, "'"); ok {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// projectRel makes a top-relative path relative to the project directory;
// one outside it starts with "../".
func (r *Repo) projectRel(p string) string {
	if strings.HasPrefix(p, r.prefix) {
		return strings.TrimPrefix(p, r.prefix)
	}
	rel, err := filepath.Rel(filepath.FromSlash(r.prefix), filepath.FromSlash(p))
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}

// mergeSignature makes the commits MergeTrees merges: always the same, so
// that the same merge writes the same objects.
var mergeSignature = Signature{Name: "ctxgraphd", Email: "ctxgraphd@localhost", When: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}

// MergeTrees merges theirs into ours, three-way with base as the common
// ancestor: the tree of ours with the changes from base to theirs applied.
// Each of base, ours and theirs is a commit or a tree id. Nothing but
// objects is written: no index, work tree or ref is touched.
//
// On a clean merge conflicts is empty and tree is the result. Otherwise
// conflicts lists the paths git could not merge (project-relative, "../"
// leading out of the project, sorted) and tree holds them with conflict
// markers, for a person or an agent to resolve: it must not be committed
// as it is. err is for git failing, not for conflicts.
//
// git 2.39 has no merge-tree --merge-base (2.40 has): merge-tree --write-tree
// merges two commits over the merge bases their histories give. So
// MergeTrees makes three commits of its own, with fixed author and date, of
// base's tree and of ours' and theirs' trees each with that one as parent,
// and merges those: the merge is of exactly these three trees, whatever the
// histories hold (several merge bases, a base that is not one). The commits
// are referenced by nothing; git gc prunes them.
//
// The repository's own configuration does not take part: a merge driver it
// defines (which .gitattributes can name for any path) is a command an
// agent can plant. Drivers of the user's global configuration work.
func (r *Repo) MergeTrees(ctx context.Context, base, ours, theirs string) (tree Tree, conflicts []string, err error) {
	ids := []string{base, ours, theirs}
	for i, what := range []string{"base", "ours", "theirs"} {
		if err := checkID(what, ids[i]); err != nil {
			return "", nil, err
		}
	}
	trees, err := r.treesOf(ctx, ids)
	if err != nil {
		return "", nil, err
	}
	// The private common directory: its configuration is not the
	// repository's; the index named is one that does not exist.
	env := []string{"GIT_COMMON_DIR=" + r.common, "GIT_OBJECT_DIRECTORY=" + r.objects, "GIT_INDEX_FILE=" + filepath.Join(r.common, "no-index")}
	commit := func(tree string, parents ...string) (string, error) {
		args := []string{"commit-tree", "--no-gpg-sign", "-m", "ctxgraphd: merge"}
		for _, p := range parents {
			args = append(args, "-p", p)
		}
		out, err := r.git(ctx, append(slices.Clone(env), mergeSignature.env()...), nil, append(args, tree)...)
		return strings.TrimSpace(string(out)), err
	}
	baseCommit, err := commit(trees[0])
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: %w", Short(theirs), Short(ours), Short(base), err)
	}
	oursCommit, err := commit(trees[1], baseCommit)
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: %w", Short(theirs), Short(ours), Short(base), err)
	}
	theirsCommit, err := commit(trees[2], baseCommit)
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: %w", Short(theirs), Short(ours), Short(base), err)
	}
	// Exit status 1 is conflicts, but also some failures: the tree id
	// first on standard output tells them apart.
	out, err := r.git(ctx, env, nil, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", oursCommit, theirsCommit)
	fields := splitNUL(out)
	if err != nil && (exitCode(err) != 1 || len(fields) == 0 || checkID("tree", fields[0]) != nil) {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: %w", Short(theirs), Short(ours), Short(base), err)
	}
	if len(fields) == 0 || checkID("tree", fields[0]) != nil {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: git merge-tree printed %q, not a tree id", Short(theirs), Short(ours), Short(base), out)
	}
	seen := map[string]bool{}
	for _, p := range fields[1:] {
		if p != "" && !seen[p] {
			seen[p] = true
			conflicts = append(conflicts, r.projectRel(p))
		}
	}
	if err != nil && len(conflicts) == 0 {
		return "", nil, fmt.Errorf("gitrepo: merge %s into %s over %s: %w", Short(theirs), Short(ours), Short(base), err)
	}
	sort.Strings(conflicts)
	return Tree(fields[0]), conflicts, nil
}

// treesOf resolves commit or tree ids to tree ids, in one git process.
func (r *Repo) treesOf(ctx context.Context, ids []string) ([]string, error) {
	var in strings.Builder
	for _, id := range ids {
		in.WriteString(id + "^{tree}\n")
	}
	out, err := r.git(ctx, nil, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(ids) {
		return nil, fmt.Errorf("gitrepo: cat-file --batch-check gave %d lines for %d objects", len(lines), len(ids))
	}
	trees := make([]string, len(ids))
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] != "tree" {
			return nil, fmt.Errorf("gitrepo: %s is neither a commit nor a tree of %s (git says %q)", ids[i], r.top, line)
		}
		trees[i] = f[0]
	}
	return trees, nil
}
