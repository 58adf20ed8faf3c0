package scriptedmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

func initCmd() map[string]any {
	return map[string]any{"agent": "initializer-agent", "task": "initialize_project", "context": map[string]any{}}
}

func codeCmd(id string, attempt int) map[string]any {
	return map[string]any{"agent": "coding-agent", "task": "implement_feature",
		"context": map[string]any{"feature_id": id, "attempt": attempt}, "precedent": []string{}, "next_agent": "main"}
}

func testCmd(id string, attempt int) map[string]any {
	return map[string]any{"agent": "tester-agent", "task": "validate_feature",
		"context":          map[string]any{"feature_id": id, "attempt": attempt},
		"success_criteria": map[string]any{"test": "sh tests/" + id + ".sh", "tests_pass": true}}
}

// listFor is the feature list of the default scenario, as the initializer
// writes it.
func listFor(t *testing.T) string {
	t.Helper()
	l, err := initialFeatureList(DefaultScenario())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

const (
	missing    = "File does not exist. Note: your current working directory is " + projectDir + "."
	written    = "File created successfully at: somewhere"
	notReadYet = "File has not been read yet. Read it first before writing to it."
	// bwrapFailed is Claude Code's result for a Bash call whose sandbox
	// bubblewrap could not set up (seen in CI: a path bound read-only
	// went away before the mount).
	bwrapFailed = "Exit code 1\nbwrap: Can't bind mount /oldroot/tmp/p/.claude/progress/x.tmp on /newroot/tmp/p/.claude/progress/x.tmp: No such file or directory"
)

// codedUpToList is a coding conversation up to its Read of the feature list.
func codedUpToList(t *testing.T, c *convo, id, body string) *convo {
	return c.read("src/"+id+".txt", missing, true).
		write("src/"+id+".txt", body, written, false).
		read(featureListPath, numbered(listFor(t)), false)
}

// want describes the move expected from the model.
type want struct {
	tool    string // "" for a final text
	target  string // file_path or command
	content string // exact content of a Write, when set
	text    string // the final text, or a prefix of it ending in "…"
}

func check(t *testing.T, got answer, w want) {
	t.Helper()
	if w.tool == "" {
		if got.StopReason != "end_turn" || len(got.Content) != 1 {
			t.Fatalf("want a final text, got %v", got)
		}
		if prefix, ok := strings.CutSuffix(w.text, "…"); ok {
			if !strings.HasPrefix(got.text(), prefix) {
				t.Fatalf("final text %q, want it to start with %q", got.text(), prefix)
			}
		} else if got.text() != w.text {
			t.Fatalf("final text %q, want %q", got.text(), w.text)
		}
		return
	}
	name, in := got.tool(t)
	target, _ := in["file_path"].(string)
	if name == "Bash" {
		target, _ = in["command"].(string)
	}
	if name != w.tool || target != w.target {
		t.Fatalf("call %s %q, want %s %q", name, target, w.tool, w.target)
	}
	if w.content != "" && in["content"] != w.content {
		t.Fatalf("%s content %q, want %q", name, in["content"], w.content)
	}
}

func abs(rel string) string { return projectDir + "/" + rel }

// TestNextMove is the script of every role as a table: for a given
// conversation, the one move the model makes next.
func TestNextMove(t *testing.T) {
	evidence := ".claude/progress/evidence/F-001/attempt-2.log"
	tests := []struct {
		name string
		c    func(t *testing.T) *convo
		want want
	}{
		// Initializer.
		{"initializer starts with the test scripts",
			func(t *testing.T) *convo { return newConvo(initCmd()) },
			want{tool: "Bash", target: New(DefaultScenario(), nil).testScripts()}},
		{"a command whose sandbox could not be set up is run again",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash(New(DefaultScenario(), nil).testScripts(), bwrapFailed, true)
			},
			want{tool: "Bash", target: New(DefaultScenario(), nil).testScripts()}},
		{"and again",
			func(t *testing.T) *convo {
				cmd := New(DefaultScenario(), nil).testScripts()
				return newConvo(initCmd()).bash(cmd, bwrapFailed, true).bash(cmd, bwrapFailed, true)
			},
			want{tool: "Bash", target: New(DefaultScenario(), nil).testScripts()}},
		{"once it ran, the script goes on",
			func(t *testing.T) *convo {
				cmd := New(DefaultScenario(), nil).testScripts()
				return newConvo(initCmd()).bash(cmd, bwrapFailed, true).bash(cmd, bwrapFailed, true).bash(cmd, "(Bash completed with no output)", false)
			},
			want{tool: "Write", target: abs(featureListPath), content: listFor(t)}},
		{"but not a third time in a row",
			func(t *testing.T) *convo {
				cmd := New(DefaultScenario(), nil).testScripts()
				return newConvo(initCmd()).bash(cmd, bwrapFailed, true).bash(cmd, bwrapFailed, true).bash(cmd, bwrapFailed, true)
			},
			want{text: "Stopping: Bash …"}},
		{"a command's own failure is not run again",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash(New(DefaultScenario(), nil).testScripts(), "Exit code 1\nmkdir: cannot create directory 'tests': File exists\nbwrap is not at fault", true)
			},
			want{text: "Stopping: Bash …"}},
		{"initializer then writes the feature list",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash("mkdir …", "(Bash completed with no output)", false)
			},
			want{tool: "Write", target: abs(featureListPath), content: listFor(t)}},
		{"initializer reads a list it may not overwrite unread",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash("mkdir …", "", false).write(featureListPath, "…", notReadYet, true)
			},
			want{tool: "Read", target: abs(featureListPath)}},
		{"initializer writes again once it has read",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash("mkdir …", "", false).write(featureListPath, "…", notReadYet, true).
					read(featureListPath, numbered("{}\n"), false)
			},
			want{tool: "Write", target: abs(featureListPath), content: listFor(t)}},
		{"initializer ends with a summary",
			func(t *testing.T) *convo {
				return newConvo(initCmd()).bash("mkdir …", "", false).write(featureListPath, "…", written, false)
			},
			want{text: "Initialized 4 features in .claude/progress/feature-list.json, each with a test script in tests/."}},

		// Coding agent.
		{"coder reads the source first",
			func(t *testing.T) *convo { return newConvo(codeCmd("F-001", 1)) },
			want{tool: "Read", target: abs("src/F-001.txt")}},
		{"pass writes working code, the missing file is no error",
			func(t *testing.T) *convo { return newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true) },
			want{tool: "Write", target: abs("src/F-001.txt"), content: "F-001 works\n"}},
		{"fail-once writes broken code on attempt 1",
			func(t *testing.T) *convo { return newConvo(codeCmd("F-002", 1)).read("src/F-002.txt", missing, true) },
			want{tool: "Write", target: abs("src/F-002.txt"), content: "F-002 broken\n"}},
		{"fail-once writes working code on attempt 2",
			func(t *testing.T) *convo {
				return newConvo(codeCmd("F-002", 2)).read("src/F-002.txt", "1\tF-002 broken\n2\t", false)
			},
			want{tool: "Write", target: abs("src/F-002.txt"), content: "F-002 works\n"}},
		{"never-pass writes broken code on attempt 3",
			func(t *testing.T) *convo { return newConvo(codeCmd("F-004", 3)).read("src/F-004.txt", missing, true) },
			want{tool: "Write", target: abs("src/F-004.txt"), content: "F-004 broken\n"}},
		{"a feature the scenario does not know is coded honestly",
			func(t *testing.T) *convo { return newConvo(codeCmd("F-099", 1)).read("src/F-099.txt", missing, true) },
			want{tool: "Write", target: abs("src/F-099.txt"), content: "F-099 works\n"}},
		{"coder reads the feature list after the source",
			func(t *testing.T) *convo {
				return newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).write("src/F-001.txt", "F-001 works\n", written, false)
			},
			want{tool: "Read", target: abs(featureListPath)}},
		{"coder ends with a summary",
			func(t *testing.T) *convo {
				return codedUpToList(t, newConvo(codeCmd("F-001", 1)), "F-001", "F-001 works\n").write(featureListPath, "…", "updated", false)
			},
			want{text: "Implemented F-001: wrote src/F-001.txt"}},
		{"a hook refusal in the middle is quoted, not retried",
			func(t *testing.T) *convo {
				return newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).
					write("src/F-001.txt", "F-001 works\n", "PreToolUse:Write hook error: [ctxgraphd hook pre-tool-use]: outside scope", true)
			},
			want{text: `Stopping: Write ` + abs("src/F-001.txt") + ` failed: "PreToolUse:Write hook error: [ctxgraphd hook pre-tool-use]: outside scope"`}},
		{"a conversation that left the script ends the turn",
			func(t *testing.T) *convo {
				return newConvo(codeCmd("F-001", 1)).bash("ls", "", false)
			},
			want{text: "Stopping: my script makes a Read call here, but the conversation has Bash ls."}},
		{"a command without a feature id ends the turn",
			func(t *testing.T) *convo {
				return newConvo(map[string]any{"agent": "coding-agent", "task": "implement_feature"})
			},
			want{text: "The command object has no context.feature_id: I do not know which feature to work on."}},
		{"a feature id that is not a file name ends the turn",
			func(t *testing.T) *convo { return newConvo(codeCmd("../etc/passwd", 1)) },
			want{text: `The feature id "../etc/passwd" is not one I can use in a file name.`}},
		{"an unknown agent ends the turn",
			func(t *testing.T) *convo { return newConvo(map[string]any{"agent": "reviewer-agent"}) },
			want{text: `I have no script for the agent "reviewer-agent".`}},
		{"a conversation that goes nowhere stops at the cap",
			func(t *testing.T) *convo {
				c := newConvo(initCmd()).bash("mkdir …", "", false)
				for range 6 {
					c.write(featureListPath, "…", notReadYet, true).read(featureListPath, "1\t{}", false)
				}
				return c
			},
			want{text: "Stopping: 13 tool calls…"}},

		// Tester.
		{"tester runs the test command of the command object",
			func(t *testing.T) *convo { return newConvo(testCmd("F-001", 2)) },
			want{tool: "Bash", target: "sh tests/F-001.sh"}},
		{"tester falls back to the feature's test script",
			func(t *testing.T) *convo {
				return newConvo(map[string]any{"agent": "tester-agent", "context": map[string]any{"feature_id": "F-003"}})
			},
			want{tool: "Bash", target: "sh tests/F-003.sh"}},
		{"a failed test ends with a report and no edits",
			func(t *testing.T) *convo {
				return newConvo(testCmd("F-001", 2)).bash("sh tests/F-001.sh", "Exit code 1\ngrep: src/F-001.txt: No such file", true)
			},
			want{text: "F-001 failed: `sh tests/F-001.sh` exited non-zero: Exit code 1\ngrep: src/F-001.txt: No such file"}},
		{"a refused test run is not reported as a failing test",
			func(t *testing.T) *convo {
				return newConvo(testCmd("F-001", 2)).bash("sh tests/F-001.sh", "PreToolUse:Bash hook error: denied", true)
			},
			want{text: "Stopping: running `sh tests/F-001.sh` failed: \"PreToolUse:Bash hook error: denied\""}},
		{"a passed test is kept as evidence",
			func(t *testing.T) *convo {
				return newConvo(testCmd("F-001", 2)).bash("sh tests/F-001.sh", "ok", false)
			},
			want{tool: "Write", target: abs(evidence), content: "$ sh tests/F-001.sh\nok\nexit status 0\n"}},
		{"tester then reads the feature list",
			func(t *testing.T) *convo {
				return newConvo(testCmd("F-001", 2)).bash("sh tests/F-001.sh", "ok", false).write(evidence, "…", written, false)
			},
			want{tool: "Read", target: abs(featureListPath)}},
		{"tester ends with its verdict",
			func(t *testing.T) *convo {
				return newConvo(testCmd("F-001", 2)).bash("sh tests/F-001.sh", "ok", false).write(evidence, "…", written, false).
					read(featureListPath, numbered(listFor(t)), false).write(featureListPath, "…", "updated", false)
			},
			want{text: "F-001 passed: sh tests/F-001.sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, ask(t, New(DefaultScenario(), nil), tt.c(t)), tt.want)
		})
	}
}

// TestFeatureListEdits checks that each role changes only its own fields of
// its own feature, whatever else the list holds.
func TestFeatureListEdits(t *testing.T) {
	// A person's list: another key order, a field the model does not know,
	// a number it must not round.
	list := `{"version": 1, "owner": "me", "features": [
  {"id": "F-001", "title": "Greeting", "test": "sh tests/F-001.sh", "status": "in_progress", "tested": false, "budget": 12345678901234567890, "note": "<b>&</b>"},
  {"id": "F-002", "title": "Farewell", "status": "pending", "tested": false}
]}`
	edited := func(t *testing.T, a answer) map[string]any {
		t.Helper()
		_, in := a.tool(t)
		content := in["content"].(string)
		if !strings.HasSuffix(content, "}\n") || !strings.Contains(content, "\n  \"features\"") {
			t.Errorf("not indented with two spaces and a final newline:\n%s", content)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(content), &m); err != nil {
			t.Fatalf("written list is not JSON: %v\n%s", err, content)
		}
		if !strings.Contains(content, "12345678901234567890") || !strings.Contains(content, `"<b>&</b>"`) {
			t.Errorf("a value was rewritten:\n%s", content)
		}
		return m
	}
	wantList := func(change func(f map[string]any)) map[string]any {
		var m map[string]any
		json.Unmarshal([]byte(list), &m)
		change(m["features"].([]any)[0].(map[string]any))
		return m
	}

	t.Run("coder sets status completed", func(t *testing.T) {
		c := newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).
			write("src/F-001.txt", "F-001 works\n", written, false).read(featureListPath, numbered(list), false)
		got := edited(t, ask(t, New(DefaultScenario(), nil), c))
		want := wantList(func(f map[string]any) { f["status"] = "completed" })
		if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
			t.Fatalf("got  %s\nwant %s", a, b)
		}
	})
	t.Run("tester sets tested and evidence", func(t *testing.T) {
		c := newConvo(testCmd("F-001", 1)).bash("sh tests/F-001.sh", "", false).
			write(".claude/progress/evidence/F-001/attempt-1.log", "…", written, false).read(featureListPath, numbered(list), false)
		got := edited(t, ask(t, New(DefaultScenario(), nil), c))
		want := wantList(func(f map[string]any) {
			f["tested"] = true
			f["evidence"] = []any{".claude/progress/evidence/F-001/attempt-1.log"}
		})
		if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
			t.Fatalf("got  %s\nwant %s", a, b)
		}
	})
	t.Run("a list without the feature ends the turn", func(t *testing.T) {
		c := newConvo(codeCmd("F-009", 1)).read("src/F-009.txt", missing, true).
			write("src/F-009.txt", "F-009 works\n", written, false).read(featureListPath, numbered(list), false)
		check(t, ask(t, New(DefaultScenario(), nil), c), want{text: `Stopping: .claude/progress/feature-list.json: no feature "F-009"`})
	})
	t.Run("a list that is not JSON ends the turn", func(t *testing.T) {
		c := newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).
			write("src/F-001.txt", "F-001 works\n", written, false).read(featureListPath, numbered("not json"), false)
		check(t, ask(t, New(DefaultScenario(), nil), c), want{text: "Stopping: .claude/progress/feature-list.json: invalid JSON…"})
	})
}

// TestStopEarly: attempt 1 ends at once without a tool; attempt 2 works.
func TestStopEarly(t *testing.T) {
	sc := Scenario{Name: "s", Features: []FeatureScript{{ID: "F-001", Title: "T", Behavior: StopEarly}}}
	s := New(sc, nil)
	check(t, ask(t, s, newConvo(codeCmd("F-001", 1))), want{text: "I could not finish."})
	check(t, ask(t, s, newConvo(codeCmd("F-001", 2)).read("src/F-001.txt", missing, true)),
		want{tool: "Write", target: abs("src/F-001.txt"), content: "F-001 works\n"})
}

// TestResumedSessionActsOnTheLastCommand: a retry resumes the coding
// session, so the history holds attempt 1 finished. The model must start
// attempt 2 from its first step and write what attempt 2 calls for.
func TestResumedSessionActsOnTheLastCommand(t *testing.T) {
	s := New(DefaultScenario(), nil)
	c := codedUpToList(t, newConvo(codeCmd("F-002", 1)), "F-002", "F-002 broken\n").
		write(featureListPath, listFor(t), "updated", false).
		say("Implemented F-002: wrote src/F-002.txt").
		prompt(codeCmd("F-002", 2))
	check(t, ask(t, s, c), want{tool: "Read", target: abs("src/F-002.txt")})
	if got := s.Stats().Runs["coding-agent"]; got != 1 {
		t.Errorf("the resumed run counted %d times as started, want 1", got)
	}

	c.read("src/F-002.txt", "1\tF-002 broken\n2\t", false)
	check(t, ask(t, s, c), want{tool: "Write", target: abs("src/F-002.txt"), content: "F-002 works\n"})

	// The CLI may answer a Read of a file it thinks unchanged with a stub:
	// the model then works from the content the conversation showed last,
	// here the list it wrote in attempt 1.
	c.write("src/F-002.txt", "F-002 works\n", "updated", false).
		read(featureListPath, "File unchanged since last read. The content from the earlier Read tool_result in this conversation is still current.", false)
	a := ask(t, s, c)
	check(t, a, want{tool: "Write", target: abs(featureListPath)})
	_, in := a.tool(t)
	f2, err := editFeature(in["content"].(string), "F-002", func(f map[string]any) {
		if f["status"] != "completed" {
			t.Errorf("F-002 status %v, want completed", f["status"])
		}
	})
	if err != nil {
		t.Fatalf("written list: %v\n%s", err, f2)
	}
	if s.Stats().Runs["coding-agent"] != 1 {
		t.Errorf("runs %v: later requests of a run must not count as starts", s.Stats().Runs)
	}

	// A Stop hook's feedback after the final answer: the model answers the
	// same final text again rather than redo its work.
	c.write(featureListPath, "…", "updated", false).say("Implemented F-002: wrote src/F-002.txt")
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "Stop hook feedback:\nkeep going"})
	check(t, ask(t, s, c), want{text: "Implemented F-002: wrote src/F-002.txt"})
}

func TestWorkingDirectory(t *testing.T) {
	tests := []struct {
		name string
		req  string
		want string
	}{
		{"system turn of 2.1.330", `{"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"# Environment\n - Primary working directory: /a/b c\n - Is a git repository: false"}]}]}`, "/a/b c"},
		{"system prompt of older versions", `{"system":[{"type":"text","text":"You are Claude.\nWorking directory: /old/style\nPlatform: linux"}],"messages":[]}`, "/old/style"},
		{"note in a tool error", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":"File does not exist. Note: your current working directory is /from/note."}]}]}`, "/from/note"},
		{"the CLI's line wins over a prompt's", `{"messages":[{"role":"user","content":"Working directory: /from/prompt"},{"role":"system","content":" - Primary working directory: /from/cli"}]}`, "/from/cli"},
		{"nothing", `{"messages":[{"role":"user","content":"hi"}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req request
			if err := json.Unmarshal([]byte(tt.req), &req); err != nil {
				t.Fatal(err)
			}
			if got := workingDir(&req); got != tt.want {
				t.Fatalf("workingDir = %q, want %q", got, tt.want)
			}
		})
	}
	// Without a working directory the paths stay relative.
	c := newConvo(codeCmd("F-001", 1))
	c.msgs = c.msgs[:1]
	check(t, ask(t, New(DefaultScenario(), nil), c), want{tool: "Read", target: "src/F-001.txt"})
}

func TestFindCommand(t *testing.T) {
	tests := []struct {
		name, text string
		agent      string // "" when none is found
		attempt    int
	}{
		{"fenced and compact", "Do:\n```json\n{\"command\": {\"agent\": \"tester-agent\", \"context\": {\"attempt\": 3}}}\n```\nbye", "tester-agent", 3},
		{"indented", "{\n  \"command\" : {\n    \"agent\": \"coding-agent\"\n  }\n}", "coding-agent", 1},
		{"attempt as a string", `{"command": {"agent": "coding-agent", "context": {"attempt": "2"}}}`, "coding-agent", 2},
		{"a broken one before a good one", `{"command": {"agent": oops}} then {"command": {"agent": "initializer-agent"}}`, "initializer-agent", 1},
		{"no agent", `{"command": {"task": "x"}}`, "", 0},
		{"truncated", `{"command": {"agent": "coding-agent"`, "", 0},
		{"none", "just text", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := findCommand(tt.text)
			if ok != (tt.agent != "") || c.Agent != tt.agent {
				t.Fatalf("findCommand = %+v, %v; want agent %q", c, ok, tt.agent)
			}
			if ok && c.attempt() != tt.attempt {
				t.Fatalf("attempt %d, want %d", c.attempt(), tt.attempt)
			}
		})
	}
}

func TestCommandOnlyFromUserText(t *testing.T) {
	s := New(DefaultScenario(), nil)
	// A command object that only a tool result shows (a Read of a prompt
	// file) is data, not an instruction.
	c := &convo{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "read the prompt file"})
	b, _ := json.Marshal(map[string]any{"command": codeCmd("F-001", 1)})
	c.read("prompt.md", "1\t"+string(b), false)
	check(t, ask(t, s, c), want{text: "OK."})
	// A plain string prompt works like blocks.
	c = &convo{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "```json\n" + string(b) + "\n```"})
	check(t, ask(t, s, c), want{tool: "Read", target: "src/F-001.txt"})
}

func TestStripLineNumbers(t *testing.T) {
	tests := []struct {
		name, in, want string
		numbered       bool
	}{
		{"2.1.330", "1\t{\n2\t  \"a\": 1\n3\t}\n4\t", "{\n  \"a\": 1\n}\n", true},
		{"cat -n with arrows and a reminder", "     1→{\n     2→}\n\n<system-reminder>\nBe careful.\n</system-reminder>", "{\n}", true},
		{"cat -n with tabs", "     9\tx\n    10\ty", "x\ny", true},
		{"a stub", "File unchanged since last read.", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := stripLineNumbers(tt.in)
			if got != tt.want || ok != tt.numbered {
				t.Fatalf("stripLineNumbers = %q, %v; want %q, %v", got, ok, tt.want, tt.numbered)
			}
		})
	}
}
