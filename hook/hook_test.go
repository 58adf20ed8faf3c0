package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// project makes a project with a state directory and socket of its own.
func project(t *testing.T) paths.Project {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	rt, err := os.MkdirTemp("", "cgh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, paths.ProgressDir), 0o755)
	os.MkdirAll(filepath.Join(dir, "tests"), 0o755)
	os.WriteFile(filepath.Join(dir, "tests", "F-001.sh"), []byte("grep -qx ok src/a\n"), 0o644)
	p, err := paths.ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func edit(p paths.Project, rel string) []byte {
	data, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": p.Dir, "hook_event_name": "PreToolUse", "tool_name": "Edit",
		"tool_input": map[string]any{"file_path": filepath.Join(p.Dir, rel), "old_string": "grep", "new_string": "true ||"}})
	return data
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestDecidingAloneHoldsTheFrozenTests: with the daemon down, the hook
// judges from what the daemon left (gates.json): a coder's edit of a frozen
// test is refused, a person's is not, and every event is spooled with the
// hash of the run's token, never the token itself.
func TestDecidingAloneHoldsTheFrozenTests(t *testing.T) {
	p := project(t)
	if err := guard.SaveOffline(p.StateDir, guard.Offline{Frozen: []string{"tests/F-001.sh"}}); err != nil {
		t.Fatal(err)
	}
	agent := map[string]string{"CTXGRAPH_AGENT": "coding-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-000002",
		"CLAUDE_PROJECT_DIR": p.Dir, "CTXGRAPH_SOCKET": p.Socket, control.RunTokenEnv: "the-secret"}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, "tests/F-001.sh")), &out, &errOut, env(agent)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"permissionDecision":"deny"`) || !strings.Contains(out.String(), "frozen_test") {
		t.Fatalf("a coder's edit of a frozen test, decided alone: %s", out.String())
	}
	person := map[string]string{"CLAUDE_PROJECT_DIR": p.Dir}
	out.Reset()
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, "tests/F-001.sh")), &out, &errOut, env(person)); code != 0 || out.Len() != 0 {
		t.Fatalf("a person's edit: exit %d, %s", code, out.String())
	}
	recs, err := spool.Read(p.StateDir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("spool: %d records, %v", len(recs), err)
	}
	if recs[0].TokenHash != control.TokenHash("the-secret") || recs[1].TokenHash != "" {
		t.Errorf("token hashes spooled: %q %q", recs[0].TokenHash, recs[1].TokenHash)
	}
	data, _ := os.ReadFile(filepath.Join(p.StateDir, spool.FileName))
	if bytes.Contains(data, []byte("the-secret")) {
		t.Error("the run's token itself was written to the spool")
	}
}

// TestTheTokenReachesTheDaemon: the daemon knows a run by its token alone;
// what the environment says about the role is not sent.
func TestTheTokenReachesTheDaemon(t *testing.T) {
	p := project(t)
	b := &recorder{}
	controltest.Serve(t, p.Socket, b)
	vars := map[string]string{"CTXGRAPH_AGENT": "tester-agent", "CTXGRAPH_RUN": "run-9", "CLAUDE_PROJECT_DIR": p.Dir,
		"CTXGRAPH_SOCKET": p.Socket, control.RunTokenEnv: "tok"}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, "src/a")), &out, &errOut, env(vars)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if len(b.tokens) != 1 || b.tokens[0] != "tok" {
		t.Fatalf("tokens the daemon saw: %q", b.tokens)
	}
	if !strings.Contains(out.String(), "scope") {
		t.Errorf("the daemon's decision was not rendered: %s", out.String())
	}
}

// TestInteractiveHooksStandAsideInRuns: the hooks init --install-hooks
// writes judge nothing inside a daemon's run, whose own hooks judge it.
func TestInteractiveHooksStandAsideInRuns(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"pre-tool-use", InteractiveFlag}, strings.NewReader("not even json"), &out, &errOut,
		env(map[string]string{"CTXGRAPH_RUN": "run-1"}))
	if code != 0 || out.Len() != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	// Outside a run they judge, and bad input on a gating event blocks.
	code = Main(context.Background(), []string{"pre-tool-use", InteractiveFlag}, strings.NewReader("not even json"), &out, &errOut, env(nil))
	if code != 2 {
		t.Fatalf("bad input on a gating event: exit %d, want 2", code)
	}
}

// recorder is a gate backend that answers every PreToolUse with a scope
// denial and remembers the tokens it was given.
type recorder struct {
	controltest.Backend
	tokens []string
}

func (r *recorder) Hook(_ context.Context, token string, req control.HookRequest) (control.HookResponse, error) {
	r.tokens = append(r.tokens, token)
	return control.HookResponse{Decision: &control.HookDecision{Gate: "scope", Code: "out_of_scope", Message: "m", Suggestion: "s", Mode: "enforce"}}, nil
}

func (r *recorder) Traces(context.Context, control.TraceQuery) ([]control.Trace, error) { return nil, nil }
func (r *recorder) Trace(context.Context, string) (control.Trace, error)               { return control.Trace{}, nil }
