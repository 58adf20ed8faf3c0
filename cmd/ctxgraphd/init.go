package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

func init() { subcommands = append(subcommands, newInitCmd) }

func newInitCmd() *cobra.Command {
	var goal, goalFile, dir string
	var installHooks bool
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
			// Runs are judged by what they change in the project's git tree,
			// and each tested feature becomes a commit: a project needs a
			// repository. One that has one is left as it is.
			created, err := gitrepo.Init(cmd.Context(), proj.Dir)
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(out, "created a git repository in %s: the daemon judges each run by what it changes there, and commits each tested feature\n", proj.Dir)
			}
			if strings.TrimSpace(goal) != "" {
				if err := progress.WriteGoal(progressDir, goal); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s\n", filepath.Join(paths.ProgressDir, progress.GoalFile))
			} else if _, err := progress.ReadGoal(progressDir); err != nil {
				fmt.Fprintf(out, "no goal yet: write %s or run `ctxgraphd init --goal TEXT`\n", filepath.Join(paths.ProgressDir, progress.GoalFile))
			}
			if installHooks {
				if err := installProjectHooks(out, proj.Dir); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "project %s ready (id %s)\nstart the daemon with: ctxgraphd run --project %s\n", proj.Dir, proj.ID, proj.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&goal, "goal", "", "what the project should become")
	cmd.Flags().StringVar(&goalFile, "goal-file", "", "read the goal from a file")
	cmd.Flags().StringVar(&dir, "project", "", "project directory (default: the current directory)")
	cmd.Flags().BoolVar(&installHooks, "install-hooks", false, "also install the gates' hooks in .claude/settings.json, for interactive Claude Code sessions (merged with the hooks already there)")
	return cmd
}

// installProjectHooks merges ctxgraphd's hooks into the project's
// .claude/settings.json. The daemon's own runs get their hooks with
// --settings and need none of this; interactive sessions do. The user's
// settings and hooks are kept, and a file that is not valid JSON is left
// untouched with an error that says so.
func installProjectHooks(out io.Writer, projectDir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--install-hooks: cannot find the ctxgraphd binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("--install-hooks: %w", err)
	}
	path := filepath.Join(projectDir, ".claude", "settings.json")
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--install-hooks: %w", err)
	}
	merged, changed, err := gates.MergeHookSettings(existing, exe)
	if err != nil {
		return fmt.Errorf("--install-hooks: %s: %w", path, err)
	}
	rel := filepath.Join(".claude", "settings.json")
	if !changed {
		fmt.Fprintf(out, "hooks already in %s\n", rel)
		return nil
	}
	if err := atomicfile.Write(path, merged, 0o644); err != nil {
		return fmt.Errorf("--install-hooks: %w", err)
	}
	fmt.Fprintf(out, "installed the gates' hooks in %s\n", rel)
	return nil
}
