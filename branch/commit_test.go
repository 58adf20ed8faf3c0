package branch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// committedFixture is a project with a first commit by its user.
func committedFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	f.write(map[string]string{"README.md": "readme\n", "tests/a.sh": "grep -q login src/login.go\n", "src/old.txt": "old\n"})
	return f, f.commitAll("the user's first commit")
}

func verdictOf(tree, base gitrepo.Tree, baseHead string) Verdict {
	return Verdict{
		Feature: &progress.Feature{ID: "F-001", Title: "log in", Test: "sh tests/a.sh"},
		Attempt: 2, Run: "run-000009", Trace: "tr-42",
		Tree: tree, Base: base, BaseHead: baseHead,
	}
}

// On a tree that held nothing but HEAD when the feature began, the branch
// takes exactly the tested tree, the user's index follows, and the tested
// ref names the commit.
func TestCommitOnTheBranch(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n", "README.md": "readme, with login\n"})
	f.remove("src/old.txt")
	tree := f.snapshot()

	c, err := Commit(t.Context(), f.repo, verdictOf(tree, base, head))
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "main" || c.OffBranch != "" || c.Ref != TestedRef("F-001") || c.Ref != "refs/ctxgraphd/tested/F-001" || c.Commit == "" {
		t.Fatalf("committed %+v, want on main under refs/ctxgraphd/tested/F-001", c)
	}
	if got := f.git("rev-parse", "refs/heads/main"); got != c.Commit {
		t.Errorf("main is at %s, want %s", got, c.Commit)
	}
	if got := f.git("rev-parse", c.Ref); got != c.Commit {
		t.Errorf("%s is at %s, want %s", c.Ref, got, c.Commit)
	}
	if got := f.git("rev-parse", c.Commit+"^{tree}"); got != string(tree) {
		t.Errorf("the commit's tree is %s, want the tested tree %s", got, tree)
	}
	if got := f.git("rev-parse", c.Commit+"^"); got != head {
		t.Errorf("the commit's parent is %s, want %s", got, head)
	}
	msg := f.git("log", "-1", "--format=%B", c.Commit)
	for _, want := range []string{"F-001: log in\n", "sh tests/a.sh", "ctxgraphd-feature: F-001", "ctxgraphd-attempt: 2", "ctxgraphd-run: run-000009", "ctxgraphd-verdict: tr-42"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not hold %q", msg, want)
		}
	}
	if who := f.git("log", "-1", "--format=%an <%ae> / %cn <%ce>", c.Commit); who != "ctxgraphd <ctxgraphd@localhost> / ctxgraphd <ctxgraphd@localhost>" {
		t.Errorf("author / committer = %q", who)
	}
	// The user's index follows the branch: nothing left to commit.
	if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status after the commit:\n%s", st)
	}
}

// Someone else's work keeps the branch where it is: the commit is made all
// the same, under the tested ref, and OffBranch says why.
func TestCommitLeavesTheBranchAlone(t *testing.T) {
	tests := []struct {
		name string
		// before runs before the feature's work begins, after before its
		// commit; both as the user.
		before, after func(f *fixture)
		why           string
	}{
		{name: "the user had uncommitted changes when the feature began",
			before: func(f *fixture) { f.write(map[string]string{"README.md": "the user's edit\n"}) },
			why:    "uncommitted changes"},
		{name: "the user committed meanwhile over the feature's change",
			after: func(f *fixture) {
				f.write(map[string]string{"README.md": "the user's readme\n"})
				f.git("commit", "-q", "-am", "the user's own commit")
				f.write(map[string]string{"README.md": "the agent's readme\n"}) // written over, after
			},
			why: "does not hold README.md as the new commits do"},
		{name: "the user committed meanwhile, not in the work tree",
			after: func(f *fixture) {
				notes := filepath.Join(f.t.TempDir(), "notes")
				if err := os.WriteFile(notes, []byte("notes\n"), 0o644); err != nil {
					f.t.Fatal(err)
				}
				blob := f.git("hash-object", "-w", notes)
				f.git("update-index", "--add", "--cacheinfo", "100644,"+blob+",NOTES.md")
				tree := f.git("write-tree")
				c := f.git("commit-tree", tree, "-p", "HEAD", "-m", "made elsewhere")
				f.git("update-ref", "refs/heads/main", c)
				f.git("reset", "-q")
			},
			why: "does not hold NOTES.md as the new commits do"},
		{name: "the user moved the branch back",
			before: func(f *fixture) {
				f.write(map[string]string{"NOTES.md": "notes\n"})
				f.git("add", "NOTES.md")
				f.git("commit", "-q", "-m", "the user's own commit")
			},
			after: func(f *fixture) { f.git("update-ref", "refs/heads/main", "HEAD^") },
			why:   "moved back or rewritten"},
		{name: "the user had uncommitted changes when the feature began, then committed",
			before: func(f *fixture) { f.write(map[string]string{"README.md": "the user's edit\n"}) },
			after: func(f *fixture) {
				f.write(map[string]string{"NOTES.md": "notes\n"})
				f.git("add", "NOTES.md")
				f.git("commit", "-q", "-m", "the user's own commit")
			},
			why: "uncommitted changes"},
		{name: "HEAD is detached",
			after: func(f *fixture) { f.git("checkout", "-q", "--detach") },
			why:   "detached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := committedFixture(t)
			if tt.before != nil {
				tt.before(f)
			}
			head := f.git("rev-parse", "HEAD")
			base := f.snapshot()
			f.write(map[string]string{"src/login.go": "package src // login\n"})
			if tt.after != nil {
				tt.after(f)
			}
			branchBefore := f.git("rev-parse", "HEAD")
			statusBefore := f.git("status", "--porcelain")
			tree := f.snapshot()
			c, err := Commit(t.Context(), f.repo, verdictOf(tree, base, head))
			if err != nil {
				t.Fatal(err)
			}
			if c.Branch != "" || !strings.Contains(c.OffBranch, tt.why) {
				t.Errorf("committed %+v, want not on the branch because %q", c, tt.why)
			}
			if got := f.git("rev-parse", "HEAD"); got != branchBefore {
				t.Errorf("HEAD moved to %s", got)
			}
			if got := f.git("status", "--porcelain"); got != statusBefore {
				t.Errorf("git status changed:\n%s\nwant:\n%s", got, statusBefore)
			}
			if got := f.git("rev-parse", TestedRef("F-001")); got != c.Commit {
				t.Errorf("tested ref at %s, want %s", got, c.Commit)
			}
			if got := f.git("rev-parse", c.Commit+"^{tree}"); got != string(tree) {
				t.Errorf("the commit's tree is %s, want the tested tree", got)
			}
		})
	}
}

// A person who commits while a feature is worked on does not keep it off
// the branch: the feature's commit goes on top of theirs, which stays as
// it is, and holds exactly the tested tree, which held their change.
func TestCommitOnTopOfAPersonsCommits(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	f.write(map[string]string{"NOTES.md": "notes\n", "README.md": "the user's readme\n"})
	f.git("add", "NOTES.md", "README.md")
	f.git("commit", "-q", "-m", "the user's own commit")
	theirs := f.git("rev-parse", "HEAD")
	f.write(map[string]string{"src/login.go": "package src // login, finished\n"})
	tree := f.snapshot()

	c, err := Commit(t.Context(), f.repo, verdictOf(tree, base, head))
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "main" || c.OffBranch != "" {
		t.Fatalf("committed %+v, want on main", c)
	}
	if got := f.git("rev-parse", "main"); got != c.Commit {
		t.Errorf("main is at %s, want the feature's commit %s", got, c.Commit)
	}
	if got := f.git("rev-parse", c.Commit+"^"); got != theirs {
		t.Errorf("the feature's commit sits on %s, want the user's commit %s", got, theirs)
	}
	if got := f.git("rev-parse", theirs+"^"); got != head {
		t.Errorf("the user's commit now sits on %s, want %s: it was rewritten", got, head)
	}
	if got := f.git("rev-parse", c.Commit+"^{tree}"); got != string(tree) {
		t.Errorf("the commit's tree is %s, want the tested tree %s", got, tree)
	}
	if got := f.git("diff", "--name-only", theirs, c.Commit); got != "src/login.go" {
		t.Errorf("the feature's commit changes %q, want only its own src/login.go", got)
	}
	if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status after the commit:\n%s", st)
	}
}

// A person's commit made after the tree was tested is one the tested tree
// holds as HEAD had it before: put on the branch, the feature's commit
// would undo it under the feature's name, so the branch is left alone.
// That holds for a path the daemon's snapshots leave out (.claude/, or
// outside the project directory), in no list of the project's changes,
// and for a change they made before the test and reverted after it, which
// leaves the branch's tree as it was.
func TestCommitDoesNotUndoAPersonsCommitItDidNotSee(t *testing.T) {
	for _, tt := range []struct {
		name string
		// before runs before the feature begins, during before the tree
		// is tested, after once it is; all as the user.
		before, during, after func(f *fixture)
		file                  string
	}{
		{name: "a path the daemon does not snapshot",
			before: func(f *fixture) {
				f.write(map[string]string{".claude/progress/keep.txt": "v1\n"})
				f.git("add", "-f", ".claude/progress/keep.txt")
				f.git("commit", "-q", "-m", "the user's first keep")
			},
			after: func(f *fixture) {
				f.write(map[string]string{".claude/progress/keep.txt": "v2\n"})
				f.git("commit", "-q", "-am", "the user's second keep")
			},
			file: ".claude/progress/keep.txt"},
		{name: "a change reverted after the test",
			during: func(f *fixture) {
				f.write(map[string]string{"README.md": "the user's readme\n"})
				f.git("commit", "-q", "-am", "the user's own commit")
			},
			after: func(f *fixture) { f.git("revert", "--no-edit", "HEAD") },
			file:  "README.md"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := committedFixture(t)
			if tt.before != nil {
				tt.before(f)
			}
			head := f.git("rev-parse", "HEAD")
			base := f.snapshot()
			f.write(map[string]string{"src/login.go": "package src // login\n"})
			if tt.during != nil {
				tt.during(f)
			}
			tree := f.snapshot() // the tested tree
			tt.after(f)
			theirs := f.git("rev-parse", "HEAD")

			c, err := Commit(t.Context(), f.repo, verdictOf(tree, base, head))
			if err != nil {
				t.Fatal(err)
			}
			if c.Branch != "" || !strings.Contains(c.OffBranch, "does not hold "+tt.file+" as the new commits do") {
				t.Errorf("committed %+v, want off the branch, naming %s", c, tt.file)
			}
			if got := f.git("rev-parse", "main"); got != theirs {
				t.Errorf("main moved to %s, want the user's commit %s", got, theirs)
			}
		})
	}
}

// A tested commit is sat on only when the branch does not hold it and it
// was made on the history the feature's work began from: one the branch
// holds is HEAD's past, one of a history the branch left would bring that
// history back. Either way the tree held more than HEAD, which is what the
// commit's why says.
func TestCommitSitsOnNoTestedCommitTheBranchHoldsOrLeft(t *testing.T) {
	notInTheWorkTree := func(f *fixture, parents ...string) string {
		notes := filepath.Join(t.TempDir(), "notes")
		if err := os.WriteFile(notes, []byte("notes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		blob := f.git("hash-object", "-w", notes)
		f.git("update-index", "--add", "--cacheinfo", "100644,"+blob+",NOTES.md")
		args := []string{"commit-tree", f.git("write-tree"), "-m", "made elsewhere"}
		for _, p := range parents {
			args = append(args, "-p", p)
		}
		c := f.git(args...)
		f.git("reset", "-q")
		return c
	}
	for _, tt := range []struct {
		name string
		// moved, after F-001's verdict, moves main without touching the
		// work tree and returns where; F-002's work began there, or, with
		// beganBefore, where main was before F-001.
		onBranch, beganBefore bool
		moved                 func(f *fixture, c1 string) string
	}{
		{"F-001 is on the branch", true, false, func(f *fixture, c1 string) string { return notInTheWorkTree(f, c1) }},
		{"the branch left F-001's history", false, false, func(f *fixture, _ string) string { return notInTheWorkTree(f) }},
		{"a person took F-001 on the branch meanwhile", false, true, func(f *fixture, c1 string) string { return c1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, head := committedFixture(t)
			base := f.snapshot()
			f.write(map[string]string{"src/login.go": "package src // login\n"})
			first := f.snapshot()
			if !tt.onBranch {
				f.git("checkout", "-q", "--detach")
			}
			c1, err := Commit(t.Context(), f.repo, verdictOf(first, base, head))
			if err != nil || (c1.Branch != "") != tt.onBranch {
				t.Fatalf("F-001 committed %+v (%v)", c1, err)
			}
			f.git("checkout", "-q", "main")
			moved := tt.moved(f, c1.Commit)
			f.git("update-ref", "refs/heads/main", moved)

			began := f.snapshot() // F-001's tree: the work tree lacks NOTES.md
			if began != first {
				t.Fatalf("the work tree is %s, want F-001's %s", began, first)
			}
			f.write(map[string]string{"src/logout.go": "package src // logout\n"})
			baseHead := moved
			if tt.beganBefore {
				baseHead = head
			}
			v := verdictOf(f.snapshot(), began, baseHead)
			v.Feature = &progress.Feature{ID: "F-002", Title: "log out", Test: "sh tests/b.sh"}
			c2, err := Commit(t.Context(), f.repo, v)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.git("rev-parse", c2.Commit+"^"); got != moved {
				t.Errorf("F-002's commit sits on %s, want HEAD %s", got, moved)
			}
			if c2.Branch != "" || !strings.Contains(c2.OffBranch, "uncommitted changes") {
				t.Errorf("F-002 committed %+v, want off the branch: the tree held more than HEAD", c2)
			}
		})
	}
}

// A feature tested again (after a person's retry) gets its new commit
// under the same ref.
func TestCommitSameFeatureTwice(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	first, err := Commit(t.Context(), f.repo, verdictOf(f.snapshot(), base, head))
	if err != nil || first.Branch != "main" {
		t.Fatalf("first commit %+v, %v", first, err)
	}
	base = f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login, fixed\n"})
	second, err := Commit(t.Context(), f.repo, verdictOf(f.snapshot(), base, first.Commit))
	if err != nil {
		t.Fatalf("second commit of the same feature: %v", err)
	}
	if second.Commit == first.Commit || second.Branch != "main" {
		t.Fatalf("second commit %+v", second)
	}
	if got := f.git("rev-parse", TestedRef("F-001")); got != second.Commit {
		t.Errorf("tested ref at %s, want the second commit %s", got, second.Commit)
	}
	if got := f.git("rev-parse", second.Commit+"^"); got != first.Commit {
		t.Errorf("the second commit's parent is %s, want the first %s", got, first.Commit)
	}
}

// A blocked feature's work is kept under its blocked ref and the work tree
// put back as it was when the feature began, for exactly the paths the
// feature changed: what the user changed before is theirs and stays.
func TestPreserve(t *testing.T) {
	f, head := committedFixture(t)
	f.write(map[string]string{"README.md": "the user's uncommitted edit\n", "src/a.txt": "a\n"})
	base := f.snapshot()
	// The feature's work.
	f.write(map[string]string{"src/a.txt": "a, changed\n", "src/new/n.txt": "new\n"})
	f.remove("src/old.txt")
	now := f.snapshot()

	commit, restored, err := Preserve(t.Context(), f.repo, "F-002", "3 of 3 attempts failed; last: the test failed", base, head)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"src/a.txt", "src/new/n.txt", "src/old.txt"}; !slices.Equal(restored, want) {
		t.Errorf("restored %q, want %q", restored, want)
	}
	if got := f.git("rev-parse", BlockedRef("F-002")); commit == "" || got != commit || BlockedRef("F-002") != "refs/ctxgraphd/blocked/F-002" {
		t.Fatalf("blocked ref at %s, commit %s", got, commit)
	}
	if got := f.git("rev-parse", commit+"^{tree}"); got != string(now) {
		t.Errorf("the kept commit's tree is %s, want the work tree with the feature's work %s", got, now)
	}
	if got := f.git("rev-parse", commit+"^"); got != head {
		t.Errorf("the kept commit's parent is %s, want HEAD %s", got, head)
	}
	msg := f.git("log", "-1", "--format=%B", commit)
	for _, want := range []string{"F-002: blocked", "the test failed", "ctxgraphd-feature: F-002", "ctxgraphd-verdict: blocked"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not hold %q", msg, want)
		}
	}
	for p, want := range map[string]string{
		"src/a.txt": "a\n", "src/new/n.txt": "<absent>", "src/old.txt": "old\n",
		"README.md": "the user's uncommitted edit\n",
	} {
		if got := f.read(p); got != want {
			t.Errorf("%s = %q after Preserve, want %q", p, got, want)
		}
	}
	if got := f.snapshot(); got != base {
		t.Error("the work tree is not back to the feature's base")
	}
	if got := f.git("rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	// Nothing changed since base: nothing to keep, the ref stays.
	c2, r2, err := Preserve(t.Context(), f.repo, "F-002", "again", base, head)
	if err != nil || c2 != "" || len(r2) != 0 {
		t.Errorf("Preserve of an unchanged tree = %q, %q, %v", c2, r2, err)
	}
	if got := f.git("rev-parse", BlockedRef("F-002")); got != commit {
		t.Errorf("blocked ref moved to %s", got)
	}
}

// In a repository without a commit yet, the tested tree is its first
// commit, without a parent, and the unborn branch takes it.
func TestCommitFirstCommitOfARepository(t *testing.T) {
	f := newFixture(t)
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	tree := f.snapshot()
	c, err := Commit(t.Context(), f.repo, verdictOf(tree, f.repo.EmptyTree(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "main" || c.OffBranch != "" {
		t.Fatalf("committed %+v, want on main", c)
	}
	if got := f.git("rev-list", "--parents", "-n", "1", c.Commit); got != c.Commit {
		t.Errorf("rev-list --parents = %q, want the commit alone (no parent)", got)
	}
	if got := f.git("rev-parse", "refs/heads/main"); got != c.Commit {
		t.Errorf("main is at %s, want %s", got, c.Commit)
	}
}

// A failure of the repository after the commit was made is an error of
// Commit, not taken for the branch having moved: the user's index locked
// by a git of their own makes the index reset fail.
func TestCommitReportsARepositoryFailure(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	tree := f.snapshot()
	lock := filepath.Join(f.dir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(lock)
	c, err := Commit(t.Context(), f.repo, verdictOf(tree, base, head))
	if err == nil || errors.Is(err, gitrepo.ErrRefChanged) || !strings.Contains(err.Error(), "index") {
		t.Fatalf("Commit with the index locked = %+v, %v; want the index failure", c, err)
	}
	if c.OffBranch != "" {
		t.Errorf("OffBranch = %q, want no reason made up for an error", c.OffBranch)
	}
	if got := f.git("rev-parse", TestedRef("F-001")); c.Commit == "" || got != c.Commit {
		t.Errorf("tested ref at %s, commit %q: want the commit kept under it", got, c.Commit)
	}
}

// Preserve in a repository without a commit keeps the work in a commit
// without a parent.
func TestPreserveWithoutACommit(t *testing.T) {
	f := newFixture(t)
	f.write(map[string]string{"README.md": "the user's\n"})
	base := f.snapshot()
	f.write(map[string]string{"src/a.txt": "a\n"})
	commit, restored, err := Preserve(t.Context(), f.repo, "F-001", "blocked", base, "")
	if err != nil || commit == "" || !slices.Equal(restored, []string{"src/a.txt"}) {
		t.Fatalf("Preserve = %q, %q, %v", commit, restored, err)
	}
	if got := f.git("rev-list", "--parents", "-n", "1", commit); got != commit {
		t.Errorf("rev-list --parents = %q, want the commit alone (no parent)", got)
	}
	if f.read("src/a.txt") != "<absent>" || f.read("README.md") != "the user's\n" {
		t.Error("the work tree is not back to the feature's base")
	}
}

// A feature whose work began on the code of a feature before it that the
// branch did not take goes on that feature's tested commit: its commit
// holds its own change alone, the branch stays where it is, and why says
// which commit to merge to take both.
func TestCommitOnTheTestedCommitItBeganOn(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	first := f.snapshot()
	f.git("checkout", "-q", "--detach") // keeps F-001 off the branch
	c1, err := Commit(t.Context(), f.repo, verdictOf(first, base, head))
	if err != nil || c1.Branch != "" {
		t.Fatalf("F-001 committed %+v (%v), want off the branch", c1, err)
	}
	f.git("checkout", "-q", "main")

	f.write(map[string]string{"src/logout.go": "package src // logout\n"})
	second := f.snapshot()
	v := verdictOf(second, first, head)
	v.Feature = &progress.Feature{ID: "F-002", Title: "log out", Test: "sh tests/b.sh"}
	c2, err := Commit(t.Context(), f.repo, v)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Branch != "" || !strings.Contains(c2.OffBranch, "began on F-001's tested commit") || !strings.Contains(c2.OffBranch, "merge "+TestedRef("F-002")) {
		t.Errorf("F-002 committed %+v, want off the branch, saying it began on F-001's tested commit", c2)
	}
	if got := f.git("rev-parse", c2.Commit+"^"); got != c1.Commit {
		t.Errorf("F-002's commit sits on %s, want F-001's tested commit %s", got, c1.Commit)
	}
	if got := f.git("diff", "--name-only", c1.Commit, c2.Commit); got != "src/logout.go" {
		t.Errorf("F-002's commit changes %q, want only its own src/logout.go", got)
	}
	if got := f.git("rev-parse", "main"); got != head {
		t.Errorf("main moved to %s", got)
	}

	// A person's uncommitted work it began on is not a tested commit: the
	// commit goes on HEAD, as before.
	g, gHead := committedFixture(t)
	g.write(map[string]string{"README.md": "the user's edit\n"})
	gBase := g.snapshot()
	g.write(map[string]string{"src/login.go": "package src // login\n"})
	c, err := Commit(t.Context(), g.repo, verdictOf(g.snapshot(), gBase, gHead))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.git("rev-parse", c.Commit+"^"); got != gHead || !strings.Contains(c.OffBranch, "uncommitted changes") {
		t.Errorf("on a person's uncommitted work: parent %s (want %s), %q", got, gHead, c.OffBranch)
	}

	// A feature blocked after it began on F-002's code: its kept work sits
	// on F-002's tested commit, and holds its own work alone.
	f.write(map[string]string{"src/profile.go": "package src // profile, broken\n"})
	kept, restored, err := Preserve(t.Context(), f.repo, "F-003", "blocked", second, head)
	if err != nil || !slices.Equal(restored, []string{"src/profile.go"}) {
		t.Fatalf("Preserve = %q, %q, %v", kept, restored, err)
	}
	if got := f.git("rev-parse", kept+"^"); got != c2.Commit {
		t.Errorf("F-003's kept work sits on %s, want F-002's tested commit %s", got, c2.Commit)
	}
}

// A feature whose work began on a tested commit the branch did not take
// goes on that commit even when a person's commit moved the branch while
// it was worked on: what it began on is read from the commit it began at,
// not from HEAD.
func TestCommitOnTheTestedCommitItBeganOnAfterTheBranchMoved(t *testing.T) {
	f, head := committedFixture(t)
	base := f.snapshot()
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	first := f.snapshot()
	f.git("checkout", "-q", "--detach") // keeps F-001 off the branch
	c1, err := Commit(t.Context(), f.repo, verdictOf(first, base, head))
	if err != nil || c1.Branch != "" {
		t.Fatalf("F-001 committed %+v (%v), want off the branch", c1, err)
	}
	f.git("checkout", "-q", "main")
	// F-002's work begins on F-001's code; then a person commits.
	f.write(map[string]string{"NOTES.md": "notes\n"})
	f.git("add", "NOTES.md")
	f.git("commit", "-q", "-m", "the user's own commit")
	f.write(map[string]string{"src/logout.go": "package src // logout\n"})
	v := verdictOf(f.snapshot(), first, head)
	v.Feature = &progress.Feature{ID: "F-002", Title: "log out", Test: "sh tests/b.sh"}
	c2, err := Commit(t.Context(), f.repo, v)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.git("rev-parse", c2.Commit+"^"); got != c1.Commit {
		t.Errorf("F-002's commit sits on %s, want F-001's tested commit %s", got, c1.Commit)
	}
	if c2.Branch != "" || !strings.Contains(c2.OffBranch, "began on F-001's tested commit") {
		t.Errorf("F-002 committed %+v, want off the branch, saying it began on F-001's tested commit", c2)
	}
}

// A blocked feature's work put back leaves what a person made of HEAD
// meanwhile, however they made it (a commit, an amend), and leaves alone a file
// on which the work tree held uncommitted work of theirs when the feature
// began, which neither HEAD nor the tree from before holds whole.
func TestPreserveLeavesAPersonsHistoryAndUncommittedWork(t *testing.T) {
	t.Run("a commit", func(t *testing.T) {
		f, head := committedFixture(t)
		base := f.snapshot()
		f.write(map[string]string{"src/a.txt": "the agent's\n", "README.md": "the agent's readme\n"})
		f.write(map[string]string{"README.md": "the user's readme\n", "NOTES.md": "notes\n"})
		f.git("add", "README.md", "NOTES.md")
		f.git("commit", "-q", "-m", "the user's own commit")
		f.write(map[string]string{"src/a.txt": "the agent's, later\n"})
		if _, _, err := Preserve(t.Context(), f.repo, "F-002", "blocked", base, head); err != nil {
			t.Fatal(err)
		}
		if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Errorf("git status after Preserve, want the work tree at HEAD:\n%s", st)
		}
		if got := f.git("show", BlockedRef("F-002")+":src/a.txt"); got != "the agent's, later" {
			t.Errorf("the kept work holds src/a.txt = %q", got)
		}
	})
	t.Run("a commit, then the agent's change to a file of it", func(t *testing.T) {
		f, head := committedFixture(t)
		base := f.snapshot()
		f.write(map[string]string{"src/a.txt": "the agent's\n"})
		f.write(map[string]string{"README.md": "the user's readme\n"})
		f.git("commit", "-q", "-am", "the user's own commit")
		f.write(map[string]string{"README.md": "the agent's readme, over the user's\n"})
		_, restored, err := Preserve(t.Context(), f.repo, "F-002", "blocked", base, head)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"README.md", "src/a.txt"}; !slices.Equal(restored, want) {
			t.Errorf("restored %q, want %q", restored, want)
		}
		if got := f.read("README.md"); got != "the user's readme\n" {
			t.Errorf("README.md = %q, want it as the user committed it", got)
		}
		if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Errorf("git status after Preserve, want the work tree at HEAD:\n%s", st)
		}
		if got := f.git("show", BlockedRef("F-002")+":README.md"); got != "the agent's readme, over the user's" {
			t.Errorf("the kept work holds README.md = %q", got)
		}
	})
	t.Run("amend", func(t *testing.T) {
		f, head := committedFixture(t)
		base := f.snapshot()
		f.write(map[string]string{"src/a.txt": "the agent's\n"})
		f.write(map[string]string{"README.md": "amended\n"})
		f.git("commit", "-q", "--amend", "-am", "the user's first commit, amended")
		if _, _, err := Preserve(t.Context(), f.repo, "F-002", "blocked", base, head); err != nil {
			t.Fatal(err)
		}
		if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Errorf("git status after Preserve, want the work tree at the amended HEAD:\n%s", st)
		}
	})
	t.Run("uncommitted at the start, then part of it committed", func(t *testing.T) {
		f, head := committedFixture(t)
		f.write(map[string]string{"README.md": "UNCOMMITTED\nreadme\n"})
		base := f.snapshot()
		f.write(map[string]string{"src/a.txt": "the agent's\n"})
		f.write(map[string]string{"NOTES.md": "notes\n"})
		f.git("add", "NOTES.md")
		f.git("commit", "-q", "-m", "the user's own commit")
		f.write(map[string]string{"README.md": "UNCOMMITTED\nreadme, committed part\n"})
		f.git("commit", "-q", "-am", "the user's part") // commits both lines here; the start held line 1 uncommitted
		f.write(map[string]string{"README.md": "UNCOMMITTED again\nreadme, committed part\n"})
		_, restored, err := Preserve(t.Context(), f.repo, "F-002", "blocked", base, head)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.read("README.md"); got != "UNCOMMITTED again\nreadme, committed part\n" {
			t.Errorf("README.md = %q, want it left as it was", got)
		}
		if slices.Contains(restored, "README.md") || !slices.Contains(restored, "src/a.txt") || !slices.Contains(restored, "NOTES.md") {
			t.Errorf("restored %q, want the feature's file and NOTES.md (to HEAD's), not README.md", restored)
		}
		if got := f.read("NOTES.md"); got != "notes\n" {
			t.Errorf("NOTES.md = %q, want the user's committed file", got)
		}
	})
}
