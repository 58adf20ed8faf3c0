package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func ctlWatchCmd(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "watch",
		Short: "Follow the daemon live: state, progress, the run in flight and its latest tool call",
		Long: `Follow the daemon live: the session state, a progress bar of the features, the
run in flight with its role, feature, attempt, elapsed time, tool calls and
latest tool call, and the session's cost so far. It redraws as things happen;
Ctrl-C ends it. With --json it prints one status object per line instead.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			proj, err := f.findProject()
			if err != nil {
				return err
			}
			// Ctrl-C is how a person leaves the view: it ends the view
			// cleanly (exit 0), whatever the terminal's shell does with the
			// signal. A second one kills it, in case leaving hangs.
			ctx, stopSignals := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stopSignals()
			context.AfterFunc(ctx, stopSignals)
			out := cmd.OutOrStdout()
			var view *watchView
			if !f.json {
				view = &watchView{w: out}
				stop := view.tick(ctx)
				defer stop()
			}
			err = control.NewClient(proj.Socket).Watch(ctx, func(st control.Status) error {
				if f.json {
					return json.NewEncoder(out).Encode(st)
				}
				return view.show(st)
			})
			switch {
			case errors.Is(err, control.ErrNoDaemon):
				return withExitCode(exitNoDaemon, &noDaemonError{proj: proj, err: err})
			case errors.Is(err, control.ErrDaemonGone):
				return fmt.Errorf("the daemon stopped; `ctxgraphd report` shows what happened")
			}
			return err
		},
	}
}

// watchView draws the status for a person, from the top of the screen,
// and redraws it every second so that the elapsed time moves.
type watchView struct {
	w    io.Writer
	mu   sync.Mutex
	last *control.Status
}

func (v *watchView) show(st control.Status) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last = &st
	return v.draw(time.Now())
}

func (v *watchView) tick(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				v.mu.Lock()
				if v.last != nil {
					v.draw(now)
				}
				v.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// draw writes the whole view: home the cursor, clear the screen, then the
// lines, so that a terminal shows exactly the current state.
func (v *watchView) draw(now time.Time) error {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	b.WriteString(renderWatch(*v.last, now))
	_, err := io.WriteString(v.w, b.String())
	return err
}

// renderWatch is the view's text.
func renderWatch(st control.Status, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ctxgraphd  %s  %s\n\n", st.Project, now.Local().Format("15:04:05"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	state := st.State
	if st.PauseRequested {
		state += " (pause requested)"
	}
	if st.WaitingUntil != nil {
		state += " until " + st.WaitingUntil.Local().Format("15:04:05") + " (" + untilText(now, *st.WaitingUntil) + ")"
	}
	fmt.Fprintf(tw, "state\t%s\n", state)
	fmt.Fprintf(tw, "features\t%s  %s\n", progressBar(st.Features, 30), countsLine(st.Features))
	row := func(label string, r control.RunInfo) {
		what := r.Role
		if r.Feature != "" {
			what += " " + r.Feature
		}
		if r.Attempt > 0 {
			what += fmt.Sprintf(" attempt %d", r.Attempt)
		}
		if r.Worker != "" {
			what += " on worker " + r.Worker
		}
		if r.WaitingForWorker {
			what += " waiting for a worker"
		}
		fmt.Fprintf(tw, "%s\t%s  %s  %s  %s\n", label, r.ID, what, durationText(now.Sub(r.StartedAt)), plural(r.ToolCalls, "tool call"))
		if r.LastTool != "" {
			fmt.Fprintf(tw, "last tool\t%s\n", textcut.Runes(textcut.Fold(r.LastTool), 90))
		}
	}
	switch r := st.Current; {
	case r != nil:
		row("run", *r)
	case len(st.Lanes) > 0:
		for _, l := range st.Lanes {
			row("lane "+l.Feature, l)
		}
		if st.Working != "" {
			fmt.Fprintf(tw, "daemon\t%s\n", st.Working)
		}
	case st.Working != "":
		fmt.Fprintf(tw, "run\tnone: the daemon is %s\n", st.Working)
	default:
		fmt.Fprintf(tw, "run\tnone\n")
	}
	fmt.Fprintf(tw, "cost\t$%.2f over %s\n", st.CostUSD, plural(st.Runs, "run"))
	if !st.Confined {
		fmt.Fprintf(tw, "confinement\tOFF (sandbox.enabled: false)\n")
	}
	if st.Message != "" {
		fmt.Fprintf(tw, "message\t%s\n", textcut.Runes(textcut.Fold(st.Message), 200))
	}
	tw.Flush()
	b.WriteString("\nCtrl-C to leave; the daemon goes on.\n")
	return b.String()
}

// progressBar draws the features as a bar of width cells: tested (#),
// blocked (x), the rest (.).
func progressBar(c control.FeatureCounts, width int) string {
	if c.Total == 0 {
		return "[" + strings.Repeat(".", width) + "]"
	}
	// Settled features fill their share of the bar whatever the rounding:
	// all of them settled is a full bar.
	tested := c.Tested * width / c.Total
	blocked := (c.Tested+c.Blocked)*width/c.Total - tested
	return "[" + strings.Repeat("#", tested) + strings.Repeat("x", blocked) + strings.Repeat(".", width-tested-blocked) + "]"
}

func ctlCostCmd(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cost",
		Short: "Show what the session cost: per feature, per role, and per tested feature",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (costs, error) {
				r, err := c.Report(ctx)
				return costsOf(r), err
			}, printCosts)
		},
	}
}

// costs is the answer of `ctl cost`.
type costs struct {
	SessionUSD          float64            `json:"session_usd"`
	ByRole              map[string]float64 `json:"by_role"`
	Tested              int                `json:"tested"`
	PerTestedFeatureUSD float64            `json:"per_tested_feature_usd"`
	Features            []featureCost      `json:"features"`
}

type featureCost struct {
	ID      string  `json:"id"`
	Outcome string  `json:"outcome"`
	Runs    int     `json:"runs"`
	CostUSD float64 `json:"cost_usd"`
}

func costsOf(r control.Report) costs {
	c := costs{SessionUSD: r.Cost.SessionUSD, ByRole: r.Cost.ByRole, Tested: r.Totals.Tested, PerTestedFeatureUSD: r.Cost.PerTestedFeatureUSD, Features: []featureCost{}}
	for _, f := range r.Features {
		c.Features = append(c.Features, featureCost{ID: f.ID, Outcome: f.Outcome, Runs: f.Runs, CostUSD: f.CostUSD})
	}
	return c
}

func printCosts(w io.Writer, c costs) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t$%.2f\n", c.SessionUSD)
	if c.Tested > 0 {
		fmt.Fprintf(tw, "per tested feature\t$%.2f (%s)\n", c.PerTestedFeatureUSD, plural(c.Tested, "tested feature"))
	}
	roles := make([]string, 0, len(c.ByRole))
	for r := range c.ByRole {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		fmt.Fprintf(tw, "%s\t$%.2f\n", r, c.ByRole[r])
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "FEATURE\tOUTCOME\tRUNS\tCOST\n")
	for _, f := range c.Features {
		fmt.Fprintf(tw, "%s\t%s\t%d\t$%.2f\n", f.ID, f.Outcome, f.Runs, f.CostUSD)
	}
	return tw.Flush()
}
