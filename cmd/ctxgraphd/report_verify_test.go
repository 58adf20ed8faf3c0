package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// reportingBackend is a daemon that answers GET /v1/report with r, which
// knows nothing of verify: what verify found is the CLI's to read.
type reportingBackend struct {
	*controltest.Backend
	r control.Report
}

func (b reportingBackend) Report(context.Context) (control.Report, error) { return b.r, nil }

// verifiedProject is a git repository with one tested feature whose frozen
// test passes, and a store a daemon left (state done).
func verifiedProject(t *testing.T) paths.Project {
	t.Helper()
	proj := ctlProject(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	files := map[string]string{
		"tests/F-001.sh": "test \"$(cat answer)\" = 42\n",
		"answer":         "42\n",
		".claude/progress/feature-list.json": `{"version": 1, "features": [
 {"id": "F-001", "title": "answer", "description": "d", "steps": ["s"], "test": "sh tests/F-001.sh", "status": "completed", "tested": true}]}`,
	}
	for rel, content := range files {
		p := filepath.Join(proj.Dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}, {"update-ref", "refs/ctxgraphd/tested/F-001", "HEAD"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = proj.Dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	st, err := store.Open(proj.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(store.Batch{Session: &store.Session{State: "done"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return proj
}

// The morning report says when verify --unconfined last ran and what it
// found, or that it never ran, read from the record verify leaves in the
// state directory: from the store a daemon left, and while a daemon holds
// the store and answers for it.
func TestReportSaysWhenVerifyRan(t *testing.T) {
	proj := verifiedProject(t)
	out, errOut, code := ctl(t, "report", "--project", proj.Dir)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "`ctxgraphd verify`: never run. `ctxgraphd verify --unconfined`: never run.") {
		t.Errorf("before any verify, the report does not say it never ran:\n%s", out)
	}

	before := time.Now()
	if _, errOut, code := ctl(t, "verify", "--project", proj.Dir, "--unconfined"); code != 0 {
		t.Fatalf("verify --unconfined: exit %d: %s", code, errOut)
	}
	head, err := exec.Command("git", "-C", proj.Dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "`ctxgraphd verify --unconfined`: last run " // then the time, which the JSON holds exactly
	wantResult := " at HEAD (" + strings.TrimSpace(string(head)) + "): all 1 pass."
	check := func(how string) {
		t.Helper()
		out, errOut, code := ctl(t, "report", "--project", proj.Dir)
		if code != 0 {
			t.Fatalf("report %s: exit %d: %s", how, code, errOut)
		}
		_, after, ok := strings.Cut(out, want)
		if !ok || !strings.Contains(after, wantResult) || !strings.Contains(out, "`ctxgraphd verify`: never run.") {
			t.Errorf("report %s does not say verify --unconfined ran and passed (and verify never did):\n%s", how, out)
		}
		out, _, _ = ctl(t, "report", "--project", proj.Dir, "--format", "json")
		var r control.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		u := r.Verify.Unconfined
		if u == nil || !u.Unconfined || !u.Passed || len(u.Features) != 1 || u.Features[0].ID != "F-001" || u.Time.Before(before.Add(-time.Second)) || r.Verify.Confined != nil {
			t.Errorf("report %s --format json: verify %+v", how, r.Verify)
		}
	}
	check("without a daemon")

	// A daemon holds the store and answers for it, knowing nothing of
	// verify's records.
	st, err := store.Open(proj.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	controltest.Serve(t, proj.Socket, reportingBackend{&controltest.Backend{}, control.Report{Project: proj.ID, Dir: proj.Dir, State: "code"}})
	check("with a daemon")
}
