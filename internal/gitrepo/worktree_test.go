package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// lane makes a repository with one commit and returns it open, its
// directory and the commit.
func lane(t *testing.T, files map[string]string) (r *Repo, dir, commit string) {
	t.Helper()
	dir = newRepo(t)
	write(t, dir, files)
	commit = commitAll(t, dir)
	return openRepo(t, dir), dir, commit
}

// stateDir is a real temporary directory outside the repository, as the
// daemon's state directory is.
func stateDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// adminDirs lists the repository's .git/worktrees entries.
func adminDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".git", "worktrees"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestAddWorktree(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"a.txt": "line\n", "run.sh": "exec:#!/bin/sh\n", "l": "link:a.txt", "sub/b": "b\n",
		// What would change bytes on checkout: end-of-line conversion, ident
		// expansion, and a filter the repository's configuration defines.
		".gitattributes": "*.txt text eol=crlf\n*.txt ident\nsub/* filter=evil\n",
		"id.txt":         "$Id$\n",
	}
	r, dir, commit := lane(t, files)
	marker := filepath.Join(stateDir(t), "ran")
	gitT(t, dir, "config", "filter.evil.smudge", "touch "+marker+"; cat")
	write(t, dir, map[string]string{".git/hooks/post-checkout": "exec:#!/bin/sh\ntouch " + marker + "\n"})
	before := viewOf(t, dir)

	wt := filepath.Join(stateDir(t), "lanes", "F-1") // its parent does not exist
	if err := r.AddWorktree(t.Context(), wt, "ctxgraphd/F-1", commit); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hook or a filter of the repository ran")
	}
	tree := Tree(strings.TrimSpace(gitT(t, dir, "rev-parse", commit+"^{tree}")))
	for p, want := range treeFiles(t, dir, tree) {
		if got := state(t, wt, p); got != want {
			t.Errorf("%s in the work tree: %q, want the commit's bytes %q", p, got, want)
		}
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/ctxgraphd/F-1")); got != commit {
		t.Errorf("branch at %s, want %s", got, commit)
	}
	if got := strings.TrimSpace(gitT(t, wt, "symbolic-ref", "HEAD")); got != "refs/heads/ctxgraphd/F-1" {
		t.Errorf("the work tree's HEAD is %s", got)
	}
	// Its index holds the commit: nothing staged.
	if got := gitT(t, wt, "diff-index", "--cached", "--name-only", "HEAD"); got != "" {
		t.Errorf("staged in the new work tree: %q", got)
	}
	// A snapshot there is the commit's tree exactly.
	lr := openRepo(t, wt)
	if snap, err := lr.Snapshot(t.Context()); err != nil || snap != tree {
		t.Errorf("Snapshot of the new work tree: %s, %v; want the commit's tree %s", snap, err, tree)
	}
	if after := viewOf(t, dir); after != before {
		t.Errorf("the main work tree changed:\nbefore %+v\nafter  %+v", before, after)
	}

	// The branch exists: it is reset to the commit asked for.
	write(t, dir, map[string]string{"a.txt": "two\n"})
	second := commitAll(t, dir)
	gitT(t, dir, "branch", "ctxgraphd/F-2", second)
	wt2 := filepath.Join(stateDir(t), "F-2")
	if err := os.Mkdir(wt2, 0o700); err != nil { // empty: fine
		t.Fatal(err)
	}
	if err := r.AddWorktree(t.Context(), wt2, "ctxgraphd/F-2", commit); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/ctxgraphd/F-2")); got != commit {
		t.Errorf("existing branch at %s, want it reset to %s", got, commit)
	}
	if got := state(t, wt2, "a.txt"); got != ModeFile+" line\n" {
		t.Errorf("a.txt in the reset work tree: %q", got)
	}
}

func TestAddWorktreeRefuses(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"a": "a"})
	full := filepath.Join(stateDir(t), "full")
	write(t, full, map[string]string{"x": "x"})
	tests := []struct {
		name, dir, branch, commit string
		want                      string // in the error
	}{
		{"non-empty directory", full, "lane", commit, "not empty"},
		{"inside the work tree", filepath.Join(dir, "lanes", "x"), "lane", commit, "inside or holds"},
		{"inside the git directory", filepath.Join(dir, ".git", "lanes", "x"), "lane", commit, "inside or holds"},
		{"holding the repository", filepath.Dir(dir), "lane", commit, "inside or holds"},
		{"empty branch", "", "", commit, "short name"},
		{"branch like an option", "", "-f", commit, "short name"},
		{"full ref name", "", "refs/heads/x", commit, "short name"},
		{"HEAD", "", "HEAD", commit, "short name"},
		{"branch with ..", "", "a..b", commit, "not a name git allows"},
		{"branch with a space", "", "a b", commit, "not a name git allows"},
		{"branch with @{", "", "a@{1}", commit, "not a name git allows"},
		{"branch ending in .lock", "", "x.lock", commit, "not a name git allows"},
		{"revision expression", "", "lane", "HEAD", "not an object id"},
		{"abbreviated id", "", "lane", commit[:12], "not an object id"},
		{"tree, not commit", "", "lane", strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD^{tree}")), "add work tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.dir
			if d == "" {
				d = filepath.Join(stateDir(t), "wt")
			}
			err := r.AddWorktree(t.Context(), d, tt.branch, tt.commit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddWorktree: %v, want an error saying %q", err, tt.want)
			}
			if got := adminDirs(t, dir); len(got) != 0 {
				t.Errorf("a refused AddWorktree left administrative files: %v", got)
			}
			if tt.dir == "" {
				if _, err := os.Lstat(d); err == nil {
					t.Errorf("a refused AddWorktree left %s", d)
				}
			}
		})
	}
	if got := state(t, full, "x"); got != ModeFile+" x" {
		t.Errorf("the non-empty directory's file is now %q", got)
	}
}

func TestRemoveWorktree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		branch string                             // given to RemoveWorktree
		spoil  func(t *testing.T, dir, wt string) // between AddWorktree and RemoveWorktree
	}{
		{name: "clean, with its branch", branch: "ctxgraphd/F-1"},
		{name: "clean, branch kept"},
		{
			name:   "untracked files, changes and a read-only directory",
			branch: "ctxgraphd/F-1",
			spoil: func(t *testing.T, dir, wt string) {
				write(t, wt, map[string]string{"a": "changed", "new/n": "n", "cache/mod/f": "f"})
				gitT(t, wt, "add", "new/n")
				for _, d := range []string{"cache/mod", "cache"} {
					if err := os.Chmod(filepath.Join(wt, d), 0o500); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
		{
			name:  "locked",
			spoil: func(t *testing.T, dir, wt string) { gitT(t, dir, "worktree", "lock", "--reason", "busy", wt) },
		},
		{
			name:   "directory already gone",
			branch: "ctxgraphd/F-1",
			spoil:  func(t *testing.T, dir, wt string) { remove(t, wt, "") },
		},
		{
			// What git leaves when it stops between recording the work
			// tree and writing its .git.
			name: "half-made: an empty directory without .git",
			spoil: func(t *testing.T, dir, wt string) {
				remove(t, wt, "")
				if err := os.Mkdir(wt, 0o700); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// What an earlier RemoveWorktree leaves when stopped: .git goes
			// last.
			name: "half-removed: only .git left",
			spoil: func(t *testing.T, dir, wt string) {
				entries, _ := os.ReadDir(wt)
				for _, e := range entries {
					if e.Name() != ".git" {
						remove(t, wt, e.Name())
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, dir, commit := lane(t, map[string]string{"a": "a", "d/b": "b"})
			write(t, dir, map[string]string{"a": "user's uncommitted work", "untracked": "u"})
			before := viewOf(t, dir)
			wt := filepath.Join(stateDir(t), "F-1")
			if err := r.AddWorktree(t.Context(), wt, "ctxgraphd/F-1", commit); err != nil {
				t.Fatal(err)
			}
			if tt.spoil != nil {
				tt.spoil(t, dir, wt)
			}
			for i := range 2 { // idempotent
				if err := r.RemoveWorktree(t.Context(), wt, tt.branch); err != nil {
					t.Fatalf("RemoveWorktree (call %d): %v", i+1, err)
				}
			}
			if _, err := os.Lstat(wt); !os.IsNotExist(err) {
				t.Errorf("%s is still there (%v)", wt, err)
			}
			if got := adminDirs(t, dir); len(got) != 0 {
				t.Errorf("administrative files left: %v", got)
			}
			if got, err := r.Worktrees(t.Context()); err != nil || len(got) != 0 {
				t.Errorf("Worktrees after removal: %v, %v", got, err)
			}
			_, exists, err := r.revParse(t.Context(), "refs/heads/ctxgraphd/F-1")
			if err != nil || exists != (tt.branch == "") {
				t.Errorf("branch exists %v (%v), want %v", exists, err, tt.branch == "")
			}
			if after := viewOf(t, dir); after != before {
				t.Errorf("the main work tree changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestRemoveWorktreeRefuses(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"a": "a"})
	wt := filepath.Join(stateDir(t), "F-1")
	if err := r.AddWorktree(t.Context(), wt, "ctxgraphd/F-1", commit); err != nil {
		t.Fatal(err)
	}
	lr := openRepo(t, wt)
	plain := filepath.Join(stateDir(t), "plain")
	write(t, plain, map[string]string{"x": "x"})
	// A directory the repository records, whose .git names another.
	other := filepath.Join(stateDir(t), "other")
	if err := r.AddWorktree(t.Context(), other, "ctxgraphd/other", commit); err != nil {
		t.Fatal(err)
	}
	write(t, other, map[string]string{".git": "gitdir: " + filepath.Join(dir, ".git", "worktrees", "F-1") + "\n"})
	// A record an agent could plant, of the directory holding the
	// repository, whose .git names the record back.
	holder := filepath.Dir(dir)
	write(t, dir, map[string]string{".git/worktrees/planted/gitdir": filepath.Join(holder, ".git") + "\n"})
	write(t, holder, map[string]string{".git": "gitdir: " + filepath.Join(dir, ".git", "worktrees", "planted") + "\n"})
	before := viewOf(t, dir)

	tests := []struct {
		name, dir, branch string
		r                 *Repo
		want              error
	}{
		{name: "the main work tree", dir: dir, r: r, want: ErrNotWorktree},
		{name: "the main work tree, from a linked one", dir: dir, r: lr, want: ErrNotWorktree},
		{name: "the work tree the Repo is open on", dir: wt, r: lr, want: ErrNotWorktree},
		{name: "a recorded directory holding the repository", dir: holder, r: r, want: ErrNotWorktree},
		{name: "the git directory", dir: filepath.Join(dir, ".git"), r: r, want: ErrNotWorktree},
		{name: "a directory that is no work tree", dir: plain, r: r, want: ErrNotWorktree},
		{name: "a recorded directory whose .git is another's", dir: other, r: r, want: ErrNotWorktree},
		{name: "the main work tree's branch", dir: filepath.Join(stateDir(t), "gone"), branch: "main", r: r},
		{name: "a bad branch name", dir: filepath.Join(stateDir(t), "gone"), branch: "a..b", r: r},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.RemoveWorktree(t.Context(), tt.dir, tt.branch)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("RemoveWorktree(%s): %v, want %v", tt.dir, err, tt.want)
			}
		})
	}
	if after := viewOf(t, dir); after != before {
		t.Errorf("the main work tree changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := state(t, dir, "a"); got != ModeFile+" a" {
		t.Errorf("the main work tree's file: %q", got)
	}
	if got := state(t, plain, "x"); got != ModeFile+" x" {
		t.Errorf("the plain directory's file: %q", got)
	}
	for _, d := range []string{wt, other} {
		if got := state(t, d, "a"); got != ModeFile+" a" {
			t.Errorf("%s/a: %q", d, got)
		}
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/main")); got != commit {
		t.Errorf("main at %s, want %s", got, commit)
	}
}

func TestWorktreesAndPrune(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"a": "a"})
	if got, err := r.Worktrees(t.Context()); err != nil || got != nil {
		t.Fatalf("Worktrees of a repository without any: %v, %v", got, err)
	}
	st := stateDir(t)
	kept, gone := filepath.Join(st, "kept"), filepath.Join(st, "gone")
	for _, wt := range []string{kept, gone} {
		if err := r.AddWorktree(t.Context(), wt, "lane/"+filepath.Base(wt), commit); err != nil {
			t.Fatal(err)
		}
	}
	detached := filepath.Join(st, "detached")
	gitT(t, dir, "worktree", "add", "-q", "--detach", detached, commit)
	remove(t, gone, "")

	got, err := r.Worktrees(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Worktree{
		{Dir: detached, Head: commit},
		{Dir: gone, Head: commit, Branch: "lane/gone", Prunable: true},
		{Dir: kept, Head: commit, Branch: "lane/kept"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Worktrees:\n got %+v\nwant %+v", got, want)
	}
	if err := r.PruneWorktrees(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err = r.Worktrees(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []Worktree{want[0], want[2]}; !reflect.DeepEqual(got, want) {
		t.Errorf("Worktrees after PruneWorktrees:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseWorktrees(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("a", 40)
	tests := []struct {
		name    string
		out     string
		want    []Worktree
		wantErr bool
	}{
		{name: "nothing"},
		{
			name: "main, branch, detached, locked and prunable, unborn, bare",
			out: "worktree /m\x00HEAD " + id + "\x00branch refs/heads/main\x00\x00" +
				"worktree /a b\x00HEAD " + id + "\x00detached\x00locked why\nnot\x00prunable gitdir file points to non-existent location\x00\x00" +
				"worktree /u\x00HEAD " + strings.Repeat("0", 40) + "\x00branch refs/heads/x/y\x00\x00" +
				"worktree /bare\x00bare\x00\x00",
			want: []Worktree{
				{Dir: "/m", Head: id, Branch: "main"},
				{Dir: "/a b", Head: id, Prunable: true},
				{Dir: "/u", Branch: "x/y"},
				{Dir: "/bare"},
			},
		},
		{name: "not NUL-terminated", out: "worktree /m", wantErr: true},
		{name: "attribute before worktree", out: "HEAD " + id + "\x00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWorktrees([]byte(tt.out))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseWorktrees(f *testing.F) {
	f.Add([]byte("worktree /m\x00HEAD 0123\x00branch refs/heads/main\x00\x00worktree /l\x00detached\x00prunable x\x00\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		all, err := parseWorktrees(out)
		if err != nil {
			return
		}
		if n := strings.Count(string(out), "worktree"); len(all) > n {
			t.Errorf("parsed %d work trees from %d \"worktree\" attributes", len(all), n)
		}
		for _, w := range all {
			if strings.Contains(w.Dir+w.Head+w.Branch, "\x00") {
				t.Errorf("a NUL in %+v", w)
			}
		}
	})
}

// A linked work tree is a project like the main one: a Repo open on it
// snapshots, compares, restores, lists, exports and commits, and what it
// writes the main Repo reads.
func TestOpenLinkedWorktree(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"a": "a", "d/b": "b"})
	_, base, _, err := r.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(stateDir(t), "F-1")
	if err := r.AddWorktree(t.Context(), wt, "ctxgraphd/F-1", commit); err != nil {
		t.Fatal(err)
	}
	lr, err := Open(t.Context(), Options{Dir: wt, Index: filepath.Join(stateDir(t), "lane.index")})
	if err != nil {
		t.Fatal(err)
	}
	if head, tree, branch, err := lr.Head(t.Context()); err != nil || head != commit || tree != base || branch != "refs/heads/ctxgraphd/F-1" {
		t.Fatalf("Head in the work tree: %s %s %s %v", head, tree, branch, err)
	}
	before := viewOf(t, dir)

	write(t, wt, map[string]string{"new.txt": "lane's work", "a": "a2"})
	tree, err := lr.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	changes, err := lr.Changes(t.Context(), base, tree)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Path+" "+c.Kind.String())
	}
	if want := []string{"a modified", "new.txt added"}; !slices.Equal(got, want) {
		t.Errorf("Changes in the work tree: %v, want %v", got, want)
	}
	files, err := lr.Files(t.Context(), tree)
	if err != nil || len(files) != 3 {
		t.Errorf("Files: %v, %v", files, err)
	}
	// The main Repo reads what the snapshot wrote.
	out := filepath.Join(stateDir(t), "export")
	if err := r.Export(t.Context(), tree, out); err != nil {
		t.Fatalf("the main Repo exporting the work tree's snapshot: %v", err)
	}
	if got := state(t, out, "new.txt"); got != ModeFile+" lane's work" {
		t.Errorf("exported new.txt: %q", got)
	}
	// Restore and Commit work there, on the work tree's own branch.
	if err := lr.Restore(t.Context(), base, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got := state(t, wt, "a"); got != ModeFile+" a" {
		t.Errorf("restored a: %q", got)
	}
	c, err := lr.Commit(t.Context(), tree, []string{commit}, "lane", daemon)
	if err != nil {
		t.Fatal(err)
	}
	if reset, err := lr.AdvanceBranch(t.Context(), commit, c); err != nil || !reset {
		t.Fatalf("AdvanceBranch in the work tree: %v, %v", reset, err)
	}
	if got, _ := r.Ref(t.Context(), "refs/heads/ctxgraphd/F-1"); got != c {
		t.Errorf("the lane's branch, seen from the main Repo: %s, want %s", got, c)
	}
	if after := viewOf(t, dir); after != before {
		t.Errorf("the main work tree changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestMergeTrees(t *testing.T) {
	t.Parallel()
	const three = "one\ntwo\nthree\nfour\nfive\n"
	tests := []struct {
		name          string
		base          map[string]string
		ours, theirs  map[string]string // written over base ("" deletes)
		wantConflicts []string
		want          map[string]string // files of a clean merge, path → content
	}{
		{
			name:   "disjoint changes",
			base:   map[string]string{"f": three, "g": "g\n"},
			ours:   map[string]string{"f": "ONE\ntwo\nthree\nfour\nfive\n", "o": "new\n"},
			theirs: map[string]string{"f": "one\ntwo\nthree\nfour\nFIVE\n", "g": ""},
			want:   map[string]string{"f": "ONE\ntwo\nthree\nfour\nFIVE\n", "o": "new\n"},
		},
		{
			name:          "same line changed both ways",
			base:          map[string]string{"f": three, "g": "g\n"},
			ours:          map[string]string{"f": "one\nTWO\nthree\nfour\nfive\n"},
			theirs:        map[string]string{"f": "one\n2\nthree\nfour\nfive\n", "g": "G\n"},
			wantConflicts: []string{"f"},
		},
		{
			name:          "deleted in ours, modified in theirs",
			base:          map[string]string{"f": three, "d/x": "x\n"},
			ours:          map[string]string{"d/x": ""},
			theirs:        map[string]string{"d/x": "changed\n"},
			wantConflicts: []string{"d/x"},
		},
		{
			name:          "added both ways with different content",
			base:          map[string]string{"f": three},
			ours:          map[string]string{"n": "ours\n", "m": "m1\n"},
			theirs:        map[string]string{"n": "theirs\n", "m": "m2\n"},
			wantConflicts: []string{"m", "n"},
		},
		{
			name:   "added both ways with the same content",
			base:   map[string]string{"f": three},
			ours:   map[string]string{"n": "same\n"},
			theirs: map[string]string{"n": "same\n"},
			want:   map[string]string{"f": three, "n": "same\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, dir, base := lane(t, tt.base)
			side := func(files map[string]string) string {
				gitT(t, dir, "checkout", "-q", "--detach", base)
				for p, c := range files {
					if c == "" {
						remove(t, dir, p)
					} else {
						write(t, dir, map[string]string{p: c})
					}
				}
				return commitAll(t, dir)
			}
			ours, theirs := side(tt.ours), side(tt.theirs)
			gitT(t, dir, "checkout", "-q", "main")
			before := viewOf(t, dir)
			tree, conflicts, err := r.MergeTrees(t.Context(), base, ours, theirs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(conflicts, tt.wantConflicts) {
				t.Errorf("conflicts %q, want %q", conflicts, tt.wantConflicts)
			}
			if checkID("tree", string(tree)) != nil {
				t.Fatalf("tree %q", tree)
			}
			if tt.want != nil {
				got := map[string]string{}
				for p, f := range treeFiles(t, dir, tree) {
					got[p] = strings.TrimPrefix(f, ModeFile+" ")
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("merged files:\n got %q\nwant %q", got, tt.want)
				}
			}
			if after := viewOf(t, dir); after != before {
				t.Errorf("MergeTrees changed the user's view:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// The merge is over the base given, not over the merge base of the
// histories: taking one commit of a lane (a cherry-pick) brings its change
// only, and trees merge as well as commits.
func TestMergeTreesOverTheBaseGiven(t *testing.T) {
	t.Parallel()
	r, dir, p0 := lane(t, map[string]string{"f": "1\n2\n3\n4\n5\n"})
	write(t, dir, map[string]string{"f": "1\nB\n3\n4\n5\n"})
	head := commitAll(t, dir)
	gitT(t, dir, "checkout", "-q", "-b", "lane", p0)
	write(t, dir, map[string]string{"g": "earlier lane commit\n"})
	l1 := commitAll(t, dir)
	write(t, dir, map[string]string{"f": "1\n2\n3\n4\nL\n"})
	l2 := commitAll(t, dir)
	gitT(t, dir, "checkout", "-q", "main")

	for _, form := range []string{"commits", "trees"} {
		base, ours, theirs := l1, head, l2
		if form == "trees" {
			base, ours, theirs = base+"^{tree}", ours+"^{tree}", theirs+"^{tree}"
			for _, p := range []*string{&base, &ours, &theirs} {
				*p = strings.TrimSpace(gitT(t, dir, "rev-parse", *p))
			}
		}
		tree, conflicts, err := r.MergeTrees(t.Context(), base, ours, theirs)
		if err != nil || conflicts != nil {
			t.Fatalf("%s: MergeTrees: %v, conflicts %v", form, err, conflicts)
		}
		want := map[string]string{"f": ModeFile + " 1\nB\n3\n4\nL\n"} // no g: that was l1's
		if got := treeFiles(t, dir, tree); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: merged %q, want %q", form, got, want)
		}
	}
}

// A merge driver is a command; one the repository's configuration defines
// does not run, whatever .gitattributes says.
func TestMergeTreesRunsNoDriverOfTheRepository(t *testing.T) {
	t.Parallel()
	r, dir, base := lane(t, map[string]string{"f": "1\n2\n3\n", ".gitattributes": "* merge=evil\n"})
	marker := filepath.Join(stateDir(t), "ran")
	gitT(t, dir, "config", "merge.evil.driver", "touch "+marker+"; cp %B %A")
	write(t, dir, map[string]string{"f": "1\n2\nours\n"})
	ours := commitAll(t, dir)
	gitT(t, dir, "checkout", "-q", "--detach", base)
	write(t, dir, map[string]string{"f": "theirs\n2\n3\n"})
	theirs := commitAll(t, dir)
	gitT(t, dir, "checkout", "-q", "main")
	tree, conflicts, err := r.MergeTrees(t.Context(), base, ours, theirs)
	if err != nil || conflicts != nil {
		t.Fatalf("MergeTrees: %v, conflicts %v", err, conflicts)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the repository's merge driver ran")
	}
	if got := treeFiles(t, dir, tree)["f"]; got != ModeFile+" theirs\n2\nours\n" {
		t.Errorf("merged f: %q", got)
	}
}

func TestMergeTreesRefuses(t *testing.T) {
	t.Parallel()
	r, dir, commit := lane(t, map[string]string{"f": "f"})
	blob := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD:f"))
	missing := strings.Repeat("1", 40)
	for _, args := range [][3]string{
		{"HEAD", commit, commit},
		{commit, commit[:10], commit},
		{commit, commit, blob},
		{commit, missing, commit},
	} {
		if _, _, err := r.MergeTrees(t.Context(), args[0], args[1], args[2]); err == nil {
			t.Errorf("MergeTrees%q: no error", args)
		}
	}
}

func TestFastForward(t *testing.T) {
	t.Parallel()
	base := map[string]string{"touched": "t\n", "deleted": "d\n", "kept": "k\n", "staged": "s\n"}
	move := map[string]string{"touched": "t2\n", "deleted": "", "added": "a\n"}
	tests := []struct {
		name       string
		moveFirst  bool                           // the branch is moved before FastForward
		user       func(t *testing.T, dir string) // the person's uncommitted work
		wantDirty  []string
		wantErr    error
		wantKept   map[string]string // work tree paths → state afterwards
		wantStaged string            // git diff --cached --name-only after the move, HEAD at to
	}{
		{name: "clean"},
		{name: "clean, the branch moved first", moveFirst: true},
		{
			name: "changes to untouched paths stay",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"staged": "s2\n", "kept": "k2\n", "untracked": "u\n"})
				gitT(t, dir, "add", "staged")
				write(t, dir, map[string]string{"staged": "s3\n"})
			},
			wantKept:   map[string]string{"staged": ModeFile + " s3\n", "kept": ModeFile + " k2\n", "untracked": ModeFile + " u\n"},
			wantStaged: "staged\n",
		},
		{
			// The index's stat data are stale, the content is not: no
			// change, and read-tree alone would refuse it.
			name: "a touched path rewritten as it was",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"touched": "t\n"})
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(filepath.Join(dir, "touched"), old, old); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:      "a touched path changed",
			user:      func(t *testing.T, dir string) { write(t, dir, map[string]string{"touched": "mine\n", "kept": "k2\n"}) },
			wantDirty: []string{"touched"},
		},
		{
			name:      "a touched path changed, the branch moved first",
			moveFirst: true,
			user:      func(t *testing.T, dir string) { write(t, dir, map[string]string{"touched": "mine\n"}) },
			wantDirty: []string{"touched"},
		},
		{
			name: "a touched path staged",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"deleted": "mine\n"})
				gitT(t, dir, "add", "deleted")
			},
			wantDirty: []string{"deleted"},
		},
		{
			name:      "a touched path deleted",
			user:      func(t *testing.T, dir string) { remove(t, dir, "touched") },
			wantDirty: []string{"touched"},
		},
		{
			name:      "an untracked file where the move adds one",
			user:      func(t *testing.T, dir string) { write(t, dir, map[string]string{"added": "mine\n"}) },
			wantDirty: []string{"added"},
		},
		{
			name: "HEAD moved by somebody else",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"other": "o\n"})
				gitT(t, dir, "add", "other")
				gitT(t, dir, "commit", "-q", "-m", "user")
			},
			wantErr: ErrRefChanged,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, dir, from := lane(t, base)
			// The lane's commit, made elsewhere: the main work tree does
			// not see it.
			other := filepath.Join(stateDir(t), "lane")
			if err := r.AddWorktree(t.Context(), other, "lane", from); err != nil {
				t.Fatal(err)
			}
			for p, c := range move {
				if c == "" {
					remove(t, other, p)
				} else {
					write(t, other, map[string]string{p: c})
				}
			}
			to := commitAll(t, other)
			if tt.user != nil {
				tt.user(t, dir)
			}
			if tt.moveFirst {
				if err := r.UpdateRef(t.Context(), "refs/heads/main", to, from); err != nil {
					t.Fatal(err)
				}
			}
			if tt.wantDirty != nil {
				// An untouched file whose index stat data are stale: a
				// refresh before the refusal would write the index.
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(filepath.Join(dir, "kept"), old, old); err != nil {
					t.Fatal(err)
				}
			}
			before := viewOf(t, dir)
			beforeFiles := files(t, dir, map[string]bool{".git": true})

			err := r.FastForward(t.Context(), from, to)
			if tt.wantDirty != nil || tt.wantErr != nil {
				var de *DirtyError
				switch {
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Fatalf("FastForward: %v, want %v", err, tt.wantErr)
				case tt.wantDirty != nil && (!errors.As(err, &de) || !errors.Is(err, ErrDirty)):
					t.Fatalf("FastForward: %v, want a DirtyError", err)
				case de != nil && !slices.Equal(de.Paths, tt.wantDirty):
					t.Errorf("dirty paths %q, want %q", de.Paths, tt.wantDirty)
				}
				if after := viewOf(t, dir); after != before {
					t.Errorf("a refused FastForward changed the user's view:\nbefore %+v\nafter  %+v", before, after)
				}
				if after := files(t, dir, map[string]bool{".git": true}); !reflect.DeepEqual(after, beforeFiles) {
					t.Errorf("a refused FastForward changed the work tree:\nbefore %q\nafter  %q", beforeFiles, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.moveFirst {
				if err := r.UpdateRef(t.Context(), "refs/heads/main", to, from); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{"touched": ModeFile + " t2\n", "deleted": "", "added": ModeFile + " a\n", "kept": ModeFile + " k\n"}
			for p, s := range tt.wantKept {
				want[p] = s
			}
			for p, s := range want {
				if got := state(t, dir, p); got != s {
					t.Errorf("%s: %q, want %q", p, got, s)
				}
			}
			if got := gitT(t, dir, "diff", "--cached", "--name-only"); got != tt.wantStaged {
				t.Errorf("staged after the move: %q, want %q", got, tt.wantStaged)
			}
			// Nothing but the person's own work is left to commit.
			var changed []string
			for _, line := range strings.Split(strings.TrimRight(gitT(t, dir, "status", "--porcelain", "--untracked-files=all"), "\n"), "\n") {
				if line != "" {
					changed = append(changed, line[3:])
				}
			}
			var wantChanged []string
			for p := range tt.wantKept {
				wantChanged = append(wantChanged, p)
			}
			slices.Sort(wantChanged)
			if !slices.Equal(changed, wantChanged) {
				t.Errorf("git status names %q, want %q", changed, wantChanged)
			}
		})
	}
}

func TestFastForwardRefusesBadInput(t *testing.T) {
	t.Parallel()
	r, _, commit := lane(t, map[string]string{"f": "f"})
	for _, args := range [][2]string{{"HEAD", commit}, {commit, "main"}, {"", commit}} {
		if err := r.FastForward(t.Context(), args[0], args[1]); err == nil || !strings.Contains(err.Error(), "not an object id") {
			t.Errorf("FastForward%q: %v", args, err)
		}
	}
	if err := r.FastForward(t.Context(), commit, commit); err != nil {
		t.Errorf("FastForward to where it is: %v", err)
	}
}

func TestProjectRel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ prefix, p, want string }{
		{"", "a/b", "a/b"},
		{"sub/", "sub/a", "a"},
		{"sub/", "other/a", "../other/a"},
		{"x/y/", "x/z", "../z"},
	} {
		r := &Repo{prefix: tt.prefix}
		if got := r.projectRel(tt.p); got != tt.want {
			t.Errorf("prefix %q: projectRel(%q) = %q, want %q", tt.prefix, tt.p, got, tt.want)
		}
	}
}
