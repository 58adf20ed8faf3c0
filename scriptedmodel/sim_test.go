package scriptedmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCLI is the agent loop of the CLI, in process and on a real directory:
// it asks the model, runs the tool it calls, and appends the result, until
// the model ends its turn. Its tools behave as NOTES.md and the real CLI
// show (line-numbered Read, Write refused on a file not read or changed
// since, "Exit code N" on a failing Bash), so that every behavior of the
// scenario can be played through quickly; TestRealClaudePlaysEveryRole
// checks the same against the real CLI.
type fakeCLI struct {
	t      *testing.T
	s      *Server
	dir    string
	arrows bool // Read answers in the older "     1→" format
}

// session is one CLI session: its conversation and what it has seen of each
// file, which is how the CLI decides that a Write needs a Read first.
type session struct {
	c    *convo
	seen map[string]string
}

func (f *fakeCLI) newSession(cmd map[string]any) *session {
	return &session{c: newConvoIn(f.dir, cmd), seen: map[string]string{}}
}

// run plays the session to the end of the model's turn and returns its
// final text.
func (f *fakeCLI) run(sess *session) string {
	f.t.Helper()
	for range 2 * maxToolCalls {
		a := ask(f.t, f.s, sess.c)
		if a.StopReason == "end_turn" {
			sess.c.say(a.text())
			return a.text()
		}
		name, in := a.tool(f.t)
		result, isError := f.exec(sess, name, in)
		sess.c.call(name, in, result, isError)
	}
	f.t.Fatalf("the model did not end its turn:\n%s", sess.c.body(false))
	return ""
}

func (f *fakeCLI) exec(sess *session, name string, in map[string]any) (string, bool) {
	path, _ := in["file_path"].(string)
	if name != "Bash" && !filepath.IsAbs(path) {
		return "file_path must be absolute, got " + path, true
	}
	switch name {
	case "Read":
		b, err := os.ReadFile(path)
		if err != nil {
			return "File does not exist. Note: your current working directory is " + f.dir + ".", true
		}
		sess.seen[path] = string(b)
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if f.arrows {
				lines[i] = fmt.Sprintf("%6d→%s", i+1, l)
			} else {
				lines[i] = fmt.Sprintf("%d\t%s", i+1, l)
			}
		}
		return strings.Join(lines, "\n"), false
	case "Write":
		content, _ := in["content"].(string)
		if b, err := os.ReadFile(path); err == nil {
			seen, ok := sess.seen[path]
			switch {
			case !ok:
				return "File has not been read yet. Read it first before writing to it.", true
			case seen != string(b):
				return "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.", true
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err.Error(), true
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err.Error(), true
		}
		sess.seen[path] = content
		return "File created successfully at: " + path, false
	case "Bash":
		cmd := exec.Command("sh", "-c", in["command"].(string))
		cmd.Dir = f.dir
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Sprintf("Exit code %d\n%s", ee.ExitCode(), out), true
		}
		if err != nil {
			return err.Error(), true
		}
		if len(out) == 0 {
			return "(Bash completed with no output)", false
		}
		return string(out), false
	}
	return "No such tool available: " + name, true
}

func (f *fakeCLI) feature(id string) map[string]any {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, featureListPath))
	if err != nil {
		f.t.Fatal(err)
	}
	var l struct{ Features []map[string]any }
	if err := json.Unmarshal(b, &l); err != nil {
		f.t.Fatalf("feature list: %v\n%s", err, b)
	}
	for _, x := range l.Features {
		if x["id"] == id {
			return x
		}
	}
	f.t.Fatalf("no %s in the list", id)
	return nil
}

// setStatus is the daemon putting a feature back in progress before a
// retry, which changes the list under the coding session's feet.
func (f *fakeCLI) setStatus(id, status string) {
	f.t.Helper()
	p := filepath.Join(f.dir, featureListPath)
	b, _ := os.ReadFile(p)
	out, err := editFeature(string(b), id, func(m map[string]any) { m["status"] = status })
	if err != nil {
		f.t.Fatal(err)
	}
	os.WriteFile(p, []byte(out), 0o644)
}

// TestBehaviorsOverAttempts plays the loop the daemon runs (code, then test
// when the feature is completed, retry on the resumed coding session) for
// every behavior, and checks the verdict after each attempt.
func TestBehaviorsOverAttempts(t *testing.T) {
	tests := []struct {
		behavior Behavior
		// per attempt: "tested", "failed" (tested false), "stopped" (the
		// coding agent left the status alone).
		outcomes []string
	}{
		{Pass, []string{"tested"}},
		{FailOnce, []string{"failed", "tested"}},
		{NeverPass, []string{"failed", "failed", "failed"}},
		{StopEarly, []string{"stopped", "tested"}},
	}
	for i, tt := range tests {
		t.Run(string(tt.behavior), func(t *testing.T) {
			sc := Scenario{Name: "sim", Features: []FeatureScript{
				{ID: "F-001", Title: "Under test", Behavior: tt.behavior},
				{ID: "F-002", Title: "Bystander", Behavior: Pass},
			}}
			f := &fakeCLI{t: t, s: New(sc, nil), dir: t.TempDir(), arrows: i%2 == 1}
			if got := f.run(f.newSession(initCmd())); !strings.HasPrefix(got, "Initialized 2 features") {
				t.Fatalf("initializer: %q", got)
			}
			coder := f.newSession(codeCmd("F-001", 1))
			for n, want := range tt.outcomes {
				attempt := n + 1
				if attempt > 1 {
					f.setStatus("F-001", "in_progress")
					coder.c.prompt(codeCmd("F-001", attempt))
				}
				summary := f.run(coder)
				if want == "stopped" {
					if summary != "I could not finish." || f.feature("F-001")["status"] != "pending" {
						t.Fatalf("attempt %d: %q, status %v", attempt, summary, f.feature("F-001")["status"])
					}
					if _, err := os.Stat(filepath.Join(f.dir, "src/F-001.txt")); err == nil {
						t.Fatalf("attempt %d: a stop-early agent wrote the source", attempt)
					}
					continue
				}
				if summary != "Implemented F-001: wrote src/F-001.txt" || f.feature("F-001")["status"] != "completed" {
					t.Fatalf("attempt %d: %q, status %v", attempt, summary, f.feature("F-001")["status"])
				}
				verdict := f.run(f.newSession(testCmd("F-001", attempt)))
				tested := f.feature("F-001")["tested"] == true
				switch want {
				case "tested":
					if !tested || verdict != "F-001 passed: sh tests/F-001.sh" {
						t.Fatalf("attempt %d: %q, tested %v", attempt, verdict, tested)
					}
					ev := fmt.Sprintf(".claude/progress/evidence/F-001/attempt-%d.log", attempt)
					if e := f.feature("F-001")["evidence"].([]any); len(e) != 1 || e[0] != ev {
						t.Fatalf("evidence %v, want [%s]", e, ev)
					}
					if _, err := os.Stat(filepath.Join(f.dir, ev)); err != nil {
						t.Fatal(err)
					}
				case "failed":
					if tested || !strings.HasPrefix(verdict, "F-001 failed: `sh tests/F-001.sh` exited non-zero: Exit code 1") {
						t.Fatalf("attempt %d: %q, tested %v", attempt, verdict, tested)
					}
				}
			}
			if b := f.feature("F-002"); b["status"] != "pending" || b["tested"] != false {
				t.Fatalf("the bystander feature changed: %v", b)
			}
		})
	}
}

// TestInitializerOverAnExistingList: the CLI refuses to overwrite a file
// the session has not read; the initializer reads it and writes again.
func TestInitializerOverAnExistingList(t *testing.T) {
	f := &fakeCLI{t: t, s: New(DefaultScenario(), nil), dir: t.TempDir()}
	os.MkdirAll(filepath.Join(f.dir, ".claude/progress"), 0o755)
	os.WriteFile(filepath.Join(f.dir, featureListPath), []byte("[]\n"), 0o644)
	sess := f.newSession(initCmd())
	if got := f.run(sess); !strings.HasPrefix(got, "Initialized 4 features") {
		t.Fatalf("initializer: %q", got)
	}
	var calls []string
	for _, x := range exchanges(mustRequest(t, sess.c).Messages) {
		calls = append(calls, x.call.Name)
	}
	if got := strings.Join(calls, " "); got != "Bash Write Read Write" {
		t.Fatalf("calls %s, want Bash Write Read Write", got)
	}
	if f.feature("F-004")["title"] != "Flaky network" {
		t.Fatal("the list was not written")
	}
}

func mustRequest(t *testing.T, c *convo) *request {
	t.Helper()
	var r request
	if err := json.Unmarshal(c.body(false), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
