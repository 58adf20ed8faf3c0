package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// The tests of this file hold that no write lands outside an agent's tree
// (issue 25.1), by either of the two hands that write for it outside its
// sandbox: the daemon, unconfined, which reads and copies what agents left
// in their trees; and Claude Code's own file tools, which the hooks alone
// hold. Wherever a run may write, a person's files, another lane's clone,
// the project's tree and verify's checkouts stay as they were.

// homeFiles is what lies under dir (a directory of the test's HOME), by
// path relative to it: each regular file's content, and what any other
// entry is.
func homeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.IsDir():
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		default:
			out[rel] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// notRegular lists what under the project's dir (relative) is neither a
// directory nor a regular file, without following a link.
func (p *project) notRegular(rel string) []string {
	p.t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(p.dir, rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			r, _ := filepath.Rel(p.dir, path)
			out = append(out, r+" ("+d.Type().String()+")")
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// TestEvidenceLinksAreNeverFollowed: a tester links its evidence into the
// person's home (scriptedmodel.LinksEvidence: test.log to ~/.bashrc, logs
// to ~/.ssh), which its sandbox allows. F-001's tester does it in the
// project's own tree, in a first session at limits.parallel 1, on an
// attempt whose test fails; the session is paused as it runs and the
// daemon stopped. A second session, at limits.parallel 2, works F-001
// again in a lane (once a person set the failed attempt's code aside, as
// the daemon asks before it makes lanes from the branch), where an honest
// tester keeps test.log and a log under logs/ and the feature is
// accepted: the daemon copies the lane's evidence into the project. Meanwhile, in a lane of its own, F-002's tester links
// its evidence the same way on an attempt whose test passes, and claims
// the feature tested.
//
// Each link is a finding against the run that made it
// (evidence_not_a_file, which `ctl traces` names), removed, and that
// attempt fails; the person's file is as it was and nothing appeared in
// their directory; the project's evidence holds regular files only, the
// honest testers' among them; both features end tested by their second
// attempt.
//
// Without the finding, F-001's links outlive the first session and the
// copy of the second is refused at them (or, without internal/treefile,
// follows them: ~/.bashrc takes the evidence's bytes and ~/.ssh a new
// file), and F-002 is tested by the attempt that made them.
func TestEvidenceLinksAreNeverFollowed(t *testing.T) {
	night(t, extended)
	p := newProject(t, scenario("evidence-links",
		tester(feature("F-001", scriptedmodel.FailOnce), scriptedmodel.LinksEvidence),
		tester(feature("F-002", scriptedmodel.Pass), scriptedmodel.LinksEvidence),
	))
	home := envOf(p.env, "HOME")
	if err := os.WriteFile(filepath.Join(home, scriptedmodel.LinkedFile), []byte("# the person's own shell settings\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, scriptedmodel.LinkedDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, scriptedmodel.LinkedDir, "authorized_keys"), []byte("ssh-ed25519 AAAAC3Nza the-person@laptop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	linkedFile := func() string {
		b, err := os.ReadFile(filepath.Join(home, scriptedmodel.LinkedFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fileBefore, dirBefore := linkedFile(), homeFiles(t, filepath.Join(home, scriptedmodel.LinkedDir))

	// The first session, at parallel 1: paused while F-001's tester of
	// attempt 1 runs, so that it ends judged and nothing after it starts.
	daemon, log1 := p.start("--exit-when-done")
	var planter string
	p.waitFor("F-001's first tester run", agentsWait, func() bool {
		st, ok := p.status()
		cur, _ := st["current"].(map[string]any)
		if !ok || cur == nil || cur["feature"] != "F-001" || cur["role"] != "tester-agent" {
			return false
		}
		planter, _ = cur["id"].(string)
		return true
	})
	p.mustRun("ctl", "pause")
	p.waitFor("the session to pause", agentsWait, func() bool {
		st, ok := p.status()
		return ok && st["state"] == "paused"
	})
	var found []control.Trace
	if err := json.Unmarshal([]byte(p.mustRun("ctl", "traces", "--json", "--type", "violation", "--feature", "F-001", "--level", "full")), &found); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, tr := range found {
		if tr.Code == "evidence_not_a_file" && tr.Context.Run == planter {
			named = append(named, tr.Path)
		}
	}
	slices.Sort(named)
	if want := []string{scriptedmodel.EvidenceLogs("F-001"), scriptedmodel.EvidenceLog("F-001")}; !slices.Equal(named, want) {
		t.Errorf("ctl traces: evidence_not_a_file violations of %s name %q, want %q\n%+v", planter, named, want, found)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Fatalf("the first session's daemon did not stop cleanly on SIGTERM: %v\n%s", err, log1)
	}
	if left := p.notRegular(".claude/progress/evidence"); len(left) > 0 {
		t.Errorf("after the first session the project's evidence holds %v", left)
	}

	// The second, at parallel 2, from the pause. Lanes are made from the
	// branch, and the daemon leaves uncommitted work in the project's
	// tree to a person: they set the failed attempt's code aside.
	if err := os.Remove(filepath.Join(p.dir, p.files("F-001").Source)); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2")
	daemon, log2 := p.start("--exit-when-done")
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	p.waitFor("the second session's daemon to answer", startWait, func() bool {
		_, ok := p.status()
		return ok
	})
	p.mustRun("ctl", "resume")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the second session's daemon: %v\n%s", err, log2)
		}
	case <-time.After(agentsWait):
		t.Fatalf("the second session did not end\n%s", log2)
	}
	o := p.outcome(log1.String()+"\n--- second session ---\n"+log2.String(), nil)
	if got, want := states(o.list), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q", got, want)
	}

	if got := linkedFile(); got != fileBefore {
		t.Errorf("~/%s was written: %q, was %q", scriptedmodel.LinkedFile, got, fileBefore)
	}
	if got := homeFiles(t, filepath.Join(home, scriptedmodel.LinkedDir)); !maps.Equal(got, dirBefore) {
		t.Errorf("~/%s holds %q, held %q", scriptedmodel.LinkedDir, got, dirBefore)
	}
	if left := p.notRegular(".claude/progress/evidence"); len(left) > 0 {
		t.Errorf("the project's evidence holds %v", left)
	}

	// F-001: the links of its first tester, in the project's tree, went
	// with that attempt; its second, in a lane, was accepted, and its
	// evidence copied in as files.
	planted := o.found(t, "F-001", "tester-agent", gates.RoleWritePolicy, "evidence_not_a_file", scriptedmodel.EvidenceLog("F-001"), scriptedmodel.EvidenceLogs("F-001"))
	for _, v := range planted {
		if v.Context.Run != planter {
			t.Errorf("F-001's evidence_not_a_file violation %s names %s, want the planting run %s", v.ID, v.Context.Run, planter)
		}
	}
	if r, ok := o.run(planter); !ok || r.Attempt != 1 || r.Outcome != "failed" {
		t.Errorf("the planting run %s: %+v, want F-001's tester of attempt 1, failed", planter, r)
	}
	o.testedBy(t, "F-001", 2)
	// At parallel 2 every feature is worked in a lane: what its tester
	// kept reached the project through the daemon's copy.
	kept := map[string]string{
		scriptedmodel.EvidenceLog("F-001"):                     "$ sh tests/F-001.sh\n",
		scriptedmodel.EvidenceLogs("F-001") + "/attempt-2.log": "$ sh tests/F-001.sh\n",
		scriptedmodel.EvidenceLog("F-002"):                     "$ sh tests/F-002.sh\n",
		scriptedmodel.EvidenceLogs("F-002") + "/attempt-2.log": "$ sh tests/F-002.sh\n",
	}
	for rel, prefix := range kept {
		if got, ok := p.readIfAny(rel); !ok || !strings.HasPrefix(got, prefix) {
			t.Errorf("the project's %s = %q (%v), want the honest tester's evidence, starting %q", rel, got, ok, prefix)
		}
	}

	// F-002: linked in its lane and claimed; the claim went with the
	// links, and its second attempt was accepted.
	lane := o.found(t, "F-002", "tester-agent", gates.RoleWritePolicy, "evidence_not_a_file", scriptedmodel.EvidenceLog("F-002"), scriptedmodel.EvidenceLogs("F-002"))
	first := o.runOf(t, "tester-agent", "F-002", 1)
	for _, v := range lane {
		if v.Context.Run != first.ID {
			t.Errorf("F-002's evidence_not_a_file violation %s names %s, want its tester of attempt 1, %s", v.ID, v.Context.Run, first.ID)
		}
	}
	if first.Outcome != "failed" {
		t.Errorf("F-002's tester of attempt 1: %+v, want it failed", first)
	}
	o.testedBy(t, "F-002", 2)
	o.agree(t)
}

// TestALanesFileToolsWriteOnlyInItsTree: at limits.parallel 2, with the
// project, the lanes' clones, the daemon's state and a checkout of
// `ctxgraphd verify` all under the system's temp directory (the layout of
// demo, CI and these tests), F-001's coder, in its lane, writes with the
// Write tool at the top of F-002's clone, of the project's tree and of the
// verify checkout, and opens F-002's test (`exit 0`) with the Edit tool in
// F-002's clone and in the project (scriptedmodel.ReachesOut). F-002's
// coder waits in its lane meanwhile (After F-001), so that its clone is
// there to reach. Each is refused as outside the project (the model read
// why, and the hooks traced it), and nothing was written; the coder's
// Write into its own Claude Code temp directory ($TMPDIR) goes through;
// both features are tested by their first attempt.
//
// Were the hooks to let file tools write the whole of the system's temp
// directory, where the sandbox lets the run's programs write only its own,
// every one of those writes would land.
func TestALanesFileToolsWriteOnlyInItsTree(t *testing.T) {
	night(t, extended)
	verify, err := os.MkdirTemp("", "ctxgraphd-verify-") // as ctxgraphd verify makes it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(verify) })
	checkout := filepath.Join(verify, "checkouts", "F-002", "tree")
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	reacher := feature("F-001", scriptedmodel.ReachesOut)
	reacher.Reaches = []string{checkout}
	waits := feature("F-002", scriptedmodel.Pass)
	waits.After = "F-001"
	p := newProject(t, scenario("lane-file-tools", reacher, waits))
	p.env = append(p.env, "CTXGRAPHD_LIMITS_PARALLEL=2")
	for _, dir := range []string{p.dir, p.paths.StateDir, checkout} {
		if !strings.HasPrefix(dir, os.TempDir()+string(filepath.Separator)) {
			t.Fatalf("%s is not under the system's temp directory %s: the test would not hold what it says", dir, os.TempDir())
		}
	}
	o := p.runMisbehaving()
	if got, want := states(o.list), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q", got, want)
	}

	lanes := filepath.Join(filepath.Dir(p.paths.StateDir), "lanes", p.paths.ID)
	reached := scriptedmodel.ReachedFile("F-001")
	otherTest := p.files("F-002").Test
	refused := []struct{ tool, path string }{
		{"Write", filepath.Join(lanes, "F-002", "wt", reached)},
		{"Write", filepath.Join(p.dir, reached)},
		{"Write", filepath.Join(checkout, reached)},
		{"Edit", filepath.Join(lanes, "F-002", "wt", otherTest)},
		{"Edit", filepath.Join(p.dir, otherTest)},
	}
	denied := o.denied(t, "F-001", gates.RoleWritePolicy, "outside_project")
	traced := o.violated(t, "F-001", "coding-agent", gates.RoleWritePolicy, "outside_project", control.SourceHook)
	for _, r := range refused {
		if !slices.ContainsFunc(denied, func(d scriptedmodel.Denial) bool { return d.Tool == r.tool && d.Target == r.path && d.Attempt == 1 }) {
			t.Errorf("the model did not read an outside_project refusal of its %s of %s (denials: %v)", r.tool, r.path, denied)
		}
		if !slices.ContainsFunc(traced, func(v control.Trace) bool {
			return v.Tool != nil && v.Tool.Name == r.tool && strings.Contains(v.Event.WhatHappened+" "+v.Tool.Input, r.path)
		}) {
			t.Errorf("no outside_project violation traced for the %s of %s", r.tool, r.path)
		}
	}
	if len(denied) != len(refused) {
		t.Errorf("%d outside_project denials, want %d: %v", len(denied), len(refused), denied)
	}
	for _, path := range []string{filepath.Join(p.dir, reached), filepath.Join(checkout, reached)} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was written (%v)", path, err)
		}
	}
	if entries, _ := os.ReadDir(checkout); len(entries) > 0 {
		t.Errorf("verify's checkout holds %v", entries)
	}
	// F-002's clone is gone with its lane: what it held is in its
	// verdict, and in no commit anywhere.
	o.absent(t, reached)
	o.unchanged(t, otherTest)
	if got := p.git("show", branch.TestedRef("F-002")+":"+otherTest); strings.Contains(got, "exit 0") {
		t.Errorf("F-002's tested commit holds its test opened:\n%s", got)
	}

	// Its own temp directory is its to write.
	scratch := filepath.Join(p.agentsTemp(), fmt.Sprintf("claude-%d", os.Getuid()), scriptedmodel.ScratchFile("F-001"))
	if b, err := os.ReadFile(scratch); err != nil || string(b) != "notes of F-001\n" {
		t.Errorf("the coder's Write into its temp directory: %s = %q (%v), want it written", scratch, b, err)
	}
	o.testedBy(t, "F-001", 1)
	o.testedBy(t, "F-002", 1)
	o.agree(t)
}
