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
			if err := r.AddClone(t.Context(), other, "lane", from); err != nil {
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
			// Its objects, the repository's too (the daemon's snapshots of
			// a lane write them there: Options.Objects).
			gitT(t, other, "push", "-q", dir, "HEAD:refs/heads/lane-objects")
			gitT(t, dir, "update-ref", "-d", "refs/heads/lane-objects")
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
