package judge

import (
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Whose a failing frozen test of an earlier feature is: the claim's only
// when it passes without the claim's change and fails with it twice.
func TestRegressionBlame(t *testing.T) {
	pass, fail := &TestResult{ExitCode: 0}, &TestResult{ExitCode: 1}
	tests := []struct {
		name         string
		alone, again *TestResult
		want         Blame
	}{
		{"no tree without the change to run it on", nil, nil, BlameClaim},
		{"fails without the change too: the branch's", fail, nil, BlameBranch},
		{"passes alone, fails again with the change: the claim's", pass, fail, BlameClaim},
		{"passes alone, passes again with the change: flaky", pass, pass, BlameFlaky},
		{"passes alone, not run again", pass, nil, BlameClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Regression{Feature: "F-000", Test: *fail, Alone: tt.alone, Again: tt.again}
			if got := r.Blame(); got != tt.want {
				t.Errorf("Blame = %d, want %d", got, tt.want)
			}
		})
	}
}

// A claim's sweep runs each failing test of a feature tested before on the
// tree without the claim's change (RunEnd.Alone), and once more on the
// candidate where it passes there: only what the claim broke is its
// regression; the rest is to be reopened.
func TestJudgeRunBlamesTheRightFeature(t *testing.T) {
	// F-000, tested, fails when its own code went bad (src/b/y.go says
	// late: a time bomb gone off) or when src/a/breaks is there.
	const earlier = "! grep -q late src/b/y.go && ! test -e src/a/breaks\n"
	tests := []struct {
		name      string
		branch    string // src/b/y.go on the branch, before the claim
		breaks    bool   // the claim adds src/a/breaks
		noAlone   bool
		wantClaim []string // the claim's regressions
		wantOther []string // to be reopened
	}{
		{name: "nothing broken", branch: "package b\n"},
		{name: "the claim breaks it", branch: "package b\n", breaks: true, wantClaim: []string{"F-000"}},
		{name: "it fails on the branch alone", branch: "late\n", wantOther: []string{"F-000"}},
		{name: "it fails on the branch alone, and the claim breaks it too", branch: "late\n", breaks: true, wantOther: []string{"F-000"}},
		{name: "no tree without the claim's change: the claim's, as before", branch: "late\n", noAlone: true, wantClaim: []string{"F-000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJudgeFixture(t, nil)
			f.write(map[string]string{"tests/e.sh": earlier, "src/b/y.go": tt.branch})
			l := list(
				progress.Feature{ID: "F-000", Test: "sh tests/e.sh", Tested: true, Status: progress.Completed},
				progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: "sh tests/a.sh"},
			)
			alone := f.snapshot()
			code := map[string]string{"src/a/x.go": "ok\n"} // as the coder left it
			if tt.breaks {
				code["src/a/breaks"] = "x\n"
			}
			f.write(code)
			base := f.snapshot() // when the tester started
			in := RunEnd{Actor: gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-7"}, Attempt: 1,
				Base: base, List: l, Rerun: true, Sweep: true, Alone: alone}
			if tt.noAlone {
				in.Alone = ""
			}
			jd := f.j.JudgeRun(t.Context(), in)
			if jd.Err != nil || jd.Test == nil || !jd.Test.Passed() {
				t.Fatalf("judgement %+v, test %+v: want F-001's own test passed", jd, jd.Test)
			}
			if got := features(jd.Regressions); !slices.Equal(got, tt.wantClaim) {
				t.Errorf("the claim's regressions %q, want %q", got, tt.wantClaim)
			}
			if got := features(jd.Reopen); !slices.Equal(got, tt.wantOther) {
				t.Errorf("to reopen %q, want %q", got, tt.wantOther)
			}
			for _, r := range append(jd.Regressions, jd.Reopen...) {
				if tt.noAlone != (r.Alone == nil) {
					t.Errorf("%s run without the claim's change: %+v", r.Feature, r.Alone)
				}
				if r.Alone != nil && r.Alone.Tree != alone {
					t.Errorf("%s was run alone on %s, want %s", r.Feature, r.Alone.Tree, alone)
				}
				// Run again on the candidate exactly when it passed alone.
				if ranAgain := r.Again != nil; ranAgain != (r.Alone != nil && r.Alone.Passed()) {
					t.Errorf("%s run again: %v (alone: %+v)", r.Feature, ranAgain, r.Alone)
				}
			}
		})
	}
}

func features(rs []Regression) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Feature)
	}
	return out
}
