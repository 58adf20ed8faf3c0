package scriptedmodel

import (
	"fmt"
	"strings"
)

// Paths of the scripted project, relative to its root.
const (
	featureListPath = ".claude/progress/feature-list.json"
	evidenceDir     = ".claude/progress/evidence"
)

func sourcePath(id string) string  { return "src/" + id + ".txt" }
func testScript(id string) string  { return "tests/" + id + ".sh" }
func testCommand(id string) string { return "sh " + testScript(id) }

// workingLine is the one line that makes a feature's test pass.
func workingLine(id string) string { return id + " works" }

// roles maps the agent of a command object to its script.
var roles = map[string]func(*Server, *turn) script{
	"initializer-agent": (*Server).initializer,
	"coding-agent":      (*Server).coder,
	"tester-agent":      (*Server).tester,
}

// work is what a coding agent does on one attempt.
type work int

const (
	writeWorking work = iota // the line the test wants, then status completed
	writeBroken              // another line, then status completed all the same
	giveUp                   // end the turn at once, touching nothing
)

// codingWork is the behavior table: what the coding agent of a feature with
// a given behavior does on attempt n (from 1). A new behavior is a new row,
// with a new kind of work when none of the existing ones fits.
var codingWork = map[Behavior]func(n int) work{
	Pass:      func(int) work { return writeWorking },
	FailOnce:  func(n int) work { return firstThen(n, writeBroken, writeWorking) },
	NeverPass: func(int) work { return writeBroken },
	StopEarly: func(n int) work { return firstThen(n, giveUp, writeWorking) },
}

func firstThen(n int, first, later work) work {
	if n <= 1 {
		return first
	}
	return later
}

// initializer writes a test script per feature, then the feature list.
func (s *Server) initializer(t *turn) script {
	n := len(s.sc.Features)
	return script{
		steps: []step{
			bash(s.testScripts(), "Create the test scripts and the source directory"),
			t.write(featureListPath, func() (string, error) { return initialFeatureList(s.sc) }),
		},
		final: func() string {
			return fmt.Sprintf("Initialized %d features in %s, each with a test script in tests/.", n, featureListPath)
		},
	}
}

// testScripts is the shell command that creates every feature's test. A
// test passes only when the feature's source file holds exactly its working
// line, so the tester's verdict follows from what the coding agent wrote.
func (s *Server) testScripts() string {
	var b strings.Builder
	b.WriteString("mkdir -p tests src\n")
	for _, f := range s.sc.Features {
		fmt.Fprintf(&b, "cat > %s <<'EOF'\n#!/bin/sh\ngrep -qx '%s' %s\nEOF\n", testScript(f.ID), workingLine(f.ID), sourcePath(f.ID))
	}
	b.WriteString("chmod +x tests/*.sh")
	return b.String()
}

// coder writes the feature's source file, working or broken as its behavior
// says for this attempt, then marks the feature completed.
func (s *Server) coder(t *turn) script {
	id, ok := t.featureID()
	if !ok {
		return finalOnly(id)
	}
	var body string
	switch s.codingWork(id, t.cmd.attempt()) {
	case giveUp:
		return finalOnly("I could not finish.")
	case writeBroken:
		body = id + " broken\n"
	default:
		body = workingLine(id) + "\n"
	}
	src := sourcePath(id)
	return script{
		steps: []step{
			// A real agent looks before it writes; on a first attempt the
			// file does not exist yet, which is fine.
			t.read(src).tolerant(),
			t.write(src, constant(body)),
			t.read(featureListPath),
			t.write(featureListPath, t.editFeature(id, func(f map[string]any) {
				f["status"] = "completed"
			})),
		},
		final: func() string { return fmt.Sprintf("Implemented %s: wrote %s", id, src) },
	}
}

// tester runs the feature's test. Only when it passes does it keep the
// output as evidence and mark the feature tested; a failure ends the turn
// with a report the coding agent's retry can use.
func (s *Server) tester(t *turn) script {
	id, ok := t.featureID()
	if !ok {
		return finalOnly(id)
	}
	test := t.cmd.SuccessCriteria.Test
	if test == "" {
		test = testCommand(id)
	}
	evidence := fmt.Sprintf("%s/%s/attempt-%d.log", evidenceDir, id, t.cmd.attempt())
	run := bash(test, "Run the feature's test")
	run.onError = func(result string) (string, bool) {
		if !strings.HasPrefix(result, "Exit code ") {
			// Not the test failing: something refused to run it.
			return fmt.Sprintf("Stopping: running `%s` failed: %q", test, excerpt(result, 500)), false
		}
		return fmt.Sprintf("%s failed: `%s` exited non-zero: %s", id, test, excerpt(result, 500)), false
	}
	return script{
		steps: []step{
			run,
			t.write(evidence, func() (string, error) {
				// play has checked that the first call since the command
				// is this test, and that it passed.
				return fmt.Sprintf("$ %s\n%s\nexit status 0\n", test, strings.TrimSpace(t.exchanges[0].result)), nil
			}),
			t.read(featureListPath),
			t.write(featureListPath, t.editFeature(id, func(f map[string]any) {
				f["tested"] = true
				f["evidence"] = []any{evidence}
			})),
		},
		final: func() string { return fmt.Sprintf("%s passed: %s", id, test) },
	}
}

// featureID returns the feature of a coding or tester command, or, when it
// is unusable, the text the turn ends with.
func (t *turn) featureID() (string, bool) {
	id := t.cmd.Context.FeatureID
	switch {
	case id == "":
		return "The command object has no context.feature_id: I do not know which feature to work on.", false
	case !safeID.MatchString(id):
		return fmt.Sprintf("The feature id %q is not one I can use in a file name.", id), false
	}
	return id, true
}

// codingWork looks up the behavior of a feature. A feature the scenario
// does not know (a person added it to the list) is coded honestly.
func (s *Server) codingWork(id string, attempt int) work {
	f, ok := s.features[id]
	if !ok {
		return codingWork[Pass](attempt)
	}
	w, ok := codingWork[f.Behavior]
	if !ok {
		return codingWork[Pass](attempt)
	}
	return w(attempt)
}

// editFeature builds the feature list with one change to one feature, from
// the content the conversation has read.
func (t *turn) editFeature(id string, change func(map[string]any)) func() (string, error) {
	return func() (string, error) {
		cur, ok := t.knownContent(t.abs(featureListPath))
		if !ok {
			return "", fmt.Errorf("I could not read %s", featureListPath)
		}
		out, err := editFeature(cur, id, change)
		if err != nil {
			return "", fmt.Errorf("%s: %w", featureListPath, err)
		}
		return out, nil
	}
}
