package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// TestRealClaudeRun drives the real CLI through the runner: an initializer
// run against the scripted model, read from the live stream to its result,
// then a resumed session on the same conversation.
func TestRealClaudeRun(t *testing.T) {
	bin := claudetest.Binary(t)
	model := scriptedmodel.New(scriptedmodel.DefaultScenario(), zaptest.NewLogger(t))
	url, err := model.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".claude", "progress"), 0o755)

	r := agents.NewRunner(agents.Options{Command: bin, Timeout: 2 * time.Minute, IdleTimeout: time.Minute,
		SocketPath: filepath.Join(t.TempDir(), "none.sock"), BaseEnv: claudetest.Env(t, url)}, zaptest.NewLogger(t))
	cmd := agents.Command{Agent: role.Initializer, Task: "initialize_project", Precedent: []string{},
		Context:         agents.CommandContext{Goal: "a tiny sample", FeatureList: ".claude/progress/feature-list.json"},
		SuccessCriteria: agents.SuccessCriteria{FeatureListWritten: true}, NextAgent: "main"}
	system, _, err := agents.RolePrompt(dir, role.Initializer)
	if err != nil {
		t.Fatal(err)
	}
	session := uuid.NewString()
	var tools []string
	res := r.Run(context.Background(), agents.Spec{RunID: "run-000001", Role: role.Initializer, SessionID: session,
		Prompt: cmd.Prompt(), SystemPrompt: system, Dir: dir},
		nil, func(e agents.Event) {
			if e.Kind == "tool_use" {
				tools = append(tools, e.Tool)
			}
		})
	if !res.OK() {
		t.Fatalf("initializer run: %+v\nstderr: %s", res, res.StderrTail)
	}
	if res.SessionID != session || res.NumTurns == 0 || res.ToolCalls == 0 || len(tools) != res.ToolCalls || res.Summary == "" {
		t.Errorf("result = %+v, tools seen %v", res, tools)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude", "progress", "feature-list.json")); err != nil {
		t.Errorf("the initializer wrote no feature list: %v", err)
	}

	// The same conversation, resumed: the CLI must accept --resume with the
	// id the first run reported.
	res2 := r.Run(context.Background(), agents.Spec{RunID: "run-000002", Role: role.Initializer, SessionID: res.SessionID, Resume: true,
		Prompt: cmd.Prompt(), SystemPrompt: system, Dir: dir}, nil, nil)
	if res2.Ended != agents.EndExited || !res2.SawResult {
		t.Errorf("resumed run: %+v\nstderr: %s", res2, res2.StderrTail)
	}
}
