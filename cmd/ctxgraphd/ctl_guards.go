package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func ctlGuardsCmd(f *ctlFlags) *cobra.Command {
	guards := &cobra.Command{
		Use:   "guards",
		Short: "The project's guards: its own gates, proposed from patterns or written in guards.yaml",
		Long: `guards lists the project's guards: declarative rules the hooks hold agents to
after the built-in gates (a Bash command, a path, or a tool_input field, denied
or warned about, with gate guard:<id>). The daemon proposes one when the same
refusal, failing command or file put back happens graph.guard_threshold times;
a proposed guard does nothing. "guards promote ID" moves it one step: to warn
(actions go through, and what it would have denied is recorded and counted),
then to enforce. "guards retire ID" ends it. Guards a team reviews in git live
in .claude/ctxgraphd/guards.yaml, and change there.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ctlRun(cmd, f, (*control.Client).Guards, printGuards)
		},
	}
	promote := &cobra.Command{
		Use:   "promote ID",
		Short: "Move a guard one step: proposed → warn → enforce",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.Guard, error) {
				return c.PromoteGuard(ctx, args[0])
			}, printGuardChange)
		},
	}
	retire := &cobra.Command{
		Use:   "retire ID",
		Short: "End a guard",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.Guard, error) {
				return c.RetireGuard(ctx, args[0])
			}, printGuardChange)
		},
	}
	guards.AddCommand(promote, retire)
	return guards
}

func printGuards(w io.Writer, l control.GuardList) error {
	if l.Problem != "" {
		fmt.Fprintf(w, "guards file not taken (the guards last read from it hold): %s\n", l.Problem)
	}
	if len(l.Guards) == 0 {
		_, err := fmt.Fprintf(w, "no guards: one is proposed when the same refusal, failing command or file put back happens graph.guard_threshold times; a team writes its own in %s\n", dash(l.File))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSOURCE\tDENIED\tWOULD-BE\tRULE")
	for _, g := range l.Guards {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", g.ID, g.Status, dash(g.Source), g.Denials, g.WouldBe, textcut.Runes(textcut.Fold(g.Rule), 100))
	}
	return tw.Flush()
}

func printGuardChange(w io.Writer, g control.Guard) error {
	var what string
	switch g.Status {
	case "warn":
		what = fmt.Sprintf("actions go through, and what it would have denied is recorded (`ctxgraphd ctl traces --gate guard:%s`); `ctxgraphd ctl guards promote %s` enforces it", g.ID, g.ID)
	case "enforce":
		what = "it holds every later agent, and a hook deciding alone"
	case "retired":
		what = "it holds nothing any more"
	}
	_, err := fmt.Fprintf(w, "guard %s: %s: %s\n", g.ID, g.Status, what)
	return err
}
