package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestLanesWorkFeaturesAtOnce: with limits.parallel 2, the real CLI works
// two features whose scopes do not overlap at once, each in a lane of
// its own, confined there by Claude Code's sandbox; both are tested, the
// branch takes one commit each on trees where both tests pass, the
// project's work tree holds both, and no lane is left.
func TestLanesWorkFeaturesAtOnce(t *testing.T) {
	t.Parallel()
	p := newProject(t, scenario("lanes",
		feature("F-001", scriptedmodel.Pass),
		feature("F-002", scriptedmodel.Pass),
	))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2")
	log := p.runToEnd()

	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q\n%s", got, want, log)
	}
	var coders []store.Run
	for _, r := range p.runs() {
		if r.Outcome != "ok" {
			t.Errorf("run %s (%s %s) outcome %q: %s", r.ID, r.Role, r.Feature, r.Outcome, r.Summary)
		}
		if r.Role == "coding-agent" {
			coders = append(coders, r)
		}
	}
	if len(coders) != 2 {
		t.Fatalf("%d coding runs, want 2", len(coders))
	}
	if a, b := coders[0], coders[1]; !a.StartedAt.Before(b.EndedAt) || !b.StartedAt.Before(a.EndedAt) {
		t.Errorf("the two coders did not work at once: %s %s–%s, %s %s–%s", a.Feature, a.StartedAt.Format(time.StampMilli), a.EndedAt.Format(time.StampMilli),
			b.Feature, b.StartedAt.Format(time.StampMilli), b.EndedAt.Format(time.StampMilli))
	}
	for _, id := range []string{"F-001", "F-002"} {
		files := p.git("ls-tree", "-r", "--name-only", "HEAD")
		if !strings.Contains(files, id) {
			t.Errorf("the branch does not hold %s's code:\n%s", id, files)
		}
	}
	// One commit a feature on the branch, each its verdict's.
	for _, id := range []string{"F-001", "F-002"} {
		got := strings.TrimSpace(p.git("log", "--format=%H", "--grep", "^ctxgraphd-feature: "+id+"$", "HEAD"))
		if got == "" || strings.Contains(got, "\n") || got != strings.TrimSpace(p.git("rev-parse", "refs/ctxgraphd/tested/"+id)) {
			t.Errorf("%s's commits on the branch: %q, want its verdict's alone\n%s", id, got, p.git("log", "--format=%h %s", "HEAD"))
		}
	}
	if left, _ := os.ReadDir(filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)); len(left) > 0 {
		t.Errorf("lanes left behind in %s: %v", filepath.Dir(p.paths.StateDir), left)
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
	t.Parallel()
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
			if !ok || !moment.now(st) {
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
