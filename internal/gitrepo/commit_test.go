package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var daemon = Signature{Name: "ctxgraphd", Email: "ctxgraphd@localhost"}

func TestCommitAndAdvanceBranch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		empty     bool                           // no commit before the daemon's
		user      func(t *testing.T, dir string) // after the snapshot, before AdvanceBranch
		wantErr   error
		wantReset bool
	}{
		{name: "clean index: the branch moves and status is clean", wantReset: true},
		{name: "first commit of an empty repository", empty: true, wantReset: true},
		{
			name: "something staged: the branch moves, the index stays",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"staged": "s"})
				gitT(t, dir, "add", "staged")
			},
		},
		{
			name: "the user committed meanwhile",
			user: func(t *testing.T, dir string) {
				write(t, dir, map[string]string{"user.txt": "mine"})
				gitT(t, dir, "add", "user.txt")
				gitT(t, dir, "commit", "-q", "-m", "user")
			},
			wantErr: ErrRefChanged,
		},
		{
			name:    "detached HEAD",
			user:    func(t *testing.T, dir string) { gitT(t, dir, "checkout", "-q", "--detach") },
			wantErr: ErrDetachedHead,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			var parents []string
			if !tt.empty {
				write(t, dir, map[string]string{"a": "a", "d": "d", "ignored.log": "i", ".gitignore": "*.log\n"})
				parents = []string{commitAll(t, dir)}
			}
			r := openRepo(t, dir)
			old, _, branch, err := r.Head(t.Context())
			if err != nil || branch != "refs/heads/main" {
				t.Fatalf("Head: branch %q, %v", branch, err)
			}
			// The agent's work.
			write(t, dir, map[string]string{"a": "a2", "new/n": "n", "run.sh": "exec:x", "l": "link:a"})
			remove(t, dir, "d")
			tree, err := r.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			when := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("", 3600))
			commit, err := r.Commit(t.Context(), tree, parents, "feature F-1: tested", Signature{Name: daemon.Name, Email: daemon.Email, When: when})
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != nil {
				tt.user(t, dir)
			}
			before := viewOf(t, dir)
			userHead := strings.TrimSpace(before.head)

			reset, err := r.AdvanceBranch(t.Context(), old, commit)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("AdvanceBranch: %v, want %v", err, tt.wantErr)
			}
			if reset != tt.wantReset {
				t.Errorf("index reset %v, want %v", reset, tt.wantReset)
			}
			after := viewOf(t, dir)
			if tt.wantErr != nil {
				if after != before {
					t.Errorf("a refused AdvanceBranch changed the user's view:\nbefore %+v\nafter  %+v", before, after)
				}
				if got := strings.TrimSpace(after.head); got != userHead {
					t.Errorf("HEAD %s, want the user's %s", got, userHead)
				}
				return
			}
			if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/main")); got != commit {
				t.Errorf("main at %s, want %s", got, commit)
			}
			if got := Tree(strings.TrimSpace(gitT(t, dir, "rev-parse", commit+"^{tree}"))); got != tree {
				t.Errorf("commit's tree %s, want the snapshot %s", got, tree)
			}
			wantLog := "ctxgraphd <ctxgraphd@localhost> 1741061167 +0100|ctxgraphd <ctxgraphd@localhost> 1741061167 +0100|feature F-1: tested|" + strings.Join(parents, " ")
			if got := strings.TrimSpace(gitT(t, dir, "log", "-1", "--format=%an <%ae> %at %ad|%cn <%ce> %ct %cd|%s|%P", "--date=format:%z", commit)); got != wantLog {
				t.Errorf("commit:\n got %q\nwant %q", got, wantLog)
			}
			if tt.wantReset {
				if st := gitT(t, dir, "status", "--porcelain=v2", "--untracked-files=all"); st != "" {
					t.Errorf("status after AdvanceBranch:\n%s", st)
				}
			} else if after.index != before.index {
				t.Error("the user's index changed although something was staged")
			}
		})
	}
}

func TestCommitRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	empty := r.EmptyTree()
	tests := []struct {
		name    string
		tree    Tree
		parents []string
		message string
		sig     Signature
	}{
		{name: "tree is a revision", tree: "HEAD^{tree}", message: "m", sig: daemon},
		{name: "parent is an option", tree: empty, parents: []string{"--help"}, message: "m", sig: daemon},
		{name: "no name", tree: empty, message: "m", sig: Signature{Email: "e@x"}},
		{name: "no email", tree: empty, message: "m", sig: Signature{Name: "n"}},
		{name: "angle bracket", tree: empty, message: "m", sig: Signature{Name: "n", Email: "<e@x>"}},
		{name: "newline in name", tree: empty, message: "m", sig: Signature{Name: "n\nx", Email: "e@x"}},
		{name: "empty message", tree: empty, message: " \n", sig: daemon},
		{name: "missing tree", tree: Tree(strings.Repeat("1", 40)), message: "m", sig: daemon},
	}
	for _, tt := range tests {
		if id, err := r.Commit(t.Context(), tt.tree, tt.parents, tt.message, tt.sig); err == nil {
			t.Errorf("%s: Commit made %s", tt.name, id)
		}
	}
}

func TestUpdateRef(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	c1, err := r.Commit(t.Context(), r.EmptyTree(), nil, "one", daemon)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := r.Commit(t.Context(), r.EmptyTree(), []string{c1}, "two", daemon)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "refs/ctxgraphd/tested/F-1"
	steps := []struct {
		name      string
		ref       string
		commit    string
		old       string
		wantErr   error // nil: success; errAny: any error
		wantAfter string
	}{
		{name: "create", ref: ref, commit: c1, old: "", wantAfter: c1},
		{name: "create again", ref: ref, commit: c2, old: "", wantErr: ErrRefChanged, wantAfter: c1},
		{name: "move from the value seen", ref: ref, commit: c2, old: c1, wantAfter: c2},
		{name: "move from a stale value", ref: ref, commit: c1, old: c1, wantErr: ErrRefChanged, wantAfter: c2},
		{name: "not a full ref name", ref: "main", commit: c1, old: "", wantErr: errAny, wantAfter: c2},
		{name: "commit is a revision", ref: ref, commit: "HEAD", old: c2, wantErr: errAny, wantAfter: c2},
		{name: "old is a revision", ref: ref, commit: c1, old: "HEAD", wantErr: errAny, wantAfter: c2},
	}
	for _, s := range steps {
		err := r.UpdateRef(t.Context(), s.ref, s.commit, s.old)
		switch {
		case s.wantErr == nil && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.wantErr == errAny && err == nil:
			t.Errorf("%s: succeeded", s.name)
		case s.wantErr != nil && s.wantErr != errAny && !errors.Is(err, s.wantErr):
			t.Errorf("%s: %v, want %v", s.name, err, s.wantErr)
		}
		if got := strings.TrimSpace(gitT(t, dir, "rev-parse", ref)); got != s.wantAfter {
			t.Errorf("%s: %s at %s, want %s", s.name, ref, got, s.wantAfter)
		}
	}
}

var errAny = errors.New("any error")

func TestHead(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	check := func(name, wantCommit string, wantTree Tree, wantBranch string) {
		t.Helper()
		commit, tree, branch, err := r.Head(t.Context())
		if err != nil || commit != wantCommit || tree != wantTree || branch != wantBranch {
			t.Errorf("%s: Head() = %q, %q, %q, %v; want %q, %q, %q", name, commit, tree, branch, err, wantCommit, wantTree, wantBranch)
		}
	}
	check("no commit", "", r.EmptyTree(), "refs/heads/main")
	write(t, dir, map[string]string{"a": "a"})
	c := commitAll(t, dir)
	tree := Tree(strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD^{tree}")))
	check("on main", c, tree, "refs/heads/main")
	gitT(t, dir, "checkout", "-q", "--detach")
	check("detached", c, tree, "")
}

func TestIndexMatchesHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  bool
	}{
		{name: "no commit, nothing staged", setup: func(t *testing.T, dir string) {}, want: true},
		{name: "no commit, something staged", setup: func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"a": "a"})
			gitT(t, dir, "add", "a")
		}},
		{name: "clean", setup: func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"a": "a"})
			commitAll(t, dir)
		}, want: true},
		{name: "changes not staged", setup: func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"a": "a"})
			commitAll(t, dir)
			write(t, dir, map[string]string{"a": "b", "untracked": "u"})
		}, want: true},
		{name: "staged", setup: func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"a": "a"})
			commitAll(t, dir)
			write(t, dir, map[string]string{"a": "b"})
			gitT(t, dir, "add", "a")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			tt.setup(t, dir)
			got, err := openRepo(t, dir).IndexMatchesHead(t.Context())
			if err != nil || got != tt.want {
				t.Errorf("IndexMatchesHead() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestRef(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t)
	r := openRepo(t, dir)
	if got, err := r.Ref(ctx, "refs/ctxgraphd/tested/F-001"); err != nil || got != "" {
		t.Fatalf("a missing ref: %q, %v", got, err)
	}
	tree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Commit(ctx, tree, nil, "m", daemon)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateRef(ctx, "refs/ctxgraphd/tested/F-001", c, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Ref(ctx, "refs/ctxgraphd/tested/F-001"); err != nil || got != c {
		t.Fatalf("Ref = %q, %v; want %s", got, err, c)
	}
	if _, err := r.Ref(ctx, "HEAD"); err == nil {
		t.Fatal("a ref that is not under refs/ must be refused")
	}
}

// A commit's message ends in exactly one newline, whether or not the
// caller ended it so.
func TestCommitMessageEndsInANewline(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	for _, msg := range []string{"subject", "subject\n", "subject\n\nbody\n"} {
		c, err := r.Commit(t.Context(), r.EmptyTree(), nil, msg, daemon)
		if err != nil {
			t.Fatal(err)
		}
		raw := gitT(t, dir, "cat-file", "commit", c)
		_, body, _ := strings.Cut(raw, "\n\n")
		want := strings.TrimSuffix(msg, "\n") + "\n"
		if body != want {
			t.Errorf("Commit(%q): message %q, want %q", msg, body, want)
		}
	}
}

// A ref that moved meanwhile is ErrRefChanged and says what it holds and
// what was expected; a failure that is no race is git's own error.
func TestUpdateRefSaysWhatTheRefHolds(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	c1, err := r.Commit(t.Context(), r.EmptyTree(), nil, "one", daemon)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := r.Commit(t.Context(), r.EmptyTree(), []string{c1}, "two", daemon)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "refs/ctxgraphd/tested/F-1"
	if err := r.UpdateRef(t.Context(), ref, c1, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		ref         string
		commit, old string
		race        bool
		want        string // in the message
	}{
		{name: "created meanwhile", ref: ref, commit: c2, old: "", race: true,
			want: "it holds " + c1 + ", not nothing (a new ref)"},
		{name: "moved meanwhile", ref: ref, commit: c1, old: c2, race: true,
			want: "it holds " + c1 + ", not " + c2},
		{name: "deleted meanwhile", ref: "refs/ctxgraphd/tested/F-2", commit: c2, old: c1, race: true,
			want: "it holds nothing, not " + c1},
		{name: "a name git refuses", ref: "refs/ctxgraphd/x.lock", commit: c1, old: "",
			want: "update-ref"},
		{name: "a name that is a revision range", ref: "refs/ctxgraphd/a..b", commit: c1, old: "",
			want: "update-ref"},
	}
	for _, tt := range tests {
		err := r.UpdateRef(t.Context(), tt.ref, tt.commit, tt.old)
		if err == nil || errors.Is(err, ErrRefChanged) != tt.race || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: UpdateRef = %v; want ErrRefChanged %v, saying %q", tt.name, err, tt.race, tt.want)
		}
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", ref)); got != c1 {
		t.Errorf("%s at %s, want %s", ref, got, c1)
	}
}

// AdvanceBranch moves nothing when the branch is not where the caller saw
// it, and says where it is, also before the first commit.
func TestAdvanceBranchSaysWhereTheBranchIs(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	c1, err := r.Commit(t.Context(), r.EmptyTree(), nil, "one", daemon)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := r.Commit(t.Context(), r.EmptyTree(), []string{c1}, "two", daemon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AdvanceBranch(t.Context(), c1, c2); !errors.Is(err, ErrRefChanged) || !strings.Contains(err.Error(), "it is at no commit, not "+c1) {
		t.Errorf("AdvanceBranch from %s on an unborn branch = %v", c1, err)
	}
	if _, err := r.AdvanceBranch(t.Context(), "", c1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AdvanceBranch(t.Context(), "", c2); !errors.Is(err, ErrRefChanged) || !strings.Contains(err.Error(), "it is at "+c1+", not ") {
		t.Errorf("AdvanceBranch from nothing on a born branch = %v", err)
	}
	if _, err := r.AdvanceBranch(t.Context(), c1, "HEAD"); err == nil || errors.Is(err, ErrRefChanged) {
		t.Errorf("AdvanceBranch to a revision = %v, want it refused", err)
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/main")); got != c1 {
		t.Errorf("main at %s, want %s", got, c1)
	}
}

// When the branch moved but the index could not be reset, AdvanceBranch
// says both: the commit is on the branch, and `git reset` is the user's to
// run.
func TestAdvanceBranchIndexResetFails(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	head := commitAll(t, dir)
	r := openRepo(t, dir)
	write(t, dir, map[string]string{"a": "a2"})
	tree, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Commit(t.Context(), tree, []string{head}, "m", daemon)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{".git/index.lock": ""}) // a git of the user's at work
	reset, err := r.AdvanceBranch(t.Context(), head, c)
	if reset || err == nil || errors.Is(err, ErrRefChanged) || !strings.Contains(err.Error(), "refs/heads/main now points at "+c+", but resetting the index failed") {
		t.Errorf("AdvanceBranch with the index locked = %v, %v", reset, err)
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/heads/main")); got != c {
		t.Errorf("main at %s, want %s", got, c)
	}
}

// Ref names a full ref's commit, "" for a ref that does not exist, and
// refuses what is not a full ref name.
func TestRefOfWhatIsNoCommit(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	r := openRepo(t, dir)
	if _, err := r.Ref(t.Context(), "main"); err == nil {
		t.Error(`Ref("main") succeeded`)
	}
	// A ref that names a tree is no commit: nothing to give UpdateRef.
	gitT(t, dir, "update-ref", "refs/ctxgraphd/tree", string(r.EmptyTree()))
	if got, err := r.Ref(t.Context(), "refs/ctxgraphd/tree"); err != nil || got != "" {
		t.Errorf("Ref of a tree = %q, %v; want \"\"", got, err)
	}
}

// RefWithTree finds, among the refs under a prefix, the newest commit
// holding a tree, and nothing outside the prefix or with another tree.
func TestRefWithTree(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a"})
	commitAll(t, dir)
	r := openRepo(t, dir)
	ctx := t.Context()
	tree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int) Signature {
		return Signature{Name: daemon.Name, Email: daemon.Email, When: time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC)}
	}
	older, err := r.Commit(ctx, tree, nil, "older", at(1))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := r.Commit(ctx, tree, nil, "newer", at(2))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a": "other"})
	otherTree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.Commit(ctx, otherTree, nil, "other", at(3))
	if err != nil {
		t.Fatal(err)
	}
	for ref, c := range map[string]string{"refs/x/tested/A": older, "refs/x/tested/B": newer, "refs/x/tested/C": other, "refs/y/D": newer} {
		if err := r.UpdateRef(ctx, ref, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		prefix      string
		tree        Tree
		ref, commit string
	}{
		{"refs/x/tested/", tree, "refs/x/tested/B", newer},
		{"refs/x/tested/", otherTree, "refs/x/tested/C", other},
		{"refs/x/tested/", r.EmptyTree(), "", ""},
		{"refs/z/", tree, "", ""},
	} {
		ref, commit, err := r.RefWithTree(ctx, tt.prefix, tt.tree)
		if err != nil || ref != tt.ref || commit != tt.commit {
			t.Errorf("RefWithTree(%s, %s) = %q %q %v, want %q %q", tt.prefix, tt.tree, ref, commit, err, tt.ref, tt.commit)
		}
	}
	if _, _, err := r.RefWithTree(ctx, "tested/", tree); err == nil {
		t.Error("RefWithTree takes a prefix that is not a full ref name")
	}
}

// ChangedPaths lists every path that differs, excluded ones too, where
// Changes lists only the project's.
func TestChangedPaths(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a", "private/p": "p"})
	from := commitAll(t, dir)
	write(t, dir, map[string]string{"a": "a2", "private/p": "p2", "b": "b"})
	to := commitAll(t, dir)
	r := openRepo(t, dir, "private")
	ctx := t.Context()
	fromTree, toTree := treesOf(t, r, from, to)
	paths, err := r.ChangedPaths(ctx, fromTree, toTree)
	if err != nil || strings.Join(paths, " ") != "a b private/p" {
		t.Errorf("ChangedPaths = %q, %v; want a, b and the excluded private/p", paths, err)
	}
	changes, err := r.Changes(ctx, fromTree, toTree)
	if err != nil || len(changes) != 2 {
		t.Errorf("Changes = %+v, %v; want a and b only", changes, err)
	}
	if paths, err := r.ChangedPaths(ctx, toTree, toTree); err != nil || len(paths) != 0 {
		t.Errorf("ChangedPaths of a tree and itself = %q, %v", paths, err)
	}
}

// ExportedChanges lists what a checkout of the project directory would
// find changed: excluded paths too (Export writes them), nothing outside
// the project directory, each relative to it.
func TestExportedChanges(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	// Besides files: a directory made (deep), one emptied, one whose only
	// file is replaced, a file made a directory, and a directory that
	// gains a file beside those it had (no entry of its parent changes).
	write(t, dir, map[string]string{"app/a": "a", "app/private/p": "p", "other": "o", "app/same": "s",
		"app/gone/g": "g", "app/kept/k1": "k", "app/swap/old": "o", "app/f": "f", "app/more/m1": "m"})
	from := commitAll(t, dir)
	os.RemoveAll(filepath.Join(dir, "app", "gone"))
	os.Remove(filepath.Join(dir, "app", "swap", "old"))
	os.Remove(filepath.Join(dir, "app", "f"))
	write(t, dir, map[string]string{"app/a": "a2", "app/private/p": "p2", "app/new/b": "b", "other": "o2",
		"app/deep/x/y": "y", "app/swap/new": "n", "app/f/inside": "i", "app/more/m2": "m"})
	to := commitAll(t, dir)
	r := openRepo(t, filepath.Join(dir, "app"), "private")
	ctx := t.Context()
	fromTree, toTree := treesOf(t, r, from, to)
	const want = "M a A deep A deep/x A deep/x/y D f A f A f/inside D gone D gone/g A more/m2 A new A new/b M private/p A swap/new D swap/old"
	changes, err := r.ExportedChanges(ctx, fromTree, toTree)
	if got := strings.Join(changedPaths(changes), " "); err != nil || got != want {
		t.Errorf("ExportedChanges = %q, %v;\nwant %q: the files, the excluded private/p and the directories made or gone, relative to app, and not other", got, err, want)
	}
	for _, c := range changes {
		if !c.Entry() && c.Path != "a" && c.Path != "private/p" {
			t.Errorf("%s %s is no entry of its directory", c.Kind, c.Path)
		}
	}
	changes, err = r.ExportedChanges(ctx, toTree, fromTree)
	back := strings.NewReplacer("A ", "D ", "D ", "A ").Replace(want)
	if got := strings.Join(changedPaths(changes), " "); err != nil || !sameSet(got, back) {
		t.Errorf("ExportedChanges backwards = %q, %v; want %q", got, err, back)
	}
	if changes, err := r.Changes(ctx, fromTree, toTree); err != nil || slices.ContainsFunc(changes, func(c Change) bool { return c.Path == "deep" || c.Path == "gone" }) {
		t.Errorf("Changes = %v, %v: the files of a feature's change name no directories", changedPaths(changes), err)
	}
	if changes, err := r.ExportedChanges(ctx, toTree, toTree); err != nil || len(changes) != 0 {
		t.Errorf("ExportedChanges of a tree and itself = %+v, %v", changes, err)
	}
	if _, err := r.ExportedChanges(ctx, "not-a-tree", toTree); err == nil {
		t.Error("ExportedChanges took a tree id that is none")
	}
	// At the repository's top, the same directories (and other).
	top := openRepo(t, dir)
	changes, err = top.ExportedChanges(ctx, fromTree, toTree)
	if got := strings.Join(changedPaths(changes), " "); err != nil || !strings.Contains(got, "A app/deep A app/deep/x ") || !strings.Contains(got, "D app/gone ") || strings.Contains(got, "M app ") {
		t.Errorf("ExportedChanges at the top = %q, %v", got, err)
	}
}

// ExportedChangesFrom asks one git process for the changes from many
// trees: each tree's are what ExportedChanges says of it alone, in every
// order of the trees asked and with a tree asked twice; the tree itself
// has none; a path with a newline in it is read whole (the pairs' headers
// are lines); and a tree id that is none is refused before git runs.
func TestExportedChangesFrom(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	ctx := t.Context()
	r := openRepo(t, dir)
	var trees []Tree
	steps := []map[string]string{
		{"a": "a", "d/x": "x"},
		{"a": "a2", "line\nbreak": "n", "d/y": "y"},
		{"e/z": "z", ":colon": "c"},
		{"a": "a3"},
	}
	for _, files := range steps {
		write(t, dir, files)
		c := commitAll(t, dir)
		tree, _ := treesOf(t, r, c, c)
		trees = append(trees, tree)
	}
	to := trees[len(trees)-1]
	alone := map[Tree]string{}
	for _, from := range trees {
		cs, err := r.ExportedChanges(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		alone[from] = fmt.Sprint(changedPaths(cs))
	}
	if !strings.Contains(alone[trees[0]], "line\nbreak") || !strings.Contains(alone[trees[1]], ":colon") {
		t.Fatalf("the fixture's changes miss the paths the test is about: %q", alone)
	}
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2, 1}, {2}} {
		var from []Tree
		for _, i := range order {
			from = append(from, trees[i])
		}
		got, err := r.ExportedChangesFrom(ctx, from, to)
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		if len(got) != len(slices.Compact(slices.Sorted(slices.Values(order)))) {
			t.Errorf("%v: answers for %d trees, want one for each asked: %v", order, len(got), got)
		}
		for _, tree := range from {
			cs, ok := got[tree]
			if p := fmt.Sprint(changedPaths(cs)); !ok || p != alone[tree] {
				t.Errorf("%v: from %s: %q (asked: %v), want %q as ExportedChanges says", order, tree, p, ok, alone[tree])
			}
		}
		if cs := got[to]; len(cs) != 0 {
			t.Errorf("%v: the tree and itself: %v", order, changedPaths(cs))
		}
	}
	if _, err := r.ExportedChangesFrom(ctx, []Tree{trees[0], "not-a-tree"}, to); err == nil {
		t.Error("ExportedChangesFrom took a tree id that is none")
	}
	if got, err := r.ExportedChangesFrom(ctx, nil, to); err != nil || len(got) != 0 {
		t.Errorf("ExportedChangesFrom of no tree = %v, %v", got, err)
	}
}

// splitPairs reads diff-tree --stdin's output whole or refuses it: a
// record before any pair's line, a line that is not two tree ids, a record
// cut short.
func TestSplitPairs(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	rec := ":100644 100644 " + strings.Repeat("1", 40) + " " + strings.Repeat("2", 40) + " M\x00p\nq\x00"
	pairs, err := splitPairs([]byte(a + " " + b + "\n" + rec + rec + b + " " + b + "\n" + a + " " + a + "\n" + rec))
	if err != nil || len(pairs) != 3 || string(pairs[0].raw) != rec+rec || len(pairs[1].raw) != 0 || string(pairs[2].raw) != rec || pairs[1].from != Tree(b) {
		t.Errorf("splitPairs = %+v, %v", pairs, err)
	}
	for _, bad := range []string{
		rec,
		a + "\n" + rec,
		a + " not-a-tree\n",
		a + "  " + b + "\n",
		a + " " + b + "\n:100644 100644 x",
		a + " " + b + "\n" + rec[:len(rec)-1],
	} {
		if pairs, err := splitPairs([]byte(bad)); err == nil {
			t.Errorf("splitPairs(%q) = %+v, want an error", bad, pairs)
		}
	}
}

// A project below a directory that only one tree has: the directories
// above the project are no changes of it, nor is the project's own.
func TestExportedChangesOfAProjectInANewDirectory(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"other": "o"})
	from := commitAll(t, dir)
	write(t, dir, map[string]string{"sub/proj/x/y": "y", "sub/side": "s"})
	to := commitAll(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "sub", "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := openRepo(t, filepath.Join(dir, "sub", "proj"))
	ctx := t.Context()
	fromTree, toTree := treesOf(t, r, from, to)
	changes, err := r.ExportedChanges(ctx, fromTree, toTree)
	if got := strings.Join(changedPaths(changes), " "); err != nil || got != "A x A x/y" {
		t.Errorf("ExportedChanges = %q, %v; want the project's own x and x/y only", got, err)
	}
}

// treesOf is the trees of two commits of r.
func treesOf(t *testing.T, r *Repo, from, to string) (Tree, Tree) {
	t.Helper()
	var trees [2]Tree
	for i, c := range []string{from, to} {
		_, tree, err := r.Resolve(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		trees[i] = tree
	}
	return trees[0], trees[1]
}

// sameSet reports whether two space-separated lists of "K path" pairs
// hold the same pairs.
func sameSet(a, b string) bool {
	pairs := func(s string) []string {
		f := strings.Fields(s)
		var out []string
		for i := 0; i+1 < len(f); i += 2 {
			out = append(out, f[i]+" "+f[i+1])
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(pairs(a), pairs(b))
}

// TouchedSince lists what any commit since touched, a change and its
// revert included, though the trees end the same.
func TestTouchedSince(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a", "b": "b"})
	from := commitAll(t, dir)
	write(t, dir, map[string]string{"a": "a2"})
	commitAll(t, dir)
	write(t, dir, map[string]string{"a": "a", "c": "c"})
	to := commitAll(t, dir)
	r := openRepo(t, dir)
	paths, err := r.TouchedSince(t.Context(), from, to)
	if err != nil || strings.Join(paths, " ") != "a c" {
		t.Errorf("TouchedSince = %q, %v; want a (changed, then changed back) and c", paths, err)
	}
	if paths, err := r.TouchedSince(t.Context(), to, to); err != nil || len(paths) != 0 {
		t.Errorf("TouchedSince of a commit and itself = %q, %v", paths, err)
	}
}

// changedPaths renders changes as "A|D|M path".
func changedPaths(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, strings.ToUpper(c.Kind.String()[:1])+" "+c.Path)
	}
	return out
}

// Entry: what a listing of the path's directory shows changed.
func TestChangeEntry(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want bool
	}{
		{Change{Kind: Added, ToMode: ModeFile}, true},
		{Change{Kind: Deleted, FromMode: ModeFile}, true},
		{Change{Kind: Modified, FromMode: ModeFile, ToMode: ModeFile}, false},
		{Change{Kind: Modified, FromMode: ModeFile, ToMode: ModeExecutable}, false},
		{Change{Kind: Modified, FromMode: ModeExecutable, ToMode: ModeFile}, false},
		{Change{Kind: Modified, FromMode: ModeFile, ToMode: ModeSymlink}, true},
		{Change{Kind: Modified, FromMode: ModeSymlink, ToMode: ModeExecutable}, true},
		{Change{Kind: Modified, FromMode: ModeSymlink, ToMode: ModeSymlink}, false},
		{Change{Kind: Modified, FromMode: ModeGitlink, ToMode: ModeFile}, true},
	} {
		if got := tc.c.Entry(); got != tc.want {
			t.Errorf("%+v.Entry() = %v, want %v", tc.c, got, tc.want)
		}
	}
}
