package scriptedmodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
)

// realProject is a temp project driven by the real claude binary against a
// scripted model.
type realProject struct {
	t     *testing.T
	bin   string
	env   []string
	dir   string
	model *Server
}

func newRealProject(t *testing.T, sc Scenario) *realProject {
	t.Helper()
	bin := claudetest.Binary(t)
	model := New(sc, zaptest.NewLogger(t))
	url, err := model.Start()
	if err != nil {
		t.Fatal(err)
	}
	// Cleanup, not defer in the caller: the model must stop logging to t
	// before the test ends.
	t.Cleanup(func() {
		if err := model.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &realProject{t: t, bin: bin, env: claudetest.Env(t, url), dir: t.TempDir(), model: model}
}

// commandPrompt is a prompt the way the daemon writes one: prose around the
// command object in a fenced JSON block (indented, to check that the model
// does not depend on compact JSON).
func commandPrompt(cmd map[string]any) string {
	b, err := json.MarshalIndent(map[string]any{"command": cmd}, "", "  ")
	if err != nil {
		panic(err)
	}
	return "You are the " + cmd["agent"].(string) + " of this project. Carry out this command:\n\n```json\n" +
		string(b) + "\n```\n\nEnd with a one-line summary."
}

func codingCommand(id string, attempt int) map[string]any {
	task := "implement_feature"
	if attempt > 1 {
		task = "fix_feature"
	}
	return map[string]any{
		"agent": "coding-agent", "task": task,
		"context":          map[string]any{"feature_id": id, "attempt": attempt, "previous_state": "next"},
		"precedent":        []string{},
		"success_criteria": map[string]any{"test": "sh tests/" + id + ".sh", "tests_pass": true},
		"next_agent":       "main",
	}
}

func testerCommand(id string, attempt int) map[string]any {
	return map[string]any{
		"agent": "tester-agent", "task": "validate_feature",
		"context":          map[string]any{"feature_id": id, "attempt": attempt, "files_changed": []string{"src/" + id + ".txt"}, "previous_state": "code"},
		"precedent":        []string{},
		"success_criteria": map[string]any{"test": "sh tests/" + id + ".sh", "tests_pass": true},
		"next_agent":       "main",
	}
}

// run runs claude to its end and returns the text of its final result.
// sessionFlag is --session-id for a new session or --resume to continue one.
func (p *realProject) run(prompt, sessionFlag, session string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, "-p", prompt, "--output-format", "stream-json", "--verbose",
		sessionFlag, session, "--permission-mode", "bypassPermissions")
	cmd.Dir, cmd.Env = p.dir, p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var last struct {
		Type    string `json:"type"`
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	found := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "result" {
			found = json.Unmarshal(sc.Bytes(), &last) == nil
		}
	}
	if err != nil || !found || last.IsError {
		p.t.Fatalf("claude: %v (result found: %v, is_error: %v)\nstdout:\n%s\nstderr:\n%s", err, found, last.IsError, stdout.String(), stderr.String())
	}
	return last.Result
}

func (p *realProject) read(rel string) string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, rel))
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}

// feature returns one feature of the list on disk, checking that the list
// is valid JSON in the contract format.
func (p *realProject) feature(id string) map[string]any {
	p.t.Helper()
	var list struct {
		Version  int              `json:"version"`
		Features []map[string]any `json:"features"`
	}
	if err := json.Unmarshal([]byte(p.read(featureListPath)), &list); err != nil {
		p.t.Fatalf("feature list: %v", err)
	}
	for _, f := range list.Features {
		if f["id"] == id {
			return f
		}
	}
	p.t.Fatalf("feature list has no %s", id)
	return nil
}

// TestRealClaudePlaysEveryRole runs the real CLI once per role on one
// project, through a pass, a failure and a retry on the resumed session, and
// judges the model by the files it leaves.
func TestRealClaudePlaysEveryRole(t *testing.T) {
	p := newRealProject(t, DefaultScenario())

	// Initializer: the feature list and a test per feature.
	out := p.run(commandPrompt(map[string]any{
		"agent": "initializer-agent", "task": "initialize_project",
		"context": map[string]any{"goal": "the demo"}, "precedent": []string{},
		"success_criteria": map[string]any{"feature_list": featureListPath}, "next_agent": "main",
	}), "--session-id", uuid.NewString())
	if !strings.Contains(out, "Initialized 4 features") {
		t.Errorf("initializer summary %q", out)
	}
	var list struct {
		Version  int              `json:"version"`
		Features []map[string]any `json:"features"`
	}
	initial := p.read(featureListPath)
	if err := json.Unmarshal([]byte(initial), &list); err != nil {
		t.Fatalf("feature list is not JSON: %v\n%s", err, initial)
	}
	if list.Version != 1 || len(list.Features) != 4 {
		t.Fatalf("feature list version %d with %d features, want 1 and 4:\n%s", list.Version, len(list.Features), initial)
	}
	for _, f := range list.Features {
		id := f["id"].(string)
		if f["status"] != "pending" || f["tested"] != false || f["test"] != "sh tests/"+id+".sh" {
			t.Errorf("initial %s: %v", id, f)
		}
		if s := p.read("tests/" + id + ".sh"); !strings.HasPrefix(s, "#!/bin/sh\n") || !strings.Contains(s, "grep -qx '"+id+" works' src/"+id+".txt") {
			t.Errorf("tests/%s.sh:\n%s", id, s)
		}
	}
	if d := list.Features[1]["depends_on"]; len(d.([]any)) != 1 || d.([]any)[0] != "F-001" {
		t.Errorf("F-002 depends_on %v", d)
	}

	// Coding agent, F-001 (pass): working source, status completed, and
	// nothing else of the list changed.
	out = p.run(commandPrompt(codingCommand("F-001", 1)), "--session-id", uuid.NewString())
	if out != "Implemented F-001: wrote src/F-001.txt" {
		t.Errorf("coding summary %q", out)
	}
	if got := p.read("src/F-001.txt"); got != "F-001 works\n" {
		t.Errorf("src/F-001.txt = %q", got)
	}
	var want map[string]any
	json.Unmarshal([]byte(initial), &want)
	want["features"].([]any)[0].(map[string]any)["status"] = "completed"
	var got map[string]any
	json.Unmarshal([]byte(p.read(featureListPath)), &got)
	if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
		t.Errorf("the coding agent changed more than its status:\n got  %s\n want %s", a, b)
	}

	// Tester, F-001: evidence, tested true.
	out = p.run(commandPrompt(testerCommand("F-001", 1)), "--session-id", uuid.NewString())
	if out != "F-001 passed: sh tests/F-001.sh" {
		t.Errorf("tester summary %q", out)
	}
	f := p.feature("F-001")
	evidence := ".claude/progress/evidence/F-001/attempt-1.log"
	if f["tested"] != true || f["status"] != "completed" || len(f["evidence"].([]any)) != 1 || f["evidence"].([]any)[0] != evidence {
		t.Errorf("F-001 after its test: %v", f)
	}
	if log := p.read(evidence); !strings.HasPrefix(log, "$ sh tests/F-001.sh\n") {
		t.Errorf("evidence:\n%s", log)
	}

	// F-002 (fail-once), attempt 1: broken source, and the tester says so
	// without marking it tested.
	coder := uuid.NewString()
	p.run(commandPrompt(codingCommand("F-002", 1)), "--session-id", coder)
	if got := p.read("src/F-002.txt"); got != "F-002 broken\n" {
		t.Errorf("attempt 1 src/F-002.txt = %q", got)
	}
	out = p.run(commandPrompt(testerCommand("F-002", 1)), "--session-id", uuid.NewString())
	if !strings.HasPrefix(out, "F-002 failed: `sh tests/F-002.sh` exited non-zero: Exit code 1") {
		t.Errorf("tester report %q", out)
	}
	if f := p.feature("F-002"); f["tested"] != false || len(f["evidence"].([]any)) != 0 {
		t.Errorf("F-002 after a failed test: %v", f)
	}
	if _, err := os.Stat(filepath.Join(p.dir, ".claude/progress/evidence/F-002")); !os.IsNotExist(err) {
		t.Errorf("a failed test left evidence: %v", err)
	}

	// The daemon puts the feature back in progress and resumes the coding
	// session: the model must act on the new command, not replay the old
	// one, and cope with a list that changed since its session read it.
	json.Unmarshal([]byte(p.read(featureListPath)), &got)
	got["features"].([]any)[1].(map[string]any)["status"] = "in_progress"
	if err := os.WriteFile(filepath.Join(p.dir, featureListPath), []byte(mustJSON(t, got)), 0o644); err != nil {
		t.Fatal(err)
	}
	out = p.run("The test failed: `sh tests/F-002.sh` exited 1. Fix it.\n\n"+commandPrompt(codingCommand("F-002", 2)), "--resume", coder)
	if out != "Implemented F-002: wrote src/F-002.txt" {
		t.Errorf("retry summary %q", out)
	}
	if got := p.read("src/F-002.txt"); got != "F-002 works\n" {
		t.Errorf("attempt 2 src/F-002.txt = %q", got)
	}
	if f := p.feature("F-002"); f["status"] != "completed" {
		t.Errorf("F-002 after its retry: %v", f)
	}
	out = p.run(commandPrompt(testerCommand("F-002", 2)), "--session-id", uuid.NewString())
	if out != "F-002 passed: sh tests/F-002.sh" {
		t.Errorf("tester summary %q", out)
	}
	if f := p.feature("F-002"); f["tested"] != true || f["evidence"].([]any)[0] != ".claude/progress/evidence/F-002/attempt-2.log" {
		t.Errorf("F-002 after its second test: %v", f)
	}
	// F-001 kept its verdict through everyone else's edits.
	if f := p.feature("F-001"); f["tested"] != true {
		t.Errorf("F-001 lost its verdict: %v", f)
	}

	st := p.model.Stats()
	if st.Runs["initializer-agent"] != 1 || st.Runs["coding-agent"] != 3 || st.Runs["tester-agent"] != 3 {
		t.Errorf("runs by role %v, want 1 initializer, 3 coding, 3 tester", st.Runs)
	}
	if st.BadRequests != 0 {
		t.Errorf("%d bad requests", st.BadRequests)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
