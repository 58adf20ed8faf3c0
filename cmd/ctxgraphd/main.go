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
	"strings"

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
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(commands()...)
	// A mistyped flag is a usage error wherever it is: exit 2, so that a
	// script can tell it from a refusal or a failure.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitUsage, err) })
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// wrapArgs makes a command's argument errors (too many, too few, an
// unknown subcommand) usage errors, for it and its subcommands.
func wrapArgs(c *cobra.Command) {
	if v := c.Args; v != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := v(cmd, args); err != nil {
				return withExitCode(exitUsage, fmt.Errorf("%w; see `%s --help`", err, cmd.CommandPath()))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// unknownCommand explains a command that does not exist, with the nearest
// one: a ctl command given without ctl is the usual slip.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if ctl, _, err := root.Find([]string{"ctl"}); err == nil && ctl != root {
		for _, c := range ctl.Commands() {
			if c.Name() == name {
				return withExitCode(exitUsage, fmt.Errorf("%s; did you mean `ctxgraphd ctl %s`?", msg, name))
			}
		}
	}
	if s := root.SuggestionsFor(name); len(s) > 0 {
		return withExitCode(exitUsage, fmt.Errorf("%s; did you mean `ctxgraphd %s`?", msg, s[0]))
	}
	return withExitCode(exitUsage, fmt.Errorf("%s; see `ctxgraphd --help`", msg))
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
	// cobra reports an unknown top-level command as a plain error; find it
	// first, to say it is a usage error and what was meant.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if c, _, err := root.Find(args[:1]); err != nil || c == root {
			if args[0] != "help" && args[0] != "completion" && args[0] != "__complete" {
				err := unknownCommand(root, args[0])
				fmt.Fprintln(os.Stderr, "ctxgraphd:", err)
				return exitUsage
			}
		}
	}
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
