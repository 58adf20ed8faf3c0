// Package testreport reads a test runner's own report of a run, so that a
// pass means tests ran: an exit status of 0 alone is also what code gets
// that ends its own test process before any test runs (os.Exit(0) in an
// init function of a Go package makes `go test` print "ok" with no test
// run).
//
// Instrument turns a feature's test command into the command to run
// (go test gets -json and a guard of its framing, below; nothing else
// changes); Read reads that run's output into a Report; Report.Verdict
// judges it with the exit status: Pass, Fail, Vacuous (exit 0, but no
// test ran, none passed, or the runner printed no report at all) or
// Unchecked (no runner this package knows, or a go test it could not
// guard: the exit status alone, said plainly).
//
// # What is checked, per runner
//
//   - go test: the command is run with -json, and only whole JSON event
//     lines count: test-level run, pass, fail and skip events; a
//     package-level fail (or build-fail) with no failing test is one
//     failure. A package that passes with no run event ran no test, and
//     one that passes without the testing package's closing "PASS" line
//     is a test binary that ended before the testing package reported
//     (os.Exit(0) in init or in TestMain before m.Run): its report is
//     missing, even when other packages ran tests. Only the framing the
//     testing package marks counts: go test runs its binaries through an
//     -exec guard (goGuard) whose first line makes test2json take only
//     lines that carry the testing package's ^V marker for framing, and
//     a -v of the command is followed by -v=test2json (a plain -v turns
//     the marks off). What a binary prints before its first marked line
//     is text of the test "(before tests)" (GuardName), framing-like or
//     not. A go test the daemon cannot guard (one a script runs, one
//     with an -exec of its own, one inside a quoted program it cannot
//     rewrite) is still read, but its passes are no proof: such a run is
//     Unchecked, judged by its exit status (Report.Unguarded).
//   - pytest (pytest, py.test, python -m pytest): the closing summary
//     line, with or without -q ("2 passed, 1 skipped in 0.01s", "no tests
//     ran in 0.00s", "1 error in 0.04s"); errors are failures.
//   - node --test: the summary of the TAP and spec reporters ("# tests
//     3" / "ℹ tests 3", pass, fail, cancelled, skipped, todo); cancelled
//     tests are failures. A passing entry named by a file's path is node's
//     report of a whole file that ran no test() of its own (a plain
//     script, or one that called process.exit(0) before its tests
//     reported) and is not counted as a test.
//   - jest: the "Tests:" line; a failed suite ("Test Suites: 1 failed")
//     is a failure even with no test counted.
//   - vitest: the "Tests" line ("Tests  1 failed | 2 passed (3)"); a
//     failed test file counts like jest's suite.
//   - cargo test: every "test result:" line, summed over the test
//     binaries (unit, integration and doc tests). Where cargo's "Running"
//     and "Doc-tests" headings are in the output, each binary must close
//     with its own line after its heading, or the report is missing.
//   - a script (sh x.sh, ./x.sh, bash -c, make) and npm/yarn/pnpm test:
//     the command does not say which runner runs, so the output is
//     searched for the report of any of the above (go test's only where
//     the script itself ran it with -json). None found: Unchecked.
//
// For the text runners, a failure count on any summary line wins over
// passes, and otherwise the LAST summary line counts, since the runner
// prints its own at the very end. Pass needs at least one test that
// passed: a run whose tests were all skipped is Vacuous (pytest.skip()
// can be raised by the code under test).
//
// # What an attacker can still forge
//
// The output is, in part, the output of the code under test, running in
// the same process as the runner's reporting. These checks stop the plain
// trick (ending the test process early, with status 0) and fake text a
// test prints while the runner still reports after it; they do not make a
// report unforgeable. Each of the following was tried against the real
// runner (go 1.26, pytest 7.2, node 20):
//
//   - go test -json: a line printed by a test that looks like a JSON
//     event arrives inside an Output field (test2json wraps the test
//     binary's stdout and stderr) and is text; so is, with the guard,
//     a framing line without the testing package's marker, printed
//     before the first test (an init function's "=== RUN   TestX",
//     "--- PASS: TestX" and "PASS" followed by os.Exit(0)) or during
//     one. Without the guard, test2json believes such unmarked lines
//     until the first marked one, and that run would be a pass. But the
//     marker is a byte anyone can print: code in the test binary that
//     prints "\x16=== RUN   TestX", "\x16--- PASS: TestX" and "\x16PASS"
//     and ends with syscall.Exit(0) (which, unlike os.Exit, the testing
//     package's -test.paniconexit0 does not catch) forges a pass, in
//     process, guard or no guard. No run catches it (go test run by a
//     person, with or without -json, reports the same pass); a review of
//     the change does: code that prints the marker and ends its process
//     with syscall.Exit has no other use. Code can also write whole
//     event lines to go test's own stdout through /proc/PPID/fd/1, where
//     the process may open it.
//   - pytest: code that prints a closing line and ends with os._exit(0)
//     forges a pass when output capture is off (-s); with pytest's
//     default capture that print is captured and the run reads as
//     Vacuous, but code can still reach the original stdout.
//   - node --test: the spec reporter prints a test's console output raw
//     (the TAP reporter escapes it as a comment), and node's summary is
//     printed last, so the last summary is node's own; a process that
//     lives on after node (a detached child) could print after it.
//   - jest, vitest, cargo test: the same as pytest: a summary printed by
//     the code followed by an early exit with status 0.
//   - any command whose output mixes several programs (`go test -json
//     ./... && ./check`) reads the lines of all of them as one output.
//
// What the outcome is for remains the daemon's to decide; a report forged
// this way also needs code written to forge it, which a review of the
// change can see.
package testreport
