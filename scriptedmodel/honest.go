package scriptedmodel

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// More kinds of features, for the toolchains models meet every night: a Go
// package tested as itself, Python under pytest, and Node through npm.
const (
	// GoPackage: the code and test are a Go kind's, and the test runs the
	// package alone, `go test ./<pkg>/`.
	GoPackage Kind = "go-package"
	// Python: the code is src/<pkg>.py (feature()), the test
	// tests/test_<pkg>.py, run with `pytest tests/test_<pkg>.py`: the
	// pytest on PATH, where a python3 found first (pyenv's) may have none.
	Python Kind = "python"
	// NPM: the code is lib/<pkg>.js (CommonJS), the test tests/<pkg>.test.js,
	// run with `npm test`, whose script in the package.json the initializer
	// writes is `node --test`. node --test finds every test file of the
	// project, so the test passes only once every Node feature works: make
	// an NPM feature depend on the scenario's other Node features.
	NPM Kind = "npm"

	// Kinds whose code needs a third-party dependency, which the coding
	// agent fetches after writing the code, as a model writes it:
	// `cd <project> && <install> && <all the tests> 2>&1 | tail -40`
	// (Install).
	//
	// NodeDep: a Node kind whose lib/<pkg>.js requires is-number, installed
	// with `npm install is-number` from npm's registry (package.json, a
	// person's, and package-lock.json change).
	NodeDep Kind = "node-dep"
	// GoDep: a Go kind whose package imports github.com/google/uuid,
	// fetched with `go get` from the module proxy (go.mod and go.sum
	// change).
	GoDep Kind = "go-dep"
	// PythonVenv: src/<pkg>.py imports greeting, installed into the
	// project's .venv with pip from Scenario.FindLinks (no index is
	// reached); the test runs `.venv/bin/python -m pytest
	// tests/test_<pkg>.py`. A coder in a work tree without a .venv makes
	// one (`python3 -m venv --system-site-packages .venv`).
	PythonVenv Kind = "python-venv"

	// NodeServer: a Node kind whose test reads GREETING from the
	// project's .env, which the person keeps untracked, starts an HTTP
	// server of the feature on ServerPort and asks it: every feature's
	// test listens on the same port, as tests written for one checkout
	// do.
	NodeServer Kind = "node-server"
)

// ServerPort is the port every NodeServer test listens on; EnvGreeting
// what its .env must say.
const (
	ServerPort  = 8787
	EnvGreeting = "hello-from-env"
)

// Third-party dependencies of the kinds above.
const (
	NodeDependency   = "is-number"
	GoDependency     = "github.com/google/uuid"
	GoDependencyAt   = "v1.6.0"
	PythonDependency = "greeting"
)

// kindFiles are the files of the kinds of this file; ok is false for the
// others.
func kindFiles(id string, k Kind) (Files, bool) {
	pkg := pkgName(id)
	switch k {
	case GoPackage:
		f := filesOf(id, Go)
		f.Command = "go test ./" + pkg + "/"
		return f, true
	case Python:
		return Files{
			Source: "src/" + pkg + ".py", Test: "tests/test_" + pkg + ".py", Command: "pytest tests/test_" + pkg + ".py",
			Working: pythonSource(workingLine(id)), Broken: pythonSource(id + " broken"),
		}, true
	case NPM:
		f := filesOf(id, Node)
		f.Test, f.Command = "tests/"+pkg+".test.js", "npm test"
		return f, true
	case NodeDep:
		f := filesOf(id, Node)
		f.Working, f.Broken = nodeDepSource(workingLine(id)), nodeDepSource(id+" broken")
		return f, true
	case GoDep:
		f := filesOf(id, Go)
		f.Working, f.Broken = goDepSource(pkg, workingLine(id)), goDepSource(pkg, id+" broken")
		return f, true
	case NodeServer:
		return filesOf(id, Node), true
	case PythonVenv:
		f, _ := kindFiles(id, Python)
		f.Command = ".venv/bin/python -m pytest " + f.Test
		f.Working, f.Broken = pythonDepSource(workingLine(id)), pythonDepSource(id+" broken")
		return f, true
	}
	return Files{}, false
}

func nodeDepSource(says string) string {
	return fmt.Sprintf("'use strict';\n\nconst isNumber = require('%s');\n\nexports.feature = () => (isNumber('42') ? '%s' : 'no number');\n", NodeDependency, says)
}

func goDepSource(pkg, says string) string {
	return fmt.Sprintf(`package %s

import "%s"

// Feature says what the feature does, once it can tell a UUID.
func Feature() string {
	if uuid.Validate("f47ac10b-58cc-4372-a567-0e02b2c3d479") != nil {
		return "no uuid"
	}
	return %q
}
`, pkg, GoDependency, says)
}

func pythonDepSource(says string) string {
	return fmt.Sprintf("import %s\n\n\ndef feature():\n    \"\"\"Say what the feature does.\"\"\"\n    return %s.say(%q)\n", PythonDependency, PythonDependency, says)
}

// Install is the command a coding agent runs in its working directory cwd
// after writing the code of a feature of kind k, as a model writes it:
// fetch the dependency, then run the tests and read the end of their
// output. "" for kinds without a dependency. With SetUp, the fetch is
// the setup's, and the coder only runs the tests.
func (sc Scenario) Install(k Kind, cwd string) string {
	if sc.SetUp {
		switch k {
		case NodeDep:
			return fmt.Sprintf("cd %s && node --test 2>&1 | tail -40", cwd)
		case GoDep:
			return fmt.Sprintf("cd %s && go test ./... 2>&1 | tail -40", cwd)
		case PythonVenv:
			return fmt.Sprintf("cd %s && .venv/bin/python -m pytest tests/ 2>&1 | tail -40", cwd)
		}
	}
	switch k {
	case NodeDep:
		return fmt.Sprintf("cd %s && npm install %s && node --test 2>&1 | tail -40", cwd, NodeDependency)
	case GoDep:
		return fmt.Sprintf("cd %s && go get %s@%s && go test ./... 2>&1 | tail -40", cwd, GoDependency, GoDependencyAt)
	case PythonVenv:
		return fmt.Sprintf("cd %s && (test -d .venv || python3 -m venv --system-site-packages .venv) && .venv/bin/pip install --no-index --find-links %s %s && .venv/bin/python -m pytest tests/ 2>&1 | tail -40",
			cwd, sc.FindLinks, PythonDependency)
	}
	return ""
}

func pythonSource(says string) string {
	return fmt.Sprintf("def feature():\n    \"\"\"Say what the feature does.\"\"\"\n    return %q\n", says)
}

// kindTestBody is the acceptance test of a feature of the kinds of this
// file; ok is false for the others.
func kindTestBody(id string, k Kind) (string, bool) {
	switch k {
	case GoPackage:
		return testBody(id, Go), true
	case Python:
		return fmt.Sprintf(`import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from %s import feature


def test_feature():
    assert feature() == %q
`, pkgName(id), workingLine(id)), true
	case NodeDep:
		return testBody(id, Node), true
	case GoDep:
		return testBody(id, Go), true
	case PythonVenv:
		return kindTestBody(id, Python)
	case NodeServer:
		f := filesOf(id, Node)
		return fmt.Sprintf(`'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

test('%s', async () => {
  const env = {};
  for (const line of fs.readFileSync(path.join(__dirname, '..', '.env'), 'utf8').split('\n')) {
    const [k, v] = line.split('=');
    if (k) env[k] = v;
  }
  const { feature } = require('../%s');
  const server = http.createServer((req, res) => res.end(env.GREETING + ' ' + feature()));
  await new Promise((ok, fail) => { server.once('error', fail); server.listen(%d, '127.0.0.1', ok); });
  try {
    const body = await (await fetch('http://127.0.0.1:%d/')).text();
    assert.strictEqual(body, '%s %s');
  } finally {
    server.close();
  }
});
`, id, f.Source, ServerPort, ServerPort, EnvGreeting, workingLine(id)), true
	case NPM:
		f, _ := kindFiles(id, NPM)
		return fmt.Sprintf(`'use strict';
const test = require('node:test');
const assert = require('node:assert');

test('%s', () => {
  const { feature } = require('../%s');
  assert.strictEqual(feature(), '%s');
});
`, id, f.Source, workingLine(id)), true
	}
	return "", false
}

// kindDirs are the directories a feature of the kinds of this file needs
// before its test is written, and whether it needs the Go module.
func kindDirs(f FeatureScript) (dirs []string, goMod bool) {
	switch f.Kind {
	case GoPackage:
		return []string{pkgName(f.ID)}, true
	case Python:
		return []string{"tests", "src"}, false
	case NPM:
		return []string{"tests", "lib"}, false
	case NodeDep:
		return []string{"test", "lib"}, false
	case GoDep:
		return []string{pkgName(f.ID)}, true
	case PythonVenv:
		return []string{"tests", "src"}, false
	case NodeServer:
		return []string{"test", "lib"}, false
	}
	return nil, false
}

// npmPackage is the package.json the initializer writes when a feature is
// NPM's: `npm test` is node's own test runner.
const npmPackage = `{
  "name": "scripted",
  "version": "1.0.0",
  "private": true,
  "scripts": {
    "test": "node --test"
  }
}
`

// kindSetup is the part of the initializer's command that the kinds of
// this file need besides their tests: the package.json of npm.
func kindSetup(sc Scenario) string {
	for _, f := range sc.Features {
		if f.Kind == NPM {
			return fmt.Sprintf("cat > package.json <<'EOF'\n%sEOF\n", npmPackage)
		}
	}
	return ""
}

// TestRunForms are placeholders a FeatureScript's TestRuns may use, each
// replaced by the feature's own value: its test command, the project's
// absolute path, the tester's evidence directory (project-relative), the
// Go or file name of the feature (pkgName) and its test file.
const (
	FormTest     = "{test}"
	FormProject  = "{project}"
	FormEvidence = "{evidence}"
	FormPkg      = "{pkg}"
	FormScript   = "{script}"
)

// formsTester is the honest tester of a feature with TestRuns: it runs the
// feature's test in each of the forms, in order, and reads each outcome as
// a model does, by the exit status where the command has one of its own
// and otherwise by what the runner printed. At the first failure it ends
// its turn with a report, as the honest tester does; output that tells of
// a refusal by the sandbox ends it too, saying so. When every form passed
// it lists as evidence the logs the forms wrote under its evidence
// directory, or, when none wrote one, keeps the last output with the Write
// tool; then it sets tested.
func (s *Server) formsTester(t *turn, id, test string) script {
	f := s.features[id]
	dir := evidenceDir + "/" + id
	expand := strings.NewReplacer(FormTest, test, FormProject, t.cwd, FormEvidence, dir,
		FormPkg, pkgName(id), FormScript, s.files(id).Test).Replace
	var steps []step
	var evidence, forms []string
	for _, form := range f.TestRuns {
		cmd := expand(form)
		forms = append(forms, cmd)
		run := bash(cmd, "Run the feature's test")
		run.onError = func(result string) (string, bool) {
			if !strings.HasPrefix(result, "Exit code ") {
				return fmt.Sprintf("Stopping: running `%s` failed: %q", cmd, excerpt(result, 500)), false
			}
			return fmt.Sprintf("%s failed: `%s` exited non-zero: %s", id, cmd, excerpt(result, 500)), false
		}
		steps = append(steps, run)
		evidence = append(evidence, logsUnder(cmd, dir)...)
	}
	last := forms[len(forms)-1]
	if len(evidence) == 0 {
		log := fmt.Sprintf("%s/attempt-%d.log", dir, t.cmd.attempt())
		evidence = []string{log}
		steps = append(steps, t.write(log, func() (string, error) {
			out, _ := t.lastBash()
			return fmt.Sprintf("$ %s\n%s\n", last, strings.TrimSpace(out)), nil
		}))
	}
	listed := make([]any, len(evidence))
	for i, e := range evidence {
		listed[i] = e
	}
	steps = append(steps, t.read(featureListPath), t.write(featureListPath, t.editFeature(id, func(f map[string]any) {
		f["tested"] = true
		f["evidence"] = listed
	})))
	// Each form's output is read before the step after it: the model
	// sees it before it acts again.
	for i, cmd := range forms {
		steps[i+1] = t.afterReading(id, cmd, steps[i+1])
	}
	return script{steps: steps, final: func() string { return fmt.Sprintf("%s passed: %s", id, strings.Join(forms, "; ")) }}
}

// afterReading is next, made only once the output of cmd, which exited
// 0, says that the test passed: output that tells of a failed test or of
// a refusal by the sandbox ends the turn with a report instead.
func (t *turn) afterReading(id, cmd string, next step) step {
	call := next.call
	next.call = func() (toolCall, error) {
		out, ok := t.lastBash()
		switch {
		case !ok:
			return toolCall{}, fmt.Errorf("I have no output of `%s`", cmd)
		case refusedWords.MatchString(out):
			return toolCall{}, fmt.Errorf("`%s` exited 0, but something was refused on the way: %q", cmd, excerpt(out, 500))
		case failedOutput.MatchString(out):
			return toolCall{}, fmt.Errorf("%s failed: `%s` says a test failed: %s", id, cmd, excerpt(out, 500))
		}
		return call()
	}
	return next
}

// lastBash is the output of the conversation's last Bash call, when it
// succeeded. The CLI sends a call back as it ran it, which is not always
// as the model wrote it (2.1.330 drops a leading `cd <working directory>
// &&`), so a form's output is found by its place, not by its text.
func (t *turn) lastBash() (string, bool) {
	for i := len(t.exchanges) - 1; i >= 0; i-- {
		if x := t.exchanges[i]; x.call.Name == "Bash" {
			return x.result, x.answered && !x.isError
		}
	}
	return "", false
}

// logsUnder are the files under dir that cmd writes with a redirection or
// tee: the evidence a tester that keeps its log the natural way leaves.
func logsUnder(cmd, dir string) []string {
	var out []string
	for _, m := range logTarget.FindAllStringSubmatch(cmd, -1) {
		if p := m[1]; strings.HasPrefix(p, dir+"/") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

var logTarget = regexp.MustCompile(`(?:>|\btee(?:\s+-a)?)\s*(\S+)`)

// failedOutput recognises a test run's output that says a test failed, as
// a model reads it when the command's exit status is not the test's
// (`| tail`, `; echo exit=$?`): go test's FAIL, pytest's "N failed",
// node's TAP and spec counts, an exit status echoed.
var failedOutput = regexp.MustCompile(`(?m)^(?:--- )?FAIL\b|\b[1-9]\d* failed\b|^not ok\b|^# fail [1-9]|^ℹ fail [1-9]|\bexit=[1-9]`)
