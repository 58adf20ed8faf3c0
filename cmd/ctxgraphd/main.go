// Command ctxgraphd drives Claude Code through a project's feature list,
// unattended, with quality gates enforced from outside the agents.
//
// One binary: the daemon (run), its control client (ctl), the hook command
// Claude Code calls (hook), project set-up (init), the effective
// configuration (config), the daemon as a systemd or launchd service
// (service) and a self-contained demo (demo).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExitCode makes main exit with code after printing err.
func withExitCode(code int, err error) error { return &exitError{code: code, err: err} }

// Exit codes of the CLI. 3 is part of the contract: no daemon runs for the project.
const (
	exitFailure  = 1
	exitUsage    = 2
	exitNoDaemon = 3
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ctxgraphd",
		Short:         "Drive Claude Code through a project's feature list, with gates that hold",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(commands()...)
	return root
}

// commands lists the subcommands; each lives in its own file.
var commands = func() []*cobra.Command {
	var cmds []*cobra.Command
	for _, c := range subcommands {
		cmds = append(cmds, c())
	}
	return cmds
}

// subcommands is filled by the init functions of the files beside this one,
// so that adding a subcommand touches one file.
var subcommands []func() *cobra.Command

func main() {
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	if !errors.Is(err, errAlreadyReported) {
		fmt.Fprintln(os.Stderr, "ctxgraphd:", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}
