package testreport

import (
	"fmt"
	"strings"
)

// Report is what a test runner reported of one run of a test command.
type Report struct {
	// Runner names the runner or runners whose report was read ("go
	// test", "pytest", "go test + cargo test"); "" when the command runs
	// no runner this package knows and its output holds no report of
	// one.
	Runner string `json:"runner,omitempty"`
	// Found says that every runner the command names printed its
	// report (for a script or npm test: that the output held one).
	Found bool `json:"found"`
	// Missing names the runners the command names whose report is not
	// in the output.
	Missing []string `json:"missing,omitempty"`
	// Ran counts the tests the runners reported on, skipped ones
	// included (go test's `run` events, node's `# tests`, jest's total);
	// Passed, Failed and Skipped split them. Failed also counts what
	// failed without a test to name: a Go package that did not build, a
	// jest suite or vitest file that failed to run, pytest's errors,
	// node's cancelled tests.
	Ran     int `json:"ran"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// Unguarded says that go test's events were read from a go test whose
	// test binaries ran without Instrument's guard (run by a script, or
	// with an -exec of its own): there test2json believes framing lines
	// the test's own code prints before its first test, so its passes are
	// no proof, and a pass is judged by the exit status (Unchecked).
	Unguarded bool `json:"unguarded,omitempty"`
	// Text is the output as a person reads it: for go test -json, the
	// text go test would have printed, rebuilt from the events' Output
	// fields, with every line that is not an event kept as it was; for
	// the other runners, the output itself.
	Text string `json:"-"`
}

// Outcome is a judgement of a test run by its exit status and its
// runner's report.
type Outcome string

const (
	// Pass: the command exited 0 and a known runner reported at least
	// one test that passed and none that failed.
	Pass Outcome = "pass"
	// Fail: the command exited non-zero, or exited 0 although its
	// runner reported a failure.
	Fail Outcome = "fail"
	// Vacuous: the command exited 0 but its runner reported that no
	// test ran (or none passed), or printed no report at all: the
	// test's process was ended before the runner could report, which is
	// what code does that ends its own test binary early.
	Vacuous Outcome = "vacuous"
	// Unchecked: the command exited 0 and runs no runner this package
	// knows, or one whose report of passes the test's code could have
	// printed (Report.Unguarded): the exit status is all there is to
	// judge by.
	Unchecked Outcome = "unchecked"
)

// zeroHint says, per runner, why a report of no test can come from a
// test that looks like it has tests.
var zeroHint = map[string]string{
	GoTest: " (no `run` event)",
	Node:   " (a test file that ends without running a test() of its own counts as none)",
}

// Verdict judges a run of the test command that exited with exitCode and
// printed r, and says why in one line a person reads in `ctl why`.
func (r Report) Verdict(exitCode int) (Outcome, string) {
	if exitCode != 0 {
		if r.Failed > 0 {
			return Fail, fmt.Sprintf("exited with status %d; %s reported %s failed", exitCode, r.Runner, plural(r.Failed, "test"))
		}
		return Fail, fmt.Sprintf("exited with status %d", exitCode)
	}
	if r.Runner == "" {
		return Unchecked, "unknown runner: judged by exit status alone"
	}
	if r.Failed > 0 {
		return Fail, fmt.Sprintf("exited 0, but %s reported %s failed", r.Runner, plural(r.Failed, "test"))
	}
	if !r.Found {
		return Vacuous, fmt.Sprintf("exited 0, but %s printed no report of its own (its process may have been ended early): a pass needs the runner's report", strings.Join(r.Missing, " and "))
	}
	if r.Ran == 0 {
		return Vacuous, fmt.Sprintf("%s reported 0 tests run%s: a pass needs at least one test", r.Runner, zeroHint[r.Runner])
	}
	if r.Passed == 0 {
		return Vacuous, fmt.Sprintf("%s reported %s run and none passed (%d skipped): a pass needs at least one test that passed", r.Runner, plural(r.Ran, "test"), r.Skipped)
	}
	if r.Unguarded {
		return Unchecked, fmt.Sprintf("%s reported %d passed, 0 failed, from a go test the daemon could not guard (a script's, or one with an -exec of its own), where the test's code can print the framing: judged by exit status alone", r.Runner, r.Passed)
	}
	if r.Skipped > 0 {
		return Pass, fmt.Sprintf("%s reported %d passed, %d skipped, 0 failed", r.Runner, r.Passed, r.Skipped)
	}
	return Pass, fmt.Sprintf("%s reported %d passed, 0 failed", r.Runner, r.Passed)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Read reads the output of a run of the test command test (as written,
// or as Instrument returned it): which runner the command uses and what
// that runner reported. output is what the command printed, stdout and
// stderr together. A runner is known from the command's simple commands;
// a script, make, or npm/yarn/pnpm test names none, and its output is
// searched for the report of any runner this package reads.
func Read(test string, output []byte) Report {
	calls, _ := scan(test, 0, true, 0, "")
	var named []string
	wrapper, unguarded := false, false
	for _, c := range calls {
		unguarded = unguarded || c.unguarded
		if c.wrapper {
			wrapper = true
		} else if !contains(named, c.runner) {
			named = append(named, c.runner)
		}
	}
	r := Report{Text: string(output)}
	if len(named) == 0 && !wrapper {
		return r
	}
	lines := splitLines(output)
	var found, seen []string // reports found whole; and those, or with a failure
	var parts []counts
	// Counts from a report that is incomplete still count: a failure
	// anywhere in the output wins.
	add := func(runner string, c counts, ok bool) {
		if ok {
			found = append(found, runner)
		}
		if ok || c.failed > 0 {
			seen = append(seen, runner)
		}
		parts = append(parts, c)
	}
	if contains(named, GoTest) || wrapper {
		c, text, ok, ended := readGo(lines)
		if ok {
			r.Text = text
			// A script's go test is none the daemon guarded.
			r.Unguarded = unguarded || wrapper
		}
		if len(ended) > 0 {
			ok = false
			for _, pkg := range ended {
				r.Missing = append(r.Missing, GoTest+" of "+pkg)
			}
		}
		add(GoTest, c, ok)
	}
	for _, runner := range textRunners {
		if contains(named, runner) || wrapper {
			c, ok := readText(runner, lines)
			add(runner, c, ok)
		}
	}
	for _, runner := range named {
		if !contains(found, runner) && (runner != GoTest || len(r.Missing) == 0) {
			r.Missing = append(r.Missing, runner)
		}
	}
	// The runners named and those found only in a wrapper's output, in
	// the order the report names them.
	var runners []string
	for _, runner := range append([]string{GoTest}, textRunners...) {
		if contains(named, runner) || contains(seen, runner) {
			runners = append(runners, runner)
		}
	}
	r.Runner = strings.Join(runners, " + ")
	r.Found = len(found) > 0 && len(r.Missing) == 0
	for _, c := range parts {
		r.Ran += c.ran
		r.Passed += c.passed
		r.Failed += c.failed
		r.Skipped += c.skipped
	}
	return r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// counts is one runner's report.
type counts struct{ ran, passed, failed, skipped int }

// splitLines splits output into lines, each with its newline (the last
// may have none).
func splitLines(output []byte) []string {
	var lines []string
	s := string(output)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}
