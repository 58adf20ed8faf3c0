package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

func scenario(name string, features ...scriptedmodel.FeatureScript) scriptedmodel.Scenario {
	return scriptedmodel.Scenario{Name: name, Features: features}
}

func feature(id string, b scriptedmodel.Behavior, deps ...string) scriptedmodel.FeatureScript {
	return scriptedmodel.FeatureScript{ID: id, Title: "feature " + id, Behavior: b, DependsOn: deps}
}

func TestTooManyBlockedFeaturesStopTheSession(t *testing.T) {
	night(t, extended)
	p := newProject(t, scenario("stop",
		feature("F-001", scriptedmodel.NeverPass),
		feature("F-002", scriptedmodel.NeverPass),
		feature("F-003", scriptedmodel.Pass),
	))
	_, log, code := p.ctxgraphd("run", "--exit-when-done", "--set", "limits.max_blocked=2", "--set", "limits.max_retries=0")
	if code != 1 || !strings.Contains(log, "2 features were blocked") {
		t.Fatalf("exit %d, want 1 with the reason; log:\n%s", code, log)
	}
	if got, want := states(p.featureList()), "F-001=blocked F-002=blocked F-003=pending"; got != want {
		t.Fatalf("final states %q, want %q", got, want)
	}
}

// A person who commits in the project while a feature is worked on keeps
// their commit as they made it, and the night's features still land on
// the branch, on top of it: the feature worked on then, and every one
// after it (which a feature left off the branch would keep off, its
// tested code being changes the branch does not hold).
func TestAPersonsCommitDuringTheNightStaysUnderTheFeatures(t *testing.T) {
	night(t, extended)
	p := newProject(t, scenario("persons-commit", feature("F-001", scriptedmodel.FailOnce), feature("F-002", scriptedmodel.Pass)))
	daemon, log := p.start("--exit-when-done")
	// F-001 is worked on from its first coding run to its second test:
	// the pause comes between two of those runs.
	p.waitFor("F-001's first coding run", agentsWait, func() bool {
		st, ok := p.status()
		cur, _ := st["current"].(map[string]any)
		return ok && cur != nil && cur["feature"] == "F-001" && cur["role"] == "coding-agent"
	})
	p.mustRun("ctl", "pause")
	p.waitFor("the session to pause", agentsWait, func() bool {
		st, ok := p.status()
		return ok && st["state"] == "paused"
	})
	// The tests ask the socket (project.status); a person asks `ctl
	// status`, which says the same of a real daemon, in JSON and in words.
	var said map[string]any
	if err := json.Unmarshal([]byte(p.mustRun("ctl", "status", "--json")), &said); err != nil {
		t.Fatal(err)
	}
	if asked, _ := p.status(); said["state"] != "paused" || said["pid"] != asked["pid"] || fmt.Sprint(said["features"]) != fmt.Sprint(asked["features"]) {
		t.Errorf("ctl status --json says %v, the socket %v", said, asked)
	}
	if words := p.mustRun("ctl", "status"); !regexp.MustCompile(`(?m)^state: +paused$`).MatchString(words) {
		t.Errorf("ctl status says:\n%s\nwant the state paused", words)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "NOTES.md"), []byte("a person's notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.git("add", "NOTES.md")
	p.git("-c", "user.name=A Person", "-c", "user.email=person@example.com", "commit", "-q", "-m", "a person's own commit")
	theirs := strings.TrimSpace(p.git("rev-parse", "HEAD"))
	exited := make(chan struct{})
	go func() { daemon.Wait(); close(exited) }()
	p.mustRun("ctl", "resume")
	p.waitFor("the night to end", agentsWait, func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})

	if got := states(p.featureList()); got != "F-001=tested F-002=tested" {
		t.Fatalf("final states %q\n%s", got, log)
	}
	if got := strings.TrimSpace(p.git("rev-parse", branch.TestedRef("F-001")+"^")); got != theirs {
		t.Errorf("F-001's commit sits on %s, want the person's commit %s", got, theirs)
	}
	if got, want := p.git("rev-parse", "HEAD"), p.git("rev-parse", branch.TestedRef("F-002")); got != want {
		t.Errorf("the branch is at %s, want F-002's commit %s", got, want)
	}
	if _, err := p.gitTry("merge-base", "--is-ancestor", theirs, "HEAD"); err != nil {
		t.Errorf("the person's commit %s is not in the branch's history: %v", theirs, err)
	}
	if got := p.git("show", "HEAD:NOTES.md"); got != "a person's notes\n" {
		t.Errorf("the branch's NOTES.md is %q, want the person's", got)
	}
	var r control.Report
	if err := json.Unmarshal([]byte(p.mustRun("report", "--format", "json")), &r); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Features {
		if f.Branch == "" {
			t.Errorf("%s is not on the branch: %+v", f.ID, f)
		}
	}
}

// TestKill9ThenRestartFinishesLikeAnUninterruptedRun: one night whose
// daemon is killed with -9 twice, once while a coding agent works on F-002
// and, after a restart, once while a tester checks F-002. Each time the
// orphaned agent dies with the daemon; the last restart finishes the night
// as an uninterrupted one would: the same states, no run done twice to its
// end, the retry and blocked counters kept across both kills, and the
// transitions one unbroken chain.
func TestKill9ThenRestartFinishesLikeAnUninterruptedRun(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("kill9",
		feature("F-001", scriptedmodel.Pass),
		feature("F-002", scriptedmodel.FailOnce),
		feature("F-003", scriptedmodel.NeverPass),
	))
	const want = "F-001=tested F-002=tested F-003=blocked"

	var logs []string
	for _, target := range []string{"coding-agent", "tester-agent"} {
		daemon, log := p.start()
		var agentPID int
		p.waitFor("a "+target+" run on F-002", agentsWait, func() bool {
			st, ok := p.status()
			if !ok {
				return false
			}
			cur, _ := st["current"].(map[string]any)
			if cur == nil || cur["role"] != target || cur["feature"] != "F-002" {
				return false
			}
			pid, _ := cur["pid"].(float64)
			agentPID = int(pid)
			return agentPID > 0
		})
		daemon.Process.Signal(syscall.SIGKILL)
		daemon.Wait()
		p.waitFor("the orphaned "+target+" to die with the daemon", 30*time.Second, func() bool { return !alive(agentPID) })
		logs = append(logs, "daemon killed during a "+target+" run:\n"+log.String())
	}

	p.runToEnd()
	if got := states(p.featureList()); got != want {
		t.Fatalf("after two kill -9 and restarts: %q, want %q\n%s", got, want, strings.Join(logs, "\n"))
	}
	p.checkNoLeftovers()
	// Nothing done twice: one finished run per role, feature and attempt.
	seen := map[string]string{}
	interrupted := map[string]int{}
	for _, r := range p.runs() {
		if r.Outcome == "interrupted" {
			interrupted[r.Role]++
		}
		if r.Outcome == "interrupted" || r.Role == "initializer-agent" {
			continue
		}
		key := r.Role + " " + r.Feature + " attempt " + string(rune('0'+r.Attempt))
		if prev, dup := seen[key]; dup {
			t.Fatalf("%s ran twice to its end (%s and %s)", key, prev, r.ID)
		}
		seen[key] = r.ID
	}
	if interrupted["coding-agent"] != 1 || interrupted["tester-agent"] != 1 {
		t.Errorf("interrupted runs by role %v, want one coder's and one tester's: one per kill", interrupted)
	}
	if n := len(codingRuns(p.runs(), "F-003")); n != 3 {
		t.Fatalf("F-003 had %d finished coding runs, want 3: the counters were not kept", n)
	}
	ts := p.transitions()
	for i := 1; i < len(ts); i++ {
		if ts[i].Seq != ts[i-1].Seq+1 {
			t.Fatalf("transition %d follows %d: one was lost", ts[i].Seq, ts[i-1].Seq)
		}
		if ts[i].From != ts[i-1].To {
			t.Fatalf("transition %d starts from %s, but %d ended in %s", ts[i].Seq, ts[i].From, ts[i-1].Seq, ts[i-1].To)
		}
	}
}

func TestMalformedFeatureListIsReportedAndNothingIsLost(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("malformed", feature("F-001", scriptedmodel.Pass)))
	// A person's half-written list: the daemon must neither crash nor let
	// an initializer overwrite it.
	broken := "{\n  \"version\": 1,\n  \"features\": [\n    {\"id\": \"F-001\", \"title\": \"Greeting\", \"test\": \"sh tests/F-001.sh\"\n"
	listPath := p.paths.Progress("feature-list.json")
	if err := os.WriteFile(listPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon, log := p.start()
	var msg string
	p.waitFor("the problem to be reported", startWait, func() bool {
		st, ok := p.status()
		if !ok {
			return false
		}
		msg, _ = st["message"].(string)
		return strings.Contains(msg, "feature-list.json")
	})
	if !strings.Contains(msg, "incomplete") && !strings.Contains(msg, "half") {
		t.Errorf("the message does not say what is wrong: %q", msg)
	}
	if data, _ := os.ReadFile(listPath); string(data) != broken {
		t.Fatalf("the person's file was changed:\n%s", data)
	}
	if st, _ := p.status(); st["state"] != "idle" {
		t.Fatalf("state %v, want idle while the list is broken", st["state"])
	}

	// Fixed: the daemon takes it and works through it. The test script is
	// the person's too.
	os.MkdirAll(filepath.Join(p.dir, "tests"), 0o755)
	os.WriteFile(filepath.Join(p.dir, "tests", "F-001.sh"), []byte("#!/bin/sh\ngrep -qx 'F-001 works' src/F-001.txt\n"), 0o755)
	fixed := broken + "    , \"status\": \"pending\", \"tested\": false, \"scope\": [\"src/F-001.txt\"]}\n  ]\n}\n"
	if err := os.WriteFile(listPath, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor("F-001 to be tested", agentsWait, func() bool {
		st, ok := p.status()
		if !ok {
			return false
		}
		f, _ := st["features"].(map[string]any)
		return f["tested"] == float64(1)
	})
	// Garbage now: reported, last good state kept.
	if err := os.WriteFile(listPath, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(time.Minute, func() bool {
		st, _ := p.status()
		m, _ := st["message"].(string)
		return strings.Contains(m, "invalid JSON")
	}) {
		st, _ := p.status()
		data, _ := os.ReadFile(listPath)
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		t.Fatalf("the garbage was not reported within a minute: status %v\nthe list on disk: %q\n%s", st, data, log)
	}
	st, _ := p.status()
	if f, _ := st["features"].(map[string]any); f["tested"] != float64(1) || f["total"] != float64(1) {
		t.Fatalf("the last good state was lost: %v", st)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Fatalf("daemon did not stop cleanly on SIGTERM: %v\n%s", err, log)
	}
}

func TestSecondDaemonForTheSameProjectIsRefused(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("twice", feature("F-001", scriptedmodel.Pass)))
	p.start()
	p.waitFor("the first daemon", startWait, func() bool { _, ok := p.status(); return ok })
	_, log, code := p.ctxgraphd("run")
	if code == 0 || !strings.Contains(log, "already") && !strings.Contains(log, "one daemon") {
		t.Fatalf("second daemon: exit %d\n%s", code, log)
	}
}
