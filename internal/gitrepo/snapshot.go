package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ChangeKind says how a path differs between two trees.
type ChangeKind int

// Kinds of change. A path whose type changed (a file that became a
// symlink) or whose mode changed is Modified.
const (
	Added ChangeKind = iota + 1
	Modified
	Deleted
)

// String returns "added", "modified" or "deleted".
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return "ChangeKind(" + strconv.Itoa(int(k)) + ")"
}

// Change is one path that differs between two trees.
type Change struct {
	Path     string // slash-separated, relative to the project directory
	Kind     ChangeKind
	From, To string // blob ids ("" when absent); commit ids for ModeGitlink
	FromMode string // ModeFile, ModeExecutable, ModeSymlink, ModeGitlink; "" when absent
	ToMode   string
}

// Snapshot records the work tree as a tree object and returns its id.
//
// The tree holds what `git add -A` would take if the index matched HEAD:
// every file of HEAD still in the work tree (ignored or not) and every
// untracked file that is not ignored, with its current content, mode or
// link target. Paths outside the project directory and excluded paths carry
// HEAD's version. Blobs are written to the object database; the tree itself
// is not referenced by anything, so git gc may prune it after
// gc.pruneExpire (two weeks by default).
//
// The work goes through the private index (GIT_INDEX_FILE), seeded from HEAD
// the first time and reused afterwards, so that git re-reads only files whose
// stat data changed. The user's index, HEAD and work tree are not touched.
func (r *Repo) Snapshot(ctx context.Context) (Tree, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.snapshot(ctx)
	if err == nil || ctx.Err() != nil {
		return t, err
	}
	// The private index is only a cache, and it can go bad behind our back:
	// git gc does not know it, so a blob only it names can be pruned, and a
	// crash can leave its lock file. Start it afresh once.
	for _, p := range []string{r.index, r.index + ".lock"} {
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			return "", err
		}
	}
	return r.snapshot(ctx)
}

func (r *Repo) snapshot(ctx context.Context) (Tree, error) {
	env, err := r.filterEnv(ctx)
	if err != nil {
		return "", err
	}
	env = append(env, "GIT_INDEX_FILE="+r.index)
	if _, err := os.Lstat(r.index); errors.Is(err, fs.ErrNotExist) {
		// Seeding from HEAD keeps files that are tracked but match
		// .gitignore in the snapshot, as git add -A would. (followHead
		// would get there too; this is the short way.)
		head, err := r.headTree(ctx)
		if err != nil {
			return "", err
		}
		if head != r.emptyTree {
			if _, err := r.git(ctx, env, nil, "read-tree", string(head)); err != nil {
				return "", err
			}
		}
	}
	args := append([]string{"-c", "advice.addIgnoredFile=false", "-c", "advice.addEmbeddedRepo=false", "add", "-A", "--"}, r.pathspecs()...)
	if _, err := r.git(ctx, env, nil, args...); err != nil && !onlyIgnoredNotice(err) {
		return "", err
	}
	if err := r.followHead(ctx, env); err != nil {
		return "", err
	}
	out, err := r.git(ctx, env, nil, "write-tree")
	if err != nil {
		return "", err
	}
	return Tree(strings.TrimSpace(string(out))), nil
}

// onlyIgnoredNotice reports whether git add failed only to say that a
// pathspec named an ignored path. Git 2.39 says so for an exclude pathspec
// (":(exclude)…") naming an ignored directory, after adding everything else;
// every real failure of git add exits 128.
func onlyIgnoredNotice(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && ge.code == 1 &&
		strings.HasPrefix(ge.stderr, "The following paths are ignored by one of your .gitignore files:")
}

// followHead brings the private index in line with head where git add -A
// alone does not: paths outside the project (or excluded) take head's
// version; a file of head that git add skipped because it is ignored is
// added; a file not in head that is ignored now is dropped. This keeps a
// snapshot a function of the work tree and HEAD only, however HEAD moved
// since the index was seeded, and a commit of it never drops or revives a
// file the user tracks or untracks.
func (r *Repo) followHead(ctx context.Context, env []string) error {
	// HEAD by name saves a rev-parse (a process) per snapshot; only when it
	// fails is there a question whether HEAD is unborn.
	out, err := r.git(ctx, env, nil, "diff-index", "--cached", "-z", "--no-renames", "HEAD", "--")
	if err != nil {
		head, herr := r.headTree(ctx)
		if herr != nil || head != r.emptyTree {
			return err
		}
		if out, err = r.git(ctx, env, nil, "diff-index", "--cached", "-z", "--no-renames", string(head), "--"); err != nil {
			return err
		}
	}
	diffs, err := parseRaw(out)
	if err != nil {
		return fmt.Errorf("gitrepo: snapshot: diff-index output: %w", err)
	}
	var info bytes.Buffer // update-index --index-info input
	var addBack, added []string
	zero := strings.Repeat("0", len(r.emptyTree))
	for _, d := range diffs {
		switch {
		case !r.owns(d.path):
			if d.fromMode == "" {
				fmt.Fprintf(&info, "0 %s\t%s\x00", zero, d.path)
			} else {
				fmt.Fprintf(&info, "%s %s\t%s\x00", d.fromMode, d.from, d.path)
			}
		case d.status == 'D':
			fi, ok := r.lstatInWorkTree(d.path)
			switch {
			case !ok:
			case d.fromMode == ModeGitlink && fi.IsDir():
				fmt.Fprintf(&info, "%s %s\t%s\x00", d.fromMode, d.from, d.path)
			case !fi.IsDir():
				addBack = append(addBack, d.path)
			}
		case d.status == 'A':
			added = append(added, d.path)
		}
	}
	if len(added) > 0 {
		out, err := r.git(ctx, env, strings.NewReader(strings.Join(added, "\x00")+"\x00"), "check-ignore", "--no-index", "-z", "--stdin")
		if err != nil && exitCode(err) != 1 { // 1: none is ignored
			return err
		}
		for _, p := range splitNUL(out) {
			fmt.Fprintf(&info, "0 %s\t%s\x00", zero, p)
		}
	}
	if len(addBack) > 0 {
		if _, err := r.git(ctx, env, strings.NewReader(strings.Join(addBack, "\x00")+"\x00"), "update-index", "--add", "-z", "--stdin"); err != nil {
			return err
		}
	}
	if info.Len() > 0 {
		if _, err := r.git(ctx, env, &info, "update-index", "-z", "--index-info"); err != nil {
			return err
		}
	}
	return nil
}

// lstatInWorkTree is os.Lstat of a top-relative path, except that a path
// below a symlink does not exist (git does not follow symlinks either).
func (r *Repo) lstatInWorkTree(p string) (fs.FileInfo, bool) {
	parts := strings.Split(p, "/")
	name := r.top
	for i, part := range parts {
		name = filepath.Join(name, part)
		fi, err := os.Lstat(name)
		if err != nil {
			return nil, false
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, false
		}
		if i == len(parts)-1 {
			return fi, true
		}
	}
	return nil, false
}

// headTree is the tree HEAD points at, or the empty tree before the first
// commit.
func (r *Repo) headTree(ctx context.Context) (Tree, error) {
	id, ok, err := r.revParse(ctx, "HEAD^{tree}")
	if err != nil || !ok {
		return r.emptyTree, err
	}
	return Tree(id), nil
}

// filterEnv switches off the filter drivers the repository's own
// configuration (.git/config, config.worktree, files they include) defines.
// git add runs a clean filter on every file it reads, and an agent can write
// .git/config and .gitattributes; a driver from the user's global or system
// configuration (git-lfs, say) is the user's choice and keeps working, also
// where the repository's configuration redefines it.
//
// The overrides go in as GIT_CONFIG_COUNT variables rather than -c flags,
// which could not carry a driver name containing "=".
func (r *Repo) filterEnv(ctx context.Context) ([]string, error) {
	if !r.mayDefineFilters() {
		return nil, nil
	}
	out, err := r.git(ctx, nil, nil, "config", "-z", "--show-scope", "--get-regexp", `^filter\.`)
	if exitCode(err) == 1 { // nothing defined
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	trusted := map[string]string{}
	var untrusted []string
	fields := splitNUL(out)
	for i := 0; i+1 < len(fields); i += 2 {
		scope := fields[i]
		key, value, hasValue := strings.Cut(fields[i+1], "\n")
		if !hasValue {
			value = "true" // a bare boolean key
		}
		switch scope {
		case "local", "worktree":
			untrusted = append(untrusted, key)
		default: // system, global, command
			trusted[key] = value
		}
	}
	if len(untrusted) == 0 {
		return nil, nil
	}
	sort.Strings(untrusted)
	var env []string
	n := 0
	for i, key := range untrusted {
		if i > 0 && key == untrusted[i-1] {
			continue
		}
		// An empty command is no filter; an empty "required" is false.
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, trusted[key]))
		n++
	}
	return append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(n)), nil
}

// mayDefineFilters reports whether the repository's own configuration
// files could define a filter driver: whether they mention a filter or an
// include at all. It spares a git config (a process) per snapshot in the
// common case; a false alarm only costs that process.
func (r *Repo) mayDefineFilters() bool {
	for _, p := range r.localConfigs {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return true
		}
		b = bytes.ToLower(b)
		if bytes.Contains(b, []byte("filter")) || bytes.Contains(b, []byte("include")) {
			return true
		}
	}
	return false
}

// Changes lists the project's paths that differ between two trees, in path
// order. Paths outside the project directory and excluded paths are left
// out.
func (r *Repo) Changes(ctx context.Context, from, to Tree) ([]Change, error) {
	if err := checkID("tree", string(from)); err != nil {
		return nil, err
	}
	if err := checkID("tree", string(to)); err != nil {
		return nil, err
	}
	args := append([]string{"diff-tree", "-r", "-z", "--no-renames", string(from), string(to), "--"}, r.pathspecs()...)
	out, err := r.git(ctx, nil, nil, args...)
	if err != nil {
		return nil, err
	}
	diffs, err := parseRaw(out)
	if err != nil {
		return nil, fmt.Errorf("gitrepo: changes %s..%s: diff-tree output: %w", from, to, err)
	}
	changes := make([]Change, 0, len(diffs))
	for _, d := range diffs {
		c := Change{
			Path:     strings.TrimPrefix(d.path, r.prefix),
			From:     d.from,
			To:       d.to,
			FromMode: d.fromMode,
			ToMode:   d.toMode,
		}
		switch d.status {
		case 'A':
			c.Kind = Added
		case 'D':
			c.Kind = Deleted
		default: // M, and T (type change)
			c.Kind = Modified
		}
		changes = append(changes, c)
	}
	// Byte order of full paths, whatever diff order the configuration asks for.
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

// Entry is one file of a tree.
type Entry struct {
	Path string // slash-separated, relative to the project directory
	Mode string // ModeFile, ModeExecutable, ModeSymlink or ModeGitlink
	ID   string // blob id; commit id for ModeGitlink
}

// Files lists the project's files in tree, in path order: what Changes
// compares, so paths outside the project directory and excluded paths are
// left out.
func (r *Repo) Files(ctx context.Context, tree Tree) ([]Entry, error) {
	if err := checkID("tree", string(tree)); err != nil {
		return nil, err
	}
	args := []string{"ls-tree", "-r", "-z", "--full-tree", string(tree)}
	if r.prefix != "" {
		args = append(args, "--", r.prefix)
	}
	out, err := r.git(ctx, []string{"GIT_LITERAL_PATHSPECS=1"}, nil, args...)
	if err != nil {
		return nil, err
	}
	var files []Entry
	for _, rec := range splitNUL(out) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("gitrepo: ls-tree %s: record %q is not <mode> <type> <id>\\t<path>", tree, rec)
		}
		if r.owns(p) {
			files = append(files, Entry{Path: strings.TrimPrefix(p, r.prefix), Mode: f[0], ID: f[2]})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// rawDiff is one record of git's raw diff format.
type rawDiff struct {
	fromMode, toMode string // "" for absent
	from, to         string // "" for absent
	status           byte
	path             string
}

// parseRaw parses `-z` raw diff output without renames:
// ":<mode> <mode> <id> <id> <status>\0<path>\0" per path.
func parseRaw(out []byte) ([]rawDiff, error) {
	var diffs []rawDiff
	for len(out) > 0 {
		meta, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("record %q is not NUL-terminated", meta)
		}
		p, rest, ok := bytes.Cut(rest, []byte{0})
		if !ok || len(p) == 0 {
			return nil, fmt.Errorf("record %q has no path", meta)
		}
		out = rest
		f := strings.Fields(string(meta))
		if len(f) != 5 || !strings.HasPrefix(f[0], ":") || f[4] == "" {
			return nil, fmt.Errorf("record %q is not :<mode> <mode> <id> <id> <status>", meta)
		}
		d := rawDiff{fromMode: f[0][1:], toMode: f[1], from: f[2], to: f[3], status: f[4][0], path: string(p)}
		if strings.Trim(d.fromMode, "0") == "" {
			d.fromMode, d.from = "", ""
		}
		if strings.Trim(d.toMode, "0") == "" {
			d.toMode, d.to = "", ""
		}
		diffs = append(diffs, d)
	}
	return diffs, nil
}

// splitNUL splits NUL-terminated records.
func splitNUL(out []byte) []string {
	s := strings.TrimSuffix(string(out), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
