package gitrepo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
)

// A snapshot is the project as it is on disk, not as git's index,
// attributes and ignore files present it: git is a tool here, not the
// judge of what the project holds.
//
//   - Bytes are taken raw. git add runs in a private GIT_COMMON_DIR whose
//     info/attributes (the attributes of highest precedence) unsets every
//     conversion (text, eol, crlf, ident, filter, working-tree-encoding) for
//     every path, with core.autocrlf off: whatever .gitattributes says,
//     the blob is the file's bytes, and a checkout of a commit of it gives
//     those bytes back. The repository's own configuration is not read by
//     those commands at all (only what Open copied of it).
//   - What is ignored is decided by a person's rules only: the .gitignore
//     files of HEAD's tree (what a person committed, or a commit of the
//     daemon's of what the gates let stand), .git/info/exclude and the
//     user's core.excludesFile. A .gitignore that is not committed hides
//     nothing: an agent cannot hide code from a change set by writing one.
//   - A repository nested in the project (a directory with a .git of its
//     own, born or unborn) is not a gitlink: its files are taken as
//     ordinary files of the project. Its .git is a refused path.
//   - A path git cannot record (a component named .git in any case, a name
//     git refuses, a file that is no regular file or symlink) never fails a
//     snapshot: it is left out of the tree and reported (Refused).

// conversionsOff is the private info/attributes.
const conversionsOff = "* -text -eol -crlf -ident -filter -working-tree-encoding\n"

// setupPrivate prepares the private common directory beside the private
// index. A private index of an earlier layout (which could hold gitlinks of
// nested repositories and filtered blobs) is dropped: it is a cache.
func (r *Repo) setupPrivate(ctx context.Context, objectFormat string) error {
	r.common = r.index + ".git"
	if _, err := os.Lstat(r.common); errors.Is(err, fs.ErrNotExist) {
		// Best effort: an index that cannot go fails the first snapshot,
		// which says why.
		for _, p := range []string{r.index, r.index + ".lock"} {
			os.Remove(p)
		}
	}
	for _, d := range []string{"info", "refs"} {
		if err := os.MkdirAll(filepath.Join(r.common, d), 0o700); err != nil {
			return fmt.Errorf("gitrepo: private git directory: %w", err)
		}
	}
	var cfg strings.Builder
	version := "0"
	if objectFormat != "sha1" {
		version = "1"
	}
	fmt.Fprintf(&cfg, "[core]\n\trepositoryformatversion = %s\n\tbare = false\n\tautocrlf = false\n\tsafecrlf = false\n", version)
	// What the repository says of the file system it lives on.
	out, err := r.git(ctx, nil, nil, "config", "--local", "-z", "--get-regexp", `^core\.(ignorecase|precomposeunicode|symlinks|filemode|protectntfs|protecthfs)$`)
	if err != nil && exitCode(err) != 1 {
		return err
	}
	for _, kv := range splitNUL(out) {
		key, value, _ := strings.Cut(kv, "\n")
		if v := strings.ToLower(value); v == "true" || v == "false" {
			fmt.Fprintf(&cfg, "\t%s = %s\n", strings.TrimPrefix(key, "core."), v)
		}
	}
	if objectFormat != "sha1" {
		fmt.Fprintf(&cfg, "[extensions]\n\tobjectformat = %s\n", objectFormat)
	}
	if err := atomicfile.Write(filepath.Join(r.common, "config"), []byte(cfg.String()), 0o600); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(r.common, "info", "attributes"), []byte(conversionsOff), 0o600); err != nil {
		return err
	}
	// The user's own global ignore file, a person's.
	if out, err := r.git(ctx, nil, nil, "config", "--path", "--get", "core.excludesFile"); err == nil {
		r.globalExcludes = strings.TrimSuffix(string(out), "\n")
	} else if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		r.globalExcludes = filepath.Join(x, "git", "ignore")
	} else if h, herr := os.UserHomeDir(); herr == nil {
		r.globalExcludes = filepath.Join(h, ".config", "git", "ignore")
	}
	return nil
}

// privateEnv is the environment of the commands that read the work tree's
// content: the private common directory (no attributes, no repository
// configuration), the real objects, the private index.
func (r *Repo) privateEnv() []string {
	return []string{"GIT_COMMON_DIR=" + r.common, "GIT_OBJECT_DIRECTORY=" + r.objects, "GIT_INDEX_FILE=" + r.index}
}

// excludeArgs are the --exclude-from arguments of a person's ignore rules,
// lowest precedence first: the user's core.excludesFile, info/exclude, and
// the .gitignore files of HEAD's tree, each made relative to the top.
func (r *Repo) excludeArgs(ctx context.Context, head Tree) ([]string, error) {
	var args []string
	for _, f := range []string{r.globalExcludes, r.infoExclude} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			args = append(args, "--exclude-from="+f)
		}
	}
	name := filepath.Join(r.common, "info", "head-ignore")
	if r.headRules != head {
		rules, err := r.headIgnoreRules(ctx, head)
		if err != nil {
			return nil, err
		}
		if err := atomicfile.Write(name, rules, 0o600); err != nil {
			return nil, err
		}
		r.headRules = head
	}
	return append(args, "--exclude-from="+name), nil
}

// headIgnoreRules turns the .gitignore files of tree into one exclude file
// relative to the top: a pattern of dir/.gitignore holds below dir only, so
// it gets dir as prefix ("dir/**/" when it has no slash but a trailing one,
// as git matches it at any depth). Shallower files come first: the deeper
// one wins, as in git.
func (r *Repo) headIgnoreRules(ctx context.Context, tree Tree) ([]byte, error) {
	if tree == r.emptyTree {
		r.headGitlinks = nil
		return nil, nil
	}
	out, err := r.git(ctx, nil, nil, "ls-tree", "-r", "-z", "--full-tree", string(tree))
	if err != nil {
		return nil, err
	}
	var files []Entry
	r.headGitlinks = map[string]bool{}
	for _, rec := range splitNUL(out) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		switch {
		case !ok || len(f) != 3:
		case f[0] == ModeGitlink:
			r.headGitlinks[p] = true
		case path.Base(p) == ".gitignore" && (f[0] == ModeFile || f[0] == ModeExecutable):
			files = append(files, Entry{Path: p, ID: f[2]})
		}
	}
	sort.SliceStable(files, func(i, j int) bool {
		return strings.Count(files[i].Path, "/") < strings.Count(files[j].Path, "/")
	})
	var b bytes.Buffer
	for _, f := range files {
		content, err := r.git(ctx, nil, nil, "cat-file", "blob", f.ID)
		if err != nil {
			return nil, err
		}
		writeRules(&b, path.Dir(f.Path), content)
	}
	return b.Bytes(), nil
}

// writeRules appends the patterns of the .gitignore of dir ("." for the
// top), made relative to the top.
func writeRules(b *bytes.Buffer, dir string, content []byte) {
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf"))
	prefix := ""
	if dir != "." {
		prefix = escapeGlob(dir) + "/"
	}
	for line := range strings.SplitSeq(string(content), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimRight(line, " ") == "" || line[0] == '#' {
			continue
		}
		neg := ""
		if line[0] == '!' {
			neg, line = "!", line[1:]
		}
		if strings.TrimRight(line, " ") == "" {
			continue
		}
		if prefix != "" {
			// A slash anywhere but at the end anchors the pattern to dir.
			if body := strings.TrimRight(line, "/"); strings.Contains(body, "/") {
				line = prefix + strings.TrimPrefix(line, "/")
			} else {
				line = prefix + "**/" + line
			}
		}
		b.WriteString(neg + line + "\n")
	}
}

// escapeGlob escapes what a pattern would read as a wildcard in a directory
// name.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\*?[]!#`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Refused is a path on disk that git cannot record: it is not in the
// snapshot.
type Refused struct {
	Path string // project-relative, slash-separated
	Why  string
}

// refusedName says why git would refuse the path p (top-relative), or "".
// Git refuses a component ".git" in any case, and, with core.protectNTFS
// (its default), the names Windows reads as ".git" (".git " or ".git.",
// "git~1").
func refusedName(p string) string {
	for part := range strings.SplitSeq(p, "/") {
		l := strings.ToLower(part)
		switch {
		case l == ".git":
			return "a .git of its own inside the project"
		case strings.TrimRight(l, " .") == ".git", l == "git~1", strings.HasPrefix(l, ".git:"):
			return "git refuses the name"
		}
	}
	return ""
}

// nested walks the project for what git's own walk does not show: a
// directory with a .git of its own (a nested repository, whose files git
// add would skip or take as a gitlink) and names git refuses below a
// tracked directory. ignored are the top-relative paths (directories
// ending in "/") a person's rules ignore; a submodule of HEAD
// (gitlinks) is the person's and stays a gitlink.
func (r *Repo) nested(gitlinks map[string]bool, ignored map[string]bool) (repos []string, refused []Refused, files map[string]fs.FileInfo) {
	files = map[string]fs.FileInfo{}
	var walk func(rel string, inRepo bool)
	walk = func(rel string, inRepo bool) {
		dir := filepath.Join(r.top, filepath.FromSlash(rel))
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		hasGit := false
		for _, e := range entries {
			if strings.EqualFold(e.Name(), ".git") {
				hasGit = true
			}
		}
		if hasGit && rel != "" {
			inRepo = true
			repos = append(repos, rel)
		}
		for _, e := range entries {
			p := e.Name()
			if rel != "" {
				p = rel + "/" + p
			}
			if rel == "" && e.Name() == ".git" {
				continue
			}
			if !r.owns(p) || gitlinks[p] || ignored[p] || ignored[p+"/"] && e.IsDir() {
				continue
			}
			if why := refusedName(p); why != "" && refusedName(path.Dir(p)) == "" {
				if strings.EqualFold(e.Name(), ".git") {
					why = "a repository nested in the project: git would record at most a link to a commit the project does not have"
				}
				refused = append(refused, Refused{Path: p, Why: why})
				continue
			}
			switch {
			case e.IsDir():
				walk(p, inRepo)
			case inRepo:
				if fi, err := e.Info(); err == nil {
					if fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0 {
						files[p] = fi
					} else {
						refused = append(refused, Refused{Path: p, Why: "not a regular file or a symlink"})
					}
				}
			case e.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0:
				refused = append(refused, Refused{Path: p, Why: "not a regular file or a symlink"})
			}
		}
	}
	walk(strings.TrimSuffix(r.prefix, "/"), false)
	return repos, refused, files
}

// refusedRecord is where the refused paths of each tree are kept, so that
// a run is charged only with those its run added (the first snapshot of a
// tree wins: a later one of the same tree, with a refused path more, does
// not hide it).
const maxRefusedRecords = 256

type refusedRecords struct {
	Order []Tree             `json:"order"`
	Trees map[Tree][]Refused `json:"trees"`
}

func (r *Repo) loadRefused() refusedRecords {
	var rec refusedRecords
	if b, err := os.ReadFile(filepath.Join(r.common, "refused.json")); err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	if rec.Trees == nil {
		rec.Trees = map[Tree][]Refused{}
	}
	return rec
}

func (r *Repo) recordRefused(t Tree, refused []Refused) error {
	rec := r.loadRefused()
	if _, ok := rec.Trees[t]; ok {
		return nil
	}
	if refused == nil {
		refused = []Refused{}
	}
	rec.Trees[t] = refused
	rec.Order = append(rec.Order, t)
	for len(rec.Order) > maxRefusedRecords {
		delete(rec.Trees, rec.Order[0])
		rec.Order = rec.Order[1:]
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.common, "refused.json"), b, 0o600)
}

// RefusedAt returns the paths git could not record when tree was first
// snapshotted; known is false when no snapshot of this repository's
// private index recorded it.
func (r *Repo) RefusedAt(tree Tree) (refused []Refused, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	refused, known = r.loadRefused().Trees[tree]
	return refused, known
}

// RemoveRefused removes refused paths from the work tree, whole (a nested
// .git directory with everything in it). Each must be one git refuses, in
// the project, below no symlink.
func (r *Repo) RemoveRefused(paths []string) error {
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return fmt.Errorf("gitrepo: remove: %w", err)
	}
	defer root.Close()
	for _, p := range paths {
		c := path.Clean(p)
		if p == "" || path.IsAbs(c) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("gitrepo: remove %q: %w: not a project path", p, ErrUnsafePath)
		}
		if c == ".git" && r.prefix == "" {
			return fmt.Errorf("gitrepo: remove %q: %w: the repository's own .git", p, ErrUnsafePath)
		}
		if _, err := checkParents(root, c, nil); err != nil {
			return fmt.Errorf("gitrepo: remove %s: %w", p, err)
		}
		if err := root.RemoveAll(c); err != nil {
			return fmt.Errorf("gitrepo: remove %s: %w", p, err)
		}
	}
	return nil
}
