package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

const demoGoal = `A tiny greeting toolkit: greet people, bid them farewell, count visitors,
and report the network status. Each piece has its own test script.
`

func newDemoCmd() *cobra.Command {
	var dir, scenarioFile, claude string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR] [--scenario FILE]",
		Short: "Run the whole loop on a sample project with the real Claude Code CLI and a built-in scripted model",
		Long: `demo creates a throwaway sample project, starts a scripted model that speaks the
Anthropic Messages API on loopback, and runs the daemon on the project with the
real Claude Code CLI until every feature is tested or blocked. No API key and no
network are needed. The sample scenario has a feature that passes at once, one
that fails its test once and is fixed on retry, and one that never passes and
ends blocked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc := scriptedmodel.DefaultScenario()
			if scenarioFile != "" {
				var err error
				if sc, err = scriptedmodel.LoadScenario(scenarioFile); err != nil {
					return err
				}
			}
			if dir != "" {
				if err := demoDirFree(dir); err != nil {
					return withExitCode(exitUsage, err)
				}
			}
			if claude == "" {
				p, err := exec.LookPath("claude")
				if err != nil {
					return fmt.Errorf("the demo runs the real Claude Code CLI, and `claude` is not on PATH: install it (make claude) or pass --claude PATH")
				}
				claude = p
			}
			if dir == "" {
				tmp, err := os.MkdirTemp("", "ctxgraphd-demo-")
				if err != nil {
					return err
				}
				dir = tmp
			}
			if err := os.MkdirAll(filepath.Join(dir, paths.ProgressDir), 0o755); err != nil {
				return err
			}
			if err := progress.WriteGoal(filepath.Join(dir, paths.ProgressDir), demoGoal); err != nil {
				return err
			}
			if _, err := gitrepo.Init(cmd.Context(), dir); err != nil {
				return err
			}
			// The demo's state lives in a throwaway directory of its own, not in
			// the user's state directory, and not in the project, whose tree
			// the daemon judges.
			stateHome, err := os.MkdirTemp("", "ctxgraphd-demo-state-")
			if err != nil {
				return err
			}
			os.Setenv("XDG_STATE_HOME", stateHome)
			proj, err := paths.ForProject(dir)
			if err != nil {
				return err
			}

			level := "info"
			if verbose {
				level = "debug"
			}
			log, err := newLogger(config.Log{Level: level, Format: "console"}, proj)
			if err != nil {
				return err
			}
			defer log.Sync()
			model := scriptedmodel.New(sc, log.Named("model"))
			url, err := model.Start()
			if err != nil {
				return err
			}
			defer model.Close()

			cfg := config.Default()
			cfg.Agent.Command = claude
			// The sample project is a sandbox made for this run: agents may
			// run as root here (agent.allow_root), which containers need.
			cfg.Agent.AllowRoot = true
			// Two features at a time, each in a lane of its own: what a
			// night with limits.parallel looks like.
			cfg.Limits.Parallel = 2
			env := append(os.Environ(),
				"ANTHROPIC_BASE_URL="+url,
				"ANTHROPIC_API_KEY=scripted-model",
				"CLAUDE_CONFIG_DIR="+filepath.Join(stateHome, "claude"),
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1",
			)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "ctxgraphd demo: sample project %s\nscripted model on %s, Claude Code at %s\n", dir, url, claude)
			if cfg.Sandbox.Enabled {
				fmt.Fprintf(out, "agents run confined by Claude Code's sandbox, two features at a time, each in a git clone of its own (a lane: limits.parallel: 2); each tested feature is committed in the sample project's git repository\n\n")
			} else {
				fmt.Fprintf(out, "CONFINEMENT IS OFF: agents' commands run unconfined\n\n")
			}
			log.Info("demo starting", zap.String("scenario", sc.Name))
			began := time.Now()
			err = runDaemon(cmd.Context(), daemonOptions{Project: proj, Config: cfg, Log: log, ExitWhenDone: true, AgentEnv: env})
			if err != nil {
				return err
			}
			return demoSummary(out, proj, time.Since(began))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where to create the sample project (default: a new temporary directory)")
	cmd.Flags().StringVar(&scenarioFile, "scenario", "", "a scenario JSON file for the scripted model")
	cmd.Flags().StringVar(&claude, "claude", "", "the Claude Code binary (default: claude on PATH)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every tool call")
	return cmd
}

// demoDirFree refuses a directory the demo would write into and that holds
// something: a project, a repository, or anybody's files. The demo writes a
// sample project, a goal and a git history of its own; none of that belongs
// in a directory that is somebody's.
func demoDirFree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".claude", ".git":
			return fmt.Errorf("--dir %s holds a project (%s): the demo writes a sample project of its own and never into one that exists; give a new or empty directory, or leave --dir out for a temporary one", dir, e.Name())
		}
	}
	if len(entries) > 0 {
		return fmt.Errorf("--dir %s is not empty: the demo writes a sample project of its own and never among other files; give a new or empty directory, or leave --dir out for a temporary one", dir)
	}
	return nil
}

// demoSummary says what happened, for someone who has never seen ctxgraphd:
// each feature's outcome and why, the runs, the time and where everything
// is. The cost is the scripted model's, made up.
func demoSummary(out io.Writer, proj paths.Project, took time.Duration) error {
	st, err := store.Open(proj.StateDir, time.Second)
	if err != nil {
		return err
	}
	defer st.Close()
	state, err := st.Load()
	if err != nil {
		return err
	}
	runs, err := st.Runs()
	if err != nil {
		return err
	}
	l, err := progress.Parse(state.FeatureList)
	if err != nil {
		return fmt.Errorf("the demo's feature list: %w", err)
	}
	fmt.Fprintf(out, "\nwhat happened, feature by feature:\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tOUTCOME\tRUNS\tWHY")
	for _, f := range l.Features {
		c := state.Counters[f.ID]
		outcome, why := "not worked", ""
		switch {
		case f.Tested:
			outcome = "tested"
			why = "its test passed when the daemon ran it itself"
			if c.Commit != "" {
				why += "; committed as " + c.Commit[:min(12, len(c.Commit))]
			}
			if c.Failures > 0 {
				why += fmt.Sprintf(", after %s", plural(c.Failures, "failed attempt"))
			}
		case f.Status == progress.Blocked:
			outcome, why = "blocked", textcut.Fold(c.LastFailure)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", f.ID, f.Title, outcome, c.Runs, why)
	}
	tw.Flush()
	var agentWall time.Duration
	for _, r := range runs {
		agentWall += r.AgentWall
	}
	fmt.Fprintf(out, "\n%s of Claude Code in %s (%s of them in the agents' own processes); cost $%.2f, simulated: the scripted model makes it up\n",
		plural(len(runs), "run"), took.Round(time.Second), agentWall.Round(time.Second), state.TotalCostUSD)
	fmt.Fprintf(out, "\nthe sample project is in %s: its code, one git commit per tested feature (git log), the evidence under .claude/progress/evidence/\n", proj.Dir)
	fmt.Fprintf(out, "the daemon's state (its store, traces and logs) is in %s\n", proj.StateDir)
	fmt.Fprintf(out, "remove both directories when you are done with them\n")
	return nil
}
