package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/hook"
)

func init() { subcommands = append(subcommands, newHookCmd) }

func newHookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook EVENT",
		Short: "The hook Claude Code runs (pre-tool-use, post-tool-use, stop, …): asks the daemon's gates",
		Long: `hook is called by Claude Code, not by people. It reads the hook payload on stdin,
asks the project's daemon (CTXGRAPH_SOCKET, or the project around CLAUDE_PROJECT_DIR)
and prints the decision in the form Claude Code honours. When the daemon does not
answer it decides alone from the files, refuses tested: true, and spools what it
saw for the daemon to take in later. ctxgraphd-hook, installed beside ctxgraphd,
is the same command in a smaller binary; the daemon's runs use it.`,
		Args: cobra.MinimumNArgs(1),
		// The hook reads its own arguments: cobra would refuse the flag
		// before the hook could stand aside.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := hook.Main(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Getenv)
			if code != 0 {
				return withExitCode(code, errAlreadyReported)
			}
			return nil
		},
	}
	return cmd
}

// errAlreadyReported ends a command whose message is already on stderr.
var errAlreadyReported = errors.New("")
