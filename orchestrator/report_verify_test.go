package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
)

// GET /v1/report says what verify last found, as `ctxgraphd report` does:
// verify runs beside the daemon and records itself in the state directory,
// apart from the store the daemon holds.
func TestReportSaysWhatVerifyLastFound(t *testing.T) {
	h := newHarness(t)
	o := h.orchestrator(false)
	r, err := o.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify.Confined != nil || r.Verify.Unconfined != nil {
		t.Fatalf("before any verify, the report has %+v", r.Verify)
	}
	run := control.VerifyRun{Time: time.Now().UTC(), Unconfined: true, Rev: "HEAD", Commit: "0123456789abcdef",
		Features: []control.VerifyFeature{{ID: "F-001", Summary: "`sh tests/F-001.sh` failed (exit 1)"}}}
	if err := report.RecordVerify(h.proj.StateDir, run); err != nil {
		t.Fatal(err)
	}
	if r, err = o.Report(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := r.Verify.Unconfined; u == nil || u.Commit != run.Commit || len(u.Features) != 1 || u.Features[0].Passed || r.Verify.Confined != nil {
		t.Errorf("after verify --unconfined, the report has %+v", r.Verify)
	}
}
