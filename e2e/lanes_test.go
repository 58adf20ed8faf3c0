package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// workedAtOnce checks a night of lanes (limits.parallel 2 or more) whose
// features were all tested at their first attempt: the real CLI worked
// two of them at once, each in a lane of its own, confined there by Claude
// Code's sandbox; the branch took one commit each, its verdict's, on trees
// where the tests pass, and holds every feature's code; and no lane is
// left.
func (p *project) workedAtOnce(o *outcome) {
	t := p.t
	t.Helper()
	var coders []store.Run
	for _, r := range o.runs {
		if r.Role == "coding-agent" {
			coders = append(coders, r)
		}
	}
	overlap := false
	for i, a := range coders {
		for _, b := range coders[i+1:] {
			overlap = overlap || (a.StartedAt.Before(b.EndedAt) && b.StartedAt.Before(a.EndedAt))
		}
	}
	if !overlap {
		var when []string
		for _, c := range coders {
			when = append(when, fmt.Sprintf("%s %s–%s", c.Feature, c.StartedAt.Format(time.StampMilli), c.EndedAt.Format(time.StampMilli)))
		}
		t.Errorf("no two coders worked at once: %s", strings.Join(when, ", "))
	}
	p.oneCommitEach(o)
	if left, _ := os.ReadDir(filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)); len(left) > 0 {
		t.Errorf("lanes left behind in %s: %v", filepath.Dir(p.paths.StateDir), left)
	}
}

// oneCommitEach checks that the branch holds every feature of a night
// tested whole: each feature's working code, and one commit a feature,
// its verdict's (the commit its tested ref names).
func (p *project) oneCommitEach(o *outcome) {
	t := p.t
	t.Helper()
	for _, f := range o.list.Features {
		files := p.files(f.ID)
		if got, err := p.gitTry("show", "HEAD:"+files.Source); err != nil || got != files.Working {
			t.Errorf("the branch holds %q as %s's code %s (%v), want %q", got, f.ID, files.Source, err, files.Working)
		}
		got := strings.TrimSpace(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: "+f.ID+"$", "HEAD"))
		if got == "" || strings.Contains(got, "\n") || got != strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/"+f.ID)) {
			t.Errorf("%s's commits on the branch: %q, want its verdict's alone\n%s", f.ID, got, p.git("log", "--format=%h %s", "HEAD"))
		}
	}
}

// TestLanesKill9ThenRestart: kill -9 of the daemon at three moments of one
// night with lanes, each followed by a restart (both lanes coding; one
// testing while the other codes; the daemon judging a lane's claim, its
// sweep and the branch's move in the balance): each time the orphaned
// agents die, the lanes go and their features are worked again from fresh
// lanes; no integration is half-done (a feature tested is on the branch,
// and the branch holds only tested features' commits), and the night ends
// as an uninterrupted one does, with no transition lost or repeated.
func TestLanesKill9ThenRestart(t *testing.T) {
	night(t, extended)
	// F-002's coder waits, on its first attempt, for F-001's verdict
	// (After): lanes that start at once would otherwise code and test in
	// step, and "one lane tests while the other codes" might never come.
	waits := feature("F-002", scriptedmodel.FailOnce)
	waits.After = "F-001"
	p := newProject(t, scenario("lanes-kill9", feature("F-001", scriptedmodel.Pass), waits))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2")
	var logs []string
	roles := func(st map[string]any) (out []string, pids []int) {
		lanes, _ := st["lanes"].([]any)
		for _, l := range lanes {
			m, _ := l.(map[string]any)
			r, _ := m["role"].(string)
			out = append(out, r)
			if pid, _ := m["pid"].(float64); pid > 0 {
				pids = append(pids, int(pid))
			}
		}
		return out, pids
	}
	for _, moment := range []struct {
		name string
		now  func(st map[string]any) bool
	}{
		{"while both lanes code", func(st map[string]any) bool {
			r, pids := roles(st)
			return len(pids) == 2 && r[0] == "coding-agent" && r[1] == "coding-agent"
		}},
		{"while one lane tests and the other codes", func(st map[string]any) bool {
			r, pids := roles(st)
			return len(pids) == 2 && r[0] != r[1]
		}},
		{"while the daemon judges a lane's claim", func(st map[string]any) bool {
			w, _ := st["working"].(string)
			return strings.Contains(w, "to judge its tester's claim")
		}},
	} {
		daemon, log := p.start()
		var pids []int
		p.waitFor(moment.name, agentsWait, func() bool {
			st, ok := p.status()
			if !ok {
				return false
			}
			f, _ := st["features"].(map[string]any)
			if total, _ := f["total"].(float64); total > 0 && f["tested"] == total {
				// The moment can no longer come: say so now, not at
				// the bound.
				t.Fatalf("the night ended before the moment %q was seen\n%s", moment.name, log.String())
			}
			if !moment.now(st) {
				return false
			}
			_, pids = roles(st)
			return true
		})
		daemon.Process.Signal(syscall.SIGKILL)
		daemon.Wait()
		for _, pid := range pids {
			p.waitFor("the orphaned agents to die with the daemon", 30*time.Second, func() bool { return !alive(pid) })
		}
		logs = append(logs, "daemon killed "+moment.name+":\n"+log.String())
	}

	p.runToEnd()
	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("after three kill -9 and restarts: %q, want %q\n%s", got, want, strings.Join(logs, "\n"))
	}
	p.checkNoLeftovers()
	if left, _ := os.ReadDir(filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)); len(left) > 0 {
		t.Errorf("lanes left behind: %v", left)
	}
	// No integration half-done: each tested feature's verdict is on the
	// branch, and every feature commit of the branch is a tested
	// feature's verdict.
	for _, id := range []string{"F-001", "F-002"} {
		ref := strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/"+id))
		if _, err := p.gitTry("merge-base", "--is-ancestor", ref, "HEAD"); err != nil {
			t.Errorf("%s's verdict %s is not on the branch: %v", id, ref, err)
		}
	}
	for _, c := range strings.Fields(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: ", "HEAD")) {
		id := strings.TrimSpace(p.git("log", "-1", "--format=%(trailers:key=ctxgraphd-feature,valueonly)", c))
		if ref := strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/"+id)); ref != c {
			t.Errorf("the branch holds %s, a commit of %s that is not its verdict (%s)", c, id, ref)
		}
	}
	ts := p.transitions()
	for i := 1; i < len(ts); i++ {
		if ts[i].Seq != ts[i-1].Seq+1 {
			t.Fatalf("transition %d follows %d: one was lost", ts[i].Seq, ts[i-1].Seq)
		}
	}
}
