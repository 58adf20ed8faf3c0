package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

func init() { subcommands = append(subcommands, newInitCmd) }

func newInitCmd() *cobra.Command {
	var goal, goalFile, dir string
	cmd := &cobra.Command{
		Use:   "init [--goal TEXT | --goal-file F] [--project DIR]",
		Short: "Prepare a project: .claude/progress/ and its goal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if goal != "" && goalFile != "" {
				return withExitCode(exitUsage, errors.New("give --goal or --goal-file, not both"))
			}
			if goalFile != "" {
				data, err := os.ReadFile(goalFile)
				if err != nil {
					return fmt.Errorf("--goal-file: %w", err)
				}
				goal = string(data)
			}
			if dir == "" {
				dir = "."
			}
			proj, err := paths.ForProject(dir)
			if err != nil {
				return err
			}
			progressDir := proj.Progress()
			if err := os.MkdirAll(filepath.Join(progressDir, progress.EvidenceDir), 0o755); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if strings.TrimSpace(goal) != "" {
				if err := progress.WriteGoal(progressDir, goal); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s\n", filepath.Join(paths.ProgressDir, progress.GoalFile))
			} else if _, err := progress.ReadGoal(progressDir); err != nil {
				fmt.Fprintf(out, "no goal yet: write %s or run `ctxgraphd init --goal TEXT`\n", filepath.Join(paths.ProgressDir, progress.GoalFile))
			}
			fmt.Fprintf(out, "project %s ready (id %s)\nstart the daemon with: ctxgraphd run --project %s\n", proj.Dir, proj.ID, proj.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&goal, "goal", "", "what the project should become")
	cmd.Flags().StringVar(&goalFile, "goal-file", "", "read the goal from a file")
	cmd.Flags().StringVar(&dir, "project", "", "project directory (default: the current directory)")
	return cmd
}
