package scriptedmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/claudetest"
)

func TestProbePlaysItsCallsThenReports(t *testing.T) {
	calls := []ProbeCall{
		{Tool: "Bash", Input: map[string]any{"command": "echo one"}},
		{Tool: "Write", Input: map[string]any{"file_path": "/p/x", "content": "x"}},
		{Tool: "Bash"},
	}
	s := NewProbe(calls, nil)
	// A command object does not make the probe play a role.
	c := newConvo(codeCmd("F-001", 1))
	for i, want := range calls {
		name, input := ask(t, s, c).tool(t)
		if name != want.Tool || len(input) != len(want.Input) || (len(input) > 0 && mustJSON(t, input) != mustJSON(t, want.Input)) {
			t.Fatalf("answer %d: %s %v, want %s %v", i+1, name, input, want.Tool, want.Input)
		}
		switch i {
		case 0:
			c.bash("echo one", "one", false)
		case 1:
			c.call("Write", input, "Exit code 1\nRead-only file system", true)
		case 2:
			c.call("Bash", input, "", false)
		}
	}
	a := ask(t, s, c)
	want := "Probe done: 3 tool results.\n[1] Bash: one\n[2] Write: Exit code 1\nRead-only file system\n[3] Bash: "
	if a.StopReason != "end_turn" || a.text() != want {
		t.Fatalf("final answer %s, want text %q", a, want)
	}
	// The report is a function of the history: asking again says the same.
	if again := ask(t, s, c); again.text() != want {
		t.Fatalf("second final answer %q", again.text())
	}
	if st := s.Stats(); st.ToolCalls != 3 || st.FinalAnswers != 2 || st.Unscripted != 0 || st.Messages != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestProbeWithoutCallsReportsAtOnce(t *testing.T) {
	s := NewProbe(nil, nil)
	c := &convo{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "anything"})
	if got := ask(t, s, c).text(); got != "Probe done: 0 tool results." {
		t.Fatalf("final answer %q", got)
	}
}

// TestRealClaudeRunsAProbe drives the real CLI with a probe and reads back
// what each call met from the result line.
func TestRealClaudeRunsAProbe(t *testing.T) {
	bin := claudetest.Binary(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "probe.txt")
	model := NewProbe([]ProbeCall{
		{Tool: "Bash", Input: map[string]any{"command": "echo hello from bash", "description": "say hello"}},
		{Tool: "Write", Input: map[string]any{"file_path": target, "content": "written by the probe\n"}},
		{Tool: "Bash", Input: map[string]any{"command": "cat probe.txt && exit 3", "description": "fail on purpose"}},
	}, zaptest.NewLogger(t))
	url, err := model.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := model.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	p := &realProject{t: t, bin: bin, env: claudetest.Env(t, url), dir: dir, model: model}

	out := p.run("Do what you like.", "--session-id", uuid.NewString())
	for _, want := range []string{
		"Probe done: 3 tool results.\n",
		"\n[1] Bash: hello from bash\n",
		"\n[2] Write: File created successfully at: " + target,
		"\n[3] Bash: Exit code 3\nwritten by the probe",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("result does not hold %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by the probe\n" {
		t.Errorf("probe.txt = %q, %v", b, err)
	}
	if st := model.Stats(); st.ToolCalls != 3 || st.FinalAnswers < 1 || st.BadRequests != 0 {
		t.Errorf("stats %+v", st)
	}
}
