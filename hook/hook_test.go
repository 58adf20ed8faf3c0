package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
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
	if err := gates.SaveOffline(p.StateDir, gates.Offline{Frozen: []string{"tests/F-001.sh"}}); err != nil {
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
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
	recs, err := spool.Read(p.StateDir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("spool: %d records, %v", len(recs), err)
	}
	// The daemon learns what the hook decided alone: the denial is
	// spooled with the coder's edit, and nothing with the person's.
	var d control.HookDecision
	if err := json.Unmarshal(recs[0].Decision, &d); err != nil || d.Gate != gates.FrozenTests || d.Code != "frozen_test" {
		t.Errorf("the coder's record carries %s (%v), want the frozen_test denial", recs[0].Decision, err)
	}
	if len(recs[1].Decision) != 0 {
		t.Errorf("the person's allowed edit was spooled with a decision: %s", recs[1].Decision)
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
	code := Main(context.Background(), []string{"pre-tool-use", gates.InteractiveFlag}, strings.NewReader("not even json"), &out, &errOut,
		env(map[string]string{"CTXGRAPH_RUN": "run-1"}))
	if code != 0 || out.Len() != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	// Outside a run they judge, and bad input on a gating event blocks.
	code = Main(context.Background(), []string{"pre-tool-use", gates.InteractiveFlag}, strings.NewReader("not even json"), &out, &errOut, env(nil))
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

func (r *recorder) Traces(context.Context, control.TraceQuery) ([]control.Trace, error) {
	return nil, nil
}
func (r *recorder) Trace(context.Context, string) (control.Trace, error) { return control.Trace{}, nil }

// listJSON is a feature list whose test is no runner the gates know, so
// that only the list says it is a test.
const listJSON = `{"version": 1, "features": [
 {"id": "F-001", "title": "Greeting", "scope": ["src/**"], "test": "./verify.sh", "status": "in_progress", "tested": false}
]}`

func writeList(t *testing.T, p paths.Project) {
	t.Helper()
	if err := os.WriteFile(p.Progress("feature-list.json"), []byte(listJSON), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stopPayload is what Claude Code sends when the agent (a subagent for
// SubagentStop) wants to end.
func stopPayload(p paths.Project, event string) []byte {
	data, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": p.Dir, "hook_event_name": event})
	return data
}

// blockedStop returns the message of the Stop block in out, or "" when
// the stop is let through.
func blockedStop(t *testing.T, out string) string {
	t.Helper()
	if out == "" {
		return ""
	}
	var block struct{ Decision, Reason string }
	if err := json.Unmarshal([]byte(out), &block); err != nil || block.Decision != "block" {
		t.Fatalf("not a Stop block: %s (%v)", out, err)
	}
	var reason gates.Denial
	if err := json.Unmarshal([]byte(block.Reason), &reason); err != nil {
		t.Fatalf("the reason is not the structured denial: %s", block.Reason)
	}
	return reason.Message
}

// TestDecidingAloneReadsTheFeatureList: with the daemon down, a coder's
// scope comes from the feature list on disk.
func TestDecidingAloneReadsTheFeatureList(t *testing.T) {
	p := project(t)
	writeList(t, p)
	coder := map[string]string{"CTXGRAPH_AGENT": "coding-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-000002", "CLAUDE_PROJECT_DIR": p.Dir}
	for rel, code := range map[string]string{"src/a": "", "docs/a.md": "out_of_scope"} {
		var out, errOut bytes.Buffer
		if c := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, rel)), &out, &errOut, env(coder)); c != 0 {
			t.Fatalf("exit %d: %s", c, errOut.String())
		}
		if code == "" && out.Len() != 0 || code != "" && !strings.Contains(out.String(), `"code\":\"`+code) {
			t.Errorf("edit of %s: %q, want %q", rel, out.String(), code)
		}
	}
}

// TestDecidingAloneCountsThisRunsRecords: a hook deciding alone knows what
// its run did from the spool (the records of this run only, by its run
// id): the tests it ran, recognised by the feature's own test command, and
// the stops the hook blocked before.
func TestDecidingAloneCountsThisRunsRecords(t *testing.T) {
	const run = "run-000003"
	ranTest := func(run string) spool.Record {
		data, _ := json.Marshal(map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "./verify.sh"}, "tool_response": map[string]any{"stdout": "ok\n", "stderr": ""}})
		return spool.Record{Event: "post-tool-use", Run: run, Payload: data}
	}
	stopped := func(run, event string, blocked bool) spool.Record {
		r := spool.Record{Event: event, Run: run, Payload: json.RawMessage(`{}`)}
		if blocked {
			r.Decision = json.RawMessage(`{"gate":"tester-must-test","code":"no_test_run","mode":"enforce"}`)
		}
		return r
	}
	tests := []struct {
		name    string
		run     string // the hook's CTXGRAPH_RUN
		spooled []spool.Record
		want    string // the block's message, "" = lets it stop
	}{
		{"nothing spooled", run, nil, "tester-agent may not stop before it has run a test (block 1 of 7)"},
		{"this run ran the feature's test", run, []spool.Record{ranTest(run)}, ""},
		{"another run ran it", run, []spool.Record{ranTest("run-000001")}, "tester-agent may not stop before it has run a test (block 1 of 7)"},
		// Another run's records before this run's are passed over, not the
		// end of the spool.
		{"this run ran it after another run's records", run, []spool.Record{ranTest("run-000001"), stopped("run-000001", "stop", true), ranTest(run)}, ""},
		// A run-less record is no run's, not even a run-less hook's.
		{"no run", "", []spool.Record{ranTest("")}, "tester-agent may not stop before it has run a test (block 1 of 7)"},
		{"the stops and subagent stops it blocked count, no others", run, []spool.Record{
			stopped(run, "stop", true), stopped(run, "subagent-stop", true), stopped(run, "stop", true),
			stopped(run, "stop", false), stopped("run-000001", "stop", true),
		}, "tester-agent may not stop before it has run a test (block 4 of 7)"},
		{"a denied tool call is not a stop", run, []spool.Record{
			{Event: "pre-tool-use", Run: run, Payload: edit(paths.Project{}, "x"), Decision: json.RawMessage(`{"gate":"scope"}`)},
		}, "tester-agent may not stop before it has run a test (block 1 of 7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := project(t)
			writeList(t, p)
			for _, r := range tt.spooled {
				if err := spool.Append(p.StateDir, r); err != nil {
					t.Fatal(err)
				}
			}
			tester := map[string]string{"CTXGRAPH_AGENT": "tester-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": tt.run, "CLAUDE_PROJECT_DIR": p.Dir}
			var out, errOut bytes.Buffer
			if c := Main(context.Background(), []string{"stop"}, bytes.NewReader(stopPayload(p, "Stop")), &out, &errOut, env(tester)); c != 0 {
				t.Fatalf("exit %d: %s", c, errOut.String())
			}
			if got := blockedStop(t, out.String()); got != tt.want {
				t.Errorf("stop: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTheProjectIsFoundFromItsDirectoryOrTheCwd: CLAUDE_PROJECT_DIR names
// the project; without it the payload's cwd does; with neither leading to
// one, a gating event is blocked with the reason.
func TestTheProjectIsFoundFromItsDirectoryOrTheCwd(t *testing.T) {
	nowhere := t.TempDir()
	tester := func(projectDir string) map[string]string {
		return map[string]string{"CTXGRAPH_AGENT": "tester-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-1", "CLAUDE_PROJECT_DIR": projectDir}
	}
	payload := func(cwd string) []byte {
		data, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": cwd, "hook_event_name": "Stop"})
		return data
	}
	tests := []struct {
		name       string
		projectDir string // $P is the project
		cwd        string
		code       int
		stderr     string // "" = the stop is judged (and blocked: no test ran)
	}{
		{"from CLAUDE_PROJECT_DIR", "$P", nowhere, 0, ""},
		{"from the payload's cwd", "", "$P", 0, ""},
		{"from a directory below the project", "", "$P/tests", 0, ""},
		{"from nowhere", "", nowhere, 2, "ctxgraphd hook stop: no daemon answered and the project could not be found from " + strconv.Quote(nowhere)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := project(t) // each its own spool
			at := func(dir string) string { return strings.Replace(dir, "$P", p.Dir, 1) }
			var out, errOut bytes.Buffer
			code := Main(context.Background(), []string{"stop"}, bytes.NewReader(payload(at(tt.cwd))), &out, &errOut, env(tester(at(tt.projectDir))))
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errOut.String())
			}
			if tt.stderr == "" {
				if !strings.Contains(blockedStop(t, out.String()), "(block 1 of 7)") {
					t.Errorf("the stop was not judged: %q %q", out.String(), errOut.String())
				}
				return
			}
			if out.Len() != 0 || !strings.HasPrefix(errOut.String(), tt.stderr) {
				t.Errorf("stdout %q, stderr %q, want %q", out.String(), errOut.String(), tt.stderr)
			}
		})
	}
}

// TestTheDaemonIsFoundThroughTheProject: without CTXGRAPH_SOCKET the hook
// asks the daemon at the project's socket; with it, at the one it names.
func TestTheDaemonIsFoundThroughTheProject(t *testing.T) {
	p := project(t)
	atProject, named := &recorder{}, &recorder{}
	controltest.Serve(t, p.Socket, atProject)
	other := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "other.sock")
	controltest.Serve(t, other, named)
	vars := map[string]string{"CTXGRAPH_AGENT": "coding-agent", "CTXGRAPH_RUN": "run-9", "CLAUDE_PROJECT_DIR": p.Dir, control.RunTokenEnv: "tok"}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, "src/a")), &out, &errOut, env(vars)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if len(atProject.tokens) != 1 || !strings.Contains(out.String(), "out_of_scope") {
		t.Fatalf("the project's daemon saw %q; the hook printed %s", atProject.tokens, out.String())
	}
	vars["CTXGRAPH_SOCKET"] = other
	out.Reset()
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(edit(p, "src/a")), &out, &errOut, env(vars)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if len(named.tokens) != 1 || len(atProject.tokens) != 1 || !strings.Contains(out.String(), "out_of_scope") {
		t.Fatalf("CTXGRAPH_SOCKET's daemon saw %q, the project's %q; the hook printed %s", named.tokens, atProject.tokens, out.String())
	}
}

// TestASpoolThatCannotBeWrittenIsReported: the decision still stands, and
// stderr says the daemon will not learn of the event.
func TestASpoolThatCannotBeWrittenIsReported(t *testing.T) {
	p := project(t)
	// A file where the state directories should be.
	if err := os.WriteFile(filepath.Dir(p.StateDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tester := map[string]string{"CTXGRAPH_AGENT": "tester-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-1", "CLAUDE_PROJECT_DIR": p.Dir}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"stop"}, bytes.NewReader(stopPayload(p, "Stop")), &out, &errOut, env(tester)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(blockedStop(t, out.String()), "(block 1 of 7)") {
		t.Errorf("the decision was lost: %s", out.String())
	}
	if !strings.HasPrefix(errOut.String(), "ctxgraphd hook stop: could not spool the record for the daemon: ") {
		t.Errorf("stderr: %q", errOut.String())
	}
}

// filler is n bytes of 'x', without holding them in memory: not JSON, and
// rejected at its first byte, so that only reading it costs.
type filler struct{ n int }

func (f *filler) Read(b []byte) (int, error) {
	if f.n == 0 {
		return 0, io.EOF
	}
	k := copy(b[:min(len(b), f.n)], xs)
	f.n -= k
	return k, nil
}

var xs = bytes.Repeat([]byte{'x'}, 1<<20)

// TestPayloadSizeLimit: MaxPayload bytes are read and judged (here: found
// not to be JSON), one byte more is refused as too large; on a gating
// event, with exit 2.
func TestPayloadSizeLimit(t *testing.T) {
	if raceEnabled {
		// The detector's shadow memory turns the two 64 MiB reads into
		// seconds each; they are one goroutine's, with nothing to race.
		t.Skip("skipping 64 MiB payloads under the race detector")
	}
	for n, want := range map[int]string{
		MaxPayload:     "ctxgraphd hook pre-tool-use: hook payload: stdin of PreToolUse is not a JSON object",
		MaxPayload + 1: "ctxgraphd hook pre-tool-use: payload larger than 67108864 bytes",
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), []string{"pre-tool-use"}, &filler{n}, &out, &errOut, env(nil))
		if code != 2 || out.Len() != 0 || !strings.HasPrefix(errOut.String(), want) {
			t.Errorf("%d bytes: exit %d, stdout %q, stderr %q; want 2 and %q", n, code, out.String(), errOut.String(), want)
		}
	}
}

// TestUsage: the hook takes one event and the interactive flag, in either
// order, and refuses anything else with exit 2 and the usage.
func TestUsage(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string // "" = the event is judged
	}{
		{nil, "ctxgraphd hook: missing EVENT; usage: ctxgraphd hook EVENT [--interactive]"},
		{[]string{gates.InteractiveFlag}, "ctxgraphd hook: missing EVENT"},
		{[]string{"--verbose", "stop"}, `ctxgraphd hook: unexpected argument "--verbose"; usage: ctxgraphd hook EVENT [--interactive]`},
		{[]string{"stop", "extra"}, `ctxgraphd hook: unexpected argument "extra"`},
		{[]string{"", "stop"}, `ctxgraphd hook: unexpected argument ""`},
		{[]string{"stop"}, ""},
		{[]string{gates.InteractiveFlag, "stop"}, ""},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		// Stdin is not JSON: an event that is judged fails on it, after
		// the arguments were accepted.
		code := Main(context.Background(), tt.args, strings.NewReader("not json"), &out, &errOut, env(nil))
		if tt.stderr == "" {
			if code != 2 || !strings.Contains(errOut.String(), "is not a JSON object") {
				t.Errorf("Main(%q): exit %d, stderr %q; want the payload judged", tt.args, code, errOut.String())
			}
			continue
		}
		if code != 2 || out.Len() != 0 || !strings.HasPrefix(errOut.String(), tt.stderr) {
			t.Errorf("Main(%q): exit %d, stderr %q; want 2 and %q", tt.args, code, errOut.String(), tt.stderr)
		}
	}
}

// TestDecidingAloneHoldsTheGuards: with the daemon down, the guards it left
// in gates.json hold as the daemon would hold them: an enforced guard
// denies with gate guard:<id>, and the denial is spooled for the daemon.
func TestDecidingAloneHoldsTheGuards(t *testing.T) {
	p := project(t)
	rule := guards.Rule{ID: "no-curl", Status: guards.Enforce, Tool: "Bash", Match: guards.Match{Command: `\bcurl\b`}, Message: "no network", Suggestion: "vendor it"}
	if err := gates.SaveOffline(p.StateDir, gates.Offline{Guards: []guards.Rule{rule}}); err != nil {
		t.Fatal(err)
	}
	agent := map[string]string{"CTXGRAPH_AGENT": "coding-agent", "CTXGRAPH_FEATURE": "F-001", "CTXGRAPH_RUN": "run-000002",
		"CLAUDE_PROJECT_DIR": p.Dir, "CTXGRAPH_SOCKET": p.Socket}
	bash := func(cmd string) []byte {
		data, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": p.Dir, "hook_event_name": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": cmd}})
		return data
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(bash("curl example.com")), &out, &errOut, env(agent)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"permissionDecision":"deny"`) || !strings.Contains(out.String(), `guard:no-curl`) {
		t.Fatalf("an agent's command a guard refuses, decided alone: %s", out.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"pre-tool-use"}, bytes.NewReader(bash("ls")), &out, &errOut, env(agent)); code != 0 || out.Len() != 0 {
		t.Fatalf("a command no guard matches: exit %d, %s", code, out.String())
	}
	recs, err := spool.Read(p.StateDir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("spool: %d records, %v", len(recs), err)
	}
	var d control.HookDecision
	if err := json.Unmarshal(recs[0].Decision, &d); err != nil || d.Gate != "guard:no-curl" || d.Code != guards.CodeDenied {
		t.Errorf("the record carries %s (%v), want the guard's denial", recs[0].Decision, err)
	}
}

// TestTheDaemonParsesWhatItJudges: a payload is parsed once, where it is
// judged. When the daemon answers, the hook hands it over as it came and
// prints the answer: here a payload the gates would refuse to read (no
// tool_name), which only the daemon may say is bad.
func TestTheDaemonParsesWhatItJudges(t *testing.T) {
	p := project(t)
	b := &recorder{}
	controltest.Serve(t, p.Socket, b)
	vars := map[string]string{"CLAUDE_PROJECT_DIR": p.Dir, "CTXGRAPH_SOCKET": p.Socket, control.RunTokenEnv: "tok"}
	var out, errOut bytes.Buffer
	payload := `{"hook_event_name": "PreToolUse"}`
	if code := Main(context.Background(), []string{"pre-tool-use"}, strings.NewReader(payload), &out, &errOut, env(vars)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if len(b.tokens) != 1 || !strings.Contains(out.String(), `"permissionDecision":"deny"`) {
		t.Errorf("the daemon was asked %d times; the hook printed %s", len(b.tokens), out.String())
	}
	// Deciding alone, the hook reads it itself, and refuses it.
	vars["CTXGRAPH_SOCKET"] = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "nobody.sock")
	out.Reset()
	if code := Main(context.Background(), []string{"pre-tool-use"}, strings.NewReader(payload), &out, &errOut, env(vars)); code != 2 || !strings.Contains(errOut.String(), "has no tool_name") {
		t.Errorf("deciding alone: exit %d, stderr %q; want 2 and the payload's problem", code, errOut.String())
	}
}
