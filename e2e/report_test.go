package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// chromium returns Debian's headless browser, which `make test` installs,
// or ends the test.
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is required in CI to check the report as a person sees it (make test installs it)")
		}
		t.Skip("skipping: chromium is not installed (make test installs it)")
	}
	return p
}

// browse runs headless Chromium on a page with a profile of its own.
func browse(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.Command(browser, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestMorningReport: a night as a person sees it. While it runs, they
// follow it in a terminal (watchTheNight). In the morning, the daemon
// stopped, `ctxgraphd report` says what happened, in Markdown, JSON and a
// page that a browser shows with its chart. While a daemon runs, the
// report is the same, asked of it.
func TestMorningReport(t *testing.T) {
	night(t, core)
	term := newTerminal(t)
	p := newProject(t, scenario("morning",
		feature("F-001", scriptedmodel.Pass),
		feature("F-002", scriptedmodel.FailOnce),
		feature("F-003", scriptedmodel.NeverPass)))
	daemon, night := p.start("--set", "limits.max_retries=1")
	watchTheNight(t, term, p, night)
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Fatalf("daemon: %v\n%s", err, night)
	}
	runs := p.runs()

	// Nothing runs: every ctl exits 3 and says where to look instead.
	_, errOut, code := p.ctxgraphd("ctl", "status")
	if code != 3 || !strings.Contains(errOut, "`ctxgraphd report` shows what happened without one") {
		t.Errorf("ctl status without a daemon: exit %d, %q", code, errOut)
	}

	md := p.mustRun("report")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\*\*done\*\*: every feature is tested or blocked`),
		regexp.MustCompile(`3 features: 2 tested, 1 blocked, 0 open\. \d+ runs`),
		regexp.MustCompile(`\| F-001 feature F-001 \| tested \| 1 \| 2 \| \$[0-9.]+ \| [0-9ms]+ \| [0-9a-f]{12} \|  \|`),
		regexp.MustCompile(`\| F-002 feature F-002 \| tested \| 2 \| 4 \|`),
		regexp.MustCompile(`\| F-003 feature F-003 \| blocked \| 2 \| 4 \| .* \| \S.*attempts.* \|`),
	} {
		if !want.MatchString(md) {
			t.Errorf("the report does not match %s:\n%s", want, md)
		}
	}

	// The morning's check of the branch as the person runs it: before it,
	// the report says it never ran; after it, when, where and that both
	// tested features pass outside the jail too.
	if !strings.Contains(md, "`ctxgraphd verify --unconfined`: never run.") {
		t.Errorf("before any verify, the report does not say verify --unconfined never ran:\n%s", md)
	}
	verified := p.mustRun("verify", "--unconfined")
	if !strings.Contains(verified, "all 2 pass") {
		t.Errorf("verify --unconfined on the night's branch:\n%s", verified)
	}
	md = p.mustRun("report")
	if want := regexp.MustCompile("`ctxgraphd verify --unconfined`: last run [0-9-]+ [0-9:]+ at HEAD \\([0-9a-f]{12}\\): all 2 pass\\."); !want.MatchString(md) {
		t.Errorf("after verify --unconfined, the report does not match %s:\n%s", want, md)
	}

	var r control.Report
	if err := json.Unmarshal([]byte(p.mustRun("report", "--format", "json")), &r); err != nil {
		t.Fatal(err)
	}
	if u := r.Verify.Unconfined; u == nil || !u.Passed || len(u.Features) != 2 || r.Verify.Confined != nil {
		t.Errorf("JSON verify %+v: want the unconfined run, both features passing, and no confined run", r.Verify)
	}
	if r.Totals.Tested != 2 || r.Totals.Blocked != 1 || len(r.Runs) != len(runs) || r.Cost.SessionUSD <= 0 {
		t.Errorf("JSON totals %+v, %d runs (the store has %d), cost %v", r.Totals, len(r.Runs), len(runs), r.Cost)
	}

	// The page, as a browser shows it: a row per feature, a bar per run in
	// the timeline with all of its run in its title, and on screen the
	// bars, one line of them in the colours of the runs' outcomes, in the
	// order the runs ran, across the night (it runs one feature at a time,
	// so its runs are one row).
	browser := chromium(t)
	page := filepath.Join(t.TempDir(), "report.html")
	p.mustRun("report", "--format", "html", "-o", page)
	dom := string(browse(t, browser, "--dump-dom", "file://"+page))
	if n := strings.Count(dom, `<rect class="run `); n != len(runs) {
		t.Errorf("the browser's page has %d bars, want one per run (%d)", n, len(runs))
	}
	for _, run := range runs {
		if !strings.Contains(dom, "<title>"+run.ID+", "+run.Role) {
			t.Errorf("the browser's page has no title for %s", run.ID)
		}
	}
	if !strings.Contains(dom, `<span id="verify-unconfined">last run `) {
		t.Error("the browser's page does not say when verify --unconfined last ran")
	}
	for _, id := range []string{"F-001", "F-002", "F-003"} {
		if !strings.Contains(dom, `data-feature="`+id+`"`) {
			t.Errorf("the browser's page has no row for %s", id)
		}
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	browse(t, browser, "--screenshot="+shot, "--window-size=1100,900", "--hide-scrollbars", "file://"+page)
	slices.SortStableFunc(runs, func(a, b store.Run) int { return a.StartedAt.Compare(b.StartedAt) })
	var want []string
	for _, run := range runs {
		if len(want) == 0 || want[len(want)-1] != run.Outcome {
			want = append(want, run.Outcome) // runs back to back with one outcome are one stretch of colour
		}
	}
	img := screenshot(t, shot)
	y, from, to := barLine(img, want)
	if y < 0 {
		t.Errorf("no line of the screenshot crosses bars coloured %v, the runs' outcomes in the order they ran", want)
	} else if width := img.Bounds().Dx(); to-from < width/2 {
		t.Errorf("the bars spread over pixels %d to %d of %d: want them across the night", from, to, width)
	} else {
		t.Logf("bars coloured %v are drawn on the screenshot's line %d, from pixel %d to %d", want, y, from, to)
	}

	// With a daemon holding the store, the report is asked of it.
	_, log := p.start()
	p.waitFor("the daemon to answer", startWait, func() bool {
		_, ok := p.status()
		return ok
	})
	var live control.Report
	if err := json.Unmarshal([]byte(p.mustRun("report", "--format", "json")), &live); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if live.Totals != r.Totals || len(live.Features) != 3 {
		t.Errorf("from the daemon: %+v, without it: %+v", live.Totals, r.Totals)
	}

	// ctl cost: where the money went, for people and for scripts.
	cost := p.mustRun("ctl", "cost")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^session\s+\$` + regexp.QuoteMeta(fmt.Sprintf("%.2f", r.Cost.SessionUSD)) + `$`),
		regexp.MustCompile(`(?m)^per tested feature\s+\$\d+\.\d\d \(2 tested features\)$`),
		regexp.MustCompile(`(?m)^coding-agent\s+\$\d+\.\d\d$`),
		regexp.MustCompile(`(?m)^F-003\s+blocked\s+4\s+\$\d+\.\d\d$`),
	} {
		if !want.MatchString(cost) {
			t.Errorf("ctl cost does not match %s:\n%s", want, cost)
		}
	}
	var costs struct {
		SessionUSD float64            `json:"session_usd"`
		ByRole     map[string]float64 `json:"by_role"`
		Features   []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(p.mustRun("ctl", "cost", "--json")), &costs); err != nil || costs.SessionUSD != r.Cost.SessionUSD || len(costs.Features) != 3 || len(costs.ByRole) != 3 {
		t.Errorf("ctl cost --json: %+v (%v)", costs, err)
	}
}

// outcomeColours are the colours report.html gives the runs' outcomes ("":
// in flight).
var outcomeColours = map[string][3]int{
	"ok": {0x2d, 0xa4, 0x4e}, "failed": {0xcf, 0x22, 0x2e}, "transient": {0xd4, 0xa7, 0x2c},
	"interrupted": {0x8c, 0x95, 0x9f}, "": {0x09, 0x69, 0xda},
}

func screenshot(t *testing.T, file string) image.Image {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// barLine finds the first line of img that crosses stretches of the
// outcomes' colours in exactly the order of want, whatever lies between
// them (white gaps, a label's letters), and says where: its y and the
// first and last x of those colours; y is -1 when no line does.
func barLine(img image.Image, want []string) (y, from, to int) {
	outcomeAt := func(x, y int) (string, bool) {
		r, g, b, _ := img.At(x, y).RGBA()
		for o, c := range outcomeColours {
			if abs(int(r>>8)-c[0]) < 24 && abs(int(g>>8)-c[1]) < 24 && abs(int(b>>8)-c[2]) < 24 {
				return o, true
			}
		}
		return "", false
	}
	bounds := img.Bounds()
	for y = bounds.Min.Y; y < bounds.Max.Y; y++ {
		var seen []string
		from, to = -1, -1
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			o, ok := outcomeAt(x, y)
			if !ok {
				continue
			}
			if from < 0 {
				from = x
			}
			to = x
			if len(seen) == 0 || seen[len(seen)-1] != o {
				seen = append(seen, o)
			}
		}
		if len(want) > 0 && slices.Equal(seen, want) {
			return y, from, to
		}
	}
	return -1, -1, -1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
