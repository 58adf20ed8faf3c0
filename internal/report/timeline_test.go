package report

import (
	"bytes"
	"encoding/xml"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// TestRowsOf: without a lane in the record, rows come from the runs'
// intervals: in the order they started, each run takes the first row free
// by its start.
func TestRowsOf(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	span := func(from, to int) control.ReportRun { return control.ReportRun{Start: at(from), End: at(to)} }
	flying := func(from int) control.ReportRun { return control.ReportRun{Start: at(from)} }
	for _, c := range []struct {
		name string
		runs []control.ReportRun
		rows []int
		n    int
	}{
		{"no runs", nil, []int{}, 0},
		{"one run", []control.ReportRun{span(0, 5)}, []int{0}, 1},
		{"one at a time is one row", []control.ReportRun{span(0, 2), span(3, 7), span(8, 9)}, []int{0, 0, 0}, 1},
		{"two at once are two rows", []control.ReportRun{span(0, 10), span(5, 15)}, []int{0, 1}, 2},
		{"a run that starts as another ends takes its row", []control.ReportRun{span(0, 10), span(10, 20)}, []int{0, 0}, 1},
		{"the first free row, not a new one", []control.ReportRun{span(0, 10), span(5, 15), span(10, 20), span(12, 14)}, []int{0, 1, 0, 2}, 3},
		{"the lowest free row", []control.ReportRun{span(0, 10), span(1, 3), span(2, 4), span(5, 6)}, []int{0, 1, 2, 1}, 3},
		{"in the order they started, whatever the order given", []control.ReportRun{span(10, 20), span(0, 10), span(5, 15)}, []int{0, 0, 1}, 2},
		{"a run in flight holds its row", []control.ReportRun{flying(0), span(5, 6), span(7, 8)}, []int{0, 1, 1}, 2},
		{"two in flight", []control.ReportRun{span(0, 1), flying(2), flying(3)}, []int{0, 0, 1}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows, n := rowsOf(c.runs)
			if !slices.Equal(rows, c.rows) || n != c.n {
				t.Errorf("rows %v of %d, want %v of %d", rows, n, c.rows, c.n)
			}
		})
	}
}

// svgDoc is the timeline as the page has it, read back as XML.
type svgDoc struct {
	ViewBox string    `xml:"viewBox,attr"`
	Label   string    `xml:"aria-label,attr"`
	Lines   []svgLine `xml:"line"`
	Rects   []svgRect `xml:"rect"`
	Texts   []svgText `xml:"text"`
}

type svgLine struct {
	Class string  `xml:"class,attr"`
	X1    float64 `xml:"x1,attr"`
	X2    float64 `xml:"x2,attr"`
	Y1    float64 `xml:"y1,attr"`
}

type svgRect struct {
	Class string  `xml:"class,attr"`
	X     float64 `xml:"x,attr"`
	Y     float64 `xml:"y,attr"`
	W     float64 `xml:"width,attr"`
	Title string  `xml:"title"`
}

type svgText struct {
	Class  string  `xml:"class,attr"`
	X      float64 `xml:"x,attr"`
	Y      float64 `xml:"y,attr"`
	Anchor string  `xml:"text-anchor,attr"`
	Text   string  `xml:",chardata"`
}

// drawn renders r's page and reads its timeline back; it also returns the
// page.
func drawn(t *testing.T, r control.Report) (svgDoc, string) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r, "html"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	from, to := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	if from < 0 || to < from {
		t.Fatalf("the page has no timeline:\n%s", page)
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(page[from:to+len("</svg>")]), &doc); err != nil {
		t.Fatalf("the timeline is not well-formed: %v\n%s", err, page[from:to])
	}
	return doc, page
}

// axis is the timeline's axis line: its ends are the night's.
func (d svgDoc) axis(t *testing.T) svgLine {
	t.Helper()
	for _, l := range d.Lines {
		if l.Class == "axis" {
			return l
		}
	}
	t.Fatal("the timeline has no axis")
	return svgLine{}
}

// axisLabels are the texts under the axis, left to right.
func (d svgDoc) axisLabels(t *testing.T) []svgText {
	var out []svgText
	for _, x := range d.Texts {
		if x.Anchor != "" {
			out = append(out, x)
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 0.1 }

// TestTimeline: a bar per run, from its start to its end on the axis's
// scale, in its outcome's class, labelled where the label fits, with all
// of the run in its title; the axis runs from the night's start to its
// end, with wall-clock ticks between.
func TestTimeline(t *testing.T) {
	r, err := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := drawn(t, r)
	axis := doc.axis(t)
	from, total := t0, 21*time.Minute // the night's first and last transitions
	x := func(at time.Time) float64 {
		return axis.X1 + (axis.X2-axis.X1)*float64(at.Sub(from))/float64(total)
	}

	if len(doc.Rects) != len(r.Runs) {
		t.Fatalf("%d bars for %d runs", len(doc.Rects), len(r.Runs))
	}
	wantClass := []string{"run transient", "run ok", "run ok", "run failed", "run ok", "run ok", "run failed"}
	for i, run := range r.Runs {
		bar := doc.Rects[i]
		if bar.Class != wantClass[i] {
			t.Errorf("%s: class %q, want %q", run.ID, bar.Class, wantClass[i])
		}
		if !near(bar.X, x(run.Start)) || !near(bar.X+bar.W, x(run.End)) {
			t.Errorf("%s from %s to %s: drawn from %v to %v, want %.1f to %.1f", run.ID, run.Start, run.End, bar.X, bar.X+bar.W, x(run.Start), x(run.End))
		}
		if bar.Y != doc.Rects[0].Y {
			t.Errorf("%s is on another row (y %v) though no run overlaps another", run.ID, bar.Y)
		}
	}
	// run-000007, F-002's third coding attempt: 6 minutes, room for its label.
	last := doc.Rects[6]
	for _, want := range []string{"run-000007", "coding-agent of F-002 (Farewell | bye)", "attempt 3", "started " + stamp(t0.Add(14*time.Minute)), "ran 6m00s", "failed", "$1.00"} {
		if !strings.Contains(last.Title, want) {
			t.Errorf("run-000007's title lacks %q:\n%s", want, last.Title)
		}
	}
	if !strings.Contains(doc.Rects[0].Title, "transient (rate_limit), $0.00") {
		t.Errorf("run-000001's title does not say why it was transient:\n%s", doc.Rects[0].Title)
	}
	var labels []string
	for _, x := range doc.Texts {
		if strings.HasPrefix(x.Class, "on ") {
			labels = append(labels, x.Text)
		}
	}
	// As much as fits, never cut, of the feature, the role and the
	// outcome: all of it on the long runs, the feature on the two-minute
	// ones, nothing on the initializer's (its role is too long) nor on
	// the one-minute one.
	if want := []string{"F-001 coder · ok", "F-001", "F-001", "F-001", "F-002 coder · failed"}; !slices.Equal(labels, want) {
		t.Errorf("bar labels %q, want %q", labels, want)
	}

	ticks := doc.axisLabels(t)
	if len(ticks) < 3 {
		t.Fatalf("axis labels %+v: want the night's ends and ticks between", ticks)
	}
	first, end := ticks[0], ticks[len(ticks)-1]
	if first.X != axis.X1 || first.Text != from.Local().Format("15:04:05") || end.X != axis.X2 || end.Text != from.Add(total).Local().Format("15:04:05") {
		t.Errorf("the axis is labelled from %+v to %+v, want the night's start and end", first, end)
	}
	for _, tick := range ticks[1 : len(ticks)-1] {
		at := from.Add(time.Duration(float64(total) * (tick.X - axis.X1) / (axis.X2 - axis.X1))).Round(time.Second).Local()
		if tick.Text != at.Format("15:04") || at.Minute()%5 != 0 || at.Second() != 0 {
			t.Errorf("tick %q at %v, which is %s: want round wall-clock times where they stand", tick.Text, tick.X, at)
		}
	}
	if !strings.Contains(doc.Label, "7 runs in 1 lane") {
		t.Errorf("aria-label %q", doc.Label)
	}
}

// TestTimelineRows: runs at once are drawn on rows of their own, each
// row labelled.
func TestTimelineRows(t *testing.T) {
	r := control.Report{Started: t0, Last: t0.Add(time.Hour), Runs: []control.ReportRun{
		{ID: "run-000001", Role: "coding-agent", Feature: "F-001", Start: t0, End: t0.Add(30 * time.Minute), Outcome: "ok"},
		{ID: "run-000002", Role: "coding-agent", Feature: "F-002", Start: t0.Add(10 * time.Minute), End: t0.Add(40 * time.Minute), Outcome: "ok"},
		{ID: "run-000003", Role: "tester-agent", Feature: "F-001", Start: t0.Add(30 * time.Minute), End: t0.Add(time.Hour), Outcome: "ok"},
	}}
	doc, _ := drawn(t, r)
	ys := []float64{doc.Rects[0].Y, doc.Rects[1].Y, doc.Rects[2].Y}
	if ys[0] == ys[1] || ys[2] != ys[0] {
		t.Errorf("bars at y %v: want the overlapping runs apart and the third back on the first row", ys)
	}
	var rows []string
	for _, x := range doc.Texts {
		if x.Class == "" && x.Anchor == "" {
			rows = append(rows, x.Text)
		}
	}
	if !slices.Equal(rows, []string{"lane 1", "lane 2"}) {
		t.Errorf("row labels %q", rows)
	}
}

// A one-second run in an eight-hour night is still seen, and still
// starts where it started.
func TestTimelineShortRunIsSeen(t *testing.T) {
	r := control.Report{Started: t0, Last: t0.Add(8 * time.Hour), Runs: []control.ReportRun{
		{ID: "run-000001", Role: "coding-agent", Feature: "F-001", Start: t0.Add(4 * time.Hour), End: t0.Add(4*time.Hour + time.Second), Outcome: "failed"},
	}}
	doc, _ := drawn(t, r)
	axis := doc.axis(t)
	bar := doc.Rects[0]
	if bar.W < 3 || !near(bar.X, (axis.X1+axis.X2)/2) {
		t.Errorf("the one-second run is drawn at %v, %v wide: want at the night's middle (%v), a few units wide", bar.X, bar.W, (axis.X1+axis.X2)/2)
	}
	for _, x := range doc.Texts {
		if strings.HasPrefix(x.Class, "on ") {
			t.Errorf("the one-second run has a label (%q) where none fits", x.Text)
		}
	}
	if !strings.Contains(bar.Title, "F-001") || !strings.Contains(bar.Title, "ran 1s") {
		t.Errorf("its title %q: want everything, label or not", bar.Title)
	}
}

// A run in flight is drawn to the report's now, and says it is in flight.
func TestTimelineInFlight(t *testing.T) {
	now := t0.Add(30 * time.Minute)
	r := control.Report{GeneratedAt: now, Started: t0, Last: t0.Add(10 * time.Minute), Runs: []control.ReportRun{
		{ID: "run-000001", Role: "initializer-agent", Start: t0, End: t0.Add(10 * time.Minute), Outcome: "ok"},
		{ID: "run-000002", Role: "coding-agent", Feature: "F-001", Attempt: 1, Start: t0.Add(10 * time.Minute), CostUSD: 0.5},
	}}
	doc, _ := drawn(t, r)
	axis := doc.axis(t)
	bar := doc.Rects[1]
	if bar.Class != "run inflight" || !near(bar.X+bar.W, axis.X2) || !near(bar.X, axis.X1+(axis.X2-axis.X1)/3) {
		t.Errorf("the run in flight is drawn %+v: want from a third of the axis to its end (%v), now", bar, axis.X2)
	}
	if !strings.Contains(bar.Title, "in flight for 20m00s") || !strings.Contains(bar.Title, "$0.50 so far") {
		t.Errorf("its title: %q", bar.Title)
	}
	labels := doc.axisLabels(t)
	if end := labels[len(labels)-1].Text; end != "now "+now.Local().Format("15:04:05") {
		t.Errorf("the axis ends at %q: want now", end)
	}
	var label string
	for _, x := range doc.Texts {
		if x.Class == "on inflight" {
			label = x.Text
		}
	}
	if label != "F-001 coder · in flight" {
		t.Errorf("its label %q", label)
	}
}

// What agents wrote (feature ids and titles, outcomes from the store)
// reaches the timeline as text, never as markup.
func TestTimelineEscapes(t *testing.T) {
	const script, quotes = "<script>alert(1)</script>", `"&'`
	r := control.Report{Started: t0, Last: t0.Add(time.Hour),
		Features: []control.ReportFeature{{ID: script, Title: quotes + " title"}},
		Runs: []control.ReportRun{
			{ID: "run-000001", Role: "coding-agent", Feature: script, Start: t0, End: t0.Add(50 * time.Minute), Outcome: "ok"},
			{ID: "run-000002", Role: "tester-agent", Feature: quotes, Start: t0.Add(50 * time.Minute), End: t0.Add(time.Hour), Outcome: `x" onmouseover="alert(1)`},
		}}
	doc, page := drawn(t, r)
	if strings.Contains(page, "<script") || strings.Contains(page, `"alert(1)`) {
		t.Errorf("markup from the store reached the page:\n%s", page)
	}
	if !strings.Contains(doc.Rects[0].Title, "coding-agent of "+script+" ("+quotes+" title)") {
		t.Errorf("the title reads %q: want the feature's id and title as they were written", doc.Rects[0].Title)
	}
	if !strings.Contains(doc.Rects[1].Title, "tester-agent of "+quotes) || doc.Rects[1].Class != "run other" {
		t.Errorf("the second bar: class %q, title %q", doc.Rects[1].Class, doc.Rects[1].Title)
	}
	var labels []string
	for _, x := range doc.Texts {
		if strings.HasPrefix(x.Class, "on ") {
			labels = append(labels, x.Text)
		}
	}
	if len(labels) == 0 || !strings.HasPrefix(labels[0], script+" coder") {
		t.Errorf("labels %q: want the feature id as written", labels)
	}
}

// With no runs there is nothing to draw, and the page says so.
func TestTimelineEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, control.Report{Started: t0, Last: t0}, "html"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<svg") || !strings.Contains(b.String(), "No runs yet") {
		t.Errorf("the timeline of a night without runs:\n%s", b.String())
	}
}
