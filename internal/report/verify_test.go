package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// render is r in format, as `ctxgraphd report --format` prints it.
func render(t *testing.T, r control.Report, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r, format); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A project where verify never ran says so, for each mode, in every
// format: silence would read as nothing to worry about.
func TestReportSaysVerifyNeverRan(t *testing.T) {
	r, _ := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	r.Verify = ReadVerify(t.TempDir())
	if r.Verify.Confined != nil || r.Verify.Unconfined != nil || r.Verify.Unreadable != "" {
		t.Fatalf("an empty state directory read as %+v", r.Verify)
	}
	if md := render(t, r, "md"); !strings.Contains(md, "`ctxgraphd verify`: never run. `ctxgraphd verify --unconfined`: never run.") {
		t.Errorf("the Markdown does not say verify never ran:\n%s", md)
	}
	page := render(t, r, "html")
	for _, want := range []string{`<span id="verify-confined">never run</span>`, `<span id="verify-unconfined">never run</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal([]byte(render(t, r, "json")), &back); err != nil {
		t.Fatal(err)
	}
	if got := string(back["verify"]); strings.Join(strings.Fields(got), "") != `{"confined":null,"unconfined":null}` {
		t.Errorf(`the JSON's "verify" is %s, want both modes null`, got)
	}
}

// Each mode's last run is recorded in the state directory and the report
// says when it ran, on which commit, and what it found; a later run of a
// mode replaces its earlier one and leaves the other mode's alone.
func TestReportSaysWhenVerifyLastRanAndWhatItFound(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state") // not made yet: verify may run before any daemon
	at := t0.Add(9 * time.Hour)
	confined := control.VerifyRun{Time: at, Rev: "HEAD", Commit: "0123456789abcdef0123", Passed: true,
		Features: []control.VerifyFeature{{ID: "F-001", Passed: true}, {ID: "F-002", Passed: true}}}
	first := control.VerifyRun{Time: at.Add(time.Minute), Unconfined: true, Rev: "HEAD", Commit: "0123456789abcdef0123", Passed: true,
		Features: []control.VerifyFeature{{ID: "F-001", Passed: true}}}
	last := control.VerifyRun{Time: at.Add(2 * time.Minute), Unconfined: true, Rev: "main", Commit: "fedcba9876543210fedc",
		Features: []control.VerifyFeature{{ID: "F-001", Passed: true}, {ID: "F-002", Summary: "`sh tests/F-002.sh` failed (exit 1)"}, {ID: "F-003", Passed: true}}}
	for _, run := range []control.VerifyRun{confined, first, last} {
		if err := RecordVerify(state, run); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	r.Verify = ReadVerify(state)
	if r.Verify.Confined == nil || r.Verify.Unconfined == nil {
		t.Fatalf("the records read back as %+v", r.Verify)
	}
	if got := *r.Verify.Unconfined; got.Rev != "main" || len(got.Features) != 3 || got.Features[1].Summary == "" || !got.Time.Equal(last.Time) {
		t.Errorf("the unconfined record is %+v, want the last unconfined run", got)
	}
	wantConfined := "`ctxgraphd verify`: last run " + stamp(confined.Time) + " at HEAD (0123456789ab): all 2 pass."
	wantUnconfined := "`ctxgraphd verify --unconfined`: last run " + stamp(last.Time) + " at main (fedcba987654): F-002 fails its frozen test (2 of 3 pass)."
	md := render(t, r, "md")
	for _, want := range []string{wantConfined, wantUnconfined} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	page := render(t, r, "html")
	for _, want := range []string{
		`<span id="verify-confined">last run ` + stamp(confined.Time) + ` at HEAD (0123456789ab): all 2 pass</span>`,
		`<span id="verify-unconfined">last run ` + stamp(last.Time) + ` at main (fedcba987654): F-002 fails its frozen test (2 of 3 pass)</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	var back control.Report
	if err := json.Unmarshal([]byte(render(t, r, "json")), &back); err != nil {
		t.Fatal(err)
	}
	if back.Verify.Confined == nil || !back.Verify.Confined.Passed || back.Verify.Unconfined == nil || back.Verify.Unconfined.Passed ||
		!back.Verify.Unconfined.Unconfined || back.Verify.Unconfined.Commit != last.Commit {
		t.Errorf("the JSON's verify is %+v", back.Verify)
	}
}

// How many failed is said as a person reads it, for every count.
func TestVerifySayCountsFailures(t *testing.T) {
	id := func(s string) string { return s }
	at := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	run := func(passed ...bool) *control.VerifyRun {
		v := &control.VerifyRun{Time: at, Rev: "HEAD", Commit: "0123456789abcdef"}
		for i, p := range passed {
			v.Features = append(v.Features, control.VerifyFeature{ID: "F-00" + string(rune('1'+i)), Passed: p})
		}
		return v
	}
	head := "last run " + stamp(at) + " at HEAD (0123456789ab): "
	for _, c := range []struct {
		run  *control.VerifyRun
		want string
	}{
		{nil, "never run"},
		{run(), head + "no tested feature to verify"},
		{run(true), head + "all 1 pass"},
		{run(true, false), head + "F-002 fails its frozen test (1 of 2 pass)"},
		{run(false, true, false), head + "F-001, F-003 fail their frozen tests (1 of 3 pass)"},
	} {
		if got := verifySay(c.run, id); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// A record that cannot be read is said, with its path and the fix, and
// never read as "never run"; the other mode's record still counts.
func TestUnreadableVerifyRecordIsSaid(t *testing.T) {
	state := t.TempDir()
	if err := RecordVerify(state, control.VerifyRun{Time: t0, Rev: "HEAD", Commit: "0123456789abcdef", Passed: true}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(state, "verify-unconfined.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := ReadVerify(state)
	if v.Confined == nil || v.Unconfined != nil {
		t.Errorf("read %+v: the confined record stands, the unconfined one is not there", v)
	}
	if !strings.Contains(v.Unreadable, bad+" cannot be read") || !strings.Contains(v.Unreadable, "remove it, and run verify again") {
		t.Errorf("unreadable %q does not name the file and the fix", v.Unreadable)
	}
	r, _ := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	r.Verify = v
	if md := render(t, r, "md"); !strings.Contains(md, "A record of verify's "+text(bad)+" cannot be read") {
		t.Errorf("the Markdown does not say the record is unreadable:\n%s", md)
	}
	// A record of the other mode in a mode's file is not taken for it.
	if err := RecordVerify(state, control.VerifyRun{Time: t0, Rev: "HEAD", Unconfined: true}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(bad)
	os.WriteFile(filepath.Join(state, "verify-confined.json"), data, 0o600)
	if v := ReadVerify(state); v.Confined != nil || !strings.Contains(v.Unreadable, "verify-confined.json cannot be read") {
		t.Errorf("an unconfined run in the confined record read as %+v", v)
	}
}
