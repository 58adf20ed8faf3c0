package gates

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// fixture loads a payload captured from the real CLI and points it at a
// tool call of the test's choosing.
func fixture(t *testing.T, name, tool string, input any) *Payload {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if tool != "" {
		raw["tool_name"] = tool
		raw["tool_input"] = input
	}
	data, _ = json.Marshal(raw)
	event := map[string]string{"PreToolUse.json": "pre-tool-use", "Stop.json": "stop", "Stop-active.json": "stop",
		"PostToolUse.json": "post-tool-use", "PostToolUseFailure.json": "post-tool-use-failure", "SessionStart.json": "session-start"}[name]
	p, err := ParsePayload(event, data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const listJSON = `{"version": 1, "features": [
 {"id": "F-001", "title": "Greeting", "scope": ["src/greet/**", "src/F-001.txt"], "test": "sh tests/F-001.sh", "status": "in_progress", "tested": false},
 {"id": "F-002", "title": "Farewell", "test": "sh tests/F-002.sh", "status": "pending", "tested": false}
]}`

type env struct {
	dir   string
	list  *progress.List
	state State
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".claude", "progress"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, ".claude", "progress", "feature-list.json"), []byte(listJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := progress.Parse([]byte(listJSON))
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "build.log")
	os.WriteFile(big, []byte(strings.Repeat("a log line of moderate length\n", 100000)), 0o644)
	return &env{dir: dir, list: l, state: State{ProjectDir: dir, List: l, Protected: []string{"/var/lib/ctxgraphd-state"}}}
}

// withTested returns the feature list with F-001 changed by fn.
func (e *env) edited(fn func(f *progress.Feature)) string {
	l := e.list.Clone()
	fn(l.Feature("F-001"))
	return string(l.Marshal())
}

func (e *env) p(rel string) string { return filepath.Join(e.dir, rel) }

func TestPreToolUseGates(t *testing.T) {
	e := newEnv(t)
	listPath := e.p(".claude/progress/feature-list.json")
	passing := []control.CommandRecord{{Command: "sh tests/F-001.sh", ExitCode: 0, IsTest: true}}
	failing := []control.CommandRecord{{Command: "sh tests/F-001.sh", ExitCode: 1, IsTest: true}}
	testedWithEvidence := e.edited(func(f *progress.Feature) {
		f.Tested, f.Status, f.Evidence = true, progress.Completed, []string{".claude/progress/evidence/F-001/a.log"}
	})
	testedNoEvidence := e.edited(func(f *progress.Feature) { f.Tested = true })

	tests := []struct {
		name     string
		actor    Actor
		tool     string
		input    map[string]any
		commands []control.CommandRecord
		offline  bool
		modes    Modes
		gate     string // "" = allowed
		code     string
		mode     Mode
	}{
		{name: "tester sets tested after a passing test with evidence", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence}, commands: passing},
		{name: "tester sets tested before running the test", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence},
			gate: TestedNeedsEvidence, code: "no_test_run"},
		{name: "tester sets tested after the test failed", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence}, commands: failing,
			gate: TestedNeedsEvidence, code: "test_failed"},
		{name: "another command passing is not the feature's test", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence},
			commands: []control.CommandRecord{{Command: "go test ./...", IsTest: true}}, gate: TestedNeedsEvidence, code: "no_test_run"},
		{name: "tester sets tested without evidence", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedNoEvidence}, commands: passing,
			gate: TestedNeedsEvidence, code: "no_evidence"},
		{name: "daemon down: tested fails closed", actor: Actor{Role: Tester, Feature: "F-001"}, offline: true,
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence}, commands: passing,
			gate: TestedNeedsEvidence, code: "daemon_unreachable"},
		{name: "tester of F-002 marks F-001", actor: Actor{Role: Tester, Feature: "F-002"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": testedWithEvidence}, commands: passing,
			gate: RoleWritePolicy, code: "not_your_feature"},
		// The one change is tested: true on another feature: it is judged
		// as not the tester's to make, never as a claim about the tester's
		// own feature and its test runs.
		{name: "tester of F-002 sets only F-001's tested (Edit)", actor: Actor{Role: Tester, Feature: "F-002"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": `"status": "in_progress", "tested": false`, "new_string": `"status": "in_progress", "tested": true`},
			gate: RoleWritePolicy, code: "not_your_feature"},
		// An Edit with an empty old_string is one the Edit tool refuses on an
		// existing file: the gate makes up no change of its own for it.
		{name: "an Edit of the list with an empty old_string is left to the tool", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": "", "new_string": `"tested": true`}},
		{name: "coder marks its own feature tested (Edit)", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": `"status": "in_progress", "tested": false`, "new_string": `"status": "completed", "tested": true`},
			gate: RoleWritePolicy, code: "coder_sets_tested"},
		{name: "coder completes its feature (Edit)", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": `"status": "in_progress"`, "new_string": `"status": "completed"`}},
		{name: "coder blocks its own feature", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": `"status": "in_progress"`, "new_string": `"status": "blocked"`},
			gate: RoleWritePolicy, code: "status_not_allowed"},
		{name: "coder rewrites a test command", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Edit", input: map[string]any{"file_path": listPath, "old_string": `"sh tests/F-001.sh"`, "new_string": `"true"`},
			gate: RoleWritePolicy, code: "feature_rewrite"},
		{name: "coder deletes a feature", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": `{"version":1,"features":[{"id":"F-001","title":"Greeting","scope":["src/greet/**","src/F-001.txt"],"test":"sh tests/F-001.sh","status":"completed"}]}`},
			gate: RoleWritePolicy, code: "feature_rewrite"},
		{name: "agent writes broken JSON", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": listPath, "content": `{"version": 1, "features": [`},
			gate: RoleWritePolicy, code: "invalid_feature_list"},
		{name: "any agent writes session-state.json", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": e.p(".claude/progress/session-state.json"), "content": "{}"},
			gate: RoleWritePolicy, code: "session_state"},
		{name: "bash flips tested with sed", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Bash", input: map[string]any{"command": `sed -i 's/"tested": false/"tested": true/' .claude/progress/feature-list.json`},
			gate: RoleWritePolicy, code: "bash_writes_feature_list"},
		{name: "bash python rewrite of the list", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Bash", input: map[string]any{"command": `python3 -c "import json; d=json.load(open('.claude/progress/feature-list.json'))"`},
			gate: RoleWritePolicy, code: "bash_writes_feature_list"},
		{name: "bash reads the list", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Bash", input: map[string]any{"command": `cat .claude/progress/feature-list.json`}},
		{name: "bash writes the session state", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Bash", input: map[string]any{"command": `echo '{}' > .claude/progress/session-state.json`},
			gate: RoleWritePolicy, code: "session_state"},
		{name: "bash touches the daemon's state", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Bash", input: map[string]any{"command": `rm -rf /var/lib/ctxgraphd-state/state.db`},
			gate: RoleWritePolicy, code: "daemon_files"},
		{name: "tester edits source", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": e.p("src/F-001.txt"), "content": "F-001 works\n"},
			gate: RoleWritePolicy, code: "tester_edits_source"},
		{name: "tester writes evidence", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": e.p(".claude/progress/evidence/F-001/a.log"), "content": "ok"}},
		{name: "coder writes inside its scope (glob)", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": e.p("src/greet/deep/hello.go"), "content": "package greet"}},
		{name: "coder writes outside its scope", actor: Actor{Role: Coder, Feature: "F-001"},
			tool: "Write", input: map[string]any{"file_path": e.p("src/other/x.go"), "content": "package other"},
			gate: Scope, code: "out_of_scope"},
		{name: "coder of a feature without scope writes anywhere", actor: Actor{Role: Coder, Feature: "F-002"},
			tool: "Write", input: map[string]any{"file_path": e.p("src/other/x.go"), "content": "package other"}},
		{name: "scope in warn mode lets it through, marked", actor: Actor{Role: Coder, Feature: "F-001"}, modes: Modes{Scope: Warn},
			tool: "Write", input: map[string]any{"file_path": e.p("src/other/x.go"), "content": "x"}, gate: Scope, code: "out_of_scope", mode: Warn},
		{name: "scope off", actor: Actor{Role: Coder, Feature: "F-001"}, modes: Modes{Scope: Off},
			tool: "Write", input: map[string]any{"file_path": e.p("src/other/x.go"), "content": "x"}},
		{name: "agent edits the daemon's configuration", actor: Actor{Role: Coder, Feature: "F-002"},
			tool: "Write", input: map[string]any{"file_path": e.p(".claude/ctxgraphd.yaml"), "content": "gates: {}"},
			gate: RoleWritePolicy, code: "daemon_files"},
		{name: "reading a huge log whole", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Read", input: map[string]any{"file_path": e.p("build.log")}, gate: LogReadLimit, code: "file_too_large"},
		{name: "reading a huge log by range", actor: Actor{Role: Tester, Feature: "F-001"},
			tool: "Read", input: map[string]any{"file_path": e.p("build.log"), "offset": 99000, "limit": 200}},
		{name: "cat of a huge log", actor: Actor{Role: Coder, Feature: "F-002"},
			tool: "Bash", input: map[string]any{"command": "cat build.log"}, gate: LogReadLimit, code: "file_too_large"},
		{name: "reading a small file", actor: Actor{Role: Coder, Feature: "F-002"},
			tool: "Read", input: map[string]any{"file_path": listPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.state
			s.Commands, s.Offline = tt.commands, tt.offline
			d := PreToolUse(tt.modes, tt.actor, s, fixture(t, "PreToolUse.json", tt.tool, tt.input))
			if tt.gate == "" {
				if d != nil {
					t.Fatalf("an honest action was stopped: %+v", d)
				}
				return
			}
			if d == nil {
				t.Fatalf("allowed; want %s/%s", tt.gate, tt.code)
			}
			want := tt.mode
			if want == "" {
				want = Enforce
			}
			if d.Gate != tt.gate || d.Code != tt.code || d.Mode != string(want) {
				t.Fatalf("got %s/%s (%s), want %s/%s (%s): %s", d.Gate, d.Code, d.Mode, tt.gate, tt.code, want, d.Message)
			}
			if d.Message == "" || d.Suggestion == "" {
				t.Fatalf("a denial must say what and what to do: %+v", d)
			}
		})
	}
}

func TestTesterMustTestBeforeStopping(t *testing.T) {
	e := newEnv(t)
	tester := Actor{Role: Tester, Feature: "F-001"}
	stop := fixture(t, "Stop.json", "", nil)
	if d := Stop(nil, tester, e.state, stop); d == nil || d.Code != "no_test_run" || !strings.Contains(d.Suggestion, "sh tests/F-001.sh") {
		t.Fatalf("tester stopping without a test: %+v", d)
	}
	s := e.state
	s.Commands = []control.CommandRecord{{Command: "sh tests/F-001.sh", ExitCode: 1, IsTest: true}}
	if d := Stop(nil, tester, s, stop); d != nil {
		t.Fatalf("a tester that ran a (failing) test must be able to stop and report: %+v", d)
	}
	s = e.state
	s.Commands = []control.CommandRecord{{Command: "ls -la", ExitCode: 0, IsTest: false}, {Command: "cat src/F-001.txt", ExitCode: 0}}
	if d := Stop(nil, tester, s, stop); !d.Blocks() {
		t.Fatalf("a tester that ran only commands that are not tests must not stop: %+v", d)
	}
	s = e.state
	s.StopBlocks = MaxStopBlocks
	if d := Stop(nil, tester, s, fixture(t, "Stop-active.json", "", nil)); d != nil {
		t.Fatalf("the gate must give up under Claude Code's cap of 8: %+v", d)
	}
	if d := Stop(nil, Actor{Role: Coder, Feature: "F-001"}, e.state, stop); d != nil {
		t.Fatalf("a coder may stop: %+v", d)
	}
}

func TestIsTestCommand(t *testing.T) {
	tests := []struct {
		cmd, featureTest string
		want             bool
	}{
		{"sh tests/F-001.sh", "sh tests/F-001.sh", true},
		{"cd sub &&  sh tests/F-001.sh", "sh tests/F-001.sh", true},
		{"go test ./...", "", true},
		{"python -m pytest -q", "", true},
		{"npm test", "", true},
		{"cargo test --all", "", true},
		{"ls -la", "", false},
		{"echo tested", "", false},
		{"cat tests.txt", "", false},
		// The feature's own command counts even when it names no runner
		// testRe knows, and only when it is that feature's.
		{"./verify.sh", "./verify.sh", true},
		{"./verify.sh", "", false},
		{"./verify.sh", "./other.sh", false},
		// Its run as people write it counts, whatever its status says;
		// a hidden status or a run that may not have happened does not.
		{"./verify.sh 2>&1 | tail -20", "./verify.sh", true},
		{"mkdir -p ev && ./verify.sh > ev/log 2>&1; cat ev/log", "./verify.sh", true},
		{"./verify.sh || true", "./verify.sh", false},
		{"false && ./verify.sh", "./verify.sh", false},
	}
	for _, tt := range tests {
		exit := 0
		if strings.HasPrefix(tt.cmd, "false") {
			exit = 1
		}
		if got := IsTestCommand(tt.cmd, tt.featureTest, "/p", exit); got != tt.want {
			t.Errorf("IsTestCommand(%q, %q) = %v", tt.cmd, tt.featureTest, got)
		}
	}
}

func TestParsePayloadErrorsNameTheProblem(t *testing.T) {
	tests := []struct{ event, data, want string }{
		{"pre-tool-use", "", "stdin is empty"},
		{"pre-tool-use", "not json", "not a JSON object"},
		{"pre-tool-use", `{"hook_event_name":"PreToolUse"}`, "no tool_name"},
		{"pre-tool-use", `{"hook_event_name":"Stop"}`, "installed for PreToolUse"},
		{"frobnicate", `{}`, "unknown event"},
		{"pre-tool-use", `{"tool_name":"Bash","tool_input":"rm -rf /"}`, "not an object"},
	}
	for _, tt := range tests {
		_, err := ParsePayload(tt.event, []byte(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePayload(%q, %q) = %v; want %q", tt.event, tt.data, err, tt.want)
		}
	}
}

func FuzzParsePayload(f *testing.F) {
	for _, name := range []string{"PreToolUse.json", "PostToolUse.json", "PostToolUseFailure.json", "Stop.json", "SessionStart.json"} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		f.Add("pre-tool-use", data)
		f.Add("stop", data)
	}
	f.Add("post-tool-use", []byte(`{"tool_name":"Bash","tool_input":{"command":1}}`))
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		p, err := ParsePayload(event, data)
		if err != nil {
			return
		}
		// Whatever parsed must be judgeable without a panic.
		s := State{ProjectDir: t.TempDir()}
		PreToolUse(nil, Actor{Role: Tester, Feature: "F-1"}, s, p)
		Stop(nil, Actor{Role: Tester}, s, p)
		RecordCommand(Actor{Role: Tester, Run: "r"}, "", "", p)
	})
}

func TestBashWriteTargets(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"echo x > src/a.txt", "src/a.txt"},
		{"echo x >> src/a.txt; echo y>src/b.txt", "src/a.txt src/b.txt"},
		{"go test ./... 2> err.log", "err.log"},
		{"make &> build.log", "build.log"},
		{"sh tests/F-001.sh > .claude/progress/evidence/F-001/a.log 2>&1", ".claude/progress/evidence/F-001/a.log"},
		{"ls | tee -a out.txt copy.txt", "out.txt copy.txt"},
		{"touch src/new.go src/other.go", "src/new.go src/other.go"},
		{"go test ./... >/dev/null", "/dev/null"},
		{`git commit -m "a > b"`, ""},
		{`echo 'x > y'`, ""},
		{"cat > src/a.txt <<'EOF'\nline > with arrow\nEOF", "src/a.txt"},
		{"echo $X > $OUT", ""},
		{"cmd 2>&1", ""},
		{"ls -la", ""},
		{"[ -f x ] && echo ok", ""},
		// A here-document opened at the very start of the line: its body
		// is still data.
		{"<<EOF cat > out.txt\nline > not-a-file\nEOF", "out.txt"},
		// Every tee and every touch of a line, not only the first.
		{"echo a | tee a.txt; echo b | tee b.txt", "a.txt b.txt"},
		{"touch a.txt && touch b.txt", "a.txt b.txt"},
		// The options of touch are no files.
		{"touch -c -m src/a.txt", "src/a.txt"},
		// An empty name is no file.
		{"echo x > ''; echo y > a.txt", "a.txt"},
	} {
		if got := strings.Join(bashWriteTargets(tc.cmd), " "); got != tc.want {
			t.Errorf("bashWriteTargets(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestBashWritesAreHeldToRoleAndScope(t *testing.T) {
	dir := t.TempDir()
	l := &progress.List{Version: 1, Features: []progress.Feature{{ID: "F-001", Title: "x", Status: progress.InProgress, Scope: []string{"src/F-001.txt"}}}}
	s := State{ProjectDir: dir, List: l}
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000002"}
	tester := Actor{Role: Tester, Feature: "F-001", Run: "run-000003"}
	for _, tc := range []struct {
		actor Actor
		cmd   string
		code  string
	}{
		{coder, "echo 'F-001 works' > src/F-001.txt", ""},
		{coder, "echo x > src/other.txt", "out_of_scope"},
		{coder, "echo x | tee src/F-002.txt", "out_of_scope"},
		{coder, "go build ./... 2> /tmp/build.log", ""},
		{tester, "sh tests/F-001.sh > .claude/progress/evidence/F-001/attempt-1.log 2>&1", ""},
		{tester, "echo fixed > src/F-001.txt", "tester_edits_source"},
		// An option is not a file out of scope.
		{coder, "touch -c src/F-001.txt", ""},
		{Actor{}, "echo x > anywhere.txt", ""},
	} {
		in, _ := json.Marshal(map[string]string{"command": tc.cmd})
		p := &Payload{Event: "PreToolUse", ToolName: "Bash", ToolInput: in}
		d := PreToolUse(Modes{}, tc.actor, s, p)
		got := ""
		if d.Blocks() {
			got = d.Code
		}
		if got != tc.code {
			t.Errorf("%s: %q → %q, want %q", tc.actor.Role, tc.cmd, got, tc.code)
		}
	}
}

// TestStopSaysWhichBlockItIs: the model is told how many of its stops were
// refused so far, counting from 1, and the gate gives up after the last.
func TestStopSaysWhichBlockItIs(t *testing.T) {
	e := newEnv(t)
	stop := fixture(t, "Stop.json", "", nil)
	tests := []struct {
		name       string
		actor      Actor
		blocks     int
		message    string // "" = lets it stop
		suggestion string
	}{
		{"the first stop", Actor{Role: Tester, Feature: "F-001"}, 0,
			"tester-agent may not stop before it has run a test (block 1 of 7)",
			"run `sh tests/F-001.sh` with the Bash tool (redirections like `> log 2>&1`, `| tail`, `cd` or `mkdir -p` before it with `&&` are fine; not `|| true`, not in the background, not only echoed), save its output under .claude/progress/evidence/F-001/, then give your verdict (a failing test is a verdict too)"},
		{"the last stop it blocks", Actor{Role: Tester, Feature: "F-001"}, MaxStopBlocks - 1,
			"tester-agent may not stop before it has run a test (block 7 of 7)",
			"run `sh tests/F-001.sh` with the Bash tool (redirections like `> log 2>&1`, `| tail`, `cd` or `mkdir -p` before it with `&&` are fine; not `|| true`, not in the background, not only echoed), save its output under .claude/progress/evidence/F-001/, then give your verdict (a failing test is a verdict too)"},
		{"a feature the list does not have", Actor{Role: Tester, Feature: "F-009"}, 2,
			"tester-agent may not stop before it has run a test (block 3 of 7)",
			"run the feature's test command with the Bash tool, save its output under .claude/progress/evidence/F-009/, then give your verdict (a failing test is a verdict too)"},
		{"past the cap", Actor{Role: Tester, Feature: "F-001"}, MaxStopBlocks, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.state
			s.StopBlocks = tt.blocks
			d := Stop(nil, tt.actor, s, stop)
			if tt.message == "" {
				if d != nil {
					t.Fatalf("blocked: %+v", d)
				}
				return
			}
			if d == nil || d.Gate != TesterMustTest || d.Code != "no_test_run" {
				t.Fatalf("got %+v, want %s/no_test_run", d, TesterMustTest)
			}
			if d.Message != tt.message || d.Suggestion != tt.suggestion {
				t.Errorf("message %q\nsuggestion %q\nwant %q\n     %q", d.Message, d.Suggestion, tt.message, tt.suggestion)
			}
		})
	}
}

// TestReadLimitIsAStrictBound: a file of exactly the limit is read whole,
// one byte more is refused, by Read and by cat alike; a ranged Read,
// a directory and a missing file are never refused.
func TestReadLimitIsAStrictBound(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"at-limit.log": 100, "over-limit.log": 101, "default-at.log": 256 << 10, "default-over.log": 256<<10 + 1} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat("x", size)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	one := 1
	tests := []struct {
		name    string
		max     int64 // State.MaxReadBytes
		tool    string
		input   map[string]any
		message string // "" = allowed
	}{
		{"Read of a file at the limit", 100, "Read", map[string]any{"file_path": filepath.Join(dir, "at-limit.log")}, ""},
		{"Read of a file over the limit", 100, "Read", map[string]any{"file_path": filepath.Join(dir, "over-limit.log")},
			"over-limit.log is 101 bytes; reading it whole would flood the context"},
		{"Read with an offset only", 100, "Read", map[string]any{"file_path": filepath.Join(dir, "over-limit.log"), "offset": one}, ""},
		{"Read with a limit only", 100, "Read", map[string]any{"file_path": filepath.Join(dir, "over-limit.log"), "limit": one}, ""},
		{"Read of a directory", 1, "Read", map[string]any{"file_path": filepath.Join(dir, "logs")}, ""},
		{"Read of a missing file", 1, "Read", map[string]any{"file_path": filepath.Join(dir, "missing.log")}, ""},
		{"the default limit is 256 KiB", 0, "Read", map[string]any{"file_path": filepath.Join(dir, "default-at.log")}, ""},
		{"over the default limit", 0, "Read", map[string]any{"file_path": filepath.Join(dir, "default-over.log")},
			"default-over.log is 262145 bytes; reading it whole would flood the context"},
		{"cat of a file at the limit", 100, "Bash", map[string]any{"command": "cat at-limit.log"}, ""},
		{"cat of a file over the limit", 100, "Bash", map[string]any{"command": "cat over-limit.log"},
			"over-limit.log is 101 bytes; printing it whole would flood the context"},
		{"cat of a directory", 1, "Bash", map[string]any{"command": "cat logs"}, ""},
		{"cat of a missing file", 1, "Bash", map[string]any{"command": "cat missing.log"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{ProjectDir: dir, MaxReadBytes: tt.max}
			in, _ := json.Marshal(tt.input)
			d := PreToolUse(Modes{}, Actor{Role: Coder, Feature: "F-001"}, s, &Payload{Event: "PreToolUse", ToolName: tt.tool, ToolInput: in})
			if tt.message == "" {
				if d != nil {
					t.Fatalf("refused: %+v", d)
				}
				return
			}
			if d == nil || d.Gate != LogReadLimit || d.Code != "file_too_large" || d.Message != tt.message {
				t.Fatalf("got %+v, want %s/file_too_large: %q", d, LogReadLimit, tt.message)
			}
		})
	}
}

// TestParsePayloadAcceptsWhatTheGatesCanJudge: every field is optional, a
// missing tool_input included, and the event comes from the command line
// when the payload does not name it.
func TestParsePayloadAcceptsWhatTheGatesCanJudge(t *testing.T) {
	tests := []struct {
		event, data string
		want        string // Event
		command     string // Input().Command
	}{
		{"pre-tool-use", `{"tool_name":"Bash"}`, "PreToolUse", ""},
		{"post-tool-use", `{"tool_name":"Bash","tool_input":{"command":"ls"}}`, "PostToolUse", "ls"},
		{"post-tool-use-failure", ` {"hook_event_name":"PostToolUseFailure","tool_name":"Bash","tool_input":{"command":"false"}} `, "PostToolUseFailure", "false"},
		{"stop", `{}`, "Stop", ""},
		{"session-start", `{"source":"startup"}`, "SessionStart", ""},
	}
	for _, tt := range tests {
		p, err := ParsePayload(tt.event, []byte(tt.data))
		if err != nil {
			t.Errorf("ParsePayload(%q, %q): %v", tt.event, tt.data, err)
			continue
		}
		if p.Event != tt.want || p.Input().Command != tt.command {
			t.Errorf("ParsePayload(%q, %q) = event %q command %q, want %q %q", tt.event, tt.data, p.Event, p.Input().Command, tt.want, tt.command)
		}
	}
}

// TestHooked: Claude Code runs the PreToolUse hook of a matcher of plain
// names for exactly those tools, and of "" for every tool.
func TestHooked(t *testing.T) {
	matcher := PreToolUseMatcher(nil)
	for _, c := range []struct {
		matcher, tool string
		want          bool
	}{
		{matcher, "Write", true},
		{matcher, "Bash", true},
		{matcher, "Read", true},
		{matcher, "WebFetch", true},
		{matcher, "Agent", true},
		{matcher, "Skill", true},
		{matcher, "Glob", false},
		{matcher, "mcp__ctxgraphd__store_trace", false},
		{matcher, "Writ", false},
		{matcher, "", false},
		{"", "Glob", true},
		{"", "mcp__ctxgraphd__store_trace", true},
		{"Bash|Write", "Write", true},
		{"Bash|Write", "Edit", false},
	} {
		if got := Hooked(c.matcher, c.tool); got != c.want {
			t.Errorf("Hooked(%q, %q) = %v, want %v", c.matcher, c.tool, got, c.want)
		}
	}
}

// TestFailsInert: only a file tool's failed call is known to have done
// nothing; a failed command, fetch or subagent may have acted.
func TestFailsInert(t *testing.T) {
	for tool, want := range map[string]bool{
		"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true, "Read": true,
		"Bash": false, "WebFetch": false, "Agent": false, "Task": false, "Monitor": false, "Workflow": false,
		"mcp__ctxgraphd__store_trace": false, "": false,
	} {
		if got := FailsInert(tool); got != want {
			t.Errorf("FailsInert(%q) = %v, want %v", tool, got, want)
		}
	}
}
