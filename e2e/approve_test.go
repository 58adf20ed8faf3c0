package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestAPlanIsApprovedBeforeAnyCode: with limits.approve_plan, the real
// initializer writes the plan and the night waits, as `ctl status` and the
// report tell a person, with nothing of any feature worked; `ctl resume`
// says to approve instead. The person pauses, edits the list and approves:
// the night goes on from there with their edit, every coding run after the
// approval, and the approval is their decision on the record.
func TestAPlanIsApprovedBeforeAnyCode(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("approve-plan",
		feature("F-001", scriptedmodel.Pass),
		feature("F-002", scriptedmodel.Pass),
	))
	daemon, log := p.start("--exit-when-done", "--set", "limits.approve_plan=true")
	defer daemon.Process.Signal(syscall.SIGTERM)
	p.waitFor("the plan's wait for a person", agentsWait, func() bool {
		st, ok := p.status()
		msg, _ := st["message"].(string)
		return ok && st["state"] == "waiting" && strings.Contains(msg, "ctxgraphd ctl approve")
	})
	if runs := p.model.Stats().Runs; len(runs) != 1 || runs["initializer-agent"] != 1 {
		t.Fatalf("runs before the approval: %v, want the initializer's alone", runs)
	}
	if words := p.mustRun("ctl", "status"); !strings.Contains(words, "waiting") || !strings.Contains(words, "ctxgraphd ctl approve") {
		t.Errorf("ctl status while the plan waits says:\n%s", words)
	}
	if report := p.mustRun("report"); !strings.Contains(report, "waiting") || !strings.Contains(report, "ctxgraphd ctl approve") {
		t.Errorf("the report while the plan waits says:\n%s", report)
	}
	if out, errOut, code := p.ctxgraphd("ctl", "resume"); code == 0 || !strings.Contains(errOut, "ctxgraphd ctl approve") {
		t.Errorf("ctl resume while the plan waits: exit %d, %q %q; want a refusal that says to approve", code, out, errOut)
	}

	p.mustRun("ctl", "pause")
	p.waitFor("the pause", startWait, func() bool { st, _ := p.status(); return st["state"] == "paused" })
	l := p.featureList()
	l.Feature("F-002").Title = "feature F-002, as the person wants it"
	if _, err := progress.WriteFeatureList(filepath.Dir(p.paths.Progress("feature-list.json")), l); err != nil {
		t.Fatal(err)
	}
	approvedAt := time.Now()
	if out := p.mustRun("ctl", "approve"); !strings.Contains(out, "approved") {
		t.Errorf("ctl approve: %q", out)
	}
	p.waitForExit(daemon, log)

	l = p.featureList()
	if got, want := states(l), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q", got, want)
	}
	if title := l.Feature("F-002").Title; title != "feature F-002, as the person wants it" {
		t.Errorf("F-002's title %q: the edit made before the approval was not taken", title)
	}
	for _, r := range p.runs() {
		if r.Role != "initializer-agent" && r.StartedAt.Before(approvedAt) {
			t.Errorf("%s %s started at %s, before the approval", r.Role, r.Feature, r.StartedAt)
		}
	}
	var approvals int
	for _, d := range p.traces(store.TraceFilter{Type: control.TraceDecision}) {
		if d.Source == control.SourceUser && strings.Contains(d.Event.WhatHappened, "approved the plan of 2 features") {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d decisions of a person approving the plan, want 1", approvals)
	}
}
