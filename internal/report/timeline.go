package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// timeline is the night drawn over time, in the SVG's own units (the page
// scales it to its width): a row per lane, a bar per run from its start to
// its end, and an axis of wall-clock times below. Every string in it is
// plain text: the template escapes it where it lands.
type timeline struct {
	Width, Height float64
	// The axis runs from AxisFrom to AxisTo (the night's start and end) at
	// AxisY, below the rows, its labels' baseline at AxisLabelY.
	AxisFrom, AxisTo, AxisY, AxisLabelY float64
	Label                               string // what the picture shows, for a screen reader
	Rows                                []row
	Bars                                []bar
	Ticks                               []tick
}

type row struct {
	Y     float64 // the label's baseline
	Label string
}

// bar is a run on the timeline.
type bar struct {
	X, Y, W, H float64
	// Class is the run's outcome as one of outcomeClass's few names: an
	// outcome is the store's word, and only known words reach an attribute.
	Class string
	// Label is what fits on the bar, "" when nothing does; Title is
	// everything, for a person hovering.
	Label          string
	LabelX, LabelY float64
	Title          string
}

type tick struct {
	X      float64
	Label  string
	Anchor string // text-anchor: the night's ends keep their labels inside the picture
}

// The picture's geometry, in SVG units. 960 wide is about the page's
// column (1000px at most) at a unit a pixel; a narrower page scales it
// down, text and all.
const (
	svgWidth  = 960
	plotLeft  = 52  // row labels to the left
	plotRight = 944 // room for a bar of minBar at the very end
	rowTop    = 4
	rowHeight = 24
	rowPitch  = 30
	minBar    = 4 // a one-second run in an eight-hour night is still seen
	charWidth = 7 // an 11-unit sans-serif character, rounded up: a label estimated too wide is left out, never overflows
	labelPad  = 4
	tickRoom  = 60 // between a tick's label and the night's ends
	maxTicks  = 8
	baseline  = 16 // of a text in a row or under the axis, from its top
)

// tickSteps are the spacings of the axis's ticks, the smallest that
// gives no more than maxTicks used.
var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// outcomeClass is the class (the colour) of a run's bar by its outcome,
// "other" for a word it does not know. The colour is never all there is:
// the bar's label and title say the outcome, and the page's legend says
// what each colour means.
var outcomeClass = map[string]string{"ok": "ok", "failed": "failed", "interrupted": "interrupted", "transient": "transient"}

const inFlight = "in flight"

// roleWord is a role as a bar's label says it.
var roleWord = map[string]string{string(role.Initializer): "initializer", string(role.Coder): "coder", string(role.Tester): "tester"}

// rowsOf assigns each run a row of the timeline, without a lane in the
// record: in the order they started, each run takes the first row whose
// last run ended at or before its start, and a new row when none did. A
// night of one run at a time is one row; runs at once get a row each. A
// run in flight holds its row to the end. rowOf[i] is runs[i]'s row; n is
// how many rows there are.
func rowsOf(runs []control.ReportRun) (rowOf []int, n int) {
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return runs[a].Start.Compare(runs[b].Start) })
	var freeAt []time.Time // each row's last run's end; zero while it is in flight
	rowOf = make([]int, len(runs))
	for _, i := range order {
		r := slices.IndexFunc(freeAt, func(end time.Time) bool { return !end.IsZero() && !end.After(runs[i].Start) })
		if r < 0 {
			r = len(freeAt)
			freeAt = append(freeAt, time.Time{})
		}
		freeAt[r] = runs[i].End
		rowOf[i] = r
	}
	return rowOf, len(freeAt)
}

// layout draws r's runs; with none, there is nothing to draw.
func layout(r control.Report) timeline {
	if len(r.Runs) == 0 {
		return timeline{}
	}
	rowOf, n := rowsOf(r.Runs)

	// The night runs from its first transition (or run) to its last, and
	// to the report's now while a run is in flight.
	from, to := r.Started, r.Last
	flying := false
	for _, run := range r.Runs {
		if from.IsZero() || run.Start.Before(from) {
			from = run.Start
		}
		to = latest(to, run.Start, run.End)
		flying = flying || run.End.IsZero()
	}
	if flying {
		to = latest(to, r.GeneratedAt)
	}
	total := max(to.Sub(from), time.Second)
	x := func(t time.Time) float64 {
		return round(plotLeft + (plotRight-plotLeft)*float64(t.Sub(from))/float64(total))
	}

	titles := map[string]string{}
	for _, f := range r.Features {
		titles[f.ID] = f.Title
	}
	tl := timeline{Width: svgWidth, AxisFrom: plotLeft, AxisTo: plotRight, AxisY: rowTop + float64(n)*rowPitch}
	tl.AxisLabelY = tl.AxisY + baseline
	tl.Height = tl.AxisLabelY + 6
	for i := range n {
		tl.Rows = append(tl.Rows, row{Y: rowTop + float64(i)*rowPitch + baseline, Label: fmt.Sprintf("lane %d", i+1)})
	}
	for i, run := range r.Runs {
		end := run.End
		if end.IsZero() {
			end = latest(run.Start, to)
		}
		b := bar{X: x(run.Start), Y: rowTop + float64(rowOf[i])*rowPitch, W: round(max(x(end)-x(run.Start), minBar)), H: rowHeight, Class: cmp.Or(outcomeClass[run.Outcome], "other")}
		word := run.Outcome
		if run.End.IsZero() {
			b.Class, word = "inflight", inFlight
		}
		who := cmp.Or(roleWord[run.Role], run.Role)
		if f := textcut.Fold(run.Feature); f != "" {
			b.Label = fit(b.W, f, f+" "+who, f+" "+who+" · "+word)
		} else {
			b.Label = fit(b.W, who, who+" · "+word)
		}
		b.LabelX, b.LabelY = b.X+labelPad, b.Y+baseline
		b.Title = runTitle(run, titles[run.Feature], end)
		tl.Bars = append(tl.Bars, b)
	}

	format := "15:04"
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if total/s <= maxTicks {
			step = s
			break
		}
	}
	if step < time.Minute {
		format = "15:04:05"
	}
	end := to.Local().Format("15:04:05")
	if flying {
		end = "now " + end
	}
	tl.Ticks = append(tl.Ticks, tick{X: plotLeft, Label: from.Local().Format("15:04:05"), Anchor: "start"})
	for _, t := range wallClock(from, to, step) {
		if at := x(t); at-plotLeft >= tickRoom && plotRight-at >= tickRoom {
			tl.Ticks = append(tl.Ticks, tick{X: at, Label: t.Format(format), Anchor: "middle"})
		}
	}
	tl.Ticks = append(tl.Ticks, tick{X: plotRight, Label: end, Anchor: "end"})

	lanes := "lanes"
	if n == 1 {
		lanes = "lane"
	}
	tl.Label = fmt.Sprintf("%d runs in %d %s from %s to %s", len(r.Runs), n, lanes, stamp(from), stamp(to))
	return tl
}

// fit is the longest of labels (each a longer telling of the one before)
// that fits on a bar w wide, or nothing. A label is never cut: "F-01…"
// would say less than nothing, and the bar's title says it all.
func fit(w float64, labels ...string) string {
	room := int((w - 2*labelPad) / charWidth)
	out := ""
	for _, l := range labels {
		if utf8.RuneCountInString(l) <= room {
			out = l
		}
	}
	return out
}

// runTitle says everything of a run, one thing a line.
func runTitle(run control.ReportRun, featureTitle string, end time.Time) string {
	var b strings.Builder
	b.WriteString(run.ID + ", " + run.Role)
	if run.Feature != "" {
		fmt.Fprintf(&b, " of %s", run.Feature)
		if featureTitle != "" {
			fmt.Fprintf(&b, " (%s)", textcut.Fold(featureTitle))
		}
	}
	if run.Attempt > 0 {
		fmt.Fprintf(&b, ", attempt %d", run.Attempt)
	}
	fmt.Fprintf(&b, "\nstarted %s, ", stamp(run.Start))
	if run.End.IsZero() {
		fmt.Fprintf(&b, "%s for %s\n%s, $%.2f so far", inFlight, span(end.Sub(run.Start)), inFlight, run.CostUSD)
		return b.String()
	}
	fmt.Fprintf(&b, "ran %s\n%s", span(run.End.Sub(run.Start)), run.Outcome)
	if run.Failure != "" {
		fmt.Fprintf(&b, " (%s)", run.Failure)
	}
	fmt.Fprintf(&b, ", $%.2f", run.CostUSD)
	return b.String()
}

// wallClock is the round times of the local clock, step apart, strictly
// between from and to.
func wallClock(from, to time.Time, step time.Duration) []time.Time {
	from = from.Local()
	y, m, d := from.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, from.Location())
	var out []time.Time
	for t := day.Add((from.Sub(day)/step + 1) * step); t.Before(to); t = t.Add(step) {
		out = append(out, t)
	}
	return out
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// round keeps a coordinate to a tenth of a unit: finer than any screen,
// and short in the page.
func round(v float64) float64 { return math.Round(v*10) / 10 }
