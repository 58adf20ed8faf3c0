package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

func init() { subcommands = append(subcommands, newConfigCmd) }

func newConfigCmd() *cobra.Command {
	var dir string
	var sets []string
	cmd := &cobra.Command{
		Use:   "config [--project DIR]",
		Short: "Print the effective configuration and where each value came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src := config.Sources{}
			var proj paths.Project
			var err error
			if dir != "" {
				proj, err = paths.ForProject(dir)
			} else if wd, werr := os.Getwd(); werr == nil {
				proj, err = paths.FindProject(wd)
				if err == paths.ErrNoProject {
					err = nil // outside a project: user file, env and flags only
				}
			}
			if err != nil {
				return err
			}
			src.ProjectDir = proj.Dir
			if src.Flags, err = parseSets(sets); err != nil {
				return withExitCode(exitUsage, err)
			}
			cfg, prov, err := config.Load(src)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), cfg.Describe(prov))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "project", "", "project directory (default: the project around the current directory)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a configuration key as run --set does, e.g. --set agent.timeout=10m (repeatable)")
	return cmd
}
