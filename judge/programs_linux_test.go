package judge

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// programRoutes are the ways an agent's shell can make one change to a
// file, F, leaving it "exit 0\n": each a program a real model's Bash runs,
// in the real bubblewrap jail on the project's tree. The end-to-end nights
// keep one route of each class with the real CLI; these are the rest.
var programRoutes = []struct{ name, script string }{
	{"sed -i", `sed -i 's/.*/exit 0/' "$F"`},
	{"python3", `python3 -c 'import sys; open(sys.argv[1], "w").write("exit 0\n")' "$F"`},
	{"a script the agent wrote", `printf '#!/bin/sh\nprintf "exit 0\\n" > "$1"\n' > /tmp/w.sh && chmod +x /tmp/w.sh && /tmp/w.sh "$F"`},
	{"cp", `printf 'exit 0\n' > /tmp/n && cp /tmp/n "$F"`},
	{"mv over it", `printf 'exit 0\n' > /tmp/n && mv -f /tmp/n "$F"`},
	{"tee", `printf 'exit 0\n' | tee "$F" >/dev/null`},
	{"dd", `printf 'exit 0\n' | dd of="$F" status=none`},
	{"a link it made and wrote through", `ln -s "$PWD/$F" .w && printf 'exit 0\n' > .w && rm .w`},
	{"a process in the background, waited for", `sh -c 'sleep 0.05; printf "exit 0\n" > "$1"' sh "$F" & wait`},
}

// Whatever program made a change, the judge sees the same change set: each
// route of programRoutes makes its change in the real jail, and the
// judgement (its findings, what it put back, the tree it stands on) is the
// one that the same change written by the test itself gets, for every gate
// whose rule is a path: a frozen test, a file outside the feature's scope,
// a guarded file, a tester's edit of source. This is what the end-to-end
// nights of python3 one-liners and scripts asserted through the CLI.
func TestJudgeRunIsTheSameWhateverProgramWrote(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the jail is bubblewrap's, on Linux")
	}
	rules := []guards.Rule{{ID: "c-files", Status: guards.Enforce, Role: gates.Coder, Match: guards.Match{Path: "src/a/*.c"}, Message: "C is generated"}}
	targets := []struct {
		name, role, path string
	}{
		{"a coder rewrites its frozen test", gates.Coder, "tests/a.sh"},
		{"a coder writes outside its scope", gates.Coder, "src/b/y.go"},
		{"a coder writes a file a guard holds", gates.Coder, "src/a/doc.c"},
		{"a tester edits source", gates.Tester, "src/a/x.go"},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			judged := func(t *testing.T, change func(f *judgeFixture)) (string, Judgement) {
				f := newJudgeFixture(t, nil)
				if err := f.j.SetGuards(rules); err != nil {
					t.Fatal(err)
				}
				before := f.read(target.path)
				change(f)
				if got := f.read(target.path); got != "exit 0\n" {
					t.Fatalf("%s = %q after the change, want %q", target.path, got, "exit 0\n")
				}
				jd := f.judge(target.role, false)
				if jd.Err != nil {
					t.Fatal(jd.Err)
				}
				if got := f.read(target.path); got != before {
					t.Errorf("%s = %q after judging, want it put back as %q", target.path, got, before)
				}
				changes, err := f.repo.Changes(t.Context(), f.base, jd.Tree)
				if err != nil {
					t.Fatal(err)
				}
				return strings.Join(changedPaths(changes), ", "), jd
			}
			wantLeft, want := judged(t, func(f *judgeFixture) { f.write(map[string]string{target.path: "exit 0\n"}) })
			if len(want.Findings) != 1 || !slices.Equal(want.Restored, []string{target.path}) {
				t.Fatalf("the change written by the test: findings %q, restored %q; want one finding, %s put back", findings(want.Findings), want.Restored, target.path)
			}
			for _, route := range programRoutes {
				t.Run(route.name, func(t *testing.T) {
					t.Parallel()
					left, got := judged(t, func(f *judgeFixture) {
						jail := sandbox.TestJail{Checkout: f.dir, Mount: f.dir, Env: append(slices.Clip(testEnv), "F="+target.path)}
						var out bytes.Buffer
						if _, err := jail.Run(t.Context(), route.script, &out); err != nil {
							t.Fatalf("%s in the jail: %v\n%s", route.script, err, out.String())
						}
					})
					if !slices.Equal(findings(got.Findings), findings(want.Findings)) || !slices.Equal(got.Restored, want.Restored) || left != wantLeft {
						t.Errorf("findings %q, restored %q, left %q; want %q, %q, %q as when the test wrote it",
							findings(got.Findings), got.Restored, left, findings(want.Findings), want.Restored, wantLeft)
					}
				})
			}
		})
	}
}
