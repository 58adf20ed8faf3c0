package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// verifyFile is where the last verify run of a mode is kept: in the
// project's state directory, outside the tree agents write, and apart from
// the store, which a running daemon holds locked while verify runs beside
// it. One file per mode, each replaced whole (atomicfile), so that a
// confined and an unconfined run ending together both stay recorded.
func verifyFile(stateDir string, unconfined bool) string {
	if unconfined {
		return filepath.Join(stateDir, "verify-unconfined.json")
	}
	return filepath.Join(stateDir, "verify-confined.json")
}

// RecordVerify keeps run as the last verify run of its mode, in the
// project's state directory stateDir (made when it is not there: verify
// runs without a daemon ever having run).
func RecordVerify(stateDir string, run control.VerifyRun) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("record the verify run: %w", err)
	}
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(verifyFile(stateDir, run.Unconfined), append(data, '\n'), 0o600)
}

// ReadVerify reads the last verify run of each mode from stateDir; a mode
// never run is nil. A record that cannot be read is said in Unreadable, with
// its path and the fix, and the report goes on: a report, `ctl why` or
// `ctl cost` must not fail for it, nor say "never run" of a run that may
// have failed.
func ReadVerify(stateDir string) control.ReportVerify {
	var v control.ReportVerify
	var bad []string
	for _, unconfined := range []bool{false, true} {
		path := verifyFile(stateDir, unconfined)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		run := new(control.VerifyRun)
		if err == nil {
			err = json.Unmarshal(data, run)
		}
		if err == nil && run.Unconfined != unconfined {
			err = fmt.Errorf("it records a run with unconfined %t", run.Unconfined)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s cannot be read (%v)", path, err))
			continue
		}
		if unconfined {
			v.Unconfined = run
		} else {
			v.Confined = run
		}
	}
	if len(bad) > 0 {
		v.Unreadable = strings.Join(bad, "; ") + ": remove it, and run verify again"
	}
	return v
}

// verifyCommands name each mode as a person types it.
const (
	verifyConfined   = "ctxgraphd verify"
	verifyUnconfined = "ctxgraphd verify --unconfined"
)

// verifySay says in a sentence when run was last run and with what result,
// or that it never was; esc makes what verify recorded from the project (a
// revision, feature ids) fit for the format it goes to.
func verifySay(run *control.VerifyRun, esc func(string) string) string {
	if run == nil {
		return "never run"
	}
	s := fmt.Sprintf("last run %s at %s (%s): ", stamp(run.Time), esc(run.Rev), gitrepo.Short(run.Commit))
	var failed []string
	for _, f := range run.Features {
		if !f.Passed {
			failed = append(failed, esc(f.ID))
		}
	}
	n := len(run.Features)
	switch {
	case n == 0:
		return s + "no tested feature to verify"
	case len(failed) == 0:
		return s + fmt.Sprintf("all %d pass", n)
	case len(failed) == 1:
		return s + fmt.Sprintf("%s fails its frozen test (%d of %d pass)", failed[0], n-1, n)
	}
	return s + fmt.Sprintf("%s fail their frozen tests (%d of %d pass)", strings.Join(failed, ", "), n-len(failed), n)
}

// verifyMarkdown is the report's paragraph on verify: both modes, each
// run or never run.
func verifyMarkdown(v control.ReportVerify) string {
	s := fmt.Sprintf("`%s`: %s. `%s`: %s.", verifyConfined, verifySay(v.Confined, text), verifyUnconfined, verifySay(v.Unconfined, text))
	if v.Unreadable != "" {
		s += " A record of verify's " + text(v.Unreadable) + "."
	}
	return s + "\n\n"
}
