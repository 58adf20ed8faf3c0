package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

func init() { subcommands = append(subcommands, newKeepCmd) }

// newKeepCmd is the keeper the daemon and workers run each agent under
// (procgroup.Keep), not a person's command.
func newKeepCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "keep -- COMMAND [ARG...]",
		Short:  "Runs COMMAND so that nothing it starts outlives it or its starter (the daemon's and workers' agents run under it)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		// Every argument is the command's.
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			procgroup.Keep(args)
		},
	}
}

// keeper is the command that runs an agent under this binary's keeper
// (agents.Options.Keeper), nil where it cannot: not Linux, or this
// binary not found.
func keeper() []string {
	if !procgroup.KeepWorks {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{self, "keep", "--"}
}
