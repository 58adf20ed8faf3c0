package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func init() { subcommands = append(subcommands, newReportCmd) }

func newReportCmd() *cobra.Command {
	var projectDir, format, out string
	cmd := &cobra.Command{
		Use:   "report [--project DIR] [--format md|html|json] [-o FILE]",
		Short: "Say what happened in the project: features, attempts, verdicts, refusals, costs, time",
		Long: `Say what happened in the project: each feature's outcome, attempts, verdict and
commit, why a blocked one is blocked, the gates' refusals, costs and time, and
the session's timeline. It works with or without a daemon: it asks the daemon
when one runs, and reads the store it left otherwise, changing nothing.

--format html writes one self-contained page (open it in a browser).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(report.Formats, format) {
				return withExitCode(exitUsage, fmt.Errorf("--format %q: use one of %s", format, strings.Join(report.Formats, ", ")))
			}
			f := ctlFlags{project: projectDir}
			proj, err := f.findProject()
			if err != nil {
				return err
			}
			r, err := readReport(cmd.Context(), proj)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return report.Render(cmd.OutOrStdout(), r, format)
			}
			var b strings.Builder
			if err := report.Render(&b, r, format); err != nil {
				return err
			}
			if err := atomicfile.Write(out, []byte(b.String()), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&projectDir, "project", "", "project directory (default: the project around the current directory)")
	cmd.Flags().StringVar(&format, "format", "md", "md, html or json")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to FILE instead of stdout")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitUsage, err) })
	return cmd
}

// readReport reads the store a daemon left or, when a daemon holds it, asks
// that daemon; what verify last found it reads itself either way, from the
// records verify left in the state directory.
func readReport(ctx context.Context, proj paths.Project) (control.Report, error) {
	r, err := readSession(ctx, proj)
	if err != nil {
		return r, err
	}
	r.Verify = report.ReadVerify(proj.StateDir)
	return r, nil
}

// readSession is the report of the store: read from it, or asked of the
// daemon that holds it.
func readSession(ctx context.Context, proj paths.Project) (control.Report, error) {
	st, err := store.OpenReadOnly(proj.StateDir, 200*time.Millisecond)
	switch {
	case err == nil:
		defer st.Close()
		return report.Build(st, proj.ID, proj.Dir, time.Now())
	case errors.Is(err, store.ErrNoState):
		return control.Report{}, fmt.Errorf("no daemon has run for %s yet, so there is nothing to report; start one with `ctxgraphd run`", proj.Dir)
	case errors.Is(err, store.ErrLocked):
		r, cerr := control.NewClient(proj.Socket).Report(ctx)
		if cerr != nil {
			return control.Report{}, fmt.Errorf("the store is held (%v) and its daemon did not answer: %w", err, cerr)
		}
		return r, nil
	}
	return control.Report{}, err
}
