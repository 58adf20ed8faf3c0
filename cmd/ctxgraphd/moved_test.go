package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// movedProject makes a project at old with a state of record and a mirror,
// as a daemon leaves them, and returns it.
func movedProject(t *testing.T, old string) paths.Project {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if err := os.MkdirAll(filepath.Join(old, paths.ProgressDir), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := paths.ForProject(old)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(p.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(store.Batch{Runs: []store.Run{{Seq: 1, ID: store.RunID(1), Role: "initializer-agent"}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := progress.WriteSessionState(p.Progress(), progress.SessionState{Version: 1, Project: p.Dir, State: "done"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func runsIn(t *testing.T, stateDir string) int {
	t.Helper()
	st, err := store.OpenReadOnly(stateDir, time.Second)
	if err != nil {
		return -1
	}
	defer st.Close()
	runs, _ := st.Runs()
	return len(runs)
}

// A project moved (or renamed) keeps its state: the next start finds it by
// the mirror that moved with the project, and carries it over.
func TestMovedProjectKeepsItsState(t *testing.T) {
	base := t.TempDir()
	old := movedProject(t, filepath.Join(base, "todo"))
	if err := os.Rename(old.Dir, filepath.Join(base, "todo-app")); err != nil {
		t.Fatal(err)
	}
	moved, err := paths.ForProject(filepath.Join(base, "todo-app"))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	if err := carryOver(moved, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	if n := runsIn(t, moved.StateDir); n != 1 {
		t.Errorf("the moved project's state has %d runs, want the 1 it had", n)
	}
	if _, err := os.Stat(old.StateDir); err == nil {
		t.Error("the former state is still there: the state was copied, not moved")
	}
	if logs.FilterMessage("the project moved: its state came with it").Len() != 1 {
		t.Errorf("the log does not say the state moved: %v", logs.All())
	}
	// Once carried over, the next start leaves it alone.
	if err := carryOver(moved, zap.NewNop()); err != nil || runsIn(t, moved.StateDir) != 1 {
		t.Errorf("a second start: %v", err)
	}
}

// A copy starts with a state of its own, and the log says how to carry
// the state over instead; the original keeps its state.
func TestCopiedProjectStartsItsOwn(t *testing.T) {
	base := t.TempDir()
	orig := movedProject(t, filepath.Join(base, "todo"))
	cp := filepath.Join(base, "todo-copy", paths.ProgressDir)
	os.MkdirAll(cp, 0o755)
	data, _ := os.ReadFile(filepath.Join(orig.Progress(), progress.SessionStateFile))
	os.WriteFile(filepath.Join(cp, progress.SessionStateFile), data, 0o644)
	copied, err := paths.ForProject(filepath.Join(base, "todo-copy"))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	if err := carryOver(copied, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	if n := runsIn(t, orig.StateDir); n != 1 {
		t.Errorf("the original's state has %d runs, want 1", n)
	}
	if _, err := os.Stat(copied.StateDir); err == nil {
		t.Error("the copy took a state")
	}
	w := logs.FilterMessage("this project looks like a copy of another: it starts with a state of its own").All()
	if len(w) != 1 || !strings.Contains(w[0].ContextMap()["to_carry_the_state_over_instead"].(string), "cp -a "+orig.StateDir) {
		t.Errorf("the log does not say how to carry the state over: %v", logs.All())
	}
}

// A daemon started before the move still holds the state: the start is
// refused, saying which.
func TestMovedProjectWhoseDaemonRuns(t *testing.T) {
	base := t.TempDir()
	old := movedProject(t, filepath.Join(base, "todo"))
	st, err := store.Open(old.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	os.Rename(old.Dir, filepath.Join(base, "todo-app"))
	moved, _ := paths.ForProject(filepath.Join(base, "todo-app"))
	err = carryOver(moved, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "the daemon started there still runs") {
		t.Errorf("carryOver = %v, want a refusal naming the running daemon", err)
	}
}
