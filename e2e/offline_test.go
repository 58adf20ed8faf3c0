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
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/internal/claudetest"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// TestHooksHoldWhileTheDaemonIsDown runs a real Claude Code session whose
// daemon is not there: the hooks must still refuse tested: true (failing
// closed), record what the agent ran, and hand it all to the daemon when it
// comes back.
func TestHooksHoldWhileTheDaemonIsDown(t *testing.T) {
	p := newProject(t, scenario("offline", feature("F-001", scriptedmodel.NeverPass)))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_MAX_RETRIES=0")
	p.runToEnd()
	if got := states(p.featureList()); got != "F-001=blocked" {
		t.Fatalf("after the first session: %s, want F-001=blocked", got)
	}

	// The daemon is gone. Someone fixes the code, and a tester session runs
	// with ctxgraphd's hooks: its test passes, its tested: true must not.
	if err := os.WriteFile(filepath.Join(p.dir, "src", "F-001.txt"), []byte("F-001 works\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const runID = "run-offline-1"
	r := agents.NewRunner(agents.Options{Command: claudetest.Binary(t), Timeout: 3 * time.Minute, SocketPath: p.paths.Socket, BaseEnv: p.env}, nil)
	cmd := agents.Command{Agent: agents.Tester, Task: "validate_feature", Precedent: []string{}, NextAgent: "main",
		Context:         agents.CommandContext{FeatureID: "F-001", Attempt: 1, PreviousState: "code"},
		SuccessCriteria: agents.SuccessCriteria{Test: "sh tests/F-001.sh", TestsPass: true, Tested: true}}
	res := r.Run(context.Background(), agents.Spec{RunID: runID, Role: agents.Tester, FeatureID: "F-001", SessionID: uuid.NewString(),
		Prompt: cmd.Prompt(), Dir: p.dir, Settings: guard.HookSettings(binary)}, nil, nil)
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
		denied = denied || rec.Event == "pre-tool-use" && strings.Contains(string(rec.Decision), guard.TestedNeedsEvidence)
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
	cmds, err := st.Commands(runID)
	if err != nil {
		t.Fatal(err)
	}
	var passed bool
	for _, c := range cmds {
		passed = passed || strings.Contains(c.Command, "tests/F-001.sh") && c.ExitCode == 0
	}
	if !passed {
		t.Errorf("the offline test run is not in the store: %+v", cmds)
	}
	trs, err := st.Traces(store.TraceFilter{Type: store.TraceViolation, Run: runID})
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) == 0 || trs[0].Source != store.SourceHook || trs[0].Gate != guard.TestedNeedsEvidence {
		t.Errorf("no violation trace from the offline denial: %+v", trs)
	}
	if f := p.featureList().Feature("F-001"); f.Tested {
		t.Error("F-001 became tested when the daemon came back")
	}
}
