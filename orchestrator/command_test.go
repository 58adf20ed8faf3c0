package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// A goal is carried whole up to maxInlineGoal; a longer one is carried as
// its beginning, cut on a line and never inside a character, with the file
// that holds all of it: the command object is a command-line argument,
// which Linux bounds.
func TestInlineGoal(t *testing.T) {
	long := strings.Repeat("a line of the goal\n", 2000)
	tests := []struct {
		name     string
		goal     string
		whole    bool
		wantHead string
	}{
		{name: "short", goal: "a todo app", whole: true},
		{name: "at the bound", goal: strings.Repeat("x", maxInlineGoal), whole: true},
		{name: "one byte over", goal: strings.Repeat("x", maxInlineGoal+1), wantHead: strings.Repeat("x", maxInlineGoal/2)},
		{name: "lines", goal: long, wantHead: long[:strings.LastIndexByte(long[:maxInlineGoal/2], '\n')]},
		{name: "multibyte", goal: strings.Repeat("é", maxInlineGoal)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, file := inlineGoal("\n" + tt.goal + "\n")
			if tt.whole {
				if text != strings.TrimSpace(tt.goal) || file != "" {
					t.Errorf("got %d bytes and file %q, want the goal whole", len(text), file)
				}
				return
			}
			if file != ".claude/progress/goal.md" {
				t.Errorf("file %q", file)
			}
			if len(text) > maxInlineGoal || !utf8.ValidString(text) {
				t.Errorf("%d bytes, valid UTF-8 %v: want at most %d, valid", len(text), utf8.ValidString(text), maxInlineGoal)
			}
			head, rest, _ := strings.Cut(text, "\n\n[the goal goes on for ")
			if tt.wantHead != "" && head != tt.wantHead {
				t.Errorf("head of %d bytes, want %d", len(head), len(tt.wantHead))
			}
			if !strings.HasPrefix(tt.goal, head) || !strings.Contains(rest, "read all of it in .claude/progress/goal.md") {
				t.Errorf("text does not begin the goal and point to the file: …%s", rest)
			}
		})
	}
}

// A goal far past what one argument may hold reaches the initializer as
// its beginning and the file.
func TestLongGoalIsHandedOffByFile(t *testing.T) {
	h := newHarness(t)
	goal := strings.Repeat("The app does one more thing.\n", 10000) // 290 KiB
	if err := progress.WriteGoal(h.proj.Progress(), goal); err != nil {
		t.Fatal(err)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	spec := h.runner.runs()[0]
	if len(spec.Prompt) > 2*maxInlineGoal {
		t.Errorf("the initializer's prompt is %d bytes", len(spec.Prompt))
	}
	cmd, err := agents.ParseCommand(spec.Prompt)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Context.GoalFile != ".claude/progress/goal.md" || !strings.HasPrefix(goal, strings.SplitN(cmd.Context.Goal, "\n\n[", 2)[0]) {
		t.Errorf("context: goal_file %q, goal of %d bytes", cmd.Context.GoalFile, len(cmd.Context.Goal))
	}
}

// No initializer starts without a goal: it would invent a project.
func TestNoInitializerWithoutAGoal(t *testing.T) {
	h := newHarness(t)
	os.Remove(filepath.Join(h.proj.Progress(), progress.GoalFile))
	err := h.runToEnd()
	if err == nil || !strings.Contains(err.Error(), "no initializer started") || !strings.Contains(err.Error(), "ctxgraphd init --goal") {
		t.Fatalf("loop ended with %v, want a stop asking for a goal", err)
	}
	if n := len(h.runner.runs()); n != 0 {
		t.Errorf("%d runs, want none", n)
	}
}
