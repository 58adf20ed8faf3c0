package judge

import (
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// What git could hide is in the change set, and what an enforced gate
// refuses of it is put back (or removed): a .gitignore an agent wrote, a
// repository it nested in the project, a path git refuses, an edit
// attributes would have hidden. None of it stops the judging.
func TestJudgeRunSeesWhatGitCouldHide(t *testing.T) {
	tests := []struct {
		name     string
		role     string
		person   func(f *fixture) // before the run's base
		misdo    func(f *fixture)
		findings []string
		removed  []string // absent after judging
		kept     []string // present after judging
		changed  string   // a change the run made that the change set must hold
	}{
		{name: "a .gitignore that hides the coder's out-of-scope code", role: gates.Coder,
			misdo: func(f *fixture) {
				f.write(map[string]string{"src/b/.gitignore": "*\n", "src/b/y.go": "package b // mine now\n"})
			},
			findings: []string{"role-write-policy/git_rules src/b/.gitignore enforce", "scope/out_of_scope src/b/y.go enforce"},
			removed:  []string{"src/b/.gitignore"}, changed: "src/b/y.go"},
		{name: "a nested repository in scope: its files are judged, its .git removed", role: gates.Coder,
			misdo: func(f *fixture) {
				f.git("init", "-q", "src/a/lib")
				f.write(map[string]string{"src/a/lib/l.go": "package lib\n"})
			},
			findings: []string{"role-write-policy/git_internals src/a/lib/.git enforce"},
			removed:  []string{"src/a/lib/.git"}, kept: []string{"src/a/lib/l.go"}, changed: "src/a/lib/l.go"},
		{name: "a nested repository made of a directory the project tracks", role: gates.Coder,
			misdo: func(f *fixture) {
				f.git("init", "-q", "src/b")
				f.write(map[string]string{"src/b/y.go": "package b // hidden?\n"})
			},
			findings: []string{"role-write-policy/git_internals src/b/.git enforce", "scope/out_of_scope src/b/y.go enforce"},
			removed:  []string{"src/b/.git"}, changed: "src/b/y.go"},
		{name: "a .GIT directory in scope", role: gates.Coder,
			misdo:    func(f *fixture) { f.write(map[string]string{"src/a/.GIT/x": "x\n"}) },
			findings: []string{"role-write-policy/git_internals src/a/.GIT enforce"},
			removed:  []string{"src/a/.GIT"}},
		{name: "a name git refuses in scope", role: gates.Coder,
			misdo:    func(f *fixture) { f.write(map[string]string{"src/a/git~1": "x\n"}) },
			findings: []string{"role-write-policy/git_refuses_path src/a/git~1 enforce"},
			removed:  []string{"src/a/git~1"}},
		{name: "a tester's edit that ident would hide", role: gates.Tester,
			person: func(f *fixture) {
				f.write(map[string]string{".gitattributes": "*.c ident\n"})
				f.commitAll("attributes")
			},
			misdo:    func(f *fixture) { f.write(map[string]string{"src/a/doc.c": "/* a */ $Id: changed $\n"}) },
			findings: []string{"role-write-policy/tester_edits_source src/a/doc.c enforce"},
			changed:  "src/a/doc.c"},
		{name: "a person's nested repository is not the run's", role: gates.Coder,
			person: func(f *fixture) {
				f.git("init", "-q", "vendor/x")
				f.write(map[string]string{"vendor/x/v.go": "package x\n"})
			},
			misdo: func(f *fixture) { f.write(map[string]string{"src/a/x.go": "ok\n"}) },
			kept:  []string{"vendor/x/.git", "vendor/x/v.go"}, changed: "src/a/x.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJudgeFixture(t, nil)
			if tt.person != nil {
				tt.person(f.fixture)
				f.base = f.snapshot()
			}
			tt.misdo(f.fixture)
			jd := f.judge(tt.role, false)
			if jd.Err != nil {
				t.Fatal(jd.Err)
			}
			if got := findings(jd.Findings); !slices.Equal(got, tt.findings) {
				t.Errorf("findings %q, want %q (changes %q)", got, tt.findings, changedPaths(jd.Changes))
			}
			if jd.Blocks() != (len(tt.findings) > 0) {
				t.Errorf("Blocks = %v", jd.Blocks())
			}
			for _, p := range tt.removed {
				if got := fileMode(t, f.dir, p); got != "absent" {
					t.Errorf("%s after judging: %s, want it gone", p, got)
				}
			}
			for _, p := range tt.kept {
				if got := fileMode(t, f.dir, p); got == "absent" {
					t.Errorf("%s is gone after judging", p)
				}
			}
			if tt.changed != "" && !slices.ContainsFunc(jd.Changes, func(c gitrepo.Change) bool { return c.Path == tt.changed }) {
				t.Errorf("changes %q do not hold %s", changedPaths(jd.Changes), tt.changed)
			}
			if now := f.snapshot(); now != jd.Tree {
				t.Errorf("jd.Tree %s is not the work tree after judging (%s)", jd.Tree, now)
			}
		})
	}
}
