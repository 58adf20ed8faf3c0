package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// blind takes from test's record every trace of path: what a record that
// could not see an input would hold. Selection then misses a change of
// it, which only a full sweep finds.
func blind(t *testing.T, f *fixture, test, path string) {
	t.Helper()
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	s, ok := f.j.seen[test]
	if !ok {
		t.Fatalf("%s has no record", test)
	}
	drop := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			if p != path {
				out = append(out, p)
			}
		}
		return out
	}
	s.seen.Opened, s.seen.Found = drop(s.seen.Opened), drop(s.seen.Found)
	f.j.seen[test] = s
}

// The backstop: six features land one after another, each its own file;
// the fourth's change breaks the first's test by an input its record
// does not hold (blind), so the selected sweeps skip it. The session's
// last sweep finds it failing on the tip, and the bisection blames the
// fourth landing, F-004, not the test's own feature nor the last one.
// Where the test fails on the landing it last passed on too (the clock),
// no landing is blamed.
//
// A record made on a claim's candidate that never landed (refused) says
// nothing of the landings: the bisection starts from the test's own
// feature's landing then, and still blames the right one.
func TestTheLastSweepFindsAMissAndBlamesItsLanding(t *testing.T) {
	for _, tc := range []struct{ breaker, refusedAfter int }{{2, 0}, {4, 0}, {6, 0}, {5, 3}, {2, 1}} {
		breaker := tc.breaker
		name := fmt.Sprintf("broken by landing %d", breaker)
		if tc.refusedAfter > 0 {
			name += fmt.Sprintf(", its record of a candidate refused after landing %d", tc.refusedAfter)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, selecting)
			l := &progress.List{Version: 1}
			for i := 1; i <= 6; i++ {
				id := fmt.Sprintf("F-%03d", i)
				files := map[string]string{fmt.Sprintf("src/f%d.txt", i): "ok\n"}
				if i == 1 {
					files["data/shared.txt"] = "ok\n"
				}
				if i == breaker {
					files["data/shared.txt"] = "broken\n"
				}
				f.write(files)
				tree := f.snapshot()
				test := fmt.Sprintf("grep -qx ok src/f%d.txt", i)
				if i == 1 {
					test += " && grep -qx ok data/shared.txt"
				}
				if r := f.j.RunTest(t.Context(), tree, test); !r.Passed() {
					t.Fatalf("%s's own test: %s", id, r.Summary())
				}
				if i == 1 {
					blind(t, f, test, "data/shared.txt")
				}
				if _, s := f.j.sweep(t.Context(), Root{}, l, id, tree); s.Ran != 0 {
					t.Fatalf("landing %d's sweep ran %d tests; want every earlier one skipped", i, s.Ran)
				}
				l.Features = append(l.Features, progress.Feature{ID: id, Test: test, Tested: true})
				f.j.Landed(id, tree)
				if i == tc.refusedAfter {
					// A claim's sweep runs F-001's test on its candidate,
					// which is then refused: it never lands.
					f.write(map[string]string{"src/refused.txt": "x\n"})
					test1 := l.Features[0].Test
					if r := f.j.RunTest(t.Context(), f.snapshot(), test1); !r.Passed() {
						t.Fatalf("F-001's test on the refused candidate: %s", r.Summary())
					}
					blind(t, f, test1, "data/shared.txt")
					f.remove("src/refused.txt")
				}
			}
			if !f.j.TipUnverified() {
				t.Fatal("the tip is verified though every sweep skipped tests")
			}
			f.j.mu.Lock()
			kept := len(f.j.verified)
			f.j.mu.Unlock()
			if kept > 1 {
				t.Errorf("after 6 landings the judge keeps %d trees' verifications; want the tip's at most", kept)
			}
			s := f.j.SweepTip(t.Context(), l)
			if s.Ran != 5 || len(s.Broken) != 1 || s.Broken[0].Feature != "F-001" {
				t.Fatalf("the last sweep: ran %d, broken %q; want the 5 not run on the tip yet run (F-006's own passed there) and F-001 broken", s.Ran, features(s.Broken))
			}
			m := s.Broken[0].Miss
			if want := fmt.Sprintf("F-%03d", breaker); m == nil || m.Of != "F-001" || m.Feature != want || m.Landing != breaker {
				t.Fatalf("the bisection: %+v; want F-001's test broken by %s at landing %d", m, want, breaker)
			}
			if !f.j.TipUnverified() {
				t.Error("a last sweep that failed verified the tip")
			}
		})
	}
	t.Run("fails where it last passed", func(t *testing.T) {
		t.Parallel()
		// A directory outside the tree the test reads, bound into its
		// jail: what the record cannot see, as the clock.
		clock := t.TempDir()
		f := newFixture(t, func(o *Options) {
			selecting(o)
			o.Jail.ReadOnly = []string{clock}
		})
		l := &progress.List{Version: 1}
		for i := 1; i <= 3; i++ {
			id := fmt.Sprintf("F-%03d", i)
			f.write(map[string]string{fmt.Sprintf("src/f%d.txt", i): "ok\n"})
			tree := f.snapshot()
			test := fmt.Sprintf("grep -qx ok src/f%d.txt", i)
			if i == 1 {
				test += " && ! test -e " + filepath.Join(clock, "late")
			}
			if r := f.j.RunTest(t.Context(), tree, test); !r.Passed() {
				t.Fatalf("%s's own test: %s", id, r.Summary())
			}
			f.j.sweep(t.Context(), Root{}, l, id, tree)
			l.Features = append(l.Features, progress.Feature{ID: id, Test: test, Tested: true})
			f.j.Landed(id, tree)
		}
		if err := os.WriteFile(filepath.Join(clock, "late"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s := f.j.SweepTip(t.Context(), l)
		if len(s.Broken) != 1 || s.Broken[0].Miss == nil || s.Broken[0].Miss.Feature != "" || s.Broken[0].Miss.Landing != 1 {
			t.Fatalf("broken %q, miss %+v; want F-001 failing where it last passed, no landing blamed", features(s.Broken), missOf(s.Broken))
		}
		// Its record passed on the tip itself: no landing is bisected.
		os.Remove(filepath.Join(clock, "late"))
		tip := f.snapshot()
		if r := f.j.RunTest(t.Context(), tip, l.Features[0].Test); !r.Passed() {
			t.Fatalf("F-001's test on the tip, the clock put back: %s", r.Summary())
		}
		os.WriteFile(filepath.Join(clock, "late"), nil, 0o644)
		if s := f.j.SweepTip(t.Context(), l); len(s.Broken) != 1 || s.Broken[0].Miss != nil {
			t.Fatalf("a test whose record passed on the failing tip: broken %q, miss %+v; want no bisection", features(s.Broken), missOf(s.Broken))
		}
	})
	t.Run("a tip swept in full and passed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, selecting)
		f.write(map[string]string{"src/f1.txt": "ok\n"})
		tree := f.snapshot()
		l := list(progress.Feature{ID: "F-001", Test: "grep -qx ok src/f1.txt", Tested: true})
		f.j.RunTest(t.Context(), tree, "grep -qx ok src/f1.txt")
		f.j.Landed("F-001", tree)
		if !f.j.TipUnverified() {
			t.Fatal("a tip no sweep ran on is verified")
		}
		if s := f.j.SweepTip(t.Context(), l); s.Ran != 0 || len(s.Broken) != 0 {
			t.Fatalf("last sweep %+v; want F-001's test, passed on the tip, not run again", s)
		}
		if f.j.TipUnverified() {
			t.Error("a tip swept in full, every test passed, is still unverified")
		}
	})
}

// A full sweep runs every test due but those the daemon's runs passed on
// its very tree in the same setting: the last claim's own test, which its
// verdict ran on the tree that landed, is not run again at the session's
// last sweep, and the tip is verified. A record of another tree, however
// far selection would trust it, a run there that failed, and one made in
// another setting (the environment changed since) are run.
func TestAFullSweepRunsWhatHasNotPassedOnItsTree(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("the daemon's test runs are recorded in its jail, bubblewrap's, on Linux")
	}
	for _, tc := range []struct {
		name string
		// before changes the judge between the last claim's run and the
		// last sweep.
		before func(f *fixture)
		// fails makes the last claim's own run fail.
		fails bool
		ran   int
	}{
		{name: "the last claim's own test passed on the tip", ran: 2},
		{name: "its run there failed", fails: true, ran: 3},
		{name: "the environment changed since", before: func(f *fixture) {
			f.j.opts.Jail.Env = append(slices.Clip(f.j.opts.Jail.Env), "MODE=other")
		}, ran: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, selecting)
			l := &progress.List{Version: 1}
			var tip gitrepo.Tree
			for i := 1; i <= 3; i++ {
				id := fmt.Sprintf("F-%03d", i)
				f.write(map[string]string{fmt.Sprintf("src/f%d.txt", i): "ok\n"})
				tip = f.snapshot()
				test := fmt.Sprintf("grep -qx ok src/f%d.txt", i)
				if i == 3 && tc.fails {
					test = "grep -qx no src/f3.txt"
				}
				f.j.RunTest(t.Context(), tip, test)
				if _, s := f.j.sweep(t.Context(), Root{}, l, id, tip); s.Ran != 0 {
					t.Fatalf("landing %d's sweep ran %d; want the earlier tests skipped by selection", i, s.Ran)
				}
				l.Features = append(l.Features, progress.Feature{ID: id, Test: test, Tested: true})
				f.j.Landed(id, tip)
			}
			if tc.before != nil {
				tc.before(f)
			}
			if !f.j.TipUnverified() {
				t.Fatal("a tip no full sweep ran on is verified")
			}
			s := f.j.SweepTip(t.Context(), l)
			if s.Ran != tc.ran {
				t.Errorf("the last sweep ran %d of 3 tests; want %d", s.Ran, tc.ran)
			}
			if want := len(s.Broken) == 0; f.j.TipUnverified() == want {
				t.Errorf("the last sweep broke %q, and the tip is verified: %v", features(s.Broken), !f.j.TipUnverified())
			}
		})
	}
	t.Run("a full sweep of a candidate runs the records of other trees", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, func(o *Options) { o.FullSweepEvery = 2 })
		l := &progress.List{Version: 1}
		var ran []int
		for i := 1; i <= 3; i++ {
			id := fmt.Sprintf("F-%03d", i)
			f.write(map[string]string{fmt.Sprintf("src/f%d.txt", i): "ok\n"})
			tree := f.snapshot()
			test := fmt.Sprintf("grep -qx ok src/f%d.txt", i)
			f.j.RunTest(t.Context(), tree, test)
			_, s := f.j.sweep(t.Context(), Root{}, l, id, tree)
			ran = append(ran, s.Ran)
			l.Features = append(l.Features, progress.Feature{ID: id, Test: test, Tested: true})
			f.j.Landed(id, tree)
		}
		if want := []int{0, 1, 0}; !slices.Equal(ran, want) {
			t.Errorf("sweeps ran %v; want %v (the second full: F-001's record is of another tree)", ran, want)
		}
	})
}

func missOf(rs []Regression) *Miss {
	if len(rs) == 0 {
		return nil
	}
	return rs[0].Miss
}
