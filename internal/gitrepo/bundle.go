package gitrepo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A bundle (git bundle's format) carries commits to a repository that
// shares no file system with this one: a header naming the bundle's tips
// and its prerequisites (the commits its objects need and leave out),
// then a pack of the objects. This package writes the header itself and
// reads it itself, rather than through git bundle and git fetch: git
// bundle wants a ref to name a tip, git fetch from a bundle moves the refs
// the bundle names unless told otherwise, writes FETCH_HEAD, and (before
// git 2.46) runs none of git's object checks on what it reads whatever
// fetch.fsckObjects says. Here the pack goes to git index-pack --strict,
// which checks every object as fetch.fsckObjects would (a tree entry named
// .git in any case, a malformed commit, a bad .gitmodules), and no ref is
// moved at all: what to do with a tip is the caller's.

// Bundle headers as git writes them: v3 adds capabilities (the object
// format), which a sha256 repository needs.
const (
	bundleV2 = "# v2 git bundle\n"
	bundleV3 = "# v3 git bundle\n"
)

// bundleTipName names the one tip of the bundles WriteBundle writes. The
// name means nothing to a reader of this package; git clone takes it as
// the commit to check out.
const bundleTipName = "HEAD"

// ErrBundleTooLarge means a bundle went past the bound its reader set.
var ErrBundleTooLarge = errors.New("bundle too large")

// WriteBundle writes to w a bundle of tip: every object reachable from
// tip, less those reachable from base when base is not "" (base is then
// the bundle's one prerequisite, and the pack may be thin against it).
// A repository that has base can take it (Unbundle); one that has nothing
// can be made from a bundle written with base "" (CloneBundle).
func (r *Repo) WriteBundle(ctx context.Context, w io.Writer, base, tip string) error {
	if err := checkID("tip", tip); err != nil {
		return err
	}
	revs := tip + "\n"
	if base != "" {
		if err := checkID("base", base); err != nil {
			return err
		}
		revs += "^" + base + "\n"
	}
	for _, c := range []string{base, tip} {
		if c == "" {
			continue
		}
		if _, ok, err := r.revParse(ctx, c+"^{commit}"); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("gitrepo: bundle %s: %s is not a commit of %s", Short(tip), c, r.top)
		}
	}
	var header strings.Builder
	if len(tip) == 64 {
		header.WriteString(bundleV3 + "@object-format=sha256\n")
	} else {
		header.WriteString(bundleV2)
	}
	if base != "" {
		header.WriteString("-" + base + "\n")
	}
	header.WriteString(tip + " " + bundleTipName + "\n\n")
	if _, err := io.WriteString(w, header.String()); err != nil {
		return fmt.Errorf("gitrepo: bundle %s: %w", Short(tip), err)
	}
	args := []string{"pack-objects", "--stdout", "--revs", "--delta-base-offset", "-q"}
	if base != "" {
		args = append(args, "--thin")
	}
	cmd, stderr := r.command(ctx, nil, strings.NewReader(revs), args...)
	cmd.Stdout = w
	if err := cmd.Run(); err != nil {
		return wrapRunError(r.top, args, err, stderr.String())
	}
	return nil
}

// Bundle is a bundle being read: its header, read, and its pack, still to
// be read by Unbundle or CloneBundle.
type Bundle struct {
	// Prerequisites are the commits the bundle's objects need and leave
	// out, in the bundle's order.
	Prerequisites []string
	// Tips are the commits the bundle carries, with the names it gives
	// them, in the bundle's order.
	Tips []BundleTip

	pack *bufio.Reader
	read *boundedReader
}

// BundleTip is one tip of a bundle.
type BundleTip struct {
	Commit string
	Name   string // as the bundle names it; nothing here moves a ref by it
}

// ReadBundle reads a bundle's header from rd, reading no more than limit
// bytes of rd in all (the pack included, when it is read): past it, the
// reads fail with ErrBundleTooLarge.
func ReadBundle(rd io.Reader, limit int64) (*Bundle, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("gitrepo: a bundle's bound is %d bytes; give a positive bound", limit)
	}
	b := &Bundle{read: &boundedReader{r: rd, left: limit, limit: limit}}
	b.pack = bufio.NewReader(b.read)
	line := func() (string, error) {
		s, err := b.pack.ReadString('\n')
		if errors.Is(err, io.EOF) {
			return "", errors.New("it ends within its header (truncated)")
		}
		return strings.TrimSuffix(s, "\n"), err
	}
	fail := func(err error) (*Bundle, error) {
		if errors.Is(err, ErrBundleTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("gitrepo: not a git bundle: %w", err)
	}
	// The first line is read whole only if it is one: a pack, or any
	// file without a newline, is not a bundle either.
	first, err := b.pack.ReadString('\n')
	first = strings.TrimSuffix(first, "\n")
	if err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	idLen := 40
	switch first + "\n" {
	case bundleV2:
	case bundleV3:
		for {
			if c, err := b.pack.Peek(1); err != nil || c[0] != '@' {
				break
			}
			capability, err := line()
			if err != nil {
				return fail(err)
			}
			switch capability {
			case "@object-format=sha1":
			case "@object-format=sha256":
				idLen = 64
			default:
				// filter= would mean a partial bundle, lacking objects.
				return fail(fmt.Errorf("capability %q is not one this reader takes (only object-format)", capability))
			}
		}
	default:
		return fail(fmt.Errorf("it starts with %.40q, not %q or %q", first, strings.TrimSpace(bundleV2), strings.TrimSpace(bundleV3)))
	}
	for {
		l, err := line()
		if err != nil {
			return fail(err)
		}
		if l == "" {
			break
		}
		if id, ok := strings.CutPrefix(l, "-"); ok {
			id, _, _ = strings.Cut(id, " ") // a prerequisite's comment is its subject
			if len(id) != idLen || checkID("prerequisite", id) != nil {
				return fail(fmt.Errorf("prerequisite line %.80q does not start with an object id", l))
			}
			b.Prerequisites = append(b.Prerequisites, id)
			continue
		}
		id, name, ok := strings.Cut(l, " ")
		if !ok || len(id) != idLen || checkID("tip", id) != nil || name == "" {
			return fail(fmt.Errorf("tip line %.80q is not an object id and a name", l))
		}
		b.Tips = append(b.Tips, BundleTip{Commit: id, Name: name})
	}
	if len(b.Tips) == 0 {
		return fail(errors.New("it names no tip"))
	}
	return b, nil
}

// boundedReader fails with ErrBundleTooLarge past its limit.
type boundedReader struct {
	r           io.Reader
	left, limit int64
	over        bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a bundle of exactly limit bytes from a
		// larger one.
		var one [1]byte
		if n, _ := io.ReadFull(b.r, one[:]); n == 0 {
			return 0, io.EOF
		}
		b.over = true
		return 0, fmt.Errorf("%w: past its bound of %d bytes", ErrBundleTooLarge, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// Unbundle adds the bundle's objects to the repository, each checked by
// git (index-pack --strict: its content, and that every object it names is
// in the pack or the repository), and checks its tips are commits there. It moves no ref: the objects are unreferenced
// until the caller points a ref at a tip, and git gc prunes them if it
// never does. Every prerequisite must be a commit the repository has.
func (r *Repo) Unbundle(ctx context.Context, b *Bundle) error {
	for _, p := range b.Prerequisites {
		if _, ok, err := r.revParse(ctx, p+"^{commit}"); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("gitrepo: the bundle needs commit %s, which %s does not have", p, r.top)
		}
	}
	return unpack(ctx, r.top, r.env(nil), b)
}

// unpack runs index-pack on b's pack in the repository env names, then
// checks the tips are commits there.
func unpack(ctx context.Context, dir string, env []string, b *Bundle) error {
	if _, err := runGit(ctx, dir, env, b.pack, "index-pack", "--stdin", "--fix-thin", "--strict"); err != nil {
		if b.read.over {
			return fmt.Errorf("gitrepo: reading the bundle's objects: %w: past its bound of %d bytes", ErrBundleTooLarge, b.read.limit)
		}
		return fmt.Errorf("gitrepo: reading the bundle's objects: %w", err)
	}
	// index-pack --strict checks that what the pack's objects name is
	// there too; a tip the pack does not carry is the one thing left.
	for _, t := range b.Tips {
		// A tag is no tip: it would stand where a commit is expected.
		if kind, err := runGit(ctx, dir, env, nil, "cat-file", "-t", t.Commit); err != nil || string(kind) != "commit\n" {
			return fmt.Errorf("gitrepo: the bundle's tip %s is a commit of neither its pack nor the repository", t.Commit)
		}
	}
	return nil
}

// CloneBundle makes at dir (absent or empty) a repository of its own from
// b, a bundle with no prerequisite (WriteBundle with base ""), whose tip
// must be commit: HEAD on branch, made at commit, with commit's files
// checked out byte for byte (no conversion .gitattributes asks for).
func CloneBundle(ctx context.Context, b *Bundle, dir, branch, commit string) error {
	if err := checkID("commit", commit); err != nil {
		return err
	}
	if len(b.Prerequisites) > 0 {
		return fmt.Errorf("gitrepo: clone %s: the bundle needs commits it does not carry (%s); a clone needs a bundle of the whole history", dir, strings.Join(b.Prerequisites, ", "))
	}
	if len(b.Tips) != 1 || b.Tips[0].Commit != commit {
		return fmt.Errorf("gitrepo: clone %s: the bundle's tips are %v, want %s alone", dir, b.Tips, commit)
	}
	if _, err := runGit(ctx, ".", nil, nil, "check-ref-format", "refs/heads/"+branch); err != nil || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("gitrepo: clone %s: %q is not a branch name git allows (see git check-ref-format)", dir, branch)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("gitrepo: clone %s: %w", dir, err)
	}
	if err := newCloneDir(abs); err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("gitrepo: clone %s: %w", abs, err)
	}
	fail := func(what string, err error) error {
		os.RemoveAll(abs)
		return fmt.Errorf("gitrepo: clone %s at %s from a bundle: %s: %w (the half-made clone was removed)", abs, Short(commit), what, err)
	}
	format := "sha1"
	if len(commit) == 64 {
		format = "sha256"
	}
	// No template: hooks a template would copy are no part of a clone.
	if _, err := runGit(ctx, abs, nil, nil, "init", "-q", "--template=", "--object-format="+format, "--", abs); err != nil {
		return fail("git init", err)
	}
	gitDir := filepath.Join(abs, ".git")
	env := []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + abs}
	if err := unpack(ctx, abs, env, b); err != nil {
		return fail("reading the bundle", err)
	}
	if _, err := runGit(ctx, abs, env, nil, "update-ref", "refs/heads/"+branch, commit); err != nil {
		return fail("making its branch", err)
	}
	if _, err := runGit(ctx, abs, env, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return fail("putting HEAD on its branch", err)
	}
	// info/attributes outranks every .gitattributes of the tree, for as
	// long as the checkout takes: the files are the commit's bytes, as a
	// snapshot takes them back (see ondisk.go).
	attributes := filepath.Join(gitDir, "info", "attributes")
	if err := os.MkdirAll(filepath.Dir(attributes), 0o755); err != nil {
		return fail("checking out", err)
	}
	if err := os.WriteFile(attributes, []byte(conversionsOff), 0o644); err != nil {
		return fail("checking out", err)
	}
	if _, err := runGit(ctx, abs, env, nil, "-c", "core.autocrlf=false", "read-tree", "--reset", "-u", commit); err != nil {
		return fail("checking out", err)
	}
	if err := os.Remove(attributes); err != nil {
		return fail("checking out", err)
	}
	return nil
}

// ObjectSizes returns the size in bytes of each object ids names (for a
// blob, its content's length; for a symlink's blob, its target's).
func (r *Repo) ObjectSizes(ctx context.Context, ids []string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	for _, id := range ids {
		if err := checkID("object", id); err != nil {
			return nil, err
		}
	}
	out, err := r.git(ctx, nil, strings.NewReader(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objectsize)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(ids) {
		return nil, fmt.Errorf("gitrepo: git cat-file --batch-check: %d lines for %d objects", len(lines), len(ids))
	}
	sizes := make([]int64, len(ids))
	for i, l := range lines {
		id, size, _ := strings.Cut(l, " ")
		n, err := strconv.ParseInt(size, 10, 64)
		if id != ids[i] || err != nil || n < 0 {
			return nil, fmt.Errorf("gitrepo: git cat-file --batch-check: %s: got %q", ids[i], l)
		}
		sizes[i] = n
	}
	return sizes, nil
}

// Unowned lists the paths of the repository, relative to its top, that
// differ between two trees and that are not the project's (outside the
// project directory, or excluded): what Changes leaves out.
func (r *Repo) Unowned(ctx context.Context, from, to Tree) ([]string, error) {
	all, err := r.ChangedPaths(ctx, from, to)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range all {
		if !r.owns(p) {
			out = append(out, p)
		}
	}
	return out, nil
}
