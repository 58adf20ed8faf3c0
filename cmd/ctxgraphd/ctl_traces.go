package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// ctlTraceCmds are the context-graph commands of ctl: traces and trace.
func ctlTraceCmds(f *ctlFlags) []*cobra.Command {
	var q control.TraceQuery
	var since time.Duration
	traces := &cobra.Command{
		Use:   "traces [QUERY]",
		Short: "List traces of the context graph (violations, decisions, …), filtered",
		Long: `traces lists the context graph's traces, oldest first. QUERY matches the text of
what happened, what was correct and why. --level is how much of each trace to show:
metadata (who, what kind, when), summary (plus a line of what happened) or full.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				q.Text = args[0]
			}
			if err := store.CheckTraceType(q.Type); err != nil {
				return withExitCode(exitUsage, fmt.Errorf("--type: %w", err))
			}
			switch q.Level {
			case "metadata", "summary", "full":
			default:
				return withExitCode(exitUsage, fmt.Errorf("--level %q: want metadata, summary or full", q.Level))
			}
			if since > 0 {
				q.Since = time.Now().Add(-since)
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
	fl.StringVar(&q.Level, "level", "summary", "detail: metadata, summary or full")
	fl.DurationVar(&since, "since", 0, "only traces of the last DURATION (e.g. 2h)")
	fl.IntVar(&q.Limit, "limit", 0, "only the newest N traces")

	trace := &cobra.Command{
		Use:   "trace ID",
		Short: "Show one trace in full",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.Trace, error) {
				return c.Trace(ctx, args[0])
			}, printTrace)
		},
	}
	return []*cobra.Command{traces, trace}
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
			dash(t.Context.Agent), dash(t.Context.Feature), dash(t.Gate), oneLine(t.Event.WhatHappened))
	}
	return tw.Flush()
}

func printTrace(w io.Writer, t control.Trace) error {
	lines := [][2]string{
		{"id", t.ID}, {"time", t.Timestamp.Local().Format(time.RFC3339)}, {"type", t.Type}, {"source", t.Source},
		{"agent", t.Context.Agent}, {"feature", t.Context.Feature}, {"run", t.Context.Run}, {"task", t.Context.Task},
		{"gate", t.Gate}, {"code", t.Code},
		{"what happened", t.Event.WhatHappened}, {"what was correct", t.Event.WhatWasCorrect}, {"why", t.Event.Why},
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		if strings.TrimSpace(l[1]) != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", l[0], l[1])
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
