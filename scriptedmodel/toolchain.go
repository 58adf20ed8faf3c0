package scriptedmodel

import (
	"fmt"
	"strings"
)

// Files says where a feature's code and acceptance test live, how the test
// runs, and what the code holds when the feature works or when a coding
// agent got it wrong. Paths are project-relative, with forward slashes.
type Files struct {
	// Source is the one file the coding agent writes.
	Source string
	// Test is the acceptance test the initializer writes with the list.
	Test string
	// Command is the feature's test command, run from the project's root.
	Command string
	// Working is the content of Source that makes the test pass, Broken
	// what a failing attempt writes instead.
	Working, Broken string
}

// Files returns where the feature's files are, by its Kind.
func (f FeatureScript) Files() Files { return filesOf(f.ID, f.Kind) }

func filesOf(id string, k Kind) Files {
	pkg := pkgName(id)
	if f, ok := kindFiles(id, k); ok {
		return f
	}
	switch k {
	case Go:
		return Files{
			Source: pkg + "/" + pkg + ".go", Test: pkg + "/" + pkg + "_test.go", Command: "go test ./" + pkg + "/...",
			Working: goSource(pkg, workingLine(id)), Broken: goSource(pkg, id+" broken"),
		}
	case Shell:
		return Files{Source: "src/" + id + ".sh", Test: testScript(id), Command: testCommand(id), Working: shellSource(workingLine(id)), Broken: shellSource(id + " broken")}
	case Node:
		return Files{
			Source: "lib/" + pkg + ".js", Test: "test/" + pkg + ".test.js", Command: "node --test test/" + pkg + ".test.js",
			Working: nodeSource(workingLine(id)), Broken: nodeSource(id + " broken"),
		}
	}
	return Files{Source: sourcePath(id), Test: testScript(id), Command: testCommand(id), Working: workingLine(id) + "\n", Broken: id + " broken\n"}
}

// pkgName is the id as a Go package and file name: its letters and digits,
// in lower case ("F-001" is f001), never starting with a digit.
func pkgName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "f" + s
	}
	return s
}

func goSource(pkg, says string) string {
	return fmt.Sprintf("package %s\n\n// Feature says what the feature does.\nfunc Feature() string { return %q }\n", pkg, says)
}

func shellSource(says string) string { return fmt.Sprintf("#!/bin/sh\necho '%s'\n", says) }

func nodeSource(says string) string {
	return fmt.Sprintf("'use strict';\n\nexports.feature = () => '%s';\n", says)
}

// testBody is the acceptance test of feature id of kind k: it passes only
// when the feature's source is the working one.
func testBody(id string, k Kind) string {
	f := filesOf(id, k)
	if b, ok := kindTestBody(id, k); ok {
		return b
	}
	switch k {
	case Go:
		return fmt.Sprintf(`package %s

import "testing"

func TestFeature(t *testing.T) {
	if got, want := Feature(), %q; got != want {
		t.Fatalf("Feature() = %%q, want %%q", got, want)
	}
}
`, pkgName(id), workingLine(id))
	case Node:
		return fmt.Sprintf(`'use strict';
const test = require('node:test');
const assert = require('node:assert');

test('%s', () => {
  const { feature } = require('../%s');
  assert.strictEqual(feature(), '%s');
});
`, id, f.Source, workingLine(id))
	case Shell:
		return fmt.Sprintf("#!/bin/sh\n[ \"$(sh %s)\" = '%s' ]\n", f.Source, workingLine(id))
	}
	return fmt.Sprintf("#!/bin/sh\ngrep -qx '%s' %s\n", workingLine(id), f.Source)
}

// goModulePath is the module of the project the initializer writes when a
// feature is Go's, and goModule its go.mod.
const (
	goModulePath = "example.com/scripted"
	goModule     = "module " + goModulePath + "\n\ngo 1.21\n"
)
