package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestHooksHoldWhileTheDaemonIsDown runs a real Claude Code session whose
// daemon is not there: the hooks must still refuse tested: true (failing
// closed), spool what the agent ran, and hand it to the daemon when it
// comes back, which believes a record to be a run's only by a token it
// issued itself.
func TestHooksHoldWhileTheDaemonIsDown(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("offline", feature("F-001", scriptedmodel.NeverPass)))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_MAX_RETRIES=0")
	p.runToEnd()
	if got := states(p.featureList()); got != "F-001=blocked" {
		t.Fatalf("after the first session: %s, want F-001=blocked", got)
	}

	// The daemon is gone. Someone fixes the code, and a tester session runs
	// with ctxgraphd's hooks: its test passes, its tested: true must not.
	// The blocked feature's work went to its ref and the tree was put
	// back, src/ included.
	if err := os.MkdirAll(filepath.Join(p.dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "src", "F-001.txt"), []byte("F-001 works\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const runID = "run-offline-1"
	r := agents.NewRunner(agents.Options{Command: claudetest.Binary(t), Timeout: 3 * time.Minute, SocketPath: p.paths.Socket, BaseEnv: p.env}, nil)
	cmd := agents.Command{Agent: role.Tester, Task: "validate_feature", Precedent: []string{}, NextAgent: "main",
		Context:         agents.CommandContext{FeatureID: "F-001", Attempt: 1, PreviousState: "code"},
		SuccessCriteria: agents.SuccessCriteria{Test: "sh tests/F-001.sh", TestsPass: true, Tested: true}}
	res := r.Run(context.Background(), agents.Spec{RunID: runID, Role: role.Tester, FeatureID: "F-001", SessionID: uuid.NewString(),
		Prompt: cmd.Prompt(), Dir: p.dir, Settings: gates.HookSettings(binary), Token: "a-token-no-daemon-issued"}, nil, nil)
	if res.Ended != agents.EndExited || !res.SawResult {
		t.Fatalf("tester session: %+v\n%s", res, res.StderrTail)
	}
	if f := p.featureList().Feature("F-001"); f.Tested {
		t.Fatal("F-001 was marked tested while the daemon was down")
	}
	recs, err := spool.Read(p.paths.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	var ranTest, denied bool
	for _, rec := range recs {
		if rec.Run != runID {
			continue
		}
		ranTest = ranTest || rec.Event == "post-tool-use" && strings.Contains(string(rec.Payload), "tests/F-001.sh")
		denied = denied || rec.Event == "pre-tool-use" && strings.Contains(string(rec.Decision), gates.TestedNeedsEvidence)
	}
	if !ranTest || !denied {
		t.Fatalf("spool: test run recorded %v, tested:true denied %v (%d records)", ranTest, denied, len(recs))
	}

	// The daemon comes back and takes in what the hooks saw.
	p.runToEnd()
	if left, _ := spool.Read(p.paths.StateDir); len(left) != 0 {
		t.Errorf("%d spooled records left after the daemon came back", len(left))
	}
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The session's environment names a run and carries a token, but no
	// daemon issued that token: what its hooks saw is kept as a person's
	// (a trace of the decision, which the hook made alone), never as the
	// run it claims to be. A command record would make it a run's test.
	cmds, err := st.Commands(runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 0 {
		t.Errorf("commands of a run the daemon never issued a token for were recorded as that run's: %+v", cmds)
	}
	trs, err := st.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		t.Fatal(err)
	}
	var offline []control.Trace
	for _, tr := range trs {
		if strings.Contains(tr.Event.WhatHappened, "while the daemon was down") {
			offline = append(offline, tr)
		}
	}
	if len(offline) != 1 || offline[0].Source != control.SourceHook || offline[0].Gate != gates.TestedNeedsEvidence || offline[0].Code != "daemon_unreachable" {
		t.Errorf("violation traces of the offline denial: %+v, want one tested-needs-evidence/daemon_unreachable from the hook", offline)
	} else if offline[0].Context.Run != "" || offline[0].Context.Agent != "" {
		t.Errorf("the offline denial is traced as %+v: a run the daemon never issued a token for is believed", offline[0].Context)
	}
	if f := p.featureList().Feature("F-001"); f.Tested {
		t.Error("F-001 became tested when the daemon came back")
	}
}
