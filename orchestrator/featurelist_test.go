package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// What a run in flight leaves of the feature list half-way is nobody's
// broken file, least of all a person's: the empty file Claude Code's
// sandbox puts where the list it denies does not exist yet, while each of
// the initializer's commands runs, and the list its Write lands in pieces.
// Nothing is reported or warned while the run is in flight, and the list
// is taken as the run left it when it ends. (A person's half-written file,
// which is neither, is reported at once: TestPersonsHalfWrittenListIsKept.)
func TestAListHalfWrittenByTheRunInFlightIsNoPersonsProblem(t *testing.T) {
	const full = `{"version": 1, "features": [{"id": "F-001", "title": "feature F-001", "test": "sh tests/F-001.sh", "status": "pending", "scope": ["src/F-001.txt"]}]}`
	for _, tc := range []struct {
		name  string
		first string // what the watcher reads while the run is in flight
		write bool   // the run's Write of the list came through its hooks first
	}{
		{"the sandbox's mount point for the denied list, before any Write", "", false},
		{"the Write half-way", full[:40], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			core, logs := observer.New(zap.DebugLevel)
			h.logOpts = []zap.Option{zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })}
			var seen, shown atomic.Bool
			h.runner.script[role.Initializer] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
				if tc.write {
					h.hook("pre-tool-use", spec, map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write",
						"tool_input": map[string]any{"file_path": filepath.Join(h.proj.Dir, ".claude/progress/feature-list.json"), "content": full}})
				}
				h.write(".claude/progress/feature-list.json", tc.first)
				// The watcher reads it while the run is in flight.
				seen.Store(eventually.Within(10*time.Second, func() bool {
					return logs.FilterMessageSnippet("feature-list.json is invalid").Len() > 0
				}))
				if st, err := h.current.Status(ctx); err == nil && strings.Contains(st.Message, "feature-list.json") {
					shown.Store(true)
				}
				h.write("tests/F-001.sh", "#!/bin/sh\ngrep -qx 'F-001 works' src/F-001.txt\n")
				h.write(".claude/progress/feature-list.json", full)
				return agents.Result{Summary: "wrote the list", NumTurns: 2}
			}
			if err := h.runToEnd(); err != nil {
				t.Fatalf("loop: %v", err)
			}
			if !seen.Load() {
				t.Fatal("the watcher never read the list half-way: the test saw nothing")
			}
			if shown.Load() {
				t.Error("the status showed a problem of the list while the run that was writing it was in flight")
			}
			for _, e := range logs.FilterMessageSnippet("feature-list.json").All() {
				if e.Level >= zapcore.WarnLevel {
					t.Errorf("logged %s %q %v: the run's own doing, half-way, is no one's problem", e.Level, e.Message, e.ContextMap())
				}
			}
			if got := summary(h.list()); got != "F-001=tested" {
				t.Errorf("features = %s, want the list the run left, worked", got)
			}
			if got := roles(h.runner.runs()); !strings.HasPrefix(got, "initializer coding:F-001") {
				t.Errorf("runs = %s, want the initializer once", got)
			}
		})
	}
}

// A save of the feature list the daemon has not read yet is never written
// over: the watcher brings it, and the sync takes it or reports it. Last
// night's CI lost a person's "not json" this way: it landed while the loop
// was between the store's write of a verdict and the list's. Once read,
// the daemon writes the list as before, and its own write never holds it
// back.
func TestAnUnreadSaveOfTheListIsNotWrittenOver(t *testing.T) {
	h := newHarness(t)
	if err := h.runToEnd(); err != nil {
		t.Fatalf("loop: %v", err)
	}
	o := h.current
	const listRel = ".claude/progress/feature-list.json"
	read := func() string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(h.proj.Dir, listRel))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	canonical := string(o.canonical.Marshal())
	if read() != canonical {
		t.Fatal("the night did not leave the canonical list on the disk")
	}
	o.writeFeatureList()
	if read() != canonical {
		t.Fatal("the daemon's write over its own write did not happen")
	}
	for _, save := range []string{"not json", strings.Replace(canonical, "feature F-001", "Greeting", 1)} {
		h.write(listRel, save)
		o.writeFeatureList()
		if got := read(); got != save {
			t.Fatalf("a save the daemon had not read was written over:\nsaved %q\nfound %q", save, got)
		}
		o.syncList(o.lanes.home, false) // what the watcher's event does
	}
	if got := o.canonical.Feature("F-001").Title; got != "Greeting" {
		t.Fatalf("the person's save was not taken: F-001 is titled %q", got)
	}
	// A daemon that has read the file and not written it yet (started on
	// a person's list) holds a save made since as well.
	o.listFile.ownWrite = nil
	h.write(listRel, "not json either")
	o.writeFeatureList()
	if got := read(); got != "not json either" {
		t.Fatalf("a save made after the daemon's only read was written over: %q", got)
	}
	o.syncList(o.lanes.home, false)
	o.canonical.Feature("F-001").Title = "Greeting, read"
	o.writeFeatureList()
	if got, want := read(), string(o.canonical.Marshal()); got != want {
		t.Fatalf("once read, the daemon's write did not go through:\n%s", got)
	}
}

// TestARunsWriteMadeBeforeAHeldBackWriteKeepsTheDaemonsDecisions: the same
// for a run's write on the project's own tree. A tester's write of its
// feature's evidence, made on the file as it was, lands while the daemon
// decides (its write held back): it is read against that file, not the
// canonical list. What the daemon decided meanwhile stays, though the
// run's file says otherwise: another feature made tested, or the run's
// own feature blocked by a person's ctl, which a status the tester may
// write would otherwise take back. Nothing the run did not change is
// reported as its violation, and its own change is taken.
func TestARunsWriteMadeBeforeAHeldBackWriteKeepsTheDaemonsDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		meantime func(l *progress.List) // the daemon's decision, held back
		holds    func(l *progress.List) string
	}{
		{"another feature made tested", func(l *progress.List) { l.Feature("F-001").Tested = true }, func(l *progress.List) string {
			if f := l.Feature("F-001"); !f.Tested {
				return "F-001 is no longer tested"
			}
			return ""
		}},
		{"the run's own feature blocked", func(l *progress.List) { l.Feature("F-002").Status = progress.Blocked }, func(l *progress.List) string {
			if f := l.Feature("F-002"); f.Status != progress.Blocked {
				return "F-002 is " + string(f.Status) + ", not blocked"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if err := h.runToEnd(); err != nil {
				t.Fatalf("loop: %v", err)
			}
			o := h.current
			const listRel = ".claude/progress/feature-list.json"
			for _, id := range []string{"F-001", "F-002"} {
				f := o.canonical.Feature(id)
				f.Tested, f.Status, f.Evidence = false, progress.Completed, nil
			}
			o.writeFeatureList()
			// F-002's tester, in flight, writes its evidence on the file
			// as it read it; the daemon has not read that write when it
			// decides.
			home := o.lanes.home
			home.active = &activeRun{run: store.Run{ID: "run-tester-F-002", Role: string(role.Tester), Feature: "F-002", Attempt: 1}}
			defer func() { home.active = nil }()
			written := o.canonical.Clone()
			const evidence = ".claude/progress/evidence/F-002/run.txt"
			written.Feature("F-002").Evidence = []string{evidence}
			h.write(listRel, string(written.Marshal()))
			tc.meantime(o.canonical)
			o.writeFeatureList() // held back: the run's write is unread
			before := len(h.violations())
			o.syncList(home, false)
			o.persist()

			if why := tc.holds(o.canonical); why != "" {
				t.Errorf("the run's write, made before the daemon's decision, took it back: %s", why)
			}
			if got := o.canonical.Feature("F-002").Evidence; len(got) != 1 || got[0] != evidence {
				t.Errorf("the tester's own change was not taken: F-002's evidence is %q", got)
			}
			disk, _, err := progress.ReadFeatureList(h.proj.Progress())
			if err != nil {
				t.Fatal(err)
			}
			if why := tc.holds(disk); why != "" {
				t.Errorf("the file does not hold the daemon's decision: %s", why)
			}
			for _, tr := range h.violations()[before:] {
				t.Errorf("what the run did not change was reported as its violation: %s", tr.Event.WhatHappened)
			}
		})
	}
}

// TestASaveMadeBeforeAHeldBackWriteKeepsTheDaemonsDecisions: a person's
// save made on the file as it was, landing while the daemon decides (its
// write held back: the save is unread), is read as made on that file. What
// the save changed is the person's, down to the field, and everything it
// left as it was keeps the daemon's state: the feature the daemon marked
// tested meanwhile stays tested, though the person's copy says otherwise,
// also when the person edited another field of that very feature. The
// daemon then writes the list again, with both.
func TestASaveMadeBeforeAHeldBackWriteKeepsTheDaemonsDecisions(t *testing.T) {
	for _, edits := range []string{"F-002", "F-001"} {
		t.Run("the person edits "+edits, func(t *testing.T) {
			h := newHarness(t)
			if err := h.runToEnd(); err != nil {
				t.Fatalf("loop: %v", err)
			}
			o := h.current
			const listRel = ".claude/progress/feature-list.json"
			// The file as the person copies it: F-001 not tested yet.
			f1 := o.canonical.Feature("F-001")
			f1.Tested, f1.Status = false, progress.Completed
			o.writeFeatureList()
			copied := o.canonical.Clone()
			// The person's edit of their copy, saved; the daemon has not
			// read it when it marks F-001 tested.
			copied.Feature(edits).Title = "Renamed by the person"
			h.write(listRel, string(copied.Marshal()))
			f1 = o.canonical.Feature("F-001")
			f1.Tested = true
			o.writeFeatureList() // held back: the save is unread
			before := len(h.violations())
			o.syncList(o.lanes.home, false)
			o.persist()

			if f := o.canonical.Feature("F-001"); !f.Tested || f.Status != progress.Completed {
				t.Errorf("the person's save, made before the verdict, took it back: F-001 is %s, tested %v", f.Status, f.Tested)
			}
			if got := o.canonical.Feature(edits).Title; got != "Renamed by the person" {
				t.Errorf("the person's edit was not taken: %s is titled %q", edits, got)
			}
			disk, _, err := progress.ReadFeatureList(h.proj.Progress())
			if err != nil {
				t.Fatal(err)
			}
			if f := disk.Feature("F-001"); !f.Tested || disk.Feature(edits).Title != "Renamed by the person" {
				t.Errorf("the file does not hold both: F-001 tested %v, %s titled %q", f.Tested, edits, disk.Feature(edits).Title)
			}
			for _, tr := range h.violations()[before:] {
				t.Errorf("the daemon's own state, missing from the save, was reported as a change to revert: %s", tr.Event.WhatHappened)
			}
		})
	}
}
