package judge

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// A run moved to a worker is judged in its clone there: its writes are the
// project's inside that directory, held to its scope and the frozen tests,
// and the lane's work tree on the daemon's machine is outside it as any
// other directory. Its paths are judged as written: a link the daemon's
// disk has at the same path is not the worker's, and is not followed.
func TestRelocatedRunIsJudgedInItsClone(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(list(progress.Feature{ID: "F-001", Scope: []string{"src/**"}, Test: "go test ./tests"}))
	if err := f.j.SetFrozen(Frozen{Files: map[string]string{"tests/frozen_test.go": "0123"}}); err != nil {
		t.Fatal(err)
	}
	lane := f.lane(map[string]string{"tests/frozen_test.go": "package tests\n"})
	// The worker's clone, at a path this machine has too: here, src/x.go
	// is a link to the frozen test, which the worker's clone knows nothing of.
	clone, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(clone, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(lane.Dir, "tests/frozen_test.go"), filepath.Join(clone, "src/x.go")); err != nil {
		t.Fatal(err)
	}
	coder := gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}
	relocated := f.j.RegisterIn(coder, lane)
	workerTmp := "/worker/tmp/cgw-w1" // the worker's temp: its sandbox lets the run write there
	if err := f.j.Relocate(relocated, clone, []string{filepath.Join(clone, "tests")}, []string{workerTmp}); err != nil {
		t.Fatal(err)
	}
	inLane := f.j.RegisterIn(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-2"}, lane)

	tests := []struct {
		name  string
		token string
		path  string
		code  string // "" when the write is let through
	}{
		{"the frozen test in the clone", relocated, filepath.Join(clone, "tests/frozen_test.go"), "frozen_test"},
		{"a file of its scope in the clone", relocated, filepath.Join(clone, "src/x.go"), ""},
		{"out of its scope in the clone", relocated, filepath.Join(clone, "docs/x.md"), "out_of_scope"},
		{"its scope's path in the lane here", relocated, filepath.Join(lane.Dir, "src/x.go"), "outside_project"},
		{"the frozen test in the lane here", relocated, filepath.Join(lane.Dir, "tests/frozen_test.go"), "outside_project"},
		{"the daemon's files", relocated, filepath.Join(f.proj.StateDir, "x"), "daemon_files"},
		{"its worker's temp directory", relocated, filepath.Join(workerTmp, "scratch.txt"), ""},
		{"a near miss of its worker's temp directory", relocated, workerTmp + "x/scratch.txt", "outside_project"},
		{"this machine's temp directory, not its worker's", relocated, filepath.Join(os.TempDir(), "scratch.txt"), "outside_project"},
		// The same lane's run that stayed is judged as before.
		{"a local run in the lane", inLane, filepath.Join(lane.Dir, "src/x.go"), ""},
		{"a local run, the clone's path", inLane, filepath.Join(clone, "docs/x.md"), "outside_project"},
		// For a run on this machine the link here is followed, into its
		// lane's frozen test.
		{"a local run, through the link here", inLane, filepath.Join(clone, "src/x.go"), "frozen_test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := f.mustHook(tt.token, "pre-tool-use", writePayload(tt.path))
			switch {
			case tt.code == "" && d != nil:
				t.Errorf("Write %s refused: %+v", tt.path, d)
			case tt.code != "" && (d == nil || d.Code != tt.code):
				t.Errorf("Write %s: decision %+v, want %s", tt.path, d, tt.code)
			}
		})
	}
}

// Relocate takes an absolute, clean directory of a known run only.
func TestRelocateRefuses(t *testing.T) {
	f := newFixture(t, nil)
	token := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	for _, tt := range []struct{ token, dir string }{
		{token, "clone"},
		{token, "/w/clone/../other"},
		{token, ""},
		{"not-a-token", "/w/clone"},
	} {
		if err := f.j.Relocate(tt.token, tt.dir, nil, nil); err == nil {
			t.Errorf("Relocate(%q, %q) = nil, want an error", tt.token, tt.dir)
		}
	}
	if err := f.j.Relocate(token, "/w/clone", nil, nil); err != nil {
		t.Errorf("Relocate of a known run to /w/clone: %v", err)
	}
}

// A reissued token is the run's, with all that was recorded of it; the
// old one opens nothing at once.
func TestReissue(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	tester := gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-1"}
	old := f.j.Register(tester)
	p := bashPayload("sh tests/a.sh")
	p["cwd"] = f.dir
	if d := f.mustHook(old, "post-tool-use", p); d != nil {
		t.Fatalf("the test run: %+v", d)
	}
	if _, ok := f.j.Reissue("not-a-token"); ok {
		t.Error("Reissue of an unknown token succeeded")
	}
	next, ok := f.j.Reissue(old)
	if !ok || next == "" || next == old {
		t.Fatalf("Reissue = %q, %v; want a new token", next, ok)
	}
	tests := []struct {
		name    string
		token   string
		event   string
		payload map[string]any
		unknown bool   // refused as no run's
		code    string // the decision's code, "" for none
	}{
		{"the old token's write", old, "pre-tool-use", writePayload(filepath.Join(f.dir, "src/a/x.go")), true, ""},
		{"the old token's stop", old, "stop", stopPayload, true, ""},
		// The new token is the tester of F-001, who changes no source...
		{"the new token's write of source", next, "pre-tool-use", writePayload(filepath.Join(f.dir, "src/a/x.go")), false, "tester_edits_source"},
		// ...and its test run, recorded under the old token, counts.
		{"the new token's stop after the test ran", next, "stop", stopPayload, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := f.hook(tt.token, tt.event, tt.payload)
			var apiErr *control.APIError
			if tt.unknown {
				if !errors.As(err, &apiErr) || apiErr.Code != control.CodeUnknownRun {
					t.Fatalf("hook = %+v, %v; want unknown_run", d, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.code == "" && d != nil:
				t.Errorf("refused: %+v", d)
			case tt.code != "" && (d == nil || d.Code != tt.code):
				t.Errorf("decision %+v, want %s", d, tt.code)
			}
		})
	}
	if got := f.j.Commands(tester.Run); len(got) != 1 || got[0].Command != "sh tests/a.sh" || !got[0].IsTest {
		t.Errorf("Commands after Reissue = %+v, want the test run", got)
	}
	if a, ok := f.j.ActorOf(next); !ok || a != tester {
		t.Errorf("ActorOf(new) = %+v, %v; want the tester", a, ok)
	}
}

// The feature list of a run on a worker is not on this machine: its Edits
// are judged against the list as the daemon knows the run has it (the
// list it was given, then what each edit let through left), and an edit
// that does not apply to that is refused, for a Write of the whole list.
func TestRelocatedRunsListEdits(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	clone := "/w/clones/lane-1" // nothing of it is on this machine
	token := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	if err := f.j.Relocate(token, clone, nil, nil); err != nil {
		t.Fatal(err)
	}
	listPath := filepath.Join(clone, ".claude/progress", progress.FeatureListFile)
	edit := func(old, new string) map[string]any {
		return map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Edit", "session_id": "s-1", "cwd": clone,
			"tool_input": map[string]any{"file_path": listPath, "old_string": old, "new_string": new}}
	}
	// In order: each step's list is what the steps before it left.
	steps := []struct {
		name     string
		old, new string
		code     string // "" when the edit is let through
	}{
		{"its own feature in progress (the first pending)", `"status": "pending"`, `"status": "in_progress"`, ""},
		{"the first pending is now the other feature's", `"status": "pending"`, `"status": "in_progress"`, "not_your_feature"},
		{"its feature, as the first edit left it, completed", `"status": "in_progress"`, `"status": "completed"`, ""},
		{"what is not in the list as known", `"status": "blocked"`, `"status": "completed"`, "feature_list_unseen"},
		{"a write of the whole list, as the last edit left it", "", "", ""},
	}
	for _, st := range steps {
		p := edit(st.old, st.new)
		if st.old == "" {
			l := twoFeatures()
			l.Features[0].Status = progress.Completed
			p = writePayload(listPath)
			p["tool_input"].(map[string]any)["content"] = string(l.Marshal())
		}
		d := f.mustHook(token, "pre-tool-use", p)
		switch {
		case st.code == "" && d != nil:
			t.Fatalf("%s: refused %+v", st.name, d)
		case st.code != "" && (d == nil || d.Code != st.code):
			t.Fatalf("%s: decision %+v, want %s", st.name, d, st.code)
		}
	}
}
