// Package gitrepo is what the daemon asks of the project's git repository.
//
// The daemon judges an agent run by its outcome, not by the commands it ran:
// an agent can change files through its edit tools, a shell, a script or a
// test it runs, and only the work tree afterwards tells what really changed.
// So the daemon records the work tree as a git tree object before and after
// a run (Snapshot) and compares the two (Changes). A tree is also what it
// commits (Commit, AdvanceBranch): the tree it tested, exactly, not whatever
// a later `git add` would pick up.
//
// None of this may disturb the person who owns the repository. Snapshots go
// through a private index file kept in the daemon's state directory, so the
// user's index, HEAD and work tree are never touched except by the methods
// made for it: Restore writes the named paths into the work tree, UpdateRef
// and AdvanceBranch move refs only if they still hold what the caller saw,
// and AdvanceBranch resets the user's index only when nothing was staged.
//
// Everything runs the git binary (plumbing commands where they exist) with
// an environment of our own making: no GIT_* variable of the daemon's
// environment reaches git, messages are in the C locale, the git directory
// and work tree are the ones Open found, and neither hooks, an fsmonitor,
// nor a filter driver defined in the repository's own configuration ever
// run. The repository's configuration is a file an agent can write; the
// daemon must not run code an agent planted, nor let it point git at a
// decoy work tree.
package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

var (
	// ErrNoGit means the git binary is not on PATH.
	ErrNoGit = errors.New("git not found on PATH; install git 2.39 or later")
	// ErrNotRepository means a directory is not inside a git work tree.
	ErrNotRepository = errors.New("not inside a git work tree")
	// ErrRefChanged means a ref no longer holds the value the caller expected:
	// somebody (normally the user) moved it meanwhile.
	ErrRefChanged = errors.New("ref changed meanwhile")
	// ErrDetachedHead means HEAD points at a commit, not at a branch.
	ErrDetachedHead = errors.New("HEAD is detached")
	// ErrUnsafePath means a path would leave the project directory, lies in
	// git's own directory, or passes through a symlink.
	ErrUnsafePath = errors.New("unsafe path")
	// ErrDirty means uncommitted changes (in the work tree or the user's
	// index) are on paths an operation would overwrite; see DirtyError.
	ErrDirty = errors.New("uncommitted changes in the way")
)

// Tree is a git tree object id.
type Tree string

// Modes of tree entries, as git writes them.
const (
	ModeFile       = "100644"
	ModeExecutable = "100755"
	ModeSymlink    = "120000"
	ModeGitlink    = "160000" // a submodule or nested repository: the id is a commit
	ModeTree       = "040000"
)

// emptyTrees are the ids of the empty tree by object format.
var emptyTrees = map[string]Tree{
	"sha1":   "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
	"sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}

// Options says which repository Open works on and where the daemon keeps its
// own index.
type Options struct {
	// Dir is the project directory: the top of a work tree, or a
	// subdirectory of a larger one. In the second case everything is limited
	// to Dir and paths are still relative to Dir.
	Dir string
	// Index is the path of the daemon's private index file. It belongs in the
	// daemon's state directory, outside the work tree, and must not be the
	// repository's own index. It is a cache: deleting it costs one slow
	// snapshot, nothing else.
	Index string
	// Exclude lists project-relative files and directories whose work tree
	// content is never snapshotted (for example ".claude/progress", which the
	// daemon itself writes). A snapshot carries HEAD's version of them, so
	// that a commit of a snapshot neither adds nor deletes them, and Changes
	// does not report them.
	Exclude []string
	// Objects, when set, is where snapshots write their objects instead
	// of the repository's own object directory: the object directory of
	// the repository a clone shares its objects with (AddClone), so that
	// what a snapshot of the clone holds is that repository's too.
	Objects string
}

// Repo is an open repository. It is safe for concurrent use; snapshots are
// serialised because they share the private index.
type Repo struct {
	top       string   // top of the work tree, real path
	gitDir    string   // absolute
	gitCommon string   // the directory of gitDir's objects and refs: itself, or a linked work tree's main one
	prefix    string   // Dir relative to top, slash-separated, "" or ending in "/"
	dir       string   // top joined with prefix
	index     string   // the private index, absolute
	exclude   []string // top-relative, clean
	emptyTree Tree
	// localConfigs are the repository's own configuration files, which an
	// agent can write (see filterEnv).
	localConfigs []string
	// The private common directory of the commands that read the work
	// tree (see ondisk.go), the real objects and info/exclude, and the
	// user's global ignore file.
	common, objects, infoExclude, globalExcludes string
	// hooks is the repository's own hooks directory (Controls).
	hooks string

	mu sync.Mutex // guards the private index and what follows
	// headRules is the tree whose .gitignore files the private common
	// directory holds; headGitlinks are its submodules.
	headRules    Tree
	headGitlinks map[string]bool

	filesMu sync.Mutex // guards what follows
	// files are the entries of the tree filesOf, as Files last listed them.
	filesOf Tree
	files   []Entry
}

// Open opens the repository whose work tree contains opts.Dir.
func Open(ctx context.Context, opts Options) (*Repo, error) {
	if opts.Dir == "" {
		return nil, errors.New("gitrepo: Options.Dir is empty; give the project directory")
	}
	if opts.Index == "" {
		return nil, errors.New("gitrepo: Options.Index is empty; give a path in the daemon's state directory for its private index")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("gitrepo: open %s: %w", opts.Dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("gitrepo: open %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("gitrepo: open %s: not a directory", dir)
	}
	out, err := runGit(ctx, dir, nil, nil, "rev-parse", "--is-inside-work-tree", "--show-object-format")
	if err != nil {
		if isNotRepository(err) {
			return nil, fmt.Errorf("gitrepo: open %s: %w; run `git init` there (or use gitrepo.Init) first", dir, ErrNotRepository)
		}
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "true" {
		return nil, fmt.Errorf("gitrepo: open %s: %w: it is inside a git directory or a bare repository", dir, ErrNotRepository)
	}
	empty, ok := emptyTrees[lines[1]]
	if !ok {
		return nil, fmt.Errorf("gitrepo: open %s: unknown object format %q", dir, lines[1])
	}
	// Each of these may contain a newline, so each is asked for alone.
	top, err := revParseLine(ctx, dir, "--show-toplevel")
	if err != nil {
		return nil, err
	}
	prefix, err := revParseLine(ctx, dir, "--show-prefix")
	if err != nil {
		return nil, err
	}
	gitDir, err := revParseLine(ctx, dir, "--absolute-git-dir")
	if err != nil {
		return nil, err
	}
	var gitPaths []string // the user's index, then the local configuration files, the objects, info/exclude
	for _, name := range []string{"index", "config", "config.worktree", "objects", "info/exclude"} {
		p, err := revParseLine(ctx, dir, "--git-path", name)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		gitPaths = append(gitPaths, p)
	}
	userIndex := gitPaths[0]

	r := &Repo{
		top:          top,
		gitDir:       gitDir,
		gitCommon:    filepath.Dir(gitPaths[3]),
		prefix:       prefix,
		dir:          filepath.Join(top, filepath.FromSlash(prefix)),
		emptyTree:    empty,
		localConfigs: gitPaths[1:3],
		objects:      gitPaths[3],
		infoExclude:  gitPaths[4],
		// Where a person's git looks for hooks unless core.hooksPath
		// says otherwise (which the configuration's sum catches): the
		// daemon's own git runs none (gitEnv), so --git-path would say
		// so rather than tell.
		hooks: filepath.Join(filepath.Dir(gitPaths[3]), "hooks"),
	}
	if opts.Objects != "" {
		r.objects = opts.Objects
	}
	if r.index, err = r.checkIndexPath(opts.Index, userIndex); err != nil {
		return nil, err
	}
	for _, e := range opts.Exclude {
		c, err := cleanPath(e)
		if err != nil {
			return nil, fmt.Errorf("gitrepo: Options.Exclude: %w", err)
		}
		r.exclude = append(r.exclude, r.prefix+c)
	}
	if err := r.setupPrivate(ctx, lines[1]); err != nil {
		return nil, err
	}
	return r, nil
}

// checkIndexPath makes the private index path absolute, creates its
// directory, and refuses a path where git would see the index as a project
// file or where it is the user's own index.
func (r *Repo) checkIndexPath(index, userIndex string) (string, error) {
	abs, err := filepath.Abs(index)
	if err != nil {
		return "", fmt.Errorf("gitrepo: Options.Index %s: %w", index, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", fmt.Errorf("gitrepo: Options.Index %s: %w", index, err)
	}
	real := abs
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		real = filepath.Join(d, filepath.Base(abs))
	}
	if u, err := filepath.EvalSymlinks(userIndex); err == nil {
		userIndex = u
	}
	if real == userIndex {
		return "", fmt.Errorf("gitrepo: Options.Index %s is the repository's own index; give a path in the daemon's state directory", index)
	}
	if rel, err := filepath.Rel(r.top, real); err == nil && filepath.IsLocal(rel) && strings.Split(filepath.ToSlash(rel), "/")[0] != ".git" {
		return "", fmt.Errorf("gitrepo: Options.Index %s is inside the work tree %s, where snapshots would take it in; give a path in the daemon's state directory", index, r.top)
	}
	return abs, nil
}

// GitDirs are the repository's git directories, which hold every object
// it has: the snapshots of agents' work trees and the candidates judged
// among them. A test run must not see them (judge.RunTestIn hides them
// where they lie outside the project): its record of what it read is made
// of the tree served to it, and what it reads elsewhere is not in it.
// None is below another of them.
func (r *Repo) GitDirs() []string {
	var dirs []string
	all := []string{r.gitDir, r.gitCommon, r.objects}
	for i, d := range all {
		below := func(o string) bool {
			rel, err := filepath.Rel(o, d)
			return err == nil && filepath.IsLocal(rel) && rel != "."
		}
		if !slices.ContainsFunc(all, below) && !slices.Contains(all[:i], d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// ObjectsDir is the object directory snapshots write to (Options.Objects).
func (r *Repo) ObjectsDir() string { return r.objects }

// Dir returns the project directory (its real path).
func (r *Repo) Dir() string { return r.dir }

// EmptyTree returns the id of the empty tree in this repository's object
// format: the tree of a repository with no commit yet.
func (r *Repo) EmptyTree() Tree { return r.emptyTree }

// Init makes dir a git repository (git init) when it is not inside a work
// tree yet; created reports whether it did. A directory inside a larger work
// tree is left alone: the project is then that subdirectory.
func Init(ctx context.Context, dir string) (created bool, err error) {
	if fi, err := os.Stat(dir); err != nil {
		return false, fmt.Errorf("gitrepo: init %s: %w", dir, err)
	} else if !fi.IsDir() {
		return false, fmt.Errorf("gitrepo: init %s: not a directory", dir)
	}
	out, err := runGit(ctx, dir, nil, nil, "rev-parse", "--is-inside-work-tree")
	switch {
	case err == nil && strings.TrimSpace(string(out)) == "true":
		return false, nil
	case err == nil:
		return false, fmt.Errorf("gitrepo: init %s: it is inside a git directory or a bare repository; choose a directory of a work tree", dir)
	case !isNotRepository(err):
		return false, err
	}
	if _, err := runGit(ctx, dir, nil, nil, "init", "-q"); err != nil {
		return false, err
	}
	return true, nil
}

// owns reports whether the top-relative path p is the project's: inside Dir
// and not excluded. Everything else follows HEAD in snapshots.
func (r *Repo) owns(p string) bool {
	if !strings.HasPrefix(p, r.prefix) {
		return false
	}
	for _, e := range r.exclude {
		if p == e || strings.HasPrefix(p, e+"/") {
			return false
		}
	}
	return true
}

// pathspecs limits a command to the project's own paths.
func (r *Repo) pathspecs() []string {
	ps := []string{"."}
	if r.prefix != "" {
		ps[0] = ":(literal)" + r.prefix
	}
	for _, e := range r.exclude {
		ps = append(ps, ":(exclude,literal)"+e)
	}
	return ps
}

// cleanPath checks a project-relative, slash-separated path from a caller
// and returns it cleaned.
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty path", ErrUnsafePath)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafePath, p)
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is absolute; give a path relative to the project directory", ErrUnsafePath, p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q leaves the project directory", ErrUnsafePath, p)
	}
	for _, part := range strings.Split(c, "/") {
		if strings.EqualFold(part, ".git") {
			return "", fmt.Errorf("%w: %q is inside git's own directory", ErrUnsafePath, p)
		}
	}
	return c, nil
}

// checkID refuses anything but a full hexadecimal object id, so that no
// caller's value can be taken by git as an option or a revision expression.
func checkID(what, id string) error {
	if len(id) != 40 && len(id) != 64 {
		return fmt.Errorf("gitrepo: %s %q is not an object id (40 or 64 hexadecimal digits)", what, id)
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("gitrepo: %s %q is not an object id (40 or 64 hexadecimal digits)", what, id)
		}
	}
	return nil
}

// extraEnv is added to every git environment; tests use it to keep the
// machine's system configuration out (GIT_CONFIG_NOSYSTEM), which the
// daemon's own environment cannot do because GIT_* variables are dropped.
var extraEnv []string

// gitEnv is the environment git runs with: the daemon's minus every GIT_*
// variable (a GIT_DIR or GIT_INDEX_FILE of whoever started the daemon must
// not redirect it), with stable messages and no prompts.
func gitEnv(add []string) []string {
	base := os.Environ()
	env := make([]string, 0, len(base)+len(extraEnv)+len(add)+3)
	for _, kv := range base {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		env = append(env, kv)
	}
	// GIT_OPTIONAL_LOCKS=0 only spares optional index refreshes (git
	// status); writes the daemon asks for still take their locks.
	env = append(env, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	env = append(env, extraEnv...)
	return append(env, add...)
}

// baseArgs come before every git command. Hooks (reference-transaction runs
// on update-ref) and an fsmonitor are commands named in files an agent can
// write; the daemon runs neither.
var baseArgs = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}

// gitError is a git command that failed.
type gitError struct {
	dir    string
	args   []string
	code   int // exit status; -1 when git did not run to its end
	stderr string
	err    error
}

func (e *gitError) Error() string {
	var b strings.Builder
	b.WriteString("gitrepo: git")
	n := 0
	for _, a := range e.args {
		if n += len(a); n > 300 {
			b.WriteString(" …")
			break
		}
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = fmt.Sprintf("%q", a)
		}
		b.WriteString(a)
	}
	fmt.Fprintf(&b, " (in %s): %v", e.dir, e.err)
	if e.stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.stderr)
	}
	return b.String()
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is git's exit status: 0 for no error, -1 when git did not run to
// its end.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// isNotRepository reports whether git failed because it found no repository.
func isNotRepository(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && strings.Contains(ge.stderr, "not a git repository")
}

// runGit runs git in dir and returns its standard output. stdin nil means
// /dev/null.
func runGit(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	var stdout bytes.Buffer
	cmd, stderr := gitCommand(ctx, dir, env, stdin, args...)
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), wrapRunError(dir, args, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// gitCommand prepares git in dir with our flags and environment; the caller
// sets Stdout.
func gitCommand(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) (*exec.Cmd, *bytes.Buffer) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append(append([]string(nil), baseArgs...), args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env)
	cmd.Stdin = stdin
	cmd.Stderr = &stderr
	setProcessGroup(cmd)
	return cmd, &stderr
}

func wrapRunError(dir string, args []string, err error, stderr string) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("gitrepo: %w (%v)", ErrNoGit, err)
	}
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return &gitError{dir: dir, args: args, code: code, stderr: strings.TrimSpace(stderr), err: err}
}

// git runs git at the top of the work tree, where every path git prints or
// takes is top-relative.
func (r *Repo) git(ctx context.Context, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	return runGit(ctx, r.top, r.env(env), stdin, args...)
}

// env names the repository and its work tree as Open found them. A
// core.worktree (or a .git file) an agent wrote afterwards could otherwise
// point git at another directory, and a snapshot would record that one.
func (r *Repo) env(env []string) []string {
	return append([]string{"GIT_DIR=" + r.gitDir, "GIT_WORK_TREE=" + r.top}, env...)
}

// command is gitCommand at the top of the work tree.
func (r *Repo) command(ctx context.Context, env []string, stdin io.Reader, args ...string) (*exec.Cmd, *bytes.Buffer) {
	return gitCommand(ctx, r.top, r.env(env), stdin, args...)
}

// revParseLine asks rev-parse for one value that may contain newlines.
func revParseLine(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := runGit(ctx, dir, nil, nil, append([]string{"rev-parse"}, args...)...)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// revParse resolves a revision expression to an object id; ok is false when
// it names nothing (an unborn HEAD, a missing ref).
func (r *Repo) revParse(ctx context.Context, rev string) (id string, ok bool, err error) {
	out, err := r.git(ctx, nil, nil, "rev-parse", "-q", "--verify", "--end-of-options", rev)
	if exitCode(err) == 1 {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(out)), true, nil
}
