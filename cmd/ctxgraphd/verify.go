package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/report"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

func init() { subcommands = append(subcommands, newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	var projectDir, at string
	var asJSON, unconfined bool
	cmd := &cobra.Command{
		Use:   "verify [ID…] [--at REV] [--unconfined] [--json]",
		Short: "Run the frozen tests of tested features again, on a clean checkout of a commit",
		Long: `Run the frozen test of each named feature (by default: every tested feature) on a
clean temporary checkout of REV (by default: HEAD, the head of the project's
branch), confined as the daemon runs them, and print a table: the feature, the
commit its verdict made, whether its test passes there, and how long it took.

With --at, the default is the features tested by then: those whose verdict's
commit is in REV's history. It works with or without a daemon, and leaves the
project's work tree and index exactly as they were. Exit 0 when every test
passes, 1 when any fails (naming them), 2 for bad input (a feature not in the
list, a revision that names no commit).

--unconfined runs the same tests on the same checkout as you, in your own
environment (your PATH, HOME, caches and network), with no jail, one at a
time: as you or CI would run them, to check that a green feature is green
for you, and not only in the daemon's jail.
It runs agent-written code as you, with every power you have: run it where
that is safe (a CI job, a container, a machine of no value).

Each run is recorded in the project's state directory, outside the tree, and
` + "`ctxgraphd report`" + ` says when each mode last ran and what it found.`,
		RunE: func(cmd *cobra.Command, ids []string) error {
			f := ctlFlags{project: projectDir}
			proj, err := f.findProject()
			if err != nil {
				return err
			}
			cfg, _, err := config.Load(config.Sources{ProjectDir: proj.Dir})
			if err != nil {
				return err
			}
			res, err := verify(cmd.Context(), proj, cfg, ids, at, unconfined)
			if err != nil {
				return err
			}
			if err := report.RecordVerify(proj.StateDir, res.record(time.Now())); err != nil {
				// The run's result stands; only the report will not know of it.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; ctxgraphd report will not show this run\n", err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				res.print(cmd.OutOrStdout())
			}
			mode := ""
			if res.Unconfined {
				mode = ", unconfined"
			}
			if failed := res.failed(); len(failed) == 1 {
				return withExitCode(1, fmt.Errorf("%s fails its frozen test at %s (%s%s)", failed[0], res.Rev, gitrepo.Short(res.Commit), mode))
			} else if len(failed) > 1 {
				return withExitCode(1, fmt.Errorf("%s fail their frozen tests at %s (%s%s)", strings.Join(failed, ", "), res.Rev, gitrepo.Short(res.Commit), mode))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&projectDir, "project", "", "project directory (default: the project around the current directory)")
	cmd.Flags().StringVar(&at, "at", "HEAD", "the commit to check out and test (any git revision)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&unconfined, "unconfined", false, "run the tests in your own environment, with no jail: agent-written code runs as you")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitUsage, err) })
	return cmd
}

// verified is what verify found.
type verified struct {
	Rev    string `json:"rev"`
	Commit string `json:"commit"`
	// Unconfined: the tests ran in the caller's own environment, with no
	// jail (--unconfined).
	Unconfined bool              `json:"unconfined"`
	Features   []verifiedFeature `json:"features"`
	Passed     bool              `json:"passed"`
}

// verifiedFeature is one feature's frozen test run on the commit.
type verifiedFeature struct {
	ID string `json:"id"`
	// VerdictCommit is the commit the feature's accepted verdict made
	// (refs/ctxgraphd/tested/<id>), "" when there is none.
	VerdictCommit string `json:"verdict_commit"`
	Test          string `json:"test"`
	Passed        bool   `json:"passed"`
	Summary       string `json:"summary"`
	TookMS        int64  `json:"took_ms"`
}

func (v verified) failed() []string {
	var out []string
	for _, f := range v.Features {
		if !f.Passed {
			out = append(out, f.ID)
		}
	}
	return out
}

// record is v as the report reads it, run at t.
func (v verified) record(t time.Time) control.VerifyRun {
	run := control.VerifyRun{Time: t.UTC(), Unconfined: v.Unconfined, Rev: v.Rev, Commit: v.Commit, Passed: v.Passed,
		Features: make([]control.VerifyFeature, 0, len(v.Features))}
	for _, f := range v.Features {
		vf := control.VerifyFeature{ID: f.ID, Passed: f.Passed}
		if !f.Passed {
			vf.Summary = f.Summary
		}
		run.Features = append(run.Features, vf)
	}
	return run
}

func (v verified) print(w io.Writer) {
	fmt.Fprintf(w, "verify at %s (%s)\n", v.Rev, gitrepo.Short(v.Commit))
	if v.Unconfined {
		fmt.Fprintln(w, "unconfined: the tests ran as you, in your own environment, with no jail")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tVERDICT COMMIT\tRESULT\tTIME")
	for _, f := range v.Features {
		result := "passes"
		if !f.Passed {
			result = "FAILS: " + f.Summary
		}
		commit := gitrepo.Short(f.VerdictCommit)
		if commit == "" {
			commit = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.ID, commit, result, (time.Duration(f.TookMS) * time.Millisecond).Round(time.Millisecond))
	}
	tw.Flush()
	switch {
	case len(v.Features) == 0:
		fmt.Fprintln(w, "no tested feature to verify")
	case v.Passed:
		fmt.Fprintf(w, "all %d pass\n", len(v.Features))
	}
}

// verify runs the frozen tests of the features ids (by default the tested
// ones, as of rev) on a throwaway checkout of rev, in the jail the daemon
// runs them in or, unconfined, in the caller's own environment. The
// repository is read through an index of its own in a temporary
// directory: the user's index, work tree and refs are not touched.
func verify(ctx context.Context, proj paths.Project, cfg *config.Config, ids []string, rev string, unconfined bool) (verified, error) {
	res := verified{Rev: rev, Unconfined: unconfined}
	list, _, err := progress.ReadFeatureList(proj.Progress())
	if err != nil {
		return res, fmt.Errorf("verify needs the feature list, for the features' tests: %w", err)
	}
	tmp, err := os.MkdirTemp("", "ctxgraphd-verify-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	repo, err := gitrepo.Open(ctx, gitrepo.Options{Dir: proj.Dir, Index: filepath.Join(tmp, "index"), Exclude: append([]string{".claude"}, cfg.Lanes.Copy...)})
	if err != nil {
		return res, err
	}
	commit, tree, err := repo.Resolve(ctx, rev)
	if err != nil {
		return res, withExitCode(exitUsage, fmt.Errorf("--at %s: %w; give a commit, a branch or a tag (git log --oneline lists the commits)", rev, err))
	}
	res.Commit = commit
	features, err := toVerify(ctx, repo, list, ids, rev, commit)
	if err != nil {
		return res, err
	}
	env := os.Environ()
	// The checkout holds the person's untracked files of lanes.copy, as
	// the daemon's test runs do.
	copies, err := captureCopies(ctx, proj, cfg)
	if err != nil {
		return res, err
	}
	opts := judge.Options{Project: proj, Repo: repo, Scratch: filepath.Join(tmp, "checkouts"), TestTimeout: cfg.Agent.Timeout, Copies: copies}
	if unconfined {
		// As a person or CI runs them: the commands as written, in a
		// checkout named as a clone of theirs is, their environment as it
		// is, no jail, no bounds, and one test at a time, since tests
		// written for one checkout may share a port or a file in HOME,
		// which the jail would have kept apart.
		opts.Jail, opts.Parallel, opts.AsThePerson = sandbox.TestJail{Off: true, Env: env}, 1, true
	} else {
		opts.Jail, opts.Parallel = testJail(env, proj, cfg, agentWritable(env, proj, cfg)), cfg.Limits.Parallel
	}
	j := judge.New(opts)
	if !unconfined {
		log, err := newLogger(config.Log{Level: "warn", Format: "console"}, proj)
		if err != nil {
			return res, err
		}
		defer log.Sync()
		if err := checkJail(ctx, cfg, j, log); err != nil {
			return res, err
		}
	}
	res.Passed = true
	tests := make([]string, len(features))
	for i, f := range features {
		tests[i] = f.Test
	}
	results := j.RunTests(ctx, tree, tests) // limits.parallel at once
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	for i, f := range features {
		vc, _ := repo.Ref(ctx, branch.TestedRef(f.ID))
		r := results[i]
		v := verifiedFeature{ID: f.ID, VerdictCommit: vc, Test: f.Test, Passed: r.Passed(), Summary: r.Summary(), TookMS: r.Took.Milliseconds()}
		res.Passed = res.Passed && v.Passed
		res.Features = append(res.Features, v)
	}
	return res, nil
}

// toVerify picks the features to run: those named, in the order given,
// each of which must be in the list with a test; or by default every
// feature tested as of rev: with a verdict commit in rev's history, or
// (without such commits, git.commit off) marked tested in the list when
// rev is HEAD.
func toVerify(ctx context.Context, repo *gitrepo.Repo, list *progress.List, ids []string, rev, commit string) ([]progress.Feature, error) {
	var out []progress.Feature
	if len(ids) > 0 {
		for _, id := range ids {
			f := list.Feature(id)
			switch {
			case f == nil:
				return nil, withExitCode(exitUsage, fmt.Errorf("%s is not in %s; the features are %s: name one of them, or none for every tested feature", id, progress.FeatureListFile, strings.Join(featureIDs(list), ", ")))
			case strings.TrimSpace(f.Test) == "":
				return nil, withExitCode(exitUsage, fmt.Errorf("%s has no test command in %s: there is nothing to run", id, progress.FeatureListFile))
			}
			out = append(out, *f)
		}
		return out, nil
	}
	for _, f := range list.Features {
		if strings.TrimSpace(f.Test) == "" {
			continue
		}
		vc, err := repo.Ref(ctx, branch.TestedRef(f.ID))
		if err != nil {
			return nil, err
		}
		switch {
		case vc != "":
			in, err := repo.IsAncestor(ctx, vc, commit)
			if err != nil {
				return nil, err
			}
			if in {
				out = append(out, f)
			}
		case f.Tested && rev == "HEAD":
			out = append(out, f)
		}
	}
	return out, nil
}

func featureIDs(l *progress.List) []string {
	ids := make([]string, 0, len(l.Features))
	for _, f := range l.Features {
		ids = append(ids, f.ID)
	}
	return slices.Clip(ids)
}
