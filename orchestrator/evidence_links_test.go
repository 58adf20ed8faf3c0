package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A lane's evidence is copied into the project by the daemon, unconfined,
// and never through a link an earlier run left in the project's evidence
// directory: a link in a log's place is replaced by the log, a linked
// directory on the way keeps the lane's evidence out (as a violation),
// and nothing outside the project is written either way.
func TestALanesEvidenceIsCopiedThroughNoLink(t *testing.T) {
	h := newHarness(t)
	h.cfg.Limits.Parallel = 2
	outside := t.TempDir()
	secret := filepath.Join(outside, ".bashrc")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := filepath.Join(h.proj.Dir, ".claude", "progress", "evidence")
	os.MkdirAll(filepath.Join(ev, "F-001"), 0o755)
	// As a tester of an earlier session could have left them, in the
	// project's own tree: F-001's log a link to a file outside, F-002's
	// whole directory a link to a directory outside.
	if err := os.Symlink(secret, filepath.Join(ev, "F-001", "a.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ev, "F-002")); err != nil {
		t.Fatal(err)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	if got := summary(h.list()); got != "F-001=tested F-002=tested" {
		t.Fatalf("features = %s", got)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
		t.Errorf("the file outside the project that F-001's link led to was written: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files were made in the directory outside the project that F-002's link led to: %v", ents)
	}
	if fi, err := os.Lstat(filepath.Join(ev, "F-001", "a.log")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("F-001's log in the project is not the lane's, a regular file: %v, %v", fi, err)
	} else if got := h.read(".claude/progress/evidence/F-001/a.log"); got != "ok\n" {
		t.Errorf("F-001's log in the project = %q, want the lane's", got)
	}
	found := false
	for _, tr := range h.violations() {
		if tr.Code == "evidence_not_a_file" && tr.Context.Feature == "F-002" && strings.Contains(tr.Event.WhatHappened, "not followed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no evidence_not_a_file violation for F-002's linked directory: %v", gateCodes(h.violations()))
	}
}
