package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// Hand is a guarantee removed on purpose, the way a plausible bug would
// remove it: `make audit` removes each once, runs the tests that must catch
// it, and puts it back. Finishing work that touches the loop, the gates or
// the verdicts includes running it, and adding a row for each new
// guarantee.
type Hand struct {
	Guarantee string // as a person says it
	File      string // relative to the module root
	Old, New  string // Old occurs exactly once in File
	Pkg       string // the package whose tests catch it
	Run       string // go test -run pattern
}

// Hands are the guarantees of the loop, the gates and the verdicts.
var Hands = []Hand{
	{"lanes never exceed limits.parallel, whatever the number of ready features",
		"orchestrator/loop.go", "o.lanesAtWork() < o.cfg.Limits.Parallel {", "o.lanesAtWork() <= o.cfg.Limits.Parallel {",
		"orchestrator", "TestLanesNeverExceedTheBound"},
	{"a lane counts against limits.parallel while its test is checked before its code, not only while a run is at work",
		"orchestrator/lanes.go", "\t\tif l.active != nil || l.check != nil {\n\t\t\tn++", "\t\tif l.active != nil {\n\t\t\tn++",
		"orchestrator", "TestLanesNeverExceedTheBound|TestLanesCheckTheirTestsAtOnce"},
	{"a lane's evidence is copied into the project through no link",
		"orchestrator/lanes.go", "if err := treefile.WriteFile(o.opts.Project.Dir, path.Join(rel, name), data, 0o644); treefile.IsNotFile(err) {", "if err := os.WriteFile(filepath.Join(o.opts.Project.Dir, rel, name), data, 0o644); treefile.IsNotFile(err) {",
		"orchestrator", "TestALanesEvidenceIsCopiedThroughNoLink"},
	{"a link or a special file a run left in its evidence directory is a finding against it",
		"judge/verdict.go", "\tchanges = append(changes, evidenceNotFiles(root.Dir, in.Actor.Feature)...)\n", "\n",
		"judge", "TestJudgeRunFindsWhatInTheEvidenceIsNoFile"},
	{"the daemon's files in a tree agents write are reached through real directories only",
		"internal/treefile/treefile.go", "\t\tif !fi.IsDir() {\n\t\t\treturn &NotFileError", "\t\tif false {\n\t\t\treturn &NotFileError",
		"internal/treefile", "TestWriteFileFollowsNoLink"},
	{"a file the daemon reads in a tree agents write is a regular file, not a link",
		"internal/treefile/treefile.go", "\tif !before.Mode().IsRegular() {", "\tif false {",
		"internal/treefile", "TestReadFileFollowsNoLink"},
	{"lessons are written into CLAUDE.md only through a link to a file of the project, outside .claude and .git",
		"internal/claudemd/claudemd.go", "rel == \".claude\" || strings.HasPrefix(rel, \".claude/\") || rel == \".git\" || strings.HasPrefix(rel, \".git/\") {", "false {",
		"internal/claudemd", "TestAddToFileThroughALink"},
	{"a run's file tools write outside its tree only where its sandbox lets its programs write (not the whole temp directory)",
		"cmd/ctxgraphd/run.go", "keepOut := []string{p.Dir, filepath.Dir(p.StateDir), filepath.Dir(p.Socket), os.TempDir()}", "keepOut := []string{p.Dir, filepath.Dir(p.StateDir), filepath.Dir(p.Socket)}",
		"cmd/ctxgraphd", "TestALanesFileToolsWriteOnlyWhereItsSandboxDoes"},
	{"a cache or allow_write entry that holds the project, the lanes, the state or the system's temp directory is not writable",
		"sandbox/env.go", "if slices.ContainsFunc(keepOut, func(k string) bool { return filepath.IsAbs(k) && within(filepath.Clean(k), []string{d}) }) {", "if false {",
		"sandbox", "TestAgentWritable"},
	{"the daemon runs the feature's test itself before it accepts a claim",
		"judge/verdict.go", "if in.Rerun && !jd.Blocks() {", "if false && in.Rerun && !jd.Blocks() {",
		"orchestrator", "TestDaemonRerunDecidesTheVerdict"},
	{"a claim is accepted only when the daemon's run of the test passed",
		"orchestrator/verdict.go", "if !jd.Test.Passed() {", "if false {",
		"orchestrator", "TestDaemonRerunDecidesTheVerdict"},
	{"a run, its transition and its counters are committed before its process starts",
		"orchestrator/spawn.go", "\to.session.Run = &run\n\to.pending.Runs = append(o.pending.Runs, run)\n", "\to.session.Run = &run\n",
		"orchestrator", "TestRunIsPersistedBeforeItStarts"},
	{"a tester may stop only after a test, not after any command",
		"gates/gates.go", "\t\tif c.IsTest {", "\t\tif true || c.IsTest {",
		"gates", "TestTesterMustTestBeforeStopping"},
	{"a dependency is met when it is tested, not when it is completed",
		"statemachine/decide.go", "if d == nil || !d.Tested {", "if d == nil || (!d.Tested && d.Status != progress.Completed) {",
		"statemachine", "TestDecide"},
	{"a tester's claim without evidence is rejected",
		"orchestrator/runend.go", "\tif len(f.Evidence) == 0 {\n\t\treturn fmt.Sprintf(\"tested: true for %s came without evidence\", id)", "\tif false {\n\t\treturn fmt.Sprintf(\"tested: true for %s came without evidence\", id)",
		"orchestrator", "TestClaimWithoutEvidenceIsRejected"},
	{"what an enforced gate refuses in a run's change set is put back",
		"judge/verdict.go", "\t\tif f.Mode == gates.Enforce {\n\t\t\tjd.Restored = append(jd.Restored, f.Path)", "\t\tif false {\n\t\t\tjd.Restored = append(jd.Restored, f.Path)",
		"orchestrator", "TestCoderChangingItsFrozenTestIsRestored"},
	{"the acceptance tests are frozen when the initializer's list is accepted",
		"orchestrator/verdict.go", "\to.refreeze(jd.Tree, \"the feature list was accepted\")\n", "\n",
		"orchestrator", "TestCoderChangingItsFrozenTestIsRestored"},
	{"a feature's test is run, and must fail, before its first coding attempt",
		"statemachine/decide.go", "\t\tif in.CheckTests {\n\t\t\tswitch c.Red {", "\t\tif false {\n\t\t\tswitch c.Red {",
		"orchestrator", "TestRedBeforeGreenBlocksUnworkableTests"},
	{"a retry resumes the feature's coding session",
		"orchestrator/spawn.go", "if a.Resume && c.CoderSession != \"\" {", "if false {",
		"orchestrator", "TestRetryResumesCodingSession"},
	{"the watcher writes back a change of the list an enforced gate refuses",
		"orchestrator/featurelist.go", "\t\tif d.Blocks() {\n\t\t\tcontinue\n\t\t}\n", "\n",
		"orchestrator", "TestRevertsAreTracedUnderTheirGate"},
	{"a shutdown takes a claim no verdict judged off the disk",
		"orchestrator/orchestrator.go", "\to.dropUnjudgedClaim()\n\tif o.waitTimer != nil {", "\tif o.waitTimer != nil {",
		"orchestrator", "TestShutdownTakesAnUnjudgedClaimOffTheDisk"},
	{"a run whose hooks never check in is killed",
		"orchestrator/hookslive.go", "\to.cur.active.hooksKilled = true\n\to.cur.active.cancel()\n", "\to.cur.active.hooksKilled = true\n",
		"orchestrator", "TestHooksLiveKillsSilentRuns"},
	{"a gated call on a run's stream counts for hooks-live",
		"orchestrator/hookslive.go", "\t\t\tw.counted = true\n", "\n",
		"orchestrator", "TestQuickSilentRunsAreNotTrusted"},
	{"a gated call answered without its hook kills the run at once",
		"orchestrator/hookslive.go", "\t\t\t\tgo w.check() // answered without its hook: at once\n", "\n",
		"orchestrator", "TestHooksLiveKillsAtAGatedAnswerWithoutHook"},
	{"a file call refused on its input does not count for hooks-live",
		"orchestrator/hookslive.go", "if !(ev.IsError && gates.FailsInert(tool)) {", "if !(ev.IsError && gates.FailsInert(tool) && false) {",
		"orchestrator", "TestHooksLiveIgnoresAFileCallRefusedOnItsInput"},
	{"a run that called no gated tool is not held silent",
		"orchestrator/hookslive.go", "return act.hooks.usedGated() || testerEnd", "return true || testerEnd",
		"orchestrator", "TestHooksLiveWaitsForAGatedCall"},
	{"a tester that ended by itself must have checked in",
		"orchestrator/hookslive.go", "return act.hooks.usedGated() || testerEnd", "return act.hooks.usedGated() || testerEnd && false",
		"orchestrator", "TestHooksLiveHoldsATestersEnd"},
	{"a live run's long gated call is spared",
		"orchestrator/hookslive.go", "o.cur.active.run.ID != ev.runID || o.judge.IsLive(ev.runID) {", "o.cur.active.run.ID != ev.runID {",
		"orchestrator", "TestHooksLiveSparesLiveRuns"},
	{"a Skill call fires the PreToolUse hook, for hooks-live",
		"gates/gates.go", "var seenTools = []string{\"Skill\"}", "var seenTools = []string{}",
		"gates", "TestPreToolUseMatcher"},
	{"a file tool's failure is the only inert one",
		"gates/gates.go", "case \"Write\", \"Edit\", \"MultiEdit\", \"NotebookEdit\", \"Read\":", "case \"Write\", \"Edit\", \"MultiEdit\", \"NotebookEdit\", \"Read\", \"Bash\":",
		"gates", "TestFailsInert"},
	{"any hook of a run makes it live",
		"judge/judge.go", "\t\trg.live = true\n\t}\n\tstate := j.state(rg)", "\t}\n\tstate := j.state(rg)",
		"judge", "TestAnyHookMakesTheRunLive"},
	{"a tool the PreToolUse matcher names is gated",
		"gates/gates.go", "return matcher == \"\" || slices.Contains(strings.Split(matcher, \"|\"), tool)", "return matcher == \"\"",
		"gates", "TestHooked"},
	{"a run's signals reach its whole process group, not only claude",
		"internal/procgroup/procgroup.go", "_ = syscall.Kill(-pgid, sig)", "_ = syscall.Kill(pgid, sig)",
		"agents", "TestRunKillsLeftoversAfterExit"},
	{"a cancelled test run by the daemon ends its whole process group",
		"internal/procgroup/procgroup.go", "func Kill(pgid int) { Signal(pgid, syscall.SIGKILL) }", "func Kill(pgid int) { _ = syscall.Kill(pgid, syscall.SIGKILL) }",
		"judge", "TestRunTest"},
	{"the daemon's test runs have no network",
		"sandbox/testrun_linux.go", `"--unshare-pid", "--unshare-net",`, `"--unshare-pid",`,
		"judge", "TestRunTestIsConfined"},
	{"the daemon's test runs cannot create a Unix socket",
		"sandbox/testrun_linux.go", `"--seccomp", "3", "--info-fd", "4",`, `"--info-fd", "4",`,
		"judge", "TestRunTestIsConfined"},
	{"the daemon's test runs do not see the state and socket directories",
		"sandbox/testrun_linux.go", "\tfor _, h := range j.Hide {\n\t\tif isDir(h) {\n\t\t\targs = append(args, \"--tmpfs\", h)", "\tfor _, h := range j.Hide {\n\t\tif false {\n\t\t\targs = append(args, \"--tmpfs\", h)",
		"judge", "TestRunTestIsConfined"},
	{"the daemon's test runs get an allow-listed environment",
		"sandbox/testrun.go", `if ok && allowed[k] {`, `if _ = k; ok {`,
		"judge", "TestTestEnvIsAnAllowList"},
	{"a process a test run detached ends with it",
		"sandbox/testrun_linux.go", `"--unshare-user", "--unshare-pid",`, `"--unshare-user",`,
		"judge", "TestRunTestLeftoverProcessIsKilledAndTheResultKept"},
	{"the daemon's test runs on a checkout of the judged tree, not the work tree",
		"judge/testrun.go", "jail.Checkout, jail.Mount = checkout, j.opts.Project.Dir", "jail.Checkout, jail.Mount = j.opts.Project.Dir, j.opts.Project.Dir",
		"judge", "TestRunTestRunsOnTheTreeNotTheWorkTree"},
	{"a runner's report that no test ran is not a pass",
		"judge/testrun.go", "r.Outcome != testreport.Vacuous && ", "",
		"judge", "TestRunTestNeedsTheRunnersReport"},
	{"a hook is believed to be a run's only by the run's token",
		"judge/judge.go", "\t\tactor = rg.actor\n", "\t\tactor = gates.Actor{}\n",
		"judge", "TestHook"},
	{"the routes for people refuse a run's token",
		"control/server/server.go", "if r.Header.Get(control.RunTokenHeader) != \"\" {", "if false {",
		"control/server", "TestPeopleRoutesRefuseRuns"},
	{"a tested commit goes on the branch only when the tree held nothing else",
		"judge/commit.go", "\tcase v.Base != headTree:", "\tcase false && v.Base != headTree:",
		"judge", "TestCommit"},
	{"writes are judged where they land, symlinks resolved",
		"gates/paths.go", "\t\treal, err := filepath.EvalSymlinks(cur)", "\t\treal, err := cur, error(nil)",
		"gates", "TestWritesAreJudgedWhereTheyLand"},
	{"the sandbox of a run denies the frozen tests",
		"orchestrator/spawn.go", "\tfor _, p := range o.judge.Frozen().Sorted() {\n\t\tdeny = append(deny, in(p))\n\t}", "",
		"orchestrator", "TestRunPolicyConfinesWhatRunsMayTouch"},
	{"a run's end that is not its agent's doing (the account, the API) is never charged",
		"orchestrator/runend.go", "if f, ok := res.Failure(o.judge.StopFailure(act.run.ID)); ok && act.interrupt == \"\" {", "if f, ok := res.Failure(o.judge.StopFailure(act.run.ID)); false && ok && act.interrupt == \"\" {",
		"orchestrator", "TestAuthFailureOfACoderChargesNoAttempt"},
	{"a tester's run that the machine kept from testing (its test, or the daemon's) charges no attempt",
		"orchestrator/verdict.go", "if e := o.testEnvironment(ev, jd); e != nil {", "if e := o.testEnvironment(ev, jd); false && e != nil {",
		"orchestrator", "TestRunnerMissingAtTheVerdictStopsForAPerson|TestTestersSandboxFailureStopsForAPerson"},
	{"a test the machine keeps from running before any code neither blocks its feature nor lets its coding start",
		"orchestrator/frozen.go", "\tif r.Env != nil {\n\t\t// The machine, not the test, failed", "\tif false {\n\t\t// The machine, not the test, failed",
		"orchestrator", "TestRunnerMissingBeforeAnyCodeStopsForAPerson"},
	{"a wait never ends before a usage limit's reset",
		"orchestrator/loop.go", "\tif f.ResetsAt.After(until) {", "\tif false {",
		"orchestrator", "TestWaitUntil"},
	{"a run that repeats the same failing call is stopped as stuck",
		"agents/stuck.go", "\tif w.count == w.after {", "\tif false {",
		"agents", "TestStuckWatch"},
	{"run --exit-when-done does not end as a success with features never worked",
		"orchestrator/orchestrator.go", "if open := unsettled(o.canonical); len(open) > 0 {", "if open := unsettled(o.canonical); false && len(open) > 0 {",
		"orchestrator", "TestWaitOnBlockedIsNoSuccess"},
	{"a budget nearly spent is said before it stops anything",
		"orchestrator/runend.go", "\to.warnBudgets(run.Feature)\n", "\n",
		"orchestrator", "TestBudgetsWarnBeforeTheyStop"},
	{"no run may spend past what is left of the session's and the feature's budgets",
		"orchestrator/spawn.go", "MaxBudgetUSD: capUSD,", "MaxBudgetUSD: max(capUSD, o.cfg.Budget.RunUSD),",
		"orchestrator", "TestRunsAreCappedAtWhatIsLeftOfTheBudgets"},
	{"a run stopped at what was left of the session's budget is not charged",
		"orchestrator/runend.go", "if res.Subtype == agents.SubtypeMaxBudget && act.cappedBy != \"\" {", "if false {",
		"orchestrator", "TestARunStoppedAtTheBudgetsRestIsNotCharged"},
	{"a test run cannot write the verdict's caches (no test can plant a build that vouches for another tree)",
		"sandbox/testrun_linux.go", `args = append(args, "--ro-bind", c, c)`, `args = append(args, "--bind", c, c)`,
		"judge", "TestTheVerdictsCachesAreReadOnlyToTests"},
	{"the verdict's Go caches are caches the test runs read only",
		"cmd/ctxgraphd/run.go", "\t\tWritable: cfg.Sandbox.AllowWrite,\n\t\tCaches:   []string{goCache, modCache},", "\t\tWritable: append([]string{goCache, modCache}, cfg.Sandbox.AllowWrite...),",
		"cmd/ctxgraphd", "TestTestJailKeepsTheVerdictsCachesReadOnly"},
	{"the verdict's modules are its own, not the agents' module cache",
		"cmd/ctxgraphd/run.go", "\"GOCACHE=\"+goCache, \"GOMODCACHE=\"+modCache,", "\"GOCACHE=\"+goCache,",
		"cmd/ctxgraphd", "TestTestJailKeepsTheVerdictsCachesReadOnly"},
	{"a cgo tree's builds are keyed by the tree: another tree's header never reaches its verdict",
		"judge/testrun.go", "\tif toolchain.UsesCgo(checkout) {", "\tif false {",
		"judge", "TestACgoHeaderOutsideThePackageIsJudgedWithItsTree"},
	{"a test run cannot set up io_uring, whose sockets the rule on socket(2) would not see",
		"sandbox/testrun_linux.go", "{Code: jge, Jt: 0, Jf: 2, K: ioUringSetup},", "{Code: jge, Jt: 0, Jf: 2, K: 1 << 20},",
		"judge", "TestRunTestIsConfined"},
	{"a run is its id and its daemon's socket: another project's run of the same id is never killed",
		"agents/proc_linux.go", "\treturn run && sock\n", "\treturn run\n",
		"agents", "TestRunSparesAnotherProjectsRun|TestKillGroupChecksTheRun"},
	{"the list of an initializer killed for silent hooks is never taken",
		"orchestrator/runend.go", "act.silent = act.hooksKilled || o.untrusted(act, res)", "act.silent = act.hooksKilled",
		"orchestrator", "TestQuickSilentRunsAreNotTrusted"},
	{"the list of an initializer that did gated work without hooks and then failed is never taken",
		"orchestrator/runend.go", "\t\tif act.silent {\n\t\t\to.setAsideUnjudgedList(act.run)", "\t\tif false {\n\t\t\to.setAsideUnjudgedList(act.run)",
		"orchestrator", "TestListOfAFailedSilentRunIsNotTaken"},
	{"a mistake refused to one agent reaches the next agent of its role on another feature",
		"graph/precedent.go", "\tif subj.Role != \"\" {", "\tif false {",
		"orchestrator", "TestPrecedentCrossesFeatures"},
	{"an agent's own lesson reaches no other agent until a person promotes it",
		"graph/precedent.go", "\t\tif t.Source == store.SourceAgent {\n\t\t\treturn \"\"", "\t\tif false {\n\t\t\treturn \"\"",
		"graph", "TestSelect"},
	{"a failed attempt is diagnosed from the daemon's own run of the test",
		"orchestrator/runend.go", "\t\tcase !ev2.claimed:\n\t\t\tin.Rerun = true", "\t\tcase !ev2.claimed:\n\t\t\tin.Rerun = false",
		"orchestrator", "TestRetryReadsTheDiagnosis"},
	{"a broken list that is gone no longer holds the loop",
		"orchestrator/featurelist.go", "\t\tif held && o.problem == \"\" {", "\t\tif held && false {",
		"orchestrator", "TestABrokenListThatIsGoneHoldsNothing"},
	{"what happens in a run hangs from the run in the context graph",
		"judge/judge.go", "\t\tif ok && t.Parent == \"\" && l.Trace != t.ID {", "\t\tif false {",
		"orchestrator", "TestTracesFormAGraph"},
	{"a person's correction hangs from the block it answers",
		"orchestrator/links.go", "\tif c := o.counters[id]; c.BlockTrace != \"\" {", "\tif c := o.counters[id]; false {",
		"orchestrator", "TestTracesFormAGraph"},
	{"a person's retry starts a new attempt in the graph",
		"orchestrator/control.go", "\t\tc.AttemptTrace, c.AttemptNo, c.BlockTrace = \"\", 0, \"\"\n", "\n",
		"orchestrator", "TestTracesFormAGraph"},
	{"ctl trace shows the whole path that led to a trace",
		"graph/links.go", "\t\tl.Path = append(l.Path, pt)\n\t\tp = pt.Parent\n", "\t\tl.Path = append(l.Path, pt)\n\t\tbreak\n",
		"graph", "TestLinksOf"},
	{"an enforced deny guard denies what it matches",
		"gates/guards.go", "\t\td.Code, d.Mode = guards.CodeDenied, Enforce\n", "\t\td.Code, d.Mode = guards.CodeDenied, Warn\n",
		"judge", "TestHookGuards"},
	{"the daemon holds hooks to the active guards",
		"judge/guards.go", "\thits := gates.Guards(j.guards, a, s, p)\n", "\thits := gates.Guards(nil, a, s, p)\n",
		"judge", "TestHookGuards"},
	{"a hook deciding alone holds the guards the daemon left",
		"hook/hook.go", "\t\tguards = o.Guards\n", "\t\t_ = o.Guards\n",
		"hook", "TestDecidingAloneHoldsTheGuards"},
	{"an enforced guard on a path holds its file whatever program wrote it: the verdict puts the change back",
		"judge/verdict.go", "\tjd.Findings = append(jd.Findings, gates.GuardChanges(guards, in.Actor, changes, jd.Findings)...)\n", "\t_ = guards\n",
		"judge", "TestJudgeRunHoldsTheGuardsOfAFile"},
	{"the sandbox of a run denies what its role's enforced path guards name",
		"orchestrator/spawn.go", "\tdeny = append(deny, o.guardDenies(string(role))...)\n", "\t_ = o.guardDenies\n",
		"orchestrator", "TestRunPolicyHoldsTheGuardsOfAFile"},
	{"what the sandbox refuses for a guard is a violation of that guard",
		"judge/judge.go", "\t\t\t\t\td = gates.GuardRefusal(j.guards, actor, state, r)\n", "\t\t\t\t\td = nil\n",
		"judge", "TestHookRecordsWhatTheSandboxRefusedForAGuard"},
	{"a command guard reads the commands as the shell runs them (quotes, lists, sh -c, eval)",
		"gates/guardcmd.go", "\tfor _, c := range cmd.simple() {", "\tfor _, c := range cmd.simple()[:0] {",
		"gates", "TestCommandGuardReadsTheShell"},
	{"no guard denies the feature's own test command",
		"gates/guards.go", "\t\tif own && d.Blocks() {", "\t\tif false && own && d.Blocks() {",
		"gates", "TestAGuardDoesNotDenyTheFeaturesOwnTest"},
	{"a guard's patterns are bounded",
		"guards/guard.go", "\tif len(m.Command) > MaxPattern ||", "\tif false && len(m.Command) > MaxPattern ||",
		"guards", "TestGuardPatternsAreBounded"},
	{"a dangling link is judged as where it leads",
		"gates/paths.go", "fi.Mode()&fs.ModeSymlink != 0 && hops < maxLinkHops", "fi.Mode()&fs.ModeSymlink != 0 && hops < 0",
		"gates", "TestADanglingLinkIsJudgedAsWhereItLeads"},
	{"CLAUDE.md is no agent's to write",
		"gates/write.go", "\tcase isClaudeMd(rel):", "\tcase false && isClaudeMd(rel):",
		"gates", "TestClaudeMdIsNoAgentsToWrite"},
	{"a promoted lesson cannot close ctxgraphd's section of CLAUDE.md",
		"internal/claudemd/claudemd.go", "\t\tfor strings.Contains(line, Begin) || strings.Contains(line, End) {", "\t\tif strings.Contains(line, Begin) || strings.Contains(line, End) {",
		"internal/claudemd", "TestAddTakesNestedMarkersOut"},
	{"a guard's regular expression compiles to a bounded program",
		"guards/pattern.go", "\t\tif n := programSize(expr); n > MaxProgram {", "\t\tif n := programSize(expr); false && n > MaxProgram {",
		"guards", "TestAGuardsProgramIsBounded"},
	{"no guard is proposed against a feature's own file",
		"orchestrator/guards.go", "\t\tif f := o.owner(r.Match.Path); f != \"\" {", "\t\tif f := o.owner(r.Match.Path); false && f != \"\" {",
		"orchestrator", "TestNoGuardIsProposedAgainstAFeaturesOwnFile"},
	{"a refusal a run's command prints is believed only where its sandbox denies",
		"judge/judge.go", "\t\t\t\tif !gates.Believable(state, r, rg.denied) {", "\t\t\t\tif false && !gates.Believable(state, r, rg.denied) {",
		"judge", "TestHookBelievesOnlyWhatTheSandboxCanHaveRefused"},
	{"the hooks know what a run's sandbox denies it",
		"orchestrator/spawn.go", "\to.judge.Confine(token, denied)\n", "\t_ = denied\n",
		"orchestrator", "TestRunSandboxIsWhatItsHooksBelieve"},
	{"a run is told what was refused about its feature's files on other features",
		"graph/precedent.go", "\tfor _, t := range onFiles {", "\tfor _, t := range onFiles[:0] {",
		"graph", "TestSelect"},
	{"a trace about a file is found under each directory above it",
		"store/traceindex.go", "\tfor _, p := range pathKeys(t.Path) {", "\tfor _, p := range pathKeys(t.Path)[:min(1, len(t.Path))] {",
		"store", "TestIndexedQueriesMatchAScan"},
	{"a hook's refusal of a file tool names the project file",
		"judge/judge.go", "\tfile, _ := state.ProjectPath(gates.FilePath(p))\n", "\tfile := \"\"\n",
		"orchestrator", "TestTracesFormAGraph"},
	{"what the session spent before a restart counts against its budget after it",
		"orchestrator/orchestrator.go", "\t\ttotalCost: st.TotalCostUSD,\n", "\t\ttotalCost: 0,\n",
		"orchestrator", "TestSessionBudgetSurvivesARestart"},
	{"a run that keeps streaming is not killed as idle",
		"agents/runner.go", "\t\t\t\tidleTimer.Reset(r.opts.IdleTimeout)\n", "\t\t\t\t_ = r.opts.IdleTimeout\n",
		"agents", "TestStreamingRunOutlivesTheIdleTimeout"},
	{"a commit's session record is written in the commit's one transaction, not in one of its own",
		"store/store.go", "\treturn s.db.Update(func(tx *bolt.Tx) error {\n\t\tif c.Session != nil {\n\t\t\tif err := putJSON(tx.Bucket(bucketSession), keySession, c.Session); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n",
		"\tif c.Session != nil {\n\t\tif err := s.db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bucketSession), keySession, c.Session) }); err != nil {\n\t\t\treturn err\n\t\t}\n\t}\n\treturn s.db.Update(func(tx *bolt.Tx) error {\n\t\tif c.Session != nil {\n",
		"store", "TestAFailedWriteLeavesNothing"},
	{"a tester's run is given the Stop hook that holds it to its test",
		"gates/settings.go", `{claude: "Stop", kebab: "stop", roles: []string{Tester}},`, `{claude: "Stop", kebab: "stop", roles: []string{Coder}},`,
		"gates", "TestRunHooksLeaveOutOnlyWhatDecidesNothing"},
	{"every run's Bash commands reach the daemon's record",
		"gates/settings.go", `{claude: "PostToolUse", kebab: "post-tool-use", matcher: "Bash|Agent|Task"},`, `{claude: "PostToolUse", kebab: "post-tool-use", matcher: "Write"},`,
		"gates", "TestRunHooksLeaveOutOnlyWhatDecidesNothing"},
	{"a person's change of a frozen test between runs is taken into the record",
		"orchestrator/frozen.go", "if string(base) == o.session.LastTree {", "if true || string(base) == o.session.LastTree {",
		"orchestrator", "TestPersonsChangeToAFrozenTestIsAdopted"},
	{"nothing of an agent's runs beside its next call: a second subagent while one works is refused",
		"gates/beside.go", "case subagentTools[p.ToolName] && s.Subagents > 0:", "case subagentTools[p.ToolName] && s.Subagents > 99:",
		"gates", "TestNothingRunsBesideTheGates"},
	{"every run has Claude Code's background tasks off",
		"agents/runner.go", "\t\tbackgroundTasks+\"=1\",\n", "",
		"agents", "TestEnv"},
	{"a hook that appeared while a run was in flight is held and the session stops for a person",
		"judge/verdict.go", "changed = before.Changed(now)", "changed = nil",
		"orchestrator", "TestAHookWrittenDuringARunIsHeldForAPerson"},
	{"Claude Code's configuration in a subdirectory is no agent's to write",
		"gates/write.go", "if strings.EqualFold(d, \".claude\") {", "if d == \".claude\" && len(dirs) == 2 {",
		"gates", "TestNestedClaudeConfigIsNoAgentsToWrite"},
	{"text agents wrote reaches a person as text",
		"internal/textcut/textcut.go", "func Fold(s string) string { return Printable(strings.Join(strings.Fields(s), \" \")) }", "func Fold(s string) string { return strings.Join(strings.Fields(s), \" \") }",
		"cmd/ctxgraphd", "TestWhyDoesNotPassAgentsTerminalEscapes"},
	{"a lane's claim is judged on its tree merged onto the branch as it is",
		"orchestrator/runend.go", "in.Onto, in.OntoBase = head, o.cur.baseHead", "in.Onto, in.OntoBase = o.cur.baseHead, o.cur.baseHead",
		"orchestrator", "TestLanes(WorkFeaturesAtOnce|SendBackWhatBreaksTheBranch)"},
	{"a lane's run cut short is judged in its lane, not in the project's tree",
		"orchestrator/runend.go", "List: o.listOrEmpty(), Root: o.root(), // a lane's run", "List: o.listOrEmpty(), Root: judge.Root{}, // a lane's run",
		"orchestrator", "TestLeftoversOfALane"},
	{"features whose scopes overlap are never worked at once",
		"statemachine/scope.go", "func ScopesOverlap(a, b []string) bool {", "func ScopesOverlap(a, b []string) bool {\n\treturn false\n",
		"orchestrator", "TestLanesHoldFeaturesWhoseScopesOverlap"},
	{"a regression sweep runs limits.parallel tests at once",
		"judge/verdict.go", "slots := make(chan struct{}, j.parallel())", "slots := make(chan struct{}, 1)",
		"judge", "TestRunTestsRunsParallelAtOnce"},
	{"a sweep's failing test is run on the branch head alone before a lane's claim is charged with it",
		"orchestrator/runend.go", "\t\t\tin.Alone = headTree\n", "\t\t\t_ = headTree\n",
		"orchestrator", "TestBlameTheRightFeature/bomb/parallel-2/earlier-first-true"},
	{"in the project's own tree, a sweep's failing test is run on the tree the feature's work began from before the claim is charged with it",
		"orchestrator/runend.go", "\t\t\tin.Alone = gitrepo.Tree(o.counters[act.run.Feature].Base)\n", "\n",
		"orchestrator", "TestBlameTheRightFeature/bomb/parallel-1/earlier-first-true"},
	{"an earlier feature's test that fails without the claim's change too is not charged to the claim",
		"judge/verdict.go", "\tcase !r.Alone.Passed():\n\t\treturn BlameBranch\n", "\tcase !r.Alone.Passed():\n\t\treturn BlameClaim\n",
		"judge", "TestRegressionBlame|TestJudgeRunBlamesTheRightFeature"},
	{"a test that fails and then passes on the same tree is reported flaky, not charged to whoever ran it last",
		"judge/verdict.go", "\tcase r.Again != nil && r.Again.Passed():\n\t\treturn BlameFlaky\n", "\tcase r.Again != nil && r.Again.Passed():\n\t\treturn BlameClaim\n",
		"orchestrator", "TestBlameTheRightFeature/flaky/parallel-1/earlier-first-true"},
	{"a claim that really breaks an earlier feature's test is still charged: the test runs alone on the tree without the change, not on the candidate",
		"judge/verdict.go", "j.RunTestsIn(ctx, root, in.Alone, tests)", "j.RunTestsIn(ctx, root, candidate, tests)",
		"orchestrator", "TestBlameTheRightFeature/breaks/parallel-1/earlier-first-true"},
	{"a reopened feature is no longer tested: it is coded again, told why",
		"orchestrator/reopen.go", "\t\tf.Tested, f.Status = false, progress.Pending\n", "\t\tf.Status = progress.Pending\n",
		"orchestrator", "TestBlameTheRightFeature/bomb/parallel-1/earlier-first-true"},
	{"a reopened feature whose retries are used up is blocked for a person, not worked for ever",
		"orchestrator/reopen.go", "\t\tif a.Kind == statemachine.BlockFeature {", "\t\tif false {",
		"orchestrator", "TestAReopenedFeatureWithoutRetriesIsBlocked"},
	{"a reopening is traced against the earlier feature, for ctl why and the report",
		"orchestrator/reopen.go", "o.trace(store.Trace{Type: store.TraceViolation", "_ = (store.Trace{Type: store.TraceViolation",
		"orchestrator", "TestBlameTheRightFeature/bomb/parallel-1/earlier-first-true"},
	{"a run that ends while the session is paused has its outcome counted",
		"orchestrator/loop.go", "if state == statemachine.Stopped || state == statemachine.Waiting || (holding && out == nil) {", "if state == statemachine.Stopped || state == statemachine.Waiting || holding {",
		"orchestrator", "TestLanesPauseKeepsTheOutcomesOfRunsInFlight|TestPauseKeepsATestersFailure"},
	{"a failed attempt sends a completed feature back to coding",
		"orchestrator/loop.go", "a.Kind == statemachine.SpawnCoder && f != nil && f.Status == progress.Completed {", "false && f != nil {",
		"orchestrator", "TestPauseKeepsATestersFailure"},
	{"no lane outlives its daemon",
		"orchestrator/orchestrator.go", "\to.dropUnjudgedClaim()\n\to.retireLanes()\n", "\to.dropUnjudgedClaim()\n",
		"orchestrator", "TestLanesAfterARestart"},
	{"the lanes check their tests beside each other",
		"orchestrator/frozen.go", "\tif o.cur != o.home {\n\t\t// A lane's check", "\tif false {\n\t\t// A lane's check",
		"orchestrator", "TestLanesCheckTheirTestsAtOnce"},
	{"a run's PreToolUse hook fires for every tool an active guard judges",
		"gates/gates.go", "\t\tnames = append(names, tools...)\n", "\t\t_ = tools\n",
		"gates", "TestPreToolUseMatcher"},
	{"a run is not given Claude Code's tools that run beside its calls",
		"orchestrator/spawn.go", `"permissions": map[string]any{"deny": gates.DeniedTools}`, `"permissions": map[string]any{"deny": []string{}}`,
		"orchestrator", "TestRunSettingsDenyToolsThatRunBeside"},
	{"Monitor and Workflow are refused as running beside the agent's calls",
		"gates/beside.go", `var besideTools = map[string]bool{"Monitor": true, "Workflow": true}`, `var besideTools = map[string]bool{}`,
		"gates", "TestBackgroundToolsAreRefusedWhateverTheGuards"},
	{"a subagent of a daemon's run works in the run's own tree, not in a worktree of Claude Code's git",
		"gates/beside.go", `case subagentTools[p.ToolName] && in.Isolation != "":`, `case false && in.Isolation != "":`,
		"gates", "TestNothingRunsBesideTheGates"},
	{"a subagent of a daemon's run joins no agent team",
		"gates/beside.go", `case subagentTools[p.ToolName] && in.TeamName != "":`, `case false && in.TeamName != "":`,
		"gates", "TestNothingRunsBesideTheGates"},
	{"a daemon's run's WebFetch is held to sandbox.allowed_domains",
		"gates/gates.go", "\t\treturn judgeWebFetch(a, s, in.URL)\n", "\t\treturn nil\n",
		"gates", "TestWebFetchIsHeldToTheAllowedHosts"},
	{"an agent's WebFetch reads the documentation of sandbox.fetch_domains",
		"cmd/ctxgraphd/run.go", `Hosts: slices.Concat(cfg.Sandbox.AllowedDomains, cfg.Sandbox.FetchDomains)`, `Hosts: cfg.Sandbox.AllowedDomains`,
		"cmd/ctxgraphd", "TestAgentNetwork"},
	{"a run's PreToolUse hook fires for WebFetch",
		"gates/gates.go", `"Monitor", "Workflow", "WebFetch"}`, `"Monitor", "Workflow"}`,
		"gates", "TestPreToolUseMatcher"},
	{"a wildcard host allows the names below it, not others that end like it",
		"gates/network.go", `strings.HasSuffix(host, "."+base)`, `strings.HasSuffix(host, base)`,
		"gates", "TestWebFetchIsHeldToTheAllowedHosts"},
	{"a WebFetch URL with user information is refused",
		"gates/network.go", `u.Opaque != "" || u.User != nil ||`, `u.Opaque != "" ||`,
		"gates", "TestWebFetchIsHeldToTheAllowedHosts"},
	{"the offline hook knows the allowed hosts",
		"gates/offline.go", "\ts.Network = Network{Unconfined: o.Network.Unconfined, Hosts: slices.Clone(o.Network.Hosts)}\n", "",
		"gates", "TestOfflineRecordRoundTrips"},
	{"a restart kills what an interrupted run left outside its process group",
		"agents/proc_linux.go", "\tdefer killEscapees(runID, socket)\n\tif pgid <= 0 {", "\tif pgid <= 0 {",
		"agents", "TestKillGroupKillsWhatLeftTheGroup"},
	{"each run is given the hooks of its own role",
		"orchestrator/spawn.go", "hooks = gates.RunHooks(o.opts.Hook, string(role), matcher)", "hooks = gates.RunHooks(o.opts.Hook, string(agents.Coder), matcher)",
		"orchestrator", "TestRunIsGivenItsRolesHooks"},
	{"a coder may change the project's dependency manifests and lock files whatever its feature's scope, in the hooks and in the verdict's change set",
		"gates/write.go", "InScope(f.Scope, rel) || progress.SharedManifest(rel) {", "InScope(f.Scope, rel) {",
		"gates", "TestWritesAreJudgedWhereTheyLand|TestChangeSetsAreJudgedLikeWrites"},
	{"a manifest's name under node_modules, vendor, testdata or a hidden directory is no shared manifest",
		"progress/shared.go", `strings.HasPrefix(d, ".") || notProjectDirs[d]`, `strings.HasPrefix(d, "..")`,
		"progress", "TestSharedManifest"},
	{"scopes that meet only on shared manifests do not keep two features out of lanes at once",
		"statemachine/scope.go", "if progress.OnlySharedManifest(p) || progress.OnlySharedManifest(q) {", "if false {",
		"statemachine", "TestScopesOverlap"},
	{"a scope glob with a wildcard is not taken for a shared manifest",
		"progress/shared.go", `return !strings.ContainsAny(glob, "*?[]{}\\") && SharedManifest(ScopePattern(glob))`, `return SharedManifest(ScopePattern(glob))`,
		"statemachine", "TestScopesOverlap"},
	{"Go's checksum database state ($GOPATH/pkg/sumdb) is writable in the sandbox and made before a run, so that go get and go mod tidy verify a new module",
		"sandbox/env.go", `out = append(out, Cache{"Go", "its checksum database's state", "GOPATH",`, `_ = append(out, Cache{"Go", "its checksum database's state", "GOPATH",`,
		"sandbox", "TestCacheDirs|TestEssentialCaches"},
	{"a test's program in a dependency directory (.venv/bin/python) is looked for where its run sees it, in the directory lent, not in the checkout",
		"judge/testrun.go", `if top, rest, _ := strings.Cut(p, "/"); deps[top] != "" {`, `if top, rest, _ := strings.Cut(p, "/"); false && deps[top] != "" {`,
		"judge", "TestATestsProgramIsFoundInTheDependenciesItIsLent"},
	{"a lane with no dependency directory of its own is lent the project's",
		"judge/testrun.go", "for _, from := range []string{root.Dir, j.opts.Project.Dir} {", "for _, from := range []string{root.Dir} {",
		"judge", "TestATestsProgramIsFoundInTheDependenciesItIsLent"},
	{"the test jail binds a dependency directory lent from the project's own tree",
		"sandbox/testrun_linux.go", "for _, base := range []string{from, j.Mount} {", "for _, base := range []string{from} {",
		"judge", "TestATestsProgramIsFoundInTheDependenciesItIsLent"},
	{"the daemon's test runs and their warm-up see the agents' module cache, read-only, even below /tmp",
		"cmd/ctxgraphd/run.go", "		ReadOnly: deps,\n", "",
		"cmd/ctxgraphd", "TestTestJailKeepsTheVerdictsCachesReadOnly"},
	{"the test jail binds its read-only directories",
		"sandbox/testrun_linux.go", `args = append(args, "--ro-bind", r, r)`, `_ = r`,
		"cmd/ctxgraphd", "TestTestJailKeepsTheVerdictsCachesReadOnly"},
	{"a module the verdict's module cache lacks is read as a dependency never fetched, not as a directory to open",
		"internal/diagnose/environment.go", "(?:mkdir|open) \\S*/mod/cache/download/", "mkdir \\S*/pkg/mod/cache/download/",
		"internal/diagnose", "TestReadEnvironment"},
	{"a registry the sandbox lets runs reach but this machine cannot (crates.io, PyPI) stops the session, charging nothing",
		"internal/diagnose/environment.go", "\t{EnvOffline, InSandbox, readProxyUnreachable},\n", "",
		"internal/diagnose", "TestReadEnvironment"},
	{"verify --unconfined runs the frozen tests in the caller's own environment, with no jail",
		"cmd/ctxgraphd/verify.go", "\tif unconfined {\n\t\t// As a person or CI runs them", "\tif false {\n\t\t// As a person or CI runs them",
		"cmd/ctxgraphd", "TestScripts/verify_unconfined"},
	{"every verify run is recorded in the state directory for the report",
		"cmd/ctxgraphd/verify.go", "if err := report.RecordVerify(proj.StateDir, res.record(time.Now())); err != nil {", "if err := error(nil); err != nil {",
		"cmd/ctxgraphd", "TestScripts/verify_unconfined|TestReportSaysWhenVerifyRan"},
	{"ctxgraphd report says when verify last ran and what it found, with or without a daemon",
		"cmd/ctxgraphd/report.go", "r.Verify = report.ReadVerify(proj.StateDir)", "r.Verify = report.VerifyRuns{}",
		"cmd/ctxgraphd", "TestReportSaysWhenVerifyRan"},
	{"the daemon's report (GET /v1/report) says what verify last found",
		"orchestrator/control.go", "r.Verify = report.ReadVerify(o.opts.Project.StateDir)", "r.Verify = report.VerifyRuns{}",
		"orchestrator", "TestReportSaysWhatVerifyLastFound"},
	{"the report says which features a verify run failed, not that all passed",
		"internal/report/verify.go", "\tcase len(failed) == 0:\n", "\tcase len(failed) >= 0:\n",
		"internal/report", "TestVerifySayCountsFailures|TestReportSaysWhenVerifyLastRanAndWhatItFound"},
	{"the report reads the record of verify --unconfined, not only verify's",
		"internal/report/verify.go", "for _, unconfined := range []bool{false, true} {", "for _, unconfined := range []bool{false} {",
		"internal/report", "TestReportSaysWhenVerifyLastRanAndWhatItFound"},
	{"an unconfined test run finds the work tree's node_modules and virtualenv",
		"sandbox/testrun.go", "\t\t\t\tos.Symlink(d, filepath.Join(j.Checkout, rel))\n", "\n",
		"sandbox", "TestUnconfinedTestSeesTheWorkTreesDependencies"},
	{"nothing in a test run's environment names the daemon's run",
		"judge/testrun.go", "\tjail.Env = slices.Clone(jail.Env)\n", "\tjail.Env = append(slices.Clone(jail.Env), \"CTXGRAPH_TEST_RUN=1\")\n",
		"judge", "TestTestRunProcessesAreRunProcesses"},
	{"the daemon adds no CI=true to a test run's environment, and TMPDIR only where it has one",
		"sandbox/testrun.go", "\tif tmpdir {\n\t\tout = append(out, \"TMPDIR=/tmp\")\n\t}\n", "\tout = append(out, \"TMPDIR=/tmp\", \"CI=true\")\n",
		"sandbox", "TestTestEnvHoldsOnlyAllowListedNames"},
	{"the locale reaches a test run by its categories' names, not by the LC_ prefix",
		"sandbox/testrun.go", `if ok && allowed[k] {`, `if ok && (allowed[k] || strings.HasPrefix(k, "LC_")) {`,
		"sandbox", "TestTestEnvHoldsOnlyAllowListedNames"},
	{"a running test's processes are known by the process group its shell leads (an orphan that kept it)",
		"judge/proc_linux.go", "\t\tif groups[group] {", "\t\tif false && groups[group] {",
		"judge", "TestTestRunProcessesAreRunProcesses"},
	{"a secret file, not only a secret directory, reads nothing in the jail",
		"sandbox/testrun_linux.go", "\t\t\targs = append(args, \"--ro-bind\", \"/dev/null\", p)", "\t\t\t_ = p",
		"sandbox", "TestSecretPathsAreUnreadableInTheJail"},
	{"a secret reached through a link reads nothing in the jail",
		"sandbox/testrun_linux.go", "\t\tp := secretPath(s)\n", "\t\tp := s\n",
		"sandbox", "TestSecretPathsAreUnreadableInTheJail"},
	{"no writable directory bound into the jail brings a secret back",
		"sandbox/testrun_linux.go", "\t// A hidden directory is an empty one that nothing can be written to\n", "\tfor _, w := range j.Writable {\n\t\tif isDir(w) {\n\t\t\targs = append(args, \"--bind\", w, w)\n\t\t}\n\t}\n\t// A hidden directory is an empty one that nothing can be written to\n",
		"sandbox", "TestSecretPathsAreUnreadableInTheJail"},
	{"go test's binaries run through the guard, so that only the testing package's marked framing is a report",
		"internal/testreport/command.go", "\t\tif len(execs) == 0 {\n\t\t\tadd += \" -exec=\" + shellQuote(goGuard)\n\t\t}\n", "\n",
		"internal/testreport", "TestInstrumentGivesGoTheGuard"},
	{"a -v of go test keeps the testing package's marks (-v=test2json after it)",
		"internal/testreport/command.go", "\t\tif v >= 0 && !vJSON {", "\t\tif false && !vJSON {",
		"internal/testreport", "TestInstrumentGivesGoTheGuard"},
	{"what a Go test binary prints before its first test is text, and no closing PASS of its package",
		"internal/testreport/gojson.go", "\t\t\tif e.Action == \"output\" {\n\t\t\t\tcontinue\n\t\t\t}\n", "\n",
		"internal/testreport", "TestGuardedForgeryBesideAnHonestPackage"},
	{"a go test the daemon could not guard is judged by its exit status, not by its report's passes",
		"internal/testreport/report.go", "\tif r.Unguarded {", "\tif false {",
		"internal/testreport", "TestReadCaptured"},
	{"the Go forgery (framing printed in init, then exit 0) is not a pass of the daemon's own run",
		"internal/testreport/command.go", "\t\tif len(execs) == 0 {\n\t\t\tadd += \" -exec=\" + shellQuote(goGuard)\n\t\t}\n", "\n",
		"judge", "TestRunTestTrustsOnlyTheTestingPackagesFraming"},
	{"a test that runs out of time watching for changes says so, and how to run the tests once",
		"judge/testrun.go", "\tcase r.TimedOut && watches(r.Command, r.Output):", "\tcase false && watches(r.Command, r.Output):",
		"judge", "TestTimedOutWatchModeSaysSo"},
}

// handTimeout bounds one audit run: a guarantee's test fails in seconds.
const handTimeout = 3 * time.Minute

// audit runs every hand mutation whose guarantee matches only on a staged
// copy of the sources and reports whether each was caught.
func audit(only *regexp.Regexp) bool {
	src, err := stage()
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(src)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "guarantee removed\tcaught by\tin")
	ok := true
	for _, h := range Hands {
		if !only.MatchString(h.Guarantee) {
			continue
		}
		fmt.Printf("audit: without %q…\n", h.Guarantee)
		caught, took, err := h.try(src)
		switch {
		case err != nil:
			fmt.Fprintf(tw, "%s\tERROR: %v\t\n", h.Guarantee, err)
			ok = false
		case !caught:
			fmt.Fprintf(tw, "%s\tNOTHING (%s ./%s passed)\t%s\n", h.Guarantee, h.Run, h.Pkg, took.Round(time.Second))
			ok = false
		default:
			fmt.Fprintf(tw, "%s\t%s (./%s)\t%s\n", h.Guarantee, h.Run, h.Pkg, took.Round(time.Second))
		}
	}
	fmt.Println()
	tw.Flush()
	return ok
}

// try removes the guarantee in the staged copy, runs its tests and puts it
// back. caught is true when the tests failed.
func (h Hand) try(src string) (caught bool, took time.Duration, err error) {
	path := filepath.Join(src, h.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return false, 0, err
	}
	if n := strings.Count(string(orig), h.Old); n != 1 {
		return false, 0, fmt.Errorf("%s holds the code to change %d times, not once: update the audit's row", h.File, n)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(orig), h.Old, h.New, 1)), 0o644); err != nil {
		return false, 0, err
	}
	defer os.WriteFile(path, orig, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), handTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-short", "-count=1", "-run", h.Run, "./"+h.Pkg)
	cmd.Dir = src
	cmd.Env = unitTestEnv()
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	took = time.Since(start)
	switch {
	case ctx.Err() != nil:
		return false, took, fmt.Errorf("the tests did not end within %s", handTimeout)
	case runErr == nil:
		return false, took, nil
	case strings.Contains(string(out), "[build failed]") || strings.Contains(string(out), "[setup failed]"):
		return false, took, fmt.Errorf("the mutated code does not build: %s", firstLines(string(out), 5))
	}
	return true, took, nil
}

// unitTestEnv is the environment of unit tests: nothing that makes a test
// drive the real Claude Code CLI.
func unitTestEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "CI" && k != "CTXGRAPHD_TEST_CLAUDE" && k != "GOFLAGS" {
			env = append(env, kv)
		}
	}
	return env
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
