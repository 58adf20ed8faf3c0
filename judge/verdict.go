package judge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// TestResult is one run of a feature's test by the daemon itself.
type TestResult struct {
	Command  string
	ExitCode int    // -1 when the test did not run to an exit
	Output   string // the end of its output, stdout and stderr as they came
	Took     time.Duration
	// CannotRun says why the test could not run at all (a file it names
	// is missing, its program is not found or not executable); "" when
	// it ran.
	CannotRun string
	// Interrupted: the daemon stopped it (ctl stop, a shutdown) before it
	// ended. It says nothing about the feature.
	Interrupted bool
	TimedOut    bool
}

// Passed reports whether the test ran and exited 0.
func (r TestResult) Passed() bool {
	return r.CannotRun == "" && !r.Interrupted && !r.TimedOut && r.ExitCode == 0
}

// Summary is the result in a sentence, for traces and the next agent.
func (r TestResult) Summary() string {
	switch {
	case r.Interrupted:
		return fmt.Sprintf("`%s` was interrupted", r.Command)
	case r.CannotRun != "":
		return fmt.Sprintf("`%s` cannot run: %s", r.Command, r.CannotRun)
	case r.TimedOut:
		return fmt.Sprintf("`%s` did not finish within %s", r.Command, r.Took.Round(time.Second))
	case r.ExitCode == 0:
		return fmt.Sprintf("`%s` passed (exit 0, %s)", r.Command, r.Took.Round(time.Millisecond))
	}
	return fmt.Sprintf("`%s` failed (exit %d): %s", r.Command, r.ExitCode, textcut.Tail(r.Output, 400))
}

// maxTestOutput is how much of a test's output the daemon keeps: its end,
// where the verdict of a test runner is.
const maxTestOutput = 256 << 10

// RunTest runs a feature's test command the way a tester should have: with
// /bin/sh in the project directory, in the daemon's own environment as
// captured at its start (nothing an agent wrote, no agent-writable
// directory on PATH), in a process group of its own that a cancellation of
// ctx or the timeout ends whole. It returns when every process of the
// group is gone.
func (j *Judge) RunTest(ctx context.Context, test string) TestResult {
	res := TestResult{Command: test, ExitCode: -1}
	if strings.TrimSpace(test) == "" {
		res.CannotRun = "the feature has no test command"
		return res
	}
	tc := shellcmd.ParseTest(test)
	if tc.Invalid != "" {
		res.CannotRun = "it is not a valid shell command: " + tc.Invalid
		return res
	}
	for _, p := range tc.Scripts {
		if _, err := os.Stat(filepath.Join(j.opts.Project.Dir, filepath.FromSlash(p))); errors.Is(err, os.ErrNotExist) {
			res.CannotRun = fmt.Sprintf("%s does not exist", p)
			return res
		}
	}
	tctx, cancel := context.WithTimeout(ctx, j.opts.TestTimeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "/bin/sh", "-c", test)
	cmd.Dir = j.opts.Project.Dir
	cmd.Env = j.opts.Env
	// The output goes to a file, not a pipe: a process the test leaves
	// behind would hold a pipe open, and the test's end would wait for it.
	out, err := os.CreateTemp("", "ctxgraphd-test-*.log")
	if err != nil {
		res.CannotRun = "no file for its output: " + err.Error()
		return res
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	procgroup.Prepare(cmd)
	start := time.Now()
	err = cmd.Run()
	res.Took = time.Since(start)
	if cmd.Process != nil {
		// What it left behind goes with it, and is gone when this returns.
		procgroup.KillAndWait(cmd.Process.Pid, procgroup.WaitDelay)
	}
	res.Output = fileTail(out, maxTestOutput)
	switch {
	case ctx.Err() != nil:
		res.Interrupted = true
		return res
	case tctx.Err() != nil:
		res.TimedOut = true
		return res
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		res.CannotRun = err.Error()
		return res
	}
	switch res.ExitCode {
	case 126:
		res.CannotRun = "the shell could not execute it (exit 126): " + textcut.Tail(res.Output, 300)
	case 127:
		res.CannotRun = "a program it runs was not found (exit 127): " + textcut.Tail(res.Output, 300)
	}
	return res
}

// fileTail is the end of f's content, at most max bytes.
func fileTail(f *os.File, max int64) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := int64(0)
	if fi.Size() > max {
		off = fi.Size() - max
	}
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	if off > 0 {
		return "[…earlier output cut…]\n" + string(buf[:n])
	}
	return string(buf[:n])
}

// WriteEvidence keeps the daemon's own run of a feature's test in the
// feature's evidence directory, and returns its project-relative path. It
// is the evidence a verdict rests on; what a tester saved is extra.
func (j *Judge) WriteEvidence(feature string, attempt int, what string, r TestResult) (string, error) {
	rel := fmt.Sprintf(".claude/progress/%s/%s/daemon-%s-attempt-%d.log", progress.EvidenceDir, feature, what, attempt)
	path := filepath.Join(j.opts.Project.Dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# ctxgraphd ran the test of %s itself (%s, attempt %d)\n", feature, what, attempt)
	fmt.Fprintf(&b, "$ %s\n", r.Command)
	b.WriteString(r.Output)
	if !strings.HasSuffix(r.Output, "\n") && r.Output != "" {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# %s\n", r.Summary())
	if err := atomicfile.Write(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return rel, nil
}

// RunEnd is a run that ended by itself, to be judged by its outcome.
type RunEnd struct {
	Actor   guard.Actor
	Attempt int
	// Base is the work tree when the run started.
	Base gitrepo.Tree
	// List is the canonical feature list: the feature's scope and test.
	List *progress.List
	// Rerun asks for the daemon's own run of the feature's test: a
	// tester's tested: true whose own record holds.
	Rerun bool
}

// Judgement is what a run came to, judged by its outcome.
type Judgement struct {
	// Changes is everything the run changed in the project, by any route.
	Changes []gitrepo.Change
	// Findings are the changes a gate does not let stand. Those of an
	// enforced gate were restored as they were before the run.
	Findings []guard.Finding
	Restored []string
	// Tree is the work tree after the run, once restored: what the test
	// ran on, and what a commit of the verdict holds.
	Tree gitrepo.Tree
	// Test is the daemon's own run of the feature's test, when asked.
	Test *TestResult
	// Err: the outcome could not be judged (the repository failed). The
	// run's claims are not taken.
	Err error
}

// Blocks reports whether an enforced gate refused part of what the run did.
func (jd Judgement) Blocks() bool {
	for _, f := range jd.Findings {
		if f.Mode == guard.Enforce {
			return true
		}
	}
	return false
}

// JudgeRun judges what a run produced. Every process of the run must be
// gone: what the tree holds now is all the run did. The run's change set
// (its base to now) meets the rules for its role (guard.JudgeChanges); what
// an enforced gate refuses is restored as it was at the run's start; then,
// when asked, the daemon runs the feature's test on the tree as it is.
func (j *Judge) JudgeRun(ctx context.Context, in RunEnd) Judgement {
	var jd Judgement
	repo := j.opts.Repo
	after, err := repo.Snapshot(ctx)
	if err != nil {
		jd.Err = fmt.Errorf("snapshot after %s: %w", in.Actor.Run, err)
		return jd
	}
	if jd.Changes, err = repo.Changes(ctx, in.Base, after); err != nil {
		jd.Err = fmt.Errorf("changes of %s: %w", in.Actor.Run, err)
		return jd
	}
	j.mu.Lock()
	state := j.state(nil)
	guards := slices.Clone(j.guards)
	j.mu.Unlock()
	state.List = in.List
	changes := make([]guard.Change, len(jd.Changes))
	for i, c := range jd.Changes {
		changes[i] = guard.Change{Path: c.Path, Kind: c.Kind.String()}
	}
	jd.Findings = guard.JudgeChanges(j.opts.Modes, in.Actor, state, changes)
	// The project's guards that hold a file hold it whatever wrote it.
	jd.Findings = append(jd.Findings, guard.GuardChanges(guards, in.Actor, changes, jd.Findings)...)
	for _, f := range jd.Findings {
		if f.Mode == guard.Enforce {
			jd.Restored = append(jd.Restored, f.Path)
		}
	}
	jd.Tree = after
	if len(jd.Restored) > 0 {
		if err := repo.Restore(ctx, in.Base, jd.Restored); err != nil {
			jd.Err = fmt.Errorf("restoring what %s must not have changed: %w", in.Actor.Run, err)
			return jd
		}
		if jd.Tree, err = repo.Snapshot(ctx); err != nil {
			jd.Err = fmt.Errorf("snapshot after restoring: %w", err)
			return jd
		}
	}
	if in.Rerun && !jd.Blocks() {
		test := ""
		if f := in.List.Feature(in.Actor.Feature); f != nil {
			test = f.Test
		}
		r := j.RunTest(ctx, test)
		jd.Test = &r
	}
	return jd
}
