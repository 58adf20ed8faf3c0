package judge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"mvdan.cc/sh/v3/syntax"

	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/inputs"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/internal/testreport"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// TestResult is one run of a feature's test by the daemon itself.
type TestResult struct {
	Command  string
	ExitCode int    // -1 when the test did not run to an exit
	Output   string // the end of its output, stdout and stderr as they came
	Took     time.Duration
	// Tree is the tree the test ran on: a throwaway checkout of it.
	Tree gitrepo.Tree
	// CannotRun says why the test could not run at all (a file it names
	// is missing, its program is not found or not executable); "" when
	// it ran.
	CannotRun string
	// NotSetUp names the dependency directory (toolchain.DependencyDirs)
	// that holds the test's program and is not there (.venv of
	// .venv/bin/python): a tree nothing set up yet. CannotRun says it too.
	NotSetUp string
	// Interrupted: the daemon stopped it (ctl stop, a shutdown) before it
	// ended. It says nothing about the feature.
	Interrupted bool
	TimedOut    bool
	// Env is a failure of the machine or the confinement that the output
	// shows (diagnose.ReadEnvironment: a runner missing from PATH, a
	// registry reached for offline, a directory held read-only, a full
	// disk), nil when the failure, if any, is the code's. It is no
	// attempt's doing: a person fixes it.
	Env *diagnose.Environment
	// Outcome is what the test's runner itself reported, read off its
	// output (testreport): an exit status of 0 with no test run is
	// Vacuous, not a pass; Reason says it in a line.
	Outcome testreport.Outcome
	Reason  string
	// Limit names the bound of sandbox.max_* the test ran into, as its
	// output and exit status say, "" when none.
	Limit string
}

// Passed reports whether the test ran, exited 0, and its runner, where
// the daemon knows it, reported at least one test run and none failed.
func (r TestResult) Passed() bool {
	return r.CannotRun == "" && !r.Interrupted && !r.TimedOut && r.ExitCode == 0 &&
		r.Outcome != testreport.Vacuous && r.Outcome != testreport.Fail
}

// Summary is the result in a sentence, for traces and the next agent: the
// end of the output, without the start-up noise of a user's shell tools.
func (r TestResult) Summary() string {
	switch {
	case r.Interrupted:
		return fmt.Sprintf("`%s` was interrupted", r.Command)
	case r.CannotRun != "":
		return fmt.Sprintf("`%s` cannot run: %s", r.Command, r.CannotRun)
	case r.TimedOut && watches(r.Command, r.Output):
		return fmt.Sprintf("`%s` did not finish within %s: its runner waits for changes to run the tests again (watch mode), as it would in a person's shell; a test command runs the tests once (`vitest run`, `jest` without --watch, --watchAll=false, or CI=true written in the command)", r.Command, r.Took.Round(time.Second))
	case r.TimedOut:
		return fmt.Sprintf("`%s` did not finish within %s", r.Command, r.Took.Round(time.Second))
	case r.Env != nil:
		return fmt.Sprintf("`%s` failed (exit %d) for want of something on this machine, not for the code: %s", r.Command, r.ExitCode, r.Env.Line)
	case r.ExitCode == 0 && !r.Passed():
		return fmt.Sprintf("`%s` exited 0 but is not a pass: %s", r.Command, r.Reason)
	case r.ExitCode == 0 && r.Reason != "":
		return fmt.Sprintf("`%s` passed (exit 0, %s; %s)", r.Command, r.Took.Round(time.Millisecond), r.Reason)
	case r.ExitCode == 0:
		return fmt.Sprintf("`%s` passed (exit 0, %s)", r.Command, r.Took.Round(time.Millisecond))
	}
	if r.Limit != "" {
		return fmt.Sprintf("`%s` failed (exit %d) on the bound %s: %s", r.Command, r.ExitCode, r.Limit, textcut.Tail(diagnose.Quiet(r.Output), 400))
	}
	return fmt.Sprintf("`%s` failed (exit %d): %s", r.Command, r.ExitCode, textcut.Tail(diagnose.Quiet(r.Output), 400))
}

// maxTestOutput is how much of a test's output the daemon keeps: its end,
// where the verdict of a test runner is. maxReportOutput is how much of it
// is read for the runner's report (go test -json's events take more room
// than its text, and a report read off a cut output could miss its tests).
const (
	maxTestOutput   = 256 << 10
	maxReportOutput = 16 << 20
)

// RunTest runs a feature's test command on tree of the project's own work
// tree: RunTestIn(ctx, Root{}, tree, test).
func (j *Judge) RunTest(ctx context.Context, tree gitrepo.Tree, test string) TestResult {
	return j.RunTestIn(ctx, Root{}, tree, test)
}

// gitDirsOutside are the git directories of the project's repository and
// of root's (a lane's linked work tree) that lie outside the project
// directory, which a test run sees only through its checkout: a project
// in a subdirectory of its repository would otherwise show its test the
// repository's objects, every candidate's among them, read where the
// record of the run's inputs cannot see them.
func (j *Judge) gitDirsOutside(root Root) []string {
	var out []string
	for _, r := range []*gitrepo.Repo{j.opts.Repo, root.Repo} {
		if r == nil {
			continue
		}
		for _, d := range r.GitDirs() {
			if rel, err := filepath.Rel(j.opts.Project.Dir, d); (err != nil || !filepath.IsLocal(rel)) && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// RunTestIn runs a feature's test command on tree, of root's work tree, the
// way a tester should have, and with none of the daemon's powers: the
// agent's code runs in it.
//
// The test runs with /bin/sh in a throwaway checkout of exactly tree
// (gitrepo.Export: the bytes the verdict judges and a commit would hold,
// not the work tree, which an agent's process may still be changing),
// seen at the project's own path, confined by Options.Jail (sandbox:
// no network, no socket, no state directory, no secrets, an allow-listed
// environment, bounded processes, memory and files), in a process group
// of its own that a cancellation of ctx or the timeout ends whole. It
// returns when every process it started is gone; whatever it wrote is
// discarded with the checkout.
//
// The checkout is seen at the project's path whatever root is, so that a
// test sees the same paths in every lane; the dependencies git does not
// carry (toolchain.DependencyDirs) are root's, lent at the same place: a green run must
// never have verified another tree's dependencies.
func (j *Judge) RunTestIn(ctx context.Context, root Root, tree gitrepo.Tree, test string) TestResult {
	root = j.root(root)
	res := TestResult{Command: test, ExitCode: -1, Tree: tree}
	// The run's record of what it read of its tree (selection.go), kept
	// when it passed, the test's record dropped otherwise; its setting is
	// taken before it starts.
	var seen *inputs.Record
	if j.records(j.opts.Jail) {
		setting := j.setting(root)
		defer func() { j.noteRun(test, tree, setting, seen, res) }()
	}
	if strings.TrimSpace(test) == "" {
		res.CannotRun = "the feature has no test command"
		return res
	}
	tc := shellcmd.ParseTest(test)
	if tc.Invalid != "" {
		res.CannotRun = "it is not a valid shell command: " + tc.Invalid
		return res
	}
	began := time.Now()
	var scratch, checkout string
	var err error
	if j.opts.AsThePerson {
		// As a clone of the person's: named as their directory, in a
		// temporary directory of no name of ours; the output file is
		// kept apart from it.
		if scratch, err = j.scratchDir(); err == nil {
			var clone string
			if clone, err = os.MkdirTemp("", ""); err == nil {
				defer os.RemoveAll(clone)
				checkout = filepath.Join(clone, filepath.Base(j.opts.Project.Dir))
				err = root.Repo.Export(ctx, tree, checkout)
			}
		}
	} else {
		scratch, err = j.checkout(ctx, root.Repo, tree)
		checkout = filepath.Join(scratch, "tree")
	}
	checkedOut := time.Since(began)
	if scratch != "" {
		defer os.RemoveAll(scratch)
	}
	if err != nil {
		if ctx.Err() != nil {
			res.Interrupted = true
			return res
		}
		res.CannotRun = "no checkout of the tree to run it on: " + err.Error()
		return res
	}
	if err := j.opts.Copies.Place(checkout); err != nil {
		res.CannotRun = err.Error()
		return res
	}
	deps := j.lentDeps(root, checkout)
	for _, p := range tc.Scripts {
		// A program in a dependency directory (.venv/bin/python,
		// node_modules/.bin/jest) is looked for where the run will
		// see it: in the directory lent, not in the checkout.
		at := filepath.Join(checkout, filepath.FromSlash(p))
		top, rest, _ := strings.Cut(p, "/")
		if deps[top] != "" {
			at = filepath.Join(deps[top], filepath.FromSlash(rest))
		}
		if _, err := os.Lstat(at); errors.Is(err, os.ErrNotExist) {
			res.CannotRun = fmt.Sprintf("%s does not exist", p)
			if _, err := os.Lstat(filepath.Join(checkout, top)); rest != "" && deps[top] == "" && errors.Is(err, os.ErrNotExist) && slices.Contains(toolchain.DependencyDirs, top) {
				res.NotSetUp = top // neither lent nor in the tree
			}
			return res
		}
	}
	tctx, cancel := context.WithTimeout(ctx, j.opts.TestTimeout)
	defer cancel()
	// Nothing in the test's environment says that the daemon runs it (code
	// could pass there alone): the control API knows its processes by
	// their ancestry and process group (IsRunProcess), from the pid
	// recorded below.
	jail := j.opts.Jail
	jail.Checkout, jail.Mount = checkout, j.opts.Project.Dir
	jail.Env = slices.Clone(jail.Env)
	jail.Hide = append(slices.Clip(jail.Hide), j.gitDirsOutside(root)...)
	cgo := toolchain.UsesCgo(checkout)
	if cgo {
		// A cgo build is keyed by its package's files only: the tree's own
		// keys keep another tree's headers out of this one's build.
		jail.Env = append(jail.Env, toolchain.CgoTreeEnv(jail.Env, string(tree))...)
	}
	jail.DepsFrom = root.Dir
	for _, d := range toolchain.DependencyDirs {
		if lent, ok := deps[d]; ok {
			jail.Deps = append(jail.Deps, lent)
		}
	}
	// What the run reads of its tree is recorded (selection.go) by a view
	// of the checkout, bound in the checkout's place: closed once the
	// run's processes are gone (below), before the checkout is removed.
	// The warm-up runs on the checkout itself: what it reads (every
	// package, to build them) is not what the test read.
	//
	// A tree that uses cgo is not recorded: its environment names the
	// tree (CgoTreeEnv), so every tree is a new setting to it, and the
	// headers its packages include from elsewhere in the tree are read by
	// the warm-up's build, not by the test.
	warmJail := jail
	var view *inputs.View
	if j.records(jail) && !cgo {
		if view = j.viewOf(checkout, scratch); view != nil {
			jail.Checkout = view.Dir
			defer func() {
				rec, err := view.Close()
				if err != nil {
					j.log.Warn("a test run's record of its inputs is lost", zap.String("test", test), zap.Error(err))
					return
				}
				seen = &rec
			}()
		}
	}
	// The command as run asks known runners for a report the daemon can
	// read (go test -json); the result still names the test as written.
	// A pipe into a filter (`| tail -5`) cuts the report it carries: such
	// a test is judged by its exit status alone, and says so.
	run, piped := test, pipes(test)
	if !piped && !j.opts.AsThePerson {
		run = testreport.Instrument(test)
	}
	start := time.Now()
	warmCPU := j.warm(tctx, warmJail, checkout, tree)
	jc, err := jail.Command(tctx, run)
	if err != nil {
		res.CannotRun = err.Error()
		return res
	}
	// The output goes to a file, not a pipe: a process the test leaves
	// behind would hold a pipe open, and the test's end would wait for it.
	out, err := os.CreateTemp(scratch, "output-*.log")
	if err != nil {
		closeFiles(jc.Cmd.ExtraFiles)
		jc.Gone(0)
		res.CannotRun = "no file for its output: " + err.Error()
		return res
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := jc.Cmd
	cmd.Stdout, cmd.Stderr = out, out
	procgroup.Prepare(cmd)
	err = cmd.Start()
	closeFiles(cmd.ExtraFiles)
	if err == nil {
		// Until its processes are gone (below): what is left of them then
		// is nothing, confined (the pid namespace ends with the test's
		// shell), or, unconfined, what left the run's process group and
		// its ancestry, which nothing tells from a person's.
		pid := cmd.Process.Pid
		j.mu.Lock()
		j.tests[pid] = true
		j.mu.Unlock()
		defer func() {
			j.mu.Lock()
			delete(j.tests, pid)
			j.mu.Unlock()
		}()
		err = cmd.Wait()
	}
	res.Took = time.Since(start)
	cpu := warmCPU
	if cmd.ProcessState != nil {
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	// What a test costs the loop: the test in its jail, its caches
	// warmed first (took, and the CPU time of both's processes), and the
	// checkout before it. make bench reads it.
	j.log.Info("the daemon's test run ended", zap.String("test", test), zap.Duration("took", res.Took), zap.Duration("cpu", cpu), zap.Duration("checkout", checkedOut))
	if cmd.Process != nil {
		// What it left behind goes with it, and is gone when this returns.
		procgroup.KillAndWait(cmd.Process.Pid, procgroup.WaitDelay)
	}
	if !jc.Gone(procgroup.WaitDelay) {
		j.log.Warn("a test run's processes outlived it", zap.String("test", test))
	}
	raw := fileTail(out, maxReportOutput)
	report := testreport.Read(run, []byte(raw))
	res.Output = textTail(report.Text, maxTestOutput)
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
	res.Outcome, res.Reason = report.Verdict(res.ExitCode)
	if res.ExitCode != 0 {
		res.Limit = limitHit(jail.Limits, res.ExitCode, raw)
	}
	if j.opts.AsThePerson && res.ExitCode == 0 {
		// Nothing was added to ask the runner for a report the daemon
		// reads: the person's own run is judged as they judge it.
		res.Outcome, res.Reason = testreport.Unchecked, "run as written, as you run it: judged by its exit status alone"
	}
	if piped && res.ExitCode == 0 {
		res.Outcome, res.Reason = testreport.Unchecked, "its output goes through a pipe, which may cut the runner's report: judged by exit status alone"
	}
	if res.ExitCode != 0 {
		// The test saw its checkout at the project's path, whatever root.
		if e, ok := diagnose.ReadEnvironment(res.Output, diagnose.Setting{Place: diagnose.InJail, ProjectDir: j.opts.Project.Dir,
			Writable: jail.Writable, Caches: j.opts.Writable}); ok {
			res.Env = &e
		}
	}
	switch res.ExitCode {
	case 126:
		res.CannotRun = "the shell could not execute it (exit 126): " + textcut.Tail(diagnose.Quiet(res.Output), 300)
	case 127:
		res.CannotRun = "a program it runs was not found (exit 127): " + textcut.Tail(diagnose.Quiet(res.Output), 300)
	}
	return res
}

// checkout makes a new directory of its own under the judge's scratch
// directory, exports tree from repo into its "tree", and returns the
// directory ("" when none was made). The scratch directory is the daemon's
// (under its state directory), which no agent can read or write.
func (j *Judge) checkout(ctx context.Context, repo *gitrepo.Repo, tree gitrepo.Tree) (string, error) {
	if repo == nil {
		return "", errors.New("the judge has no repository")
	}
	dir, err := j.scratchDir()
	if err != nil {
		return "", err
	}
	// The tree goes one level down, so that the output file and the
	// checkout are removed together and the checkout holds nothing else.
	return dir, repo.Export(ctx, tree, filepath.Join(dir, "tree"))
}

// scratchPrefix begins the name of each test run's scratch directory, and
// viewDir is where in it the run's recording view is mounted (viewOf).
const (
	scratchPrefix = "t-"
	viewDir       = "view"
)

// scratchDir makes a new directory of a test run's own in the scratch
// directory, for its output file and its checkout.
func (j *Judge) scratchDir() (string, error) {
	base := j.opts.Scratch
	if base == "" {
		base = filepath.Join(j.opts.Project.StateDir, "checkouts")
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	dir := filepath.Join(base, scratchPrefix+rand.Text()[:12])
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// CheckJail tries the test runs' jail once (sandbox.TestJail.Check).
func (j *Judge) CheckJail(ctx context.Context) error { return j.opts.Jail.Check(ctx) }

// Sweep removes what test runs of an earlier daemon left in the scratch
// directory (a crash between a checkout and its removal), the recording
// views it left mounted there first: their server died with it, and a
// view no one serves refuses its removal.
func (j *Judge) Sweep() error {
	base := j.opts.Scratch
	if base == "" {
		base = filepath.Join(j.opts.Project.StateDir, "checkouts")
	}
	views, _ := filepath.Glob(filepath.Join(base, scratchPrefix+"*", viewDir))
	for _, v := range views {
		inputs.Detach(v) // not mounted, or gone: RemoveAll says what is left
	}
	return os.RemoveAll(base)
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// lentDeps are the dependency directories (toolchain.DependencyDirs) a test run on
// checkout is lent, by name: those the checkout lacks, from root's work
// tree; or, where a lane's work tree has none of its own (its agents
// installed nothing yet, as before any code), from the project's own
// tree, the person's, which is what a person who takes the lane's work
// runs it with. A checkout that carries one keeps its own.
func (j *Judge) lentDeps(root Root, checkout string) map[string]string {
	out := map[string]string{}
	for _, d := range toolchain.DependencyDirs {
		if _, err := os.Lstat(filepath.Join(checkout, d)); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		for _, from := range []string{root.Dir, j.opts.Project.Dir} {
			if fi, err := os.Stat(filepath.Join(from, d)); from != "" && err == nil && fi.IsDir() {
				out[d] = filepath.Join(from, d)
				break
			}
		}
	}
	return out
}

// limitHit names the bound of l that a test which exited with exit and
// printed out ran into, "" when nothing says it did. A write past the file
// bound kills the writer with SIGXFSZ (a shell reports 128+25) or fails
// with EFBIG; a fork past the process bound fails with EAGAIN; an
// allocation past the memory bound fails with ENOMEM, which runtimes
// report in their own words.
func limitHit(l sandbox.Limits, exit int, out string) string {
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(out, s) {
				return true
			}
		}
		return false
	}
	switch {
	case l.FileSize > 0 && (exit == 128+25 || has("File too large", "file size limit exceeded")):
		return fmt.Sprintf("sandbox.max_file_mb (%d MiB per file)", l.FileSize>>20)
	case l.Processes > 0 && has("fork: retry: Resource temporarily unavailable", "Cannot fork", "can't fork", "fork: Resource temporarily unavailable", "BlockingIOError: [Errno 11]"):
		return fmt.Sprintf("sandbox.max_processes (%d)", l.Processes)
	case l.Memory > 0 && has("MemoryError", "Cannot allocate memory", "cannot allocate memory", "out of memory", "Allocation failed - JavaScript heap", "memory allocation of"):
		return fmt.Sprintf("sandbox.max_memory_mb (%d MiB per process)", l.Memory>>20)
	}
	return ""
}

// watches reports whether a test command that ran out of time was a
// runner watching for changes rather than running: its output says so
// (vitest), or its command asks for it (jest's --watch and --watchAll,
// which print nothing more without a terminal, and react-scripts test,
// which watches unless CI is set). The daemon sets no CI in a test's
// environment, so that such a command behaves as in a person's shell.
func watches(test, output string) bool {
	if strings.Contains(output, "Waiting for file changes") || strings.Contains(output, "Watch Usage") {
		return true
	}
	for _, w := range strings.Fields(test) {
		if w == "--watch" || w == "--watchAll" || w == "--watch=true" || w == "--watchAll=true" {
			return true
		}
	}
	return strings.Contains(test, "react-scripts test") && !strings.Contains(test, "--watchAll=false") && !strings.Contains(test, "CI=")
}

// pipes reports whether test, as the shell reads it, sends a command's
// output through a pipe.
func pipes(test string) bool {
	f, err := syntax.NewParser().Parse(strings.NewReader(test), "")
	if err != nil {
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if b, ok := n.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			found = true
		}
		return !found
	})
	return found
}

// textTail is the end of s, at most max bytes, marked when cut (or when
// s was already cut).
func textTail(s string, max int) string {
	const mark = "[…earlier output cut…]\n"
	body, cut := strings.CutPrefix(s, mark)
	if len(body) > max {
		body, cut = body[len(body)-max:], true
	}
	if cut {
		return mark + body
	}
	return body
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

// warm fills the jail's caches (sandbox.TestJail.Caches) for the
// toolchains the checkout uses, by their warm-up commands, which compile
// and run none of the project's code: the test run that follows sees the
// caches read-only and finds its build done. A warm-up that fails costs
// nothing but time: the test builds what it needs itself, in its own
// /tmp. A tree whose warm-ups all succeeded is not warmed again: what
// they compile is keyed by the tree's content, and is in the caches (a
// sweep runs every frozen test on the same tree). It returns the CPU
// time the warm-ups took.
func (j *Judge) warm(ctx context.Context, jail sandbox.TestJail, checkout string, tree gitrepo.Tree) time.Duration {
	var cpu time.Duration
	if jail.Off || !sandbox.Confines || len(jail.Caches) == 0 {
		return cpu // unconfined, the caches are the test's to write anyway
	}
	j.mu.Lock()
	done := j.warmed[tree]
	j.mu.Unlock()
	if done {
		return cpu
	}
	ok := true
	for _, t := range toolchain.Used(checkout) {
		if t.Warm == "" {
			continue
		}
		began := time.Now()
		took, err := jail.Warming().Run(ctx, t.Warm, nil)
		cpu += took
		ok = ok && err == nil
		j.log.Debug("the verdict's caches warmed", zap.String("toolchain", t.Name), zap.Duration("took", time.Since(began)), zap.Duration("cpu", took), zap.Error(err))
	}
	if ok {
		j.mu.Lock()
		j.warmed[tree] = true
		j.mu.Unlock()
	}
	return cpu
}
