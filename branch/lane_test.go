package branch

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// candidateFixture is a committed project and a candidate tree on its HEAD
// (the lane's change, src/login.go, merged onto the branch), with the
// project's work tree left at HEAD, as a lane leaves it.
func candidateFixture(t *testing.T) (f *fixture, head string, candidate gitrepo.Tree) {
	t.Helper()
	f, head = committedFixture(t)
	f.write(map[string]string{"src/login.go": "package src // login\n"})
	candidate = f.snapshot()
	f.remove("src/login.go")
	return f, head, candidate
}

// A lane's candidate, with the branch still where the lane's claim was
// judged, lands: committed on onto under the tested ref, the project's
// work tree and index brought forward, then the branch moved.
func TestCommitLaneLands(t *testing.T) {
	f, head, candidate := candidateFixture(t)
	f.write(map[string]string{"NOTES.md": "a person's notes, not in the commit's way\n"})

	c, err := CommitLane(t.Context(), f.repo, verdictOf(candidate, "", ""), head)
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "main" || c.OffBranch != "" || c.Ref != TestedRef("F-001") || c.Commit == "" {
		t.Fatalf("committed %+v, want on main under %s", c, TestedRef("F-001"))
	}
	for _, ref := range []string{"refs/heads/main", c.Ref} {
		if got := f.git("rev-parse", ref); got != c.Commit {
			t.Errorf("%s is at %s, want %s", ref, got, c.Commit)
		}
	}
	if got := f.git("rev-parse", c.Commit+"^"); got != head {
		t.Errorf("the commit sits on %s, want onto %s", got, head)
	}
	if got := f.git("rev-parse", c.Commit+"^{tree}"); got != string(candidate) {
		t.Errorf("the commit's tree is %s, want the candidate %s", got, candidate)
	}
	if got := f.read("src/login.go"); got != "package src // login\n" {
		t.Errorf("the work tree's src/login.go = %q, want the commit's", got)
	}
	if got := f.git("status", "--porcelain", "--untracked-files=all"); got != "?? NOTES.md" {
		t.Errorf("git status after the landing = %q, want the person's NOTES.md alone", got)
	}
	msg := f.git("log", "-1", "--format=%B", c.Commit)
	for _, want := range []string{"F-001: log in\n", "ctxgraphd-feature: F-001", "ctxgraphd-attempt: 2", "ctxgraphd-verdict: tr-42"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not hold %q", msg, want)
		}
	}
}

// What keeps a lane's candidate off the branch leaves the branch, the
// work tree and the index as they were; the commit is kept under the
// tested ref all the same, and OffBranch says why and what to merge.
func TestCommitLaneLeavesTheBranchAlone(t *testing.T) {
	for _, tt := range []struct {
		name string
		// meanwhile runs, as the person, after the candidate was judged.
		meanwhile func(f *fixture)
		why       string
	}{
		{"HEAD is detached", func(f *fixture) { f.git("checkout", "-q", "--detach") }, "HEAD is detached"},
		{"the branch moved", func(f *fixture) {
			f.write(map[string]string{"NOTES.md": "notes\n"})
			f.git("add", "NOTES.md")
			f.git("commit", "-q", "-m", "the person's own commit")
		}, "main moved while F-001's verdict was judged; merge refs/ctxgraphd/tested/F-001 to take it"},
		{"a person's change is in the way", func(f *fixture) {
			f.write(map[string]string{"src/login.go": "the person's own login\n"})
		}, "uncommitted changes in the work tree are on paths F-001 changes (src/login.go); commit or stash them, then merge refs/ctxgraphd/tested/F-001"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, head, candidate := candidateFixture(t)
			tt.meanwhile(f)
			before, status := f.git("rev-parse", "HEAD"), f.git("status", "--porcelain", "--untracked-files=all")

			c, err := CommitLane(t.Context(), f.repo, verdictOf(candidate, "", ""), head)
			if err != nil {
				t.Fatal(err)
			}
			if c.Branch != "" || c.OffBranch != tt.why {
				t.Errorf("committed %+v, want off the branch because %q", c, tt.why)
			}
			if got := f.git("rev-parse", "HEAD"); got != before {
				t.Errorf("HEAD moved from %s to %s", before, got)
			}
			if got := f.git("status", "--porcelain", "--untracked-files=all"); got != status {
				t.Errorf("git status = %q, want it as it was: %q", got, status)
			}
			if got := f.git("rev-parse", TestedRef("F-001")); c.Commit == "" || got != c.Commit {
				t.Errorf("tested ref at %s, commit %q: want the commit kept under it", got, c.Commit)
			}
			if got := f.git("rev-parse", c.Commit+"^"); got != head {
				t.Errorf("the commit sits on %s, want onto %s", got, head)
			}
		})
	}
}

// A lane is a clone on a branch of its own, named for its feature, made
// from the given commit; the project's repository gets no branch of it.
func TestClone(t *testing.T) {
	f, head := committedFixture(t)
	dir := filepath.Join(t.TempDir(), "F-003", "wt")
	if err := Clone(t.Context(), f.repo, dir, "F-003", head); err != nil {
		t.Fatal(err)
	}
	if LaneBranch("F-003") != "ctxgraphd/F-003" {
		t.Errorf("LaneBranch(F-003) = %q", LaneBranch("F-003"))
	}
	lane := &fixture{t: t, dir: dir}
	if got := lane.git("symbolic-ref", "HEAD"); got != "refs/heads/"+LaneBranch("F-003") {
		t.Errorf("the lane's HEAD is on %s, want %s", got, LaneBranch("F-003"))
	}
	if got := lane.git("rev-parse", "HEAD"); got != head {
		t.Errorf("the lane's branch is at %s, want %s", got, head)
	}
	if got := f.git("for-each-ref", "--format=%(refname)", "refs/heads/"); got != "refs/heads/main" {
		t.Errorf("the project's branches are %q, want main alone", got)
	}
}

// A closed lane's work is kept under the ref given, as a commit of its
// tree on the commit the lane was made from; a lane that did no work
// keeps nothing, and a lane kept again moves the ref to its new work.
func TestKeepLane(t *testing.T) {
	f, head, tree := candidateFixture(t)
	ref := LaneRef("F-002")
	if ref != "refs/ctxgraphd/lane/F-002" {
		t.Errorf("LaneRef(F-002) = %q", ref)
	}
	headTree := f.snapshot()
	if c, err := KeepLane(t.Context(), f.repo, "F-002", ref, headTree, head); err != nil || c != "" {
		t.Fatalf("KeepLane of a lane without work = %q, %v; want nothing kept", c, err)
	}
	if got := f.git("for-each-ref", "--format=%(refname)", ref); got != "" {
		t.Fatalf("%s made for a lane without work", ref)
	}

	c, err := KeepLane(t.Context(), f.repo, "F-002", ref, tree, head)
	if err != nil || c == "" {
		t.Fatalf("KeepLane = %q, %v", c, err)
	}
	if got := f.git("rev-parse", ref); got != c {
		t.Errorf("%s is at %s, want %s", ref, got, c)
	}
	if got := f.git("rev-parse", c+"^"); got != head {
		t.Errorf("the kept work sits on %s, want the lane's base %s", got, head)
	}
	if got := f.git("rev-parse", c+"^{tree}"); got != string(tree) {
		t.Errorf("the kept commit's tree is %s, want the lane's %s", got, tree)
	}
	msg := f.git("log", "-1", "--format=%B", c)
	for _, want := range []string{"ctxgraphd: F-002's work, kept when its lane closed", "ctxgraphd-feature: F-002"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not hold %q", msg, want)
		}
	}
	if who := f.git("log", "-1", "--format=%an <%ae>", c); who != "ctxgraphd <ctxgraphd@localhost>" {
		t.Errorf("author = %q", who)
	}
	if got := f.git("rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}

	f.write(map[string]string{"src/login.go": "package src // login, again\n"})
	again := f.snapshot()
	c2, err := KeepLane(t.Context(), f.repo, "F-002", ref, again, head)
	if err != nil || c2 == "" || c2 == c {
		t.Fatalf("KeepLane again = %q, %v", c2, err)
	}
	if got := f.git("rev-parse", ref); got != c2 {
		t.Errorf("%s is at %s, want the new work %s", ref, got, c2)
	}
}
