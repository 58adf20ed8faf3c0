package branch

import (
	"strings"
	"testing"
)

// The initializer's work goes on the branch when the tree held nothing
// but HEAD before it ran, in a repository with commits or without.
func TestCommitScaffold(t *testing.T) {
	for _, tt := range []struct {
		name      string
		committed bool
	}{
		{"on HEAD", true},
		{"the repository's first commit", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, head := newFixture(t), ""
			if tt.committed {
				f, head = committedFixture(t)
			}
			before := f.snapshot()
			f.write(map[string]string{"tests/F-001.sh": "test -e src/login.go\n", "go.mod": "module p\n"})
			tree := f.snapshot()

			c, err := CommitScaffold(t.Context(), f.repo, tree, before, "run-000001", 3)
			if err != nil || c == "" {
				t.Fatalf("CommitScaffold = %q, %v", c, err)
			}
			if got := f.git("rev-parse", "refs/heads/main"); got != c {
				t.Errorf("main is at %s, want %s", got, c)
			}
			if got := f.git("rev-parse", c+"^{tree}"); got != string(tree) {
				t.Errorf("the commit's tree is %s, want the initializer's %s", got, tree)
			}
			want := c // no parent
			if head != "" {
				want = c + " " + head
			}
			if got := f.git("rev-list", "--parents", "-n", "1", c); got != want {
				t.Errorf("rev-list --parents = %q, want %q", got, want)
			}
			msg := f.git("log", "-1", "--format=%B", c)
			for _, want := range []string{"ctxgraphd: the feature list's acceptance tests and scaffolding", "Written by the initializer (run-000001) for 3 features.", "ctxgraphd-run: run-000001"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not hold %q", msg, want)
				}
			}
			if who := f.git("log", "-1", "--format=%an <%ae> / %cn <%ce>", c); who != "ctxgraphd <ctxgraphd@localhost> / ctxgraphd <ctxgraphd@localhost>" {
				t.Errorf("author / committer = %q", who)
			}
			if st := f.git("status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Errorf("git status after the commit:\n%s", st)
			}
		})
	}
}

// A person's work in the tree before the initializer ran, or a detached
// HEAD, keeps the initializer's work out of any commit: nothing is
// written, and no error.
func TestCommitScaffoldLeavesAPersonsTreeAlone(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before func(f *fixture)
	}{
		{"uncommitted work", func(f *fixture) { f.write(map[string]string{"README.md": "the person's edit\n"}) }},
		{"HEAD is detached", func(f *fixture) { f.git("checkout", "-q", "--detach") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, head := committedFixture(t)
			tt.before(f)
			before := f.snapshot()
			f.write(map[string]string{"tests/F-001.sh": "test -e src/login.go\n"})
			status := f.git("status", "--porcelain", "--untracked-files=all")

			c, err := CommitScaffold(t.Context(), f.repo, f.snapshot(), before, "run-000001", 1)
			if err != nil || c != "" {
				t.Fatalf("CommitScaffold = %q, %v; want nothing committed", c, err)
			}
			if got := f.git("rev-parse", "HEAD"); got != head {
				t.Errorf("HEAD moved to %s", got)
			}
			if got := f.git("rev-parse", "refs/heads/main"); got != head {
				t.Errorf("main moved to %s", got)
			}
			if got := f.git("status", "--porcelain", "--untracked-files=all"); got != status {
				t.Errorf("git status = %q, want %q", got, status)
			}
		})
	}
}
