// Package diagnose reads a failing test's output for what a coding agent
// needs on its retry: where the test failed, what it expected, what it
// got. It knows the shapes of Go's testing package, node --test (TAP),
// pytest and the common "expected … got …" phrasing, and otherwise keeps
// the end of the output, less the start-up noise of a user's shell tools
// (Quiet). No model is asked: the daemon's own run of the test is the
// ground truth, and a retry should read it, not a story about it.
//
// A failure that is not the code's at all (a cache the confinement holds
// read-only, a host it refuses, a registry the daemon's offline test run
// reached for, a runner missing from PATH, a full disk) is told apart by
// ReadEnvironment, in one table of what the machine's own programs say:
// no attempt can fix it, so it is for a person, with the exact fix.
package diagnose

import (
	"regexp"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// Diagnosis is what a failing test said, in parts a model can act on.
// Every field but Test and Output may be empty: a test that prints
// nothing structured still has its exit code and its output.
type Diagnosis struct {
	Test     string `json:"test"`
	ExitCode int    `json:"exit_code"`
	// Failing names the failing tests, when the runner names them.
	Failing []string `json:"failing,omitempty"`
	// At is where the first failure was reported (file:line).
	At       string `json:"at,omitempty"`
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
	// Message is the first failure's own message.
	Message string `json:"message,omitempty"`
	// FailedAssumption is what the last attempt believed that the test
	// disproved; the daemon fills it from the attempt's own words.
	FailedAssumption string `json:"failed_assumption,omitempty"`
	// Output is the part of the output that matters: the failure's lines,
	// or the end of the output when none stands out.
	Output string `json:"output"`
}

// Bounds of what a diagnosis keeps: a retry's command is read on every
// turn.
const (
	maxField       = 300
	maxOutputLines = 20
	maxOutputBytes = 2000
	maxFailing     = 10
	// lookAhead bounds how far past a line its detail is looked for (a
	// panic's frame, a YAML block's text), so that reading stays linear.
	lookAhead = 40
)

var (
	goFail     = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	goMessage  = regexp.MustCompile(`^\s+(\S+\.go:\d+): (.+)$`)
	goPanic    = regexp.MustCompile(`^panic: (.+)$`)
	goFrame    = regexp.MustCompile(`^\s+(\S+\.go:\d+)`)
	tapNotOK   = regexp.MustCompile(`^\s*not ok \d+ - (.+?)\s*$`)
	tapField   = regexp.MustCompile(`^\s*(expected|actual|location|error):\s*(.+?),?\s*$`)
	specFail   = regexp.MustCompile(`^\s*✖ (.+?[^:])(?: \([\d.]+m?s\))?\s*$`)
	jsError    = regexp.MustCompile(`^\s*(\w*Error(?: \[\w+\])?: .+)$`)
	jsFrame    = regexp.MustCompile(`^\s+at (?:.* \()?(/[^():]+:\d+:\d+)\)?$`)
	pyFailed   = regexp.MustCompile(`^FAILED (\S+)`)
	pyAssert   = regexp.MustCompile(`^E\s+assert (.+?) == (.+)$`)
	pyError    = regexp.MustCompile(`^E\s+(\w+(?:Error|Exception)\b.*)$`)
	pyLocation = regexp.MustCompile(`^(\S+\.py:\d+): \w+`)
	// got 2, want 3 · F() = 2, want 3 · want 3, got 2 · expected 3 but
	// got 2 · Expected: 3 / Received: 2 (each on its line).
	gotWant      = regexp.MustCompile(`(?i)(?:\bgot|=)\s+(.+?),?\s+want(?:ed)?:?\s+(.+)$`)
	wantGot      = regexp.MustCompile(`(?i)\bwant(?:ed)?:?\s+(.+?),?\s+(?:but\s+)?got:?\s+(.+)$`)
	expectedGot  = regexp.MustCompile(`(?i)\bexpected:?\s+(.+?),?\s+(?:but\s+)?(?:got|received|was|actual):?\s+(.+)$`)
	expectedLine = regexp.MustCompile(`(?i)^\s*(?:expected|want)(?:\s+value)?:\s*(.+)$`)
	gotLine      = regexp.MustCompile(`(?i)^\s*(?:received|got|actual)(?:\s+value)?:\s*(.+)$`)
)

// Read diagnoses a failing test from its command, exit code and output.
func Read(test string, exitCode int, output string) Diagnosis {
	d := Diagnosis{Test: test, ExitCode: exitCode}
	lines := strings.Split(strings.ReplaceAll(Quiet(output), "\r\n", "\n"), "\n")
	var keep []int // indexes of the lines that matter
	mark := func(i int) {
		if len(keep) == 0 || keep[len(keep)-1] != i {
			keep = append(keep, i)
		}
	}
	for i, l := range lines {
		switch {
		case goFail.MatchString(l):
			d.Failing = appendNew(d.Failing, goFail.FindStringSubmatch(l)[1])
			mark(i)
		case tapNotOK.MatchString(l):
			d.Failing = appendNew(d.Failing, tapNotOK.FindStringSubmatch(l)[1])
			mark(i)
		case pyFailed.MatchString(l):
			d.Failing = appendNew(d.Failing, pyFailed.FindStringSubmatch(l)[1])
			mark(i)
		case goMessage.MatchString(l):
			m := goMessage.FindStringSubmatch(l)
			d.first(m[1], m[2])
			mark(i)
		case goPanic.MatchString(l):
			d.first("", "panic: "+goPanic.FindStringSubmatch(l)[1])
			mark(i)
			// The panic's place is the first frame of the test's own code
			// after it: the first .go line that is not the runtime's.
			for j := i + 1; j < min(len(lines), i+lookAhead) && d.At == ""; j++ {
				if f := goFrame.FindStringSubmatch(lines[j]); f != nil && !strings.Contains(f[1], "/runtime/") && !strings.Contains(f[1], "/testing/") {
					d.At = clip(f[1])
					mark(j)
				}
			}
		case specFail.MatchString(l):
			d.Failing = appendNew(d.Failing, specFail.FindStringSubmatch(l)[1])
			mark(i)
		case jsError.MatchString(l):
			d.first("", jsError.FindStringSubmatch(l)[1])
			mark(i)
		case jsFrame.MatchString(l):
			setOnce(&d.At, jsFrame.FindStringSubmatch(l)[1])
			mark(i)
		case tapField.MatchString(l):
			m := tapField.FindStringSubmatch(l)
			v := strings.Trim(m[2], `'"`)
			if v == "|-" || v == "|" || v == ">-" {
				// A YAML block: the value is the next line that says something.
				v = ""
				for j := i + 1; j < min(len(lines), i+lookAhead) && v == ""; j++ {
					v = strings.TrimSpace(lines[j])
				}
			}
			switch m[1] {
			case "expected":
				setOnce(&d.Expected, v)
			case "actual":
				setOnce(&d.Got, v)
			case "location":
				setOnce(&d.At, v)
			case "error":
				setOnce(&d.Message, v)
			}
			mark(i)
		case pyAssert.MatchString(l):
			m := pyAssert.FindStringSubmatch(l)
			setOnce(&d.Got, m[1])
			setOnce(&d.Expected, m[2])
			d.first("", strings.TrimSpace(strings.TrimPrefix(l, "E")))
			mark(i)
		case pyError.MatchString(l):
			d.first("", pyError.FindStringSubmatch(l)[1])
			mark(i)
		case pyLocation.MatchString(l):
			setOnce(&d.At, pyLocation.FindStringSubmatch(l)[1])
			mark(i)
		case isPair(l):
			mark(i) // read after the loop, when no runner's fields said it
		case expectedLine.MatchString(l):
			setOnce(&d.Expected, expectedLine.FindStringSubmatch(l)[1])
			mark(i)
		case gotLine.MatchString(l):
			setOnce(&d.Got, gotLine.FindStringSubmatch(l)[1])
			mark(i)
		}
	}
	// What a failure message says it expected and got, when no runner's
	// own fields did.
	if d.Expected == "" && d.Got == "" {
		for _, l := range lines {
			if m := gotWant.FindStringSubmatch(l); m != nil {
				d.Got, d.Expected = clip(m[1]), clip(m[2])
			} else if m := wantGot.FindStringSubmatch(l); m != nil {
				d.Expected, d.Got = clip(m[1]), clip(m[2])
			} else if m := expectedGot.FindStringSubmatch(l); m != nil {
				d.Expected, d.Got = clip(m[1]), clip(m[2])
			} else {
				continue
			}
			break
		}
	}
	d.Output = excerpt(lines, keep)
	return d
}

// isPair reports whether a line says both what was expected and what came.
func isPair(l string) bool {
	return gotWant.MatchString(l) || wantGot.MatchString(l) || expectedGot.MatchString(l)
}

// first records the first failure's place and message.
func (d *Diagnosis) first(at, msg string) {
	if d.Message != "" {
		return
	}
	d.Message = clip(msg)
	if d.At == "" {
		d.At = clip(at)
	}
}

func setOnce(field *string, v string) {
	if *field == "" {
		*field = clip(v)
	}
}

func appendNew(list []string, s string) []string {
	if len(list) >= maxFailing {
		return list
	}
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, clip(s))
}

// excerpt is the lines that matter, each with the line after it (where a
// runner puts the detail), in order; or the output's last lines when none
// was marked. It stays within maxOutputLines and maxOutputBytes.
func excerpt(lines []string, keep []int) string {
	var picked []string
	if len(keep) == 0 {
		end := len(lines)
		for end > 0 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
		picked = lines[max(0, end-maxOutputLines):end]
	} else {
		taken := map[int]bool{}
		for _, i := range keep {
			for _, j := range []int{i, i + 1} {
				if j < len(lines) && !taken[j] && strings.TrimSpace(lines[j]) != "" {
					taken[j] = true
					picked = append(picked, lines[j])
				}
			}
		}
		picked = picked[:min(len(picked), maxOutputLines)]
	}
	out := strings.Join(picked, "\n")
	if len(out) > maxOutputBytes {
		out = textcut.Cut(out, maxOutputBytes)
	}
	return out
}

func clip(s string) string { return textcut.Cut(strings.TrimSpace(s), maxField) }
