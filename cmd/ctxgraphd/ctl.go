package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func init() { subcommands = append(subcommands, newCtlCmd) }

// ctlFlags are the flags every ctl command takes.
type ctlFlags struct {
	project string
	json    bool
}

func newCtlCmd() *cobra.Command {
	f := &ctlFlags{}
	cmd := &cobra.Command{
		Use:   "ctl COMMAND",
		Short: "Talk to the project's daemon: status, watch, features, cost, pause, resume, approve, stop, retry, unblock, skip",
		Long: `Talk to the daemon of the project around the current directory (or --project).

Every command takes --json for scripts. Exit codes: 0 done, 1 the daemon refused
or failed, 2 bad usage, 3 no daemon runs for the project.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return withExitCode(exitUsage, fmt.Errorf("unknown ctl command %q; did you mean `ctxgraphd ctl %s`?", args[0], s[0]))
			}
			return withExitCode(exitUsage, fmt.Errorf("unknown ctl command %q; see `ctxgraphd ctl --help`", args[0]))
		},
	}
	cmd.SuggestionsMinimumDistance = 2
	// Usage mistakes exit 2, so that scripts can tell them from a refusal.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitUsage, err) })
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.project, "project", "", "project directory (default: the project around the current directory)")
	pf.BoolVar(&f.json, "json", false, "print JSON for scripts")

	cmd.AddCommand(
		&cobra.Command{
			Use:   "status",
			Short: "Show the session state, the feature counts and the run in flight",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return ctlRun(cmd, f, (*control.Client).Status, printStatus)
			},
		},
		&cobra.Command{
			Use:   "features",
			Short: "List the features with their status and attempts",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) ([]control.Feature, error) {
					fs, err := c.Features(ctx)
					if fs == nil {
						fs = []control.Feature{} // `[]`, not `null`, for scripts
					}
					return fs, err
				}, printFeatures)
			},
		},
		ctlAction(f, "pause", "Start no new run; the run in flight finishes first", (*control.Client).Pause,
			"paused: no new run starts (a run in flight finishes first)"),
		ctlAction(f, "resume", "Go on after pause, stop, or a wait", (*control.Client).Resume,
			"resumed"),
		ctlAction(f, "approve", "Approve the plan the daemon waits on (limits.approve_plan), and go on", (*control.Client).Approve,
			"approved: the features of the plan are worked from now on"),
		ctlAction(f, "stop", "Stop the run in flight and the session; it waits for `ctl resume`", (*control.Client).Stop,
			"stopped: the session waits for `ctxgraphd ctl resume`"),
		ctlFeatureAction(f, "retry", "Start a feature's attempts over", (*control.Client).Retry,
			"%s: its attempts start over"),
		ctlUnblockCmd(f),
		ctlFeatureAction(f, "skip", "Set a feature aside (as blocked) and go on with the others", (*control.Client).Skip,
			"%s: skipped (set aside as blocked)"),
	)
	cmd.AddCommand(ctlWatchCmd(f), ctlCostCmd(f), ctlWhyCmd(f))
	cmd.AddCommand(ctlTraceCmds(f)...)
	cmd.AddCommand(ctlLessonsCmd(f), ctlPatternsCmd(f), ctlGuardsCmd(f), ctlWorkersCmd(f))
	return cmd
}

func ctlUnblockCmd(f *ctlFlags) *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:   "unblock ID [--note TEXT]",
		Short: "Reopen a blocked feature, with a note for its next coding agent",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.OK, error) {
				return control.OK{OK: true}, c.Unblock(ctx, id, note)
			}, func(w io.Writer, _ control.OK) error {
				if note != "" {
					_, err := fmt.Fprintf(w, "%s: unblocked, with a note for its next coding agent\n", id)
					return err
				}
				_, err := fmt.Fprintf(w, "%s: unblocked\n", id)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "what the next coding agent of the feature should know")
	return cmd
}

// ctlAction is a command without arguments that asks the daemon to act.
func ctlAction(f *ctlFlags, name, short string, call func(*control.Client, context.Context) error, done string) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.OK, error) {
				return control.OK{OK: true}, call(c, ctx)
			}, printLine(done))
		},
	}
}

// ctlFeatureAction is a command on one feature; done has a %s for its id.
func ctlFeatureAction(f *ctlFlags, name, short string, call func(*control.Client, context.Context, string) error, done string) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.OK, error) {
				return control.OK{OK: true}, call(c, ctx, args[0])
			}, printLine(fmt.Sprintf(done, args[0])))
		},
	}
}

// ctlRun is the shape of every ctl command: find the project, ask its
// daemon, print the answer as JSON or for people.
func ctlRun[T any](cmd *cobra.Command, f *ctlFlags, call func(*control.Client, context.Context) (T, error), human func(io.Writer, T) error) error {
	proj, err := f.findProject()
	if err != nil {
		return err
	}
	v, err := call(control.NewClient(proj.Socket), cmd.Context())
	if err != nil {
		if errors.Is(err, control.ErrNoDaemon) {
			return withExitCode(exitNoDaemon, &noDaemonError{proj: proj, err: err})
		}
		// An *APIError reads as the daemon's message; run prints it and
		// exits 1.
		return err
	}
	w := cmd.OutOrStdout()
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return human(w, v)
}

// findProject is --project, or the project around the current directory.
// Unlike `run`, it does not insist on .claude/progress under --project: the
// socket alone says whether a daemon serves the directory.
func (f *ctlFlags) findProject() (paths.Project, error) {
	if f.project != "" {
		return paths.ForProject(f.project)
	}
	wd, err := os.Getwd()
	if err != nil {
		return paths.Project{}, err
	}
	return paths.FindProject(wd)
}

// noDaemonError tells people what to do; it still matches
// control.ErrNoDaemon for callers.
type noDaemonError struct {
	proj paths.Project
	err  error
}

func (e *noDaemonError) Error() string {
	return fmt.Sprintf("no ctxgraphd daemon runs for %s (socket %s); `ctxgraphd report` shows what happened without one, `ctxgraphd run` starts it", e.proj.Dir, e.proj.Socket)
}

func (e *noDaemonError) Unwrap() error { return e.err }

// usageArgs makes an argument mistake exit 2.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return withExitCode(exitUsage, err)
		}
		return nil
	}
}

func printLine(line string) func(io.Writer, control.OK) error {
	return func(w io.Writer, _ control.OK) error {
		_, err := fmt.Fprintln(w, line)
		return err
	}
}

// printStatus prints the status as a few aligned lines.
func printStatus(w io.Writer, st control.Status) error {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	state := st.State
	if st.PauseRequested {
		state += " (pause requested: takes effect when the run in flight ends)"
	}
	fmt.Fprintf(tw, "state:\t%s\n", state)
	fmt.Fprintf(tw, "features:\t%s\n", countsLine(st.Features))
	switch {
	case st.Current != nil:
		fmt.Fprintf(tw, "current:\t%s\n", runLine(st.Current, now))
	case len(st.Lanes) > 0:
		for i := range st.Lanes {
			fmt.Fprintf(tw, "lane %s:\t%s\n", st.Lanes[i].Feature, runLine(&st.Lanes[i], now))
		}
		if st.Working != "" {
			fmt.Fprintf(tw, "daemon:\t%s\n", st.Working)
		}
	case st.Working != "":
		fmt.Fprintf(tw, "current:\tthe daemon is %s\n", st.Working)
	default:
		fmt.Fprintf(tw, "current:\tno run\n")
	}
	if !st.Confined {
		fmt.Fprintf(tw, "confinement:\tOFF (sandbox.enabled: false): agents' commands run unconfined\n")
	}
	if st.WaitingUntil != nil {
		fmt.Fprintf(tw, "waiting:\tuntil %s (%s)\n", st.WaitingUntil.Local().Format("2006-01-02 15:04:05 MST"), untilText(now, *st.WaitingUntil))
	}
	if st.BlockedInSession > 0 {
		fmt.Fprintf(tw, "blocked:\t%s in this session\n", plural(st.BlockedInSession, "feature"))
	}
	if st.Message != "" {
		fmt.Fprintf(tw, "message:\t%s\n", textcut.Fold(st.Message))
	}
	fmt.Fprintf(tw, "cost:\t$%.2f over %s\n", st.CostUSD, plural(st.Runs, "run"))
	daemon := fmt.Sprintf("pid %d", st.PID)
	if !st.StartedAt.IsZero() {
		daemon += ", up " + durationText(now.Sub(st.StartedAt))
	}
	fmt.Fprintf(tw, "daemon:\t%s\n", daemon)
	if st.Project != "" {
		fmt.Fprintf(tw, "project:\t%s\n", st.Project)
	}
	return tw.Flush()
}

// countsLine reads like "3 tested, 1 blocked, 2 pending of 6"; states
// without features are left out.
func countsLine(c control.FeatureCounts) string {
	if c.Total == 0 {
		return "none yet"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{
		{c.Tested, "tested"},
		{c.Blocked, "blocked"},
		{c.Completed, "awaiting test"},
		{c.InProgress, "in progress"},
		{c.Pending, "pending"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", c.Total)
}

// runLine reads like "coding-agent on F-003, attempt 2 (run r-7, pid 4343, for 3m12s)".
func runLine(r *control.RunInfo, now time.Time) string {
	s := r.Role
	if r.Feature != "" {
		s += " on " + r.Feature
	}
	if r.Attempt > 0 {
		s += fmt.Sprintf(", attempt %d", r.Attempt)
	}
	details := []string{"run " + r.ID}
	if r.PID > 0 {
		details = append(details, fmt.Sprintf("pid %d", r.PID))
	}
	if r.Worker != "" {
		details = append(details, "on worker "+r.Worker)
	}
	if r.WaitingForWorker {
		details = append(details, "waiting for a worker")
	}
	if !r.StartedAt.IsZero() {
		details = append(details, "for "+durationText(now.Sub(r.StartedAt)))
	}
	return s + " (" + strings.Join(details, ", ") + ")"
}

// printFeatures prints the features as an aligned table.
func printFeatures(w io.Writer, fs []control.Feature) error {
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "no features yet: the initializer has not written the feature list")
		return err
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTESTED\tATTEMPTS\tCOST\tTITLE\tLAST FAILURE")
	for _, f := range fs {
		tested := "no"
		if f.Tested {
			tested = "yes"
		}
		last := ""
		if !f.Tested {
			last = textcut.Runes(textcut.Fold(f.LastFailure), 80)
		}
		status := textcut.Fold(f.Status)
		if f.Lane != "" {
			status += " (lane)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t$%.2f\t%s\t%s\n", textcut.Fold(f.ID), status, tested, f.Attempts, f.CostUSD, textcut.Runes(textcut.Fold(f.Title), 40), last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A feature without a failure ends at its title, with no padding.
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n"))); err != nil {
			return err
		}
	}
	return nil
}

func durationText(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

func untilText(now, t time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + durationText(d)
	}
	return "due now"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
