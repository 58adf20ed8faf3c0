package testreport

import (
	"encoding/json"
	"strings"
)

// event is one line of `go test -json` (test2json's TestEvent, and the
// build events cmd/go adds: build-output, build-fail).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     *string
}

// readGo counts the test events of go test -json output and rebuilds the
// text go test would have printed. ended lists the packages that passed
// without the testing package's closing "PASS": their test binary ended
// (with status 0) before the testing package reported, which is what
// os.Exit(0) in an init function or in TestMain before m.Run does. A
// package whose tests a -run pattern all filtered out still closes with
// "PASS" (after "testing: warning: no tests to run"). Only whole JSON event lines count: a
// test's own output, even a line that looks like an event or a `--- PASS`
// line, reaches the output inside an event's Output field (test2json
// wraps the test binary's stdout and stderr), where it is text; and with
// Instrument's guard, so does a framing line the binary prints without
// the testing package's marker (see goGuard): test2json names GuardName
// as its test until the first marked line, and the package's own end
// too when there was none.
func readGo(lines []string) (c counts, text string, found bool, ended []string) {
	var b strings.Builder
	passedPkg := map[string]bool{}
	closed := map[string]bool{}
	var order []string
	// Packages that failed, and those of them that named a failing test:
	// a package that fails with no failing test (a build failure, a
	// crash before any test, a TestMain that exits 1) is one failure.
	failedPkg := map[string]bool{}
	testFailed := map[string]bool{}
	for _, line := range lines {
		e, ok := parseEvent(line)
		if !ok {
			b.WriteString(line)
			continue
		}
		found = true
		if e.Output != nil {
			b.WriteString(*e.Output)
		}
		if e.Test == GuardName {
			// The binary's, before its first test (Instrument's guard):
			// its output is text, its end the package's end, and a
			// "PASS" it printed is no closing of the testing package's.
			if e.Action == "output" {
				continue
			}
			e.Test = ""
		}
		pkg := e.Package
		if pkg == "" {
			// build-fail names its package as "pkg [pkg.test]".
			pkg, _, _ = strings.Cut(e.ImportPath, " ")
		}
		if e.Test == "" {
			switch {
			case e.Action == "fail" || e.Action == "build-fail":
				failedPkg[pkg] = true
			case e.Action == "pass":
				if !passedPkg[pkg] {
					order = append(order, pkg)
				}
				passedPkg[pkg] = true
			case e.Action == "output" && e.Output != nil && strings.TrimRight(*e.Output, "\r\n") == "PASS":
				closed[pkg] = true
			}
			continue
		}
		switch e.Action {
		case "run":
			c.ran++
		case "pass":
			c.passed++
		case "fail":
			c.failed++
			testFailed[pkg] = true
		case "skip":
			c.skipped++
		}
	}
	for pkg := range failedPkg {
		if !testFailed[pkg] {
			c.failed++
		}
	}
	for _, pkg := range order {
		if !closed[pkg] && !failedPkg[pkg] {
			ended = append(ended, pkg)
		}
	}
	return c, b.String(), found, ended
}

// parseEvent reads a line as a go test -json event: a JSON object with an
// Action and the package it is about.
func parseEvent(line string) (event, bool) {
	s := strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return event{}, false
	}
	var e event
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return event{}, false
	}
	if e.Action == "" || (e.Package == "" && e.ImportPath == "") {
		return event{}, false
	}
	return e, true
}
