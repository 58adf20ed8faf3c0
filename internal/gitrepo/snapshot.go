package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
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
// The tree holds the project as it is on disk (see ondisk.go): every file
// of HEAD still in the work tree (ignored or not) and every other file that
// a person's ignore rules (HEAD's .gitignore files, info/exclude, the
// user's core.excludesFile) do not ignore, the files of repositories
// nested in the project included, each with its raw bytes, mode or link
// target. Paths outside the project directory and excluded paths carry
// HEAD's version; paths git cannot record are left out (SnapshotRefused
// names them). Blobs are written to the object database; the tree itself
// is not referenced by anything, so git gc may prune it after
// gc.pruneExpire (two weeks by default).
//
// The work goes through the private index (GIT_INDEX_FILE), seeded from HEAD
// the first time and reused afterwards, so that git re-reads only files whose
// stat data changed. The user's index, HEAD and work tree are not touched.
func (r *Repo) Snapshot(ctx context.Context) (Tree, error) {
	t, _, err := r.SnapshotRefused(ctx)
	return t, err
}

// SnapshotRefused is Snapshot, with the paths on disk that git cannot
// record and the snapshot therefore lacks (see Refused). They never fail
// it.
func (r *Repo) SnapshotRefused(ctx context.Context) (Tree, []Refused, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, refused, err := r.snapshot(ctx)
	if err != nil && ctx.Err() == nil {
		// The private index is only a cache, and it can go bad behind our
		// back: git gc does not know it, so a blob only it names can be
		// pruned, and a crash can leave its lock file. Start it afresh once.
		for _, p := range []string{r.index, r.index + ".lock"} {
			if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				return "", nil, err
			}
		}
		t, refused, err = r.snapshot(ctx)
	}
	if err != nil {
		return "", nil, err
	}
	if err := r.recordRefused(t, refused); err != nil {
		return "", nil, err
	}
	return t, refused, nil
}

func (r *Repo) snapshot(ctx context.Context) (Tree, []Refused, error) {
	// Every command that writes the index runs in the private environment
	// too: writing an index re-reads racily clean files, through the
	// attributes and filters of whatever environment it runs in.
	env := []string{"GIT_INDEX_FILE=" + r.index}
	penv := r.privateEnv()
	head, err := r.headTree(ctx)
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Lstat(r.index); errors.Is(err, fs.ErrNotExist) && head != r.emptyTree {
		// Seeding from HEAD keeps files that are tracked but match
		// .gitignore in the snapshot, as git add -A would. (followHead
		// would get there too; this is the short way.)
		if _, err := r.git(ctx, penv, nil, "read-tree", string(head)); err != nil {
			return "", nil, err
		}
	}
	excl, err := r.excludeArgs(ctx, head)
	if err != nil {
		return "", nil, err
	}
	// What a person's rules ignore, for the walk that finds what git's own
	// walk does not show.
	out, err := r.git(ctx, penv, nil, append(append([]string{"ls-files", "-z", "-o", "-i", "--directory"}, excl...), append([]string{"--"}, r.pathspecs()...)...)...)
	if err != nil {
		return "", nil, err
	}
	ignored := map[string]bool{}
	for _, p := range splitNUL(out) {
		ignored[p] = true
	}
	repos, refused, nestedFiles := r.nested(r.headGitlinks, ignored)
	// Tracked files: modified and deleted.
	if _, err := r.git(ctx, penv, nil, append([]string{"add", "-u", "--"}, r.pathspecs()...)...); err != nil {
		return "", nil, err
	}
	// Untracked files a person's rules do not ignore.
	out, err = r.git(ctx, penv, nil, append(append([]string{"ls-files", "-z", "-o"}, excl...), append([]string{"--"}, r.pathspecs()...)...)...)
	if err != nil {
		return "", nil, err
	}
	var add []string
	for _, p := range splitNUL(out) {
		if !strings.HasSuffix(p, "/") && refusedName(p) == "" && !under(p, repos) {
			add = append(add, p)
		}
	}
	for len(add) > 0 {
		_, err := r.git(ctx, append(penv, "GIT_LITERAL_PATHSPECS=1"), strings.NewReader(strings.Join(add, "\x00")+"\x00"),
			"-c", "advice.addIgnoredFile=false", "add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul")
		if err == nil {
			break
		}
		bad := invalidPaths(err)
		if len(bad) == 0 {
			return "", nil, err
		}
		// A name git refuses that refusedName does not know: left out and
		// reported, the rest added.
		add = slices.DeleteFunc(add, func(p string) bool {
			if bad[p] {
				refused = append(refused, Refused{Path: strings.TrimPrefix(p, r.prefix), Why: "git refuses the name"})
			}
			return bad[p]
		})
	}
	if err := r.addNested(ctx, penv, repos, nestedFiles); err != nil {
		return "", nil, err
	}
	if err := r.followHead(ctx, env, penv, excl); err != nil {
		return "", nil, err
	}
	out, err = r.git(ctx, penv, nil, "write-tree")
	if err != nil {
		return "", nil, err
	}
	for i := range refused {
		refused[i].Path = strings.TrimPrefix(refused[i].Path, r.prefix)
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].Path < refused[j].Path })
	return Tree(strings.TrimSpace(string(out))), refused, nil
}

// under reports whether p is in one of the directories dirs.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// invalidPaths are the paths git add said were invalid.
func invalidPaths(err error) map[string]bool {
	var ge *gitError
	if !errors.As(err, &ge) {
		return nil
	}
	bad := map[string]bool{}
	for line := range strings.SplitSeq(ge.stderr, "\n") {
		if p, ok := strings.CutPrefix(line, "error: invalid path '"); ok {
			bad[strings.TrimSuffix(p, "'")] = true
		}
	}
	return bad
}

// addNested takes the files of the repositories nested in the project as
// ordinary files (git add would skip them, or record a gitlink): their raw
// bytes, and no entry for what is gone. There is no stat cache for them;
// they are rare.
func (r *Repo) addNested(ctx context.Context, penv []string, repos []string, files map[string]fs.FileInfo) error {
	if len(repos) == 0 {
		return nil
	}
	args := []string{"ls-files", "-z", "-c", "--"}
	for _, d := range repos {
		args = append(args, d)
	}
	out, err := r.git(ctx, append(penv, "GIT_LITERAL_PATHSPECS=1"), nil, args...)
	if err != nil {
		return err
	}
	zero := strings.Repeat("0", len(r.emptyTree))
	var info bytes.Buffer
	for _, p := range splitNUL(out) {
		if _, ok := files[p]; !ok {
			fmt.Fprintf(&info, "0 %s\t%s\x00", zero, p)
		}
	}
	for _, d := range repos {
		fmt.Fprintf(&info, "0 %s\t%s\x00", zero, d) // a gitlink of an older snapshot
	}
	var regular []string
	for p := range files {
		regular = append(regular, p)
	}
	sort.Strings(regular)
	var paths []string
	for _, p := range regular {
		fi := files[p]
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(filepath.Join(r.top, filepath.FromSlash(p)))
			if err != nil {
				continue
			}
			id, err := r.git(ctx, penv, strings.NewReader(target), "hash-object", "-w", "--stdin")
			if err != nil {
				return err
			}
			fmt.Fprintf(&info, "%s %s\t%s\x00", ModeSymlink, strings.TrimSpace(string(id)), p)
			continue
		}
		paths = append(paths, p)
	}
	if len(paths) > 0 {
		out, err := r.git(ctx, penv, strings.NewReader(strings.Join(paths, "\n")+"\n"), "hash-object", "-w", "--no-filters", "--stdin-paths")
		if err != nil {
			return err
		}
		ids := strings.Fields(string(out))
		if len(ids) != len(paths) {
			return fmt.Errorf("gitrepo: hash-object gave %d ids for %d files", len(ids), len(paths))
		}
		for i, p := range paths {
			mode := ModeFile
			if files[p].Mode()&0o100 != 0 {
				mode = ModeExecutable
			}
			fmt.Fprintf(&info, "%s %s\t%s\x00", mode, ids[i], p)
		}
	}
	_, err = r.git(ctx, penv, &info, "update-index", "-z", "--index-info")
	return err
}

// followHead brings the private index in line with head where the steps
// before alone do not: paths outside the project (or excluded) take head's
// version; a file of head that is not in the index is added; a file not
// in head that a person's rules ignore now is dropped. This keeps a
// snapshot a function of the work tree and HEAD only, however HEAD moved
// since the index was seeded, and a commit of it never drops or revives a
// file the user tracks or untracks.
func (r *Repo) followHead(ctx context.Context, env, penv, excl []string) error {
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
	var addBack []string
	added := map[string]bool{}
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
			added[d.path] = true
		}
	}
	if len(added) > 0 {
		out, err := r.git(ctx, penv, nil, append([]string{"ls-files", "-z", "-c", "-i"}, excl...)...)
		if err != nil {
			return err
		}
		for _, p := range splitNUL(out) {
			if added[p] {
				fmt.Fprintf(&info, "0 %s\t%s\x00", zero, p)
			}
		}
	}
	if len(addBack) > 0 {
		if _, err := r.git(ctx, penv, strings.NewReader(strings.Join(addBack, "\x00")+"\x00"), "update-index", "--add", "-z", "--stdin"); err != nil {
			return err
		}
	}
	if info.Len() > 0 {
		if _, err := r.git(ctx, penv, &info, "update-index", "-z", "--index-info"); err != nil {
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
	if from == to {
		return nil, nil // (a run that changed nothing in the project: a tester's, often)
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
	return r.changesOf(diffs), nil
}

// changesOf is the project's part of a raw diff, relative to the project
// directory and in byte order of full paths (whatever diff order the
// configuration asks for). A directory's entry counts only when it is in
// one tree alone (diff-tree -t names every tree on the way).
func (r *Repo) changesOf(diffs []rawDiff) []Change {
	changes := make([]Change, 0, len(diffs))
	for _, d := range diffs {
		if d.fromMode == ModeTree || d.toMode == ModeTree {
			// A directory in both trees changed below: its files say how.
			// The project directory itself is no entry of the project.
			if d.status == 'M' || d.path+"/" == r.prefix || !strings.HasPrefix(d.path, r.prefix) {
				continue
			}
		}
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
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes
}

// Entry reports whether c adds the path, removes it or changes its type
// (a file made a link or a submodule): whether a listing of its directory
// shows the change. A change of content, or of a file's executable bit,
// does not.
func (c Change) Entry() bool {
	kind := func(mode string) string {
		if mode == ModeExecutable {
			return ModeFile
		}
		return mode
	}
	return c.Kind != Modified || kind(c.FromMode) != kind(c.ToMode)
}

// ExportedChanges lists the paths of what Export writes (the project
// directory's files, excluded ones included) that differ between two
// trees, relative to the project directory, in path order: what a test
// run on a checkout of from would find changed on a checkout of to. A
// directory that only one of them has is one of the changes too (Kind
// Added or Deleted, its mode ModeTree): a listing of its parent shows it
// come or go.
func (r *Repo) ExportedChanges(ctx context.Context, from, to Tree) ([]Change, error) {
	changes, err := r.ExportedChangesFrom(ctx, []Tree{from}, to)
	return changes[from], err
}

// ExportedChangesFrom is ExportedChanges from each of froms to to, keyed
// by the tree it is from, in one git process (diff-tree --stdin). A
// regression sweep asks it of the trees of every record it holds, one a
// landing: with a process for each, selection's own cost grew with the
// square of a night's landings.
func (r *Repo) ExportedChangesFrom(ctx context.Context, froms []Tree, to Tree) (map[Tree][]Change, error) {
	if err := checkID("tree", string(to)); err != nil {
		return nil, err
	}
	changes := make(map[Tree][]Change, len(froms))
	var pairs bytes.Buffer
	for _, from := range froms {
		if err := checkID("tree", string(from)); err != nil {
			return nil, err
		}
		if _, dup := changes[from]; dup {
			continue
		}
		changes[from] = nil // (a tree and itself: no change, and no need to ask)
		if from != to {
			fmt.Fprintf(&pairs, "%s %s\n", from, to)
		}
	}
	if pairs.Len() == 0 {
		return changes, nil
	}
	// -t: the trees on the way too, each changed one, so that a directory
	// in one tree alone is a change (made by its first file, gone with
	// its last), which git's list of files does not name. The project
	// directory's paths, its excluded ones included: Export writes them.
	args := append([]string{"diff-tree", "--stdin", "-r", "-z", "-t", "--no-renames", "--"}, r.pathspecs()[:1]...)
	out, err := r.git(ctx, nil, &pairs, args...)
	if err != nil {
		return nil, err
	}
	sections, err := splitPairs(out)
	if err != nil {
		return nil, fmt.Errorf("gitrepo: changes to %s: diff-tree --stdin output: %w", to, err)
	}
	for _, s := range sections {
		if _, asked := changes[s.from]; !asked || s.to != to {
			return nil, fmt.Errorf("gitrepo: changes to %s: diff-tree --stdin answered for %s..%s, which was not asked", to, s.from, s.to)
		}
		diffs, err := parseRaw(s.raw)
		if err != nil {
			return nil, fmt.Errorf("gitrepo: changes %s..%s: diff-tree output: %w", s.from, to, err)
		}
		changes[s.from] = r.changesOf(diffs)
	}
	return changes, nil
}

// pairDiff is the raw diff diff-tree --stdin wrote for one pair of trees.
type pairDiff struct {
	from, to Tree
	raw      []byte
}

// splitPairs splits diff-tree --stdin's output into its pairs: each is a
// line "<from> <to>\n" (a newline even with -z), then its records, each
// ":<meta>\0<path>\0". A path may hold a newline, so a record is read
// whole by its NULs, never by lines.
func splitPairs(out []byte) ([]pairDiff, error) {
	var pairs []pairDiff
	for len(out) > 0 {
		header, rest, ok := bytes.Cut(out, []byte{'\n'})
		from, to, two := strings.Cut(string(header), " ")
		if !ok || !two || checkID("tree", from) != nil || checkID("tree", to) != nil {
			return nil, fmt.Errorf("%q is not a line of two tree ids", textcut.Cut(string(header), 100))
		}
		end := 0
		for end < len(rest) && rest[end] == ':' {
			meta := bytes.IndexByte(rest[end:], 0)
			if meta < 0 {
				return nil, fmt.Errorf("record %q is not NUL-terminated", textcut.Cut(string(rest[end:]), 100))
			}
			path := bytes.IndexByte(rest[end+meta+1:], 0)
			if path < 0 {
				return nil, fmt.Errorf("record %q has no path", textcut.Cut(string(rest[end:]), 100))
			}
			end += meta + 1 + path + 1
		}
		pairs = append(pairs, pairDiff{from: Tree(from), to: Tree(to), raw: rest[:end]})
		out = rest[end:]
	}
	return pairs, nil
}

// ChangedPaths lists every path of the repository that differs between two
// trees, relative to the repository's top, in or out of the project
// directory, excluded or not: for when the question is not what the
// daemon judges but whether anything at all differs (a person's commits
// against the tree a feature was tested on).
func (r *Repo) ChangedPaths(ctx context.Context, from, to Tree) ([]string, error) {
	if err := checkID("tree", string(from)); err != nil {
		return nil, err
	}
	if err := checkID("tree", string(to)); err != nil {
		return nil, err
	}
	if from == to {
		return nil, nil
	}
	out, err := r.git(ctx, nil, nil, "diff-tree", "-r", "-z", "--no-renames", "--name-only", string(from), string(to))
	if err != nil {
		return nil, err
	}
	var paths []string
	for p := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// TouchedSince lists every path of the repository, relative to its top,
// that a commit in from..to changed (to's history less from's; each
// parent of a merge counts), whatever the trees end as: commits that undo
// each other still touched their paths.
func (r *Repo) TouchedSince(ctx context.Context, from, to string) ([]string, error) {
	if err := checkID("commit", from); err != nil {
		return nil, err
	}
	if err := checkID("commit", to); err != nil {
		return nil, err
	}
	out, err := r.git(ctx, nil, nil, "log", "-z", "--format=", "--name-only", "--no-renames", "-m", from+".."+to)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var paths []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		p = strings.Trim(p, "\n")
		if p != "" && !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, nil
}

// Entry is one file of a tree.
type Entry struct {
	Path string // slash-separated, relative to the project directory
	Mode string // ModeFile, ModeExecutable, ModeSymlink or ModeGitlink
	ID   string // blob id; commit id for ModeGitlink
}

// Files lists the project's files in tree, in path order: what Changes
// compares, so paths outside the project directory and excluded paths are
// left out. A tree never changes: the last one listed is kept, for the
// daemon lists one tree again and again (a checkout per test run of a
// verdict, the frozen tests' drift).
func (r *Repo) Files(ctx context.Context, tree Tree) ([]Entry, error) {
	if err := checkID("tree", string(tree)); err != nil {
		return nil, err
	}
	r.filesMu.Lock()
	defer r.filesMu.Unlock()
	if r.filesOf == tree {
		return slices.Clone(r.files), nil
	}
	files, err := r.listFiles(ctx, tree)
	if err != nil {
		return nil, err
	}
	r.filesOf, r.files = tree, files
	return slices.Clone(files), nil
}

func (r *Repo) listFiles(ctx context.Context, tree Tree) ([]Entry, error) {
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
