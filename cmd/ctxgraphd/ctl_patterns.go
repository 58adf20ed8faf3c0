package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func ctlPatternsCmd(f *ctlFlags) *cobra.Command {
	var atLeast int
	cmd := &cobra.Command{
		Use:   "patterns",
		Short: "What happened again and again: the same refusal, failing command or file put back",
		Long: `patterns groups what happened again and again in the project: refusals of one
gate to agents of one role for the same reason, the same command failing, the
same file put back after runs; with how often, on which features, and the
newest examples (trace or run ids, for ctl trace and ctl why).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if atLeast < 1 {
				return withExitCode(exitUsage, fmt.Errorf("--min %d: want a whole number >= 1", atLeast))
			}
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) ([]control.Pattern, error) {
				return c.Patterns(ctx, atLeast)
			}, printPatterns)
		},
	}
	cmd.Flags().IntVar(&atLeast, "min", 2, "only what happened at least N times")
	return cmd
}

func printPatterns(w io.Writer, ps []control.Pattern) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "no patterns: nothing happened again and again")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COUNT\tKIND\tWHAT\tFEATURES\tEXAMPLES")
	for _, p := range ps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", p.Count, p.Kind, textcut.Runes(textcut.Fold(p.What), 80), dash(strings.Join(p.Features, ",")), strings.Join(p.Examples, " "))
	}
	return tw.Flush()
}
