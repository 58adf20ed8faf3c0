package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// Formats are the formats a report renders in.
var Formats = []string{"md", "html", "json"}

// Render writes r in format (one of Formats).
func Render(w io.Writer, r control.Report, format string) error {
	switch format {
	case "md":
		return Markdown(w, r)
	case "html":
		return HTML(w, r)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return fmt.Errorf("unknown report format %q: use one of %s", format, strings.Join(Formats, ", "))
}

// Markdown writes r for a terminal or a README.
func Markdown(w io.Writer, r control.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ctxgraphd report: %s\n\n", r.Dir)
	fmt.Fprintf(&b, "**%s**", r.State)
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", text(r.Message))
	}
	b.WriteString("\n\n")
	if !r.Started.IsZero() {
		fmt.Fprintf(&b, "From %s to %s (%s). ", stamp(r.Started), stamp(r.Last), span(r.Last.Sub(r.Started)))
	}
	t := r.Totals
	fmt.Fprintf(&b, "%d features: %d tested, %d blocked, %d open. %d runs, %s of agent time, $%.2f",
		t.Features, t.Tested, t.Blocked, t.Open, t.Runs, span(t.AgentTime), r.Cost.SessionUSD)
	if t.Tested > 0 {
		fmt.Fprintf(&b, " ($%.2f per tested feature)", r.Cost.PerTestedFeatureUSD)
	}
	fmt.Fprintf(&b, ". %d refusals", t.Refusals)
	if t.LostToRefusals > 0 {
		fmt.Fprintf(&b, "; %d turns lost to refusals of work the verdict then accepted", t.LostToRefusals)
	}
	b.WriteString(".\n\n")
	b.WriteString(verifyMarkdown(r.Verify))

	b.WriteString("## Features\n\n| Feature | Outcome | Attempts | Runs | Cost | Time | Commit | Why |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Features {
		commit := gitrepo.Short(f.Commit)
		if commit != "" && f.Branch == "" {
			commit += " (ref only)"
		}
		fmt.Fprintf(&b, "| %s %s | %s | %d | %d | $%.2f | %s | %s | %s |\n", text(f.ID), text(f.Title), f.Outcome, f.Attempts, f.Runs, f.CostUSD, span(f.Time), commit, text(why(f)))
	}
	b.WriteString("\n## Cost by role\n\n")
	roles := make([]string, 0, len(r.Cost.ByRole))
	for role := range r.Cost.ByRole {
		roles = append(roles, role)
	}
	slices.Sort(roles)
	for _, role := range roles {
		fmt.Fprintf(&b, "- %s: $%.2f\n", role, r.Cost.ByRole[role])
	}
	if len(r.Refusals) > 0 {
		b.WriteString("\n## Refusals\n\n")
		for _, x := range r.Refusals {
			fmt.Fprintf(&b, "- %s %s %s %s/%s: %s\n", stamp(x.Time), text(x.Feature), x.Role, x.Gate, x.Code, text(x.What))
		}
	}
	b.WriteString("\n## Runs\n\n")
	for _, run := range r.Runs {
		what := run.Outcome
		if run.Failure != "" {
			what += " (" + run.Failure + ")"
		}
		fmt.Fprintf(&b, "- %s %s %s %s", stamp(run.Start), run.ID, run.Role, text(run.Feature))
		if run.Attempt > 0 {
			fmt.Fprintf(&b, " attempt %d", run.Attempt)
		}
		fmt.Fprintf(&b, ": %s, $%.2f, %s", what, run.CostUSD, span(run.End.Sub(run.Start)))
		if run.LostToRefusals > 0 {
			fmt.Fprintf(&b, ", %d turns lost to refusals", run.LostToRefusals)
		}
		if run.Summary != "" {
			fmt.Fprintf(&b, ": %s", text(run.Summary))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// why is what a feature's row says in its Why column: why it is blocked or
// what its last attempt failed on, or, for a tested feature whose commit
// the branch did not take, why not.
func why(f control.ReportFeature) string {
	if f.Why == "" && f.Commit != "" && f.Branch == "" && f.OffBranch != "" {
		return "not on the branch: " + f.OffBranch
	}
	return f.Why
}

//go:embed report.html
var pageSource string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"stamp": stamp, "span": span, "short": gitrepo.Short, "usd": func(f float64) string { return fmt.Sprintf("$%.2f", f) }, "why": why,
	"verifySay": func(run *control.VerifyRun) string { return verifySay(run, func(s string) string { return s }) },
}).Parse(pageSource))

// HTML writes r as one self-contained page: no script, no request for
// anything, the night's timeline drawn in SVG.
func HTML(w io.Writer, r control.Report) error {
	return page.Execute(w, struct {
		control.Report
		Timeline timeline
	}{r, layout(r)})
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// span is a duration as a person reads it: 3h12m, 4m05s, 12s.
func span(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// text is what agents or a feature list wrote (titles, ids, summaries,
// reasons that quote a test's output), fit for a line or a table cell of
// the Markdown report: on one line, nothing that drives a terminal
// (textcut.Fold), and every character that starts Markdown's inline markup
// escaped, so that an agent's image, link, HTML or bold "tested" shows as
// the text it is wherever the report is rendered.
func text(s string) string { return markdownEscaper.Replace(textcut.Fold(s)) }

var markdownEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", `\<`, ">", `\>`,
	"!", `\!`, "&", `\&`, "|", `\|`, "~", `\~`, "#", `\#`)
