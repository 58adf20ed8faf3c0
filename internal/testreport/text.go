package testreport

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	// ansi matches the colour and cursor sequences a runner forced into
	// colour (FORCE_COLOR, --color=yes) writes around its summary.
	ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

	// pytest's closing line: "=== 2 passed, 1 skipped in 0.01s ===",
	// "1 failed, 1 passed in 0.01s" (-q), "no tests ran in 0.00s",
	// "1 error in 0.04s", with "(0:01:02)" after long runs.
	pytestLine = regexp.MustCompile(`^(?:=+ )?((?:\d+ [a-z]+)(?:, \d+ [a-z]+)*|no tests ran) in [0-9.]+s(?: \([0-9:.]+\))?(?: =+)?$`)
	countPart  = regexp.MustCompile(`(\d+) ([a-z]+)`)

	// node --test's summary, TAP ("# tests 3") and spec ("ℹ tests 3"),
	// at the start of a line: the TAP reporter escapes a test's own
	// "# …" output as "# \# …".
	nodeLine = regexp.MustCompile(`^(?:#|ℹ) (tests|pass|fail|cancelled|skipped|todo) (\d+)$`)
	// A whole test file reported as one test: node does that for a file
	// that ran no test() of its own (or ended its process first), and
	// names it by its path. TAP: "ok 1 - /abs/x.test.js", spec:
	// "✔ /abs/x.test.js (96.7ms)".
	nodeFilePass = regexp.MustCompile(`^(?:ok \d+ - |✔ )(\S+\.[cm]?[jt]sx?)(?: \([0-9.]+m?s\))?$`)

	// jest: "Tests:       1 failed, 1 skipped, 3 passed, 5 total" and
	// "Test Suites: 3 failed, 1 passed, 4 total".
	jestTests  = regexp.MustCompile(`^Tests:\s+(.*\d+ total)$`)
	jestSuites = regexp.MustCompile(`^Test Suites:\s+(.*\d+ total)$`)

	// vitest: "      Tests  1 failed | 3 passed | 1 skipped (5)" and
	// " Test Files  1 failed | 1 passed (2)".
	vitestTests = regexp.MustCompile(`^\s*Tests\s{2,}(.*\S)\s+\((\d+)\)$`)
	vitestFiles = regexp.MustCompile(`^\s*Test Files\s{2,}(.*\S)\s+\((\d+)\)$`)

	// cargo test: the harness's closing line of each test binary, and
	// cargo's heading before each binary (on stderr).
	cargoResult = regexp.MustCompile(`^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; \d+ filtered out`)
	cargoHead   = regexp.MustCompile(`^ {5}Running \S+(?: \S+)?(?: \(.+\))?$|^ {3}Doc-tests \S+$`)
)

// clean is a line as its runner meant it: without its newline, carriage
// return or colour.
func clean(line string) string {
	line = strings.TrimRight(line, "\r\n")
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = ansi.ReplaceAllString(line, "")
	}
	return strings.TrimRight(line, " \r")
}

// readText reads a text runner's report off its output.
func readText(runner string, lines []string) (counts, bool) {
	switch runner {
	case Pytest:
		return readPytest(lines)
	case Node:
		return readNode(lines)
	case Jest:
		return readJest(lines)
	case Vitest:
		return readVitest(lines)
	case Cargo:
		return readCargo(lines)
	}
	return counts{}, false
}

// parts reads "1 failed, 2 passed" (or "1 failed | 2 passed") into words
// and numbers.
func parts(s string) map[string]int {
	m := map[string]int{}
	for _, p := range countPart.FindAllStringSubmatch(s, -1) {
		m[p[2]] += atoi(p[1])
	}
	return m
}

// atoi reads a count; one too long for an int (only forged output has
// one) reads as a large count, never a negative one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 1 << 30
	}
	return min(n, 1<<30)
}

// readPytest takes pytest's LAST closing line (pytest prints it once, at
// the very end), but a failure or error count on any closing line wins:
// a failure is never outvoted by a later line that could have been
// printed by the code under test.
func readPytest(lines []string) (counts, bool) {
	var last map[string]int
	maxFailed := 0
	for _, line := range lines {
		m := pytestLine.FindStringSubmatch(clean(line))
		if m == nil {
			continue
		}
		p := parts(m[1])
		last = p
		maxFailed = max(maxFailed, p["failed"]+p["error"]+p["errors"])
	}
	if last == nil {
		return counts{}, false
	}
	c := counts{
		passed:  last["passed"] + last["xpassed"],
		failed:  max(last["failed"]+last["error"]+last["errors"], maxFailed),
		skipped: last["skipped"] + last["xfailed"],
	}
	c.ran = c.passed + last["failed"] + last["error"] + last["errors"] + c.skipped
	return c, true
}

// readNode takes the last value of each of node's summary lines, the
// greatest fail and cancelled counts seen anywhere, and does not count
// as a test a whole file reported as passing (see nodeFilePass).
func readNode(lines []string) (counts, bool) {
	last := map[string]int{}
	maxFailed := 0
	files := 0
	for _, line := range lines {
		l := clean(line)
		if m := nodeFilePass.FindStringSubmatch(l); m != nil && strings.Contains(m[1], "/") {
			files++
			continue
		}
		m := nodeLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n := atoi(m[2])
		last[m[1]] = n
		if m[1] == "fail" || m[1] == "cancelled" {
			maxFailed = max(maxFailed, n)
		}
	}
	tests, ok := last["tests"]
	if !ok {
		return counts{}, false
	}
	// A file entry is a test in node's count and a pass; but it ran no
	// test() of its own (or ended before its tests were reported).
	files = min(files, last["pass"], tests)
	return counts{
		ran:     tests - files,
		passed:  last["pass"] - files,
		failed:  max(last["fail"]+last["cancelled"], maxFailed),
		skipped: last["skipped"] + last["todo"],
	}, true
}

// readJest takes jest's last "Tests:" line; a suite that failed to run
// (no test to count) is a failure too, and a failure on any line wins.
func readJest(lines []string) (counts, bool) {
	var last map[string]int
	maxFailed, suitesFailed := 0, 0
	for _, line := range lines {
		l := clean(line)
		if m := jestSuites.FindStringSubmatch(l); m != nil {
			suitesFailed = max(suitesFailed, parts(m[1])["failed"])
			continue
		}
		if m := jestTests.FindStringSubmatch(l); m != nil {
			last = parts(m[1])
			maxFailed = max(maxFailed, last["failed"])
		}
	}
	if last == nil {
		if suitesFailed > 0 {
			return counts{failed: suitesFailed}, true
		}
		return counts{}, false
	}
	c := counts{
		ran:     last["total"],
		passed:  last["passed"],
		failed:  max(last["failed"], maxFailed),
		skipped: last["skipped"] + last["todo"],
	}
	if c.failed == 0 {
		c.failed = suitesFailed
	}
	return c, true
}

// readVitest reads vitest's closing "Tests" line as readJest reads
// jest's; "Tests  no tests" is a report of none.
func readVitest(lines []string) (counts, bool) {
	var last map[string]int
	found := false
	maxFailed, filesFailed := 0, 0
	for _, line := range lines {
		l := clean(line)
		if m := vitestFiles.FindStringSubmatch(l); m != nil {
			filesFailed = max(filesFailed, parts(m[1])["failed"])
			found = true
			continue
		}
		if m := vitestTests.FindStringSubmatch(l); m != nil {
			p := parts(m[1])
			p["total"] = atoi(m[2])
			last = p
			maxFailed = max(maxFailed, p["failed"])
			found = true
		}
	}
	if !found {
		return counts{}, false
	}
	c := counts{
		ran:     last["total"],
		passed:  last["passed"],
		failed:  max(last["failed"], maxFailed),
		skipped: last["skipped"] + last["todo"],
	}
	if c.failed == 0 {
		c.failed = filesFailed
	}
	return c, true
}

// readCargo sums the closing lines of the test binaries cargo ran (unit
// tests, integration tests, doc tests). When cargo's headings are in the
// output, each binary's report is the last closing line after its
// heading, and a heading with no closing line after it is a binary that
// ended before it reported: the report is missing. A failure on any
// closing line wins.
func readCargo(lines []string) (counts, bool) {
	type block struct {
		c      counts
		done   bool
		failed int
	}
	var blocks []*block
	heads := false
	for _, line := range lines {
		l := clean(line)
		if cargoHead.MatchString(l) {
			heads = true
			blocks = append(blocks, &block{})
			continue
		}
		m := cargoResult.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if !heads {
			blocks = append(blocks, &block{}) // cargo -q: no headings
		}
		if len(blocks) == 0 {
			continue
		}
		b := blocks[len(blocks)-1]
		passed, failed, ignored, measured := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
		b.c = counts{ran: passed + failed + ignored + measured, passed: passed + measured, failed: failed, skipped: ignored}
		b.failed = max(b.failed, failed)
		b.done = true
	}
	if len(blocks) == 0 {
		return counts{}, false
	}
	var c counts
	complete := true
	for _, b := range blocks {
		if !b.done {
			complete = false
		}
		c.ran += b.c.ran
		c.passed += b.c.passed
		c.failed += max(b.c.failed, b.failed)
		c.skipped += b.c.skipped
	}
	return c, complete
}
