package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

func init() { subcommands = append(subcommands, newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	var (
		url, creds, dir, claude, ca, runtime string
		slots                                int
		allowRoot                            bool
	)
	cmd := &cobra.Command{
		Use:   "worker --nats URL --creds FILE [--slots N]",
		Short: "Run lanes of a daemon's night on this machine, pulled over NATS (executor: nats)",
		Long: `A worker pulls lanes' runs from the daemon's work queue and runs each in a clone
of its own, with this machine's Claude Code login and sandbox. It needs no file
system shared with the daemon: code comes and goes as git bundles, and the
daemon judges what comes back as it judges its own lanes.

The credentials file is the one ` + "`ctxgraphd ctl workers add NAME`" + ` wrote on the
daemon's machine. On SIGTERM or SIGINT the worker stops its runs and gives them
back to the daemon, which hands them to another worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" || creds == "" {
				return withExitCode(exitUsage, errors.New("worker: --nats URL and --creds FILE are both required: the daemon's NATS URL (its log and `ctxgraphd ctl workers` show it) and the file `ctxgraphd ctl workers add NAME` wrote"))
			}
			if slots < 1 {
				return withExitCode(exitUsage, fmt.Errorf("worker: --slots %d: want at least 1 (lanes this machine runs at once)", slots))
			}
			c, err := fleet.LoadCredentials(creds)
			if err != nil {
				return err
			}
			if dir == "" {
				state, err := paths.StateHome(os.Getenv)
				if err != nil {
					return err
				}
				dir = filepath.Join(state, "ctxgraphd", "worker-"+c.Project+"-"+c.Worker)
			}
			if dir, err = filepath.Abs(dir); err != nil {
				return err
			}
			log, err := newLogger(config.Log{Level: "info"}, paths.Project{ID: c.Project})
			if err != nil {
				return err
			}
			defer log.Sync()
			log = log.With(zap.String("worker", c.Worker))
			var opts []nats.Option
			if ca != "" {
				opts = append(opts, nats.RootCAs(ca))
			}
			hook, err := hookCommand()
			if err != nil {
				return err
			}
			env, err := withAgentTemp(os.Environ(), filepath.Join(os.TempDir(), "cgw-"+c.Worker))
			if err != nil {
				return err
			}
			if err := workerCheck(cmd.Context(), claude, runtime, allowRoot, env); err != nil {
				return err
			}
			prlimit, _ := paths.LookPath("prlimit", os.Getenv("PATH"))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return fleet.RunWorker(ctx, fleet.WorkerOptions{
				URL: url, Credentials: c, NATS: opts, Slots: slots, Dir: dir, Claude: claude,
				Hook: hook, Env: env, AllowRoot: allowRoot, Prlimit: prlimit, Keeper: keeper(), SandboxRuntime: runtime, Log: log,
			})
		},
	}
	cmd.Flags().StringVar(&url, "nats", "", "the daemon's NATS server, e.g. nats://daemon-host:4222 (tls:// with nats.tls)")
	cmd.Flags().StringVar(&creds, "creds", "", "this worker's credentials FILE, as ctxgraphd ctl workers add NAME wrote it")
	cmd.Flags().IntVar(&slots, "slots", 1, "lanes this machine runs at once")
	cmd.Flags().StringVar(&dir, "dir", "", "where the lanes' clones are made (default: $XDG_STATE_HOME/ctxgraphd/worker-PROJECT-NAME)")
	cmd.Flags().StringVar(&claude, "claude", "claude", "the Claude Code CLI, with this machine's login")
	cmd.Flags().StringVar(&ca, "ca", "", "a PEM file of the CA that signed the daemon's nats.tls.cert, when the system does not trust it")
	cmd.Flags().BoolVar(&allowRoot, "allow-root", false, "run agents as root (only on a machine that is a sandbox itself)")
	cmd.Flags().StringVar(&runtime, "sandbox-runtime", "srt", "Anthropic's sandbox runtime (npm @anthropic-ai/sandbox-runtime), which confines the project's setup step in each clone")
	return cmd
}

// workerCheck makes sure, before the worker takes any lane, that it can
// run one as the daemon's own checks make sure the daemon can: Claude Code
// is there, new enough and logged in, agents may run as this user, the
// sandbox works, and the sandbox runtime that confines the project's
// setup is there. A worker that cannot work refuses to start, with the
// fix of each problem in this worker's terms, rather than take a lane and
// fail it.
func workerCheck(ctx context.Context, claude, runtime string, allowRoot bool, env []string) error {
	var problems startProblems
	add := problems.add
	add(agents.CheckRoot(allowRoot, env, agents.WorkerSettings))
	add(agents.Preflight(ctx, claude, env, agents.WorkerSettings))
	if err := sandbox.Check(ctx); err != nil {
		add(fmt.Errorf("%w. A worker's runs are confined as the daemon's are", err))
	}
	if _, err := (sandbox.Setup{Runtime: runtime, RuntimeOption: "the worker's --sandbox-runtime", Env: env}).FindRuntime(); err != nil {
		add(fmt.Errorf("the worker confines the project's setup step with Anthropic's sandbox runtime, and %w", err))
	}
	return problems.err("ctxgraphd worker cannot start on this machine")
}
