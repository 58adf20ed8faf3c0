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
)

func ctlWorkersCmd(f *ctlFlags) *cobra.Command {
	workers := &cobra.Command{
		Use:   "workers",
		Short: "The machines that run lanes over NATS (executor: nats): list, add, revoke",
		Long: `workers lists the workers the daemon issued credentials to, and the URL they
connect to: the NATS server embedded in the daemon (executor: nats in
.claude/ctxgraphd.yaml). "workers add NAME" issues credentials to a new worker
and says the command that starts it; copy the credentials file to the worker's
machine, and keep it secret: whoever holds it is that worker. "workers revoke
NAME" removes them: the worker's connections close at once.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.WorkerList, error) {
				l, err := c.Workers(ctx)
				if l.Workers == nil {
					l.Workers = []control.Worker{} // `[]`, not `null`, for scripts
				}
				return l, err
			}, printWorkers)
		},
	}
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Issue credentials to a new worker (1 to 63 lower-case letters, digits and '-')",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.NewWorker, error) {
				return c.AddWorker(ctx, args[0])
			}, printNewWorker)
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a worker's credentials: its connections close at once",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.OK, error) {
				return control.OK{OK: true}, c.RevokeWorker(ctx, name)
			}, printLine(fmt.Sprintf("worker %s: revoked; its credentials connect no more", name)))
		},
	}
	workers.AddCommand(add, revoke)
	return workers
}

func printWorkers(w io.Writer, l control.WorkerList) error {
	fmt.Fprintf(w, "workers connect to %s\n", l.URL)
	if len(l.Workers) == 0 {
		_, err := fmt.Fprintln(w, "no workers: `ctxgraphd ctl workers add NAME` issues credentials to one")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tRUNS\tLAST HEARD\tFINDINGS\tPUBLIC KEY\tCREDENTIALS")
	now := time.Now()
	for _, wk := range l.Workers {
		state, heard, runs := "offline", "never", "-"
		if wk.Connected {
			state = "connected"
		}
		if wk.LastHeard != nil {
			heard = now.Sub(*wk.LastHeard).Round(time.Second).String() + " ago"
		}
		if len(wk.Runs) > 0 {
			runs = strings.Join(wk.Runs, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", wk.Name, state, runs, heard, wk.Findings, wk.PublicKey, wk.Credentials)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, wk := range l.Workers {
		if wk.Findings == 0 {
			continue
		}
		fmt.Fprintf(w, "findings against %s (%d; the last %d, newest last):\n", wk.Name, wk.Findings, len(wk.LastFindings))
		for _, f := range wk.LastFindings {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	return nil
}

func printNewWorker(w io.Writer, nw control.NewWorker) error {
	fmt.Fprintf(w, "worker %s: credentials in %s (keep them secret: whoever holds them is this worker)\n", nw.Name, nw.Credentials)
	fmt.Fprintf(w, "Start it, here or on another machine with the file copied there:\n  ctxgraphd worker --nats %s --creds %s\n", nw.URL, nw.Credentials)
	if strings.Contains(nw.URL, "://0.0.0.0:") {
		// The server listens on every interface: its URL names none.
		fmt.Fprintln(w, "with this machine's name (the one its TLS certificate names) in place of 0.0.0.0")
	}
	return nil
}
