package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// ctlTraceCmds are the context-graph commands of ctl: traces and trace.
func ctlTraceCmds(f *ctlFlags) []*cobra.Command {
	var q control.TraceQuery
	var since, until time.Duration
	var prune bool
	var olderThan string
	traces := &cobra.Command{
		Use:   "traces [QUERY]",
		Short: "List traces of the context graph (violations, decisions, …), filtered",
		Long: `traces lists the context graph's traces, oldest first. QUERY matches the text of
what happened, what was correct and why. --level is how much of each trace to show:
metadata (who, what kind, when), summary (plus a line of what happened) or full.

--prune compacts instead the traces of tested and blocked features older than
--older-than (default: graph.retention): the repeated refusals of a run are
folded into the newest of them, which counts them; the hooks' tool-level records
and the successful commands of those runs are dropped; verdicts, decisions,
corrections, lessons, transitions, anything a person wrote, and every trace
another hangs from are kept, so that ctl why tells the same story.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if prune {
				return ctlPrune(cmd, f, args, olderThan)
			}
			if cmd.Flags().Changed("older-than") {
				return withExitCode(exitUsage, fmt.Errorf("--older-than goes with --prune"))
			}
			if len(args) == 1 {
				q.Text = args[0]
			}
			if err := control.CheckTraceType(q.Type); err != nil {
				return withExitCode(exitUsage, fmt.Errorf("--type: %w", err))
			}
			if err := control.CheckLevel(q.Level); err != nil {
				return withExitCode(exitUsage, fmt.Errorf("--level: %w", err))
			}
			now := time.Now()
			if since > 0 {
				q.Since = now.Add(-since)
			}
			if until > 0 {
				q.Until = now.Add(-until)
			}
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) ([]control.Trace, error) {
				ts, err := c.Traces(ctx, q)
				if ts == nil {
					ts = []control.Trace{}
				}
				return ts, err
			}, printTraces)
		},
	}
	fl := traces.Flags()
	fl.StringVar(&q.Type, "type", "", "only traces of this type: decision, violation, correction, approval, handoff, transition, lesson")
	fl.StringVar(&q.Agent, "agent", "", "only traces of this role")
	fl.StringVar(&q.Feature, "feature", "", "only traces of this feature")
	fl.StringVar(&q.Run, "run", "", "only traces of this run")
	fl.StringVar(&q.Gate, "gate", "", "only traces of this gate (scope, tested-needs-evidence, …)")
	fl.StringVar(&q.Level, "level", control.LevelSummary, "detail: metadata, summary or full")
	fl.DurationVar(&since, "since", 0, "only traces of the last DURATION (e.g. 2h)")
	fl.DurationVar(&until, "until", 0, "only traces older than DURATION (e.g. 30m: not the last half hour)")
	fl.IntVar(&q.Limit, "limit", 0, "only the newest N traces")
	fl.BoolVar(&prune, "prune", false, "compact the old traces of tested and blocked features (see above) and say what was dropped and kept")
	fl.StringVar(&olderThan, "older-than", "", "with --prune: how old a trace must be (e.g. 720h); default graph.retention")

	trace := &cobra.Command{
		Use:   "trace ID",
		Short: "Show one trace in full, the path that led to it and what followed",
		Long: `trace shows one trace in full, where it stands in the context graph: the path
that led to it (the feature, its attempt, the run, the tool call) and what
followed from it (a run's refusals and verdict, the correction of a block, the
commit of a verdict), or, when nothing did, what happened next in its run.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.TraceLinks, error) {
				return c.TraceLinks(ctx, args[0])
			}, printTraceLinks)
		},
	}
	return []*cobra.Command{traces, trace}
}

// ctlPrune is ctl traces --prune.
func ctlPrune(cmd *cobra.Command, f *ctlFlags, args []string, olderThan string) error {
	var other []string
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name != "prune" && fl.Name != "older-than" && cmd.LocalFlags().Lookup(fl.Name) != nil {
			other = append(other, "--"+fl.Name)
		}
	})
	if len(args) > 0 || len(other) > 0 {
		return withExitCode(exitUsage, fmt.Errorf("--prune takes no query and no filter (%s): it compacts the old traces of every finished feature", strings.Join(append(other, args...), " ")))
	}
	if olderThan != "" {
		if d, err := time.ParseDuration(olderThan); err != nil || d < 0 {
			return withExitCode(exitUsage, fmt.Errorf("--older-than %q: want a duration >= 0 with a unit, such as 720h or 30m", olderThan))
		}
	}
	return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.PruneResult, error) {
		return c.PruneTraces(ctx, control.PruneRequest{OlderThan: olderThan})
	}, printPrune)
}

func printPrune(w io.Writer, r control.PruneResult) error {
	if len(r.Features) == 0 {
		_, err := fmt.Fprintf(w, "nothing to compact: no feature is tested or blocked yet\n")
		return err
	}
	_, err := fmt.Fprintf(w, `compacted the traces before %s of %s (%s)
  %d examined
  %d repeated refusals folded into the newest of their kind in their run (its count says how many)
  %d tool-level records of the hooks dropped
  %d kept (verdicts, decisions, corrections, lessons, transitions, what a person wrote, the first refusal of each kind)
  commands of those runs: %d successful ones dropped, %d failures and tests kept
`, r.Before, plural(len(r.Features), "finished feature"), strings.Join(r.Features, ", "), r.Examined, r.Folded, r.Dropped, r.Kept, r.CommandsDropped, r.CommandsKept)
	return err
}

func printTraces(w io.Writer, ts []control.Trace) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "no traces")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tTYPE\tAGENT\tFEATURE\tGATE\tWHAT HAPPENED")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Timestamp.Local().Format("01-02 15:04:05"), t.Type,
			dash(t.Context.Agent), dash(t.Context.Feature), dash(t.Gate), textcut.Fold(t.Event.WhatHappened)+times(t.Count))
	}
	return tw.Flush()
}

// times says how many a compacted trace stands for.
func times(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (×%d)", n)
}

func printTraceLinks(w io.Writer, l control.TraceLinks) error {
	if len(l.Path) > 0 {
		fmt.Fprintln(w, "led here:")
		for i, t := range l.Path {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", i+1), traceLine(t))
		}
		fmt.Fprintf(w, "%s> %s\n\n", strings.Repeat("  ", len(l.Path)+1), l.Trace.ID)
	}
	if err := printTrace(w, l.Trace); err != nil {
		return err
	}
	for _, part := range []struct {
		title  string
		traces []control.Trace
	}{{"followed from it", l.Followed}, {"then, in the same " + parentKind(l), l.Next}} {
		if len(part.traces) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", part.title)
		for _, t := range part.traces {
			fmt.Fprintf(w, "  %s\n", traceLine(t))
		}
	}
	return nil
}

// parentKind names what a trace's siblings share: its run, or its parent.
func parentKind(l control.TraceLinks) string {
	if n := len(l.Path); n > 0 && l.Path[n-1].Type == control.TraceHandoff {
		return "run"
	}
	return "place"
}

// traceLine is a trace in a line: id, type, who, and what happened.
func traceLine(t control.Trace) string {
	who := strings.Join(nonEmpty(t.Context.Agent, t.Context.Feature, t.Context.Run, t.Gate), " ")
	what := textcut.Fold(t.Event.WhatHappened)
	if t.Tool != nil {
		what = fmt.Sprintf("[%s %s] %s", t.Tool.Name, textcut.Fold(t.Tool.Input), what)
	}
	if who != "" {
		who = " (" + who + ")"
	}
	return fmt.Sprintf("%s %s%s: %s", t.ID, t.Type, who, what)
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func printTrace(w io.Writer, t control.Trace) error {
	lines := [][2]string{
		{"id", t.ID}, {"time", t.Timestamp.Local().Format(time.RFC3339)}, {"type", t.Type}, {"source", t.Source},
		{"agent", t.Context.Agent}, {"feature", t.Context.Feature}, {"run", t.Context.Run}, {"task", t.Context.Task},
		{"attempt", attemptOf(t)}, {"gate", t.Gate}, {"code", t.Code}, {"path", t.Path}, {"tool call", toolOf(t)}, {"parent", t.Parent},
		{"what happened", t.Event.WhatHappened}, {"what was correct", t.Event.WhatWasCorrect}, {"why", t.Event.Why},
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		// Each on its line, and as text: agents write traces, and a
		// person's terminal must not take their bytes for commands.
		if v := textcut.Fold(l[1]); v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", l[0], v)
		}
	}
	return tw.Flush()
}

func attemptOf(t control.Trace) string {
	if t.Context.Attempt == 0 {
		return ""
	}
	return fmt.Sprint(t.Context.Attempt)
}

func toolOf(t control.Trace) string {
	if t.Tool == nil {
		return ""
	}
	return strings.TrimSpace(t.Tool.Name + " " + t.Tool.Input)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
