package diagnose

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Outputs of real runners (go test, node --test with its TAP and spec
// reporters, pytest), cut to their failing part.
const (
	goOutput = `--- FAIL: TestAdd (0.00s)
    calc_test.go:7: Add(1, 2) = -1, want 3
FAIL
FAIL	example.com/calc	0.009s
FAIL
`
	goPanicOutput = `--- FAIL: TestDiv (0.00s)
panic: runtime error: integer divide by zero [recovered]
	panic: runtime error: integer divide by zero

goroutine 7 [running]:
testing.tRunner.func1.2({0x5d2b60, 0x6c9e70})
	/usr/local/go/src/testing/testing.go:1734 +0x21c
panic({0x5d2b60?, 0x6c9e70?})
	/usr/local/go/src/runtime/panic.go:792 +0x132
example.com/calc.Div(...)
	/home/dev/calc/calc.go:5
example.com/calc.TestDiv(0xc000003340?)
	/home/dev/calc/calc_test.go:12 +0x12
FAIL	example.com/calc	0.011s
`
	tapOutput = `TAP version 13
# Subtest: adds
not ok 1 - adds
  ---
  duration_ms: 3.061362
  location: '/tmp/dg/n/add.test.js:3:1'
  failureType: 'testCodeFailure'
  error: |-
    Expected values to be strictly equal:
    
    -1 !== 3
    
  code: 'ERR_ASSERTION'
  name: 'AssertionError'
  expected: 3
  actual: -1
  operator: 'strictEqual'
  stack: |-
    TestContext.<anonymous> (/tmp/dg/n/add.test.js:3:29)
    Test.runInAsyncScope (node:async_hooks:206:9)
  ...
1..1
# tests 1
# pass 0
# fail 1
`
	specOutput = `✖ adds (1.024ms)
ℹ tests 1
ℹ pass 0
ℹ fail 1

✖ failing tests:

test at add.test.js:3:1
✖ adds (1.024ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  -1 !== 3

      at TestContext.<anonymous> (/home/dev/proj/add.test.js:3:29)
      at Test.runInAsyncScope (node:async_hooks:214:14)
    {
      generatedMessage: true,
      code: 'ERR_ASSERTION',
      actual: -1,
      expected: 3,
      operator: 'strictEqual'
    }
`
	pytestOutput = `============================= test session starts ==============================
collected 1 item

test_calc.py F                                                           [100%]

=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(1, 2) == 3
E       assert -1 == 3
E        +  where -1 = add(1, 2)

test_calc.py:4: AssertionError
=========================== short test summary info ============================
FAILED test_calc.py::test_add - assert -1 == 3
============================== 1 failed in 0.02s ===============================
`
)

func TestRead(t *testing.T) {
	tests := []struct {
		name, output string
		want         Diagnosis
		outputHas    []string
	}{
		{"go test", goOutput, Diagnosis{Failing: []string{"TestAdd"}, At: "calc_test.go:7", Message: "Add(1, 2) = -1, want 3", Expected: "3", Got: "-1"},
			[]string{"--- FAIL: TestAdd", "calc_test.go:7: Add(1, 2) = -1, want 3"}},
		{"go test panic", goPanicOutput, Diagnosis{Failing: []string{"TestDiv"}, At: "/home/dev/calc/calc.go:5", Message: "panic: runtime error: integer divide by zero [recovered]"},
			[]string{"panic: runtime error", "/home/dev/calc/calc.go:5"}},
		{"node --test, tap", tapOutput, Diagnosis{Failing: []string{"adds"}, At: "/tmp/dg/n/add.test.js:3:1", Message: "Expected values to be strictly equal:", Expected: "3", Got: "-1"},
			[]string{"not ok 1 - adds", "expected: 3", "actual: -1"}},
		{"node --test, spec", specOutput, Diagnosis{Failing: []string{"adds"}, At: "/home/dev/proj/add.test.js:3:29", Message: "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:", Expected: "3", Got: "-1"},
			[]string{"✖ adds", "actual: -1"}},
		{"pytest", pytestOutput, Diagnosis{Failing: []string{"test_calc.py::test_add"}, At: "test_calc.py:4", Message: "assert -1 == 3", Expected: "3", Got: "-1"},
			[]string{"E       assert -1 == 3", "test_calc.py:4: AssertionError"}},
		{"expected … but got …", "checking the greeting\nexpected 'hello' but got 'hullo'\n", Diagnosis{Expected: "'hello'", Got: "'hullo'"},
			[]string{"expected 'hello' but got 'hullo'"}},
		{"want … got …", "want: 200, got: 404\n", Diagnosis{Expected: "200", Got: "404"}, nil},
		{"Expected / Received lines", "Expected: 3\nReceived: -1\n", Diagnosis{Expected: "3", Got: "-1"}, nil},
		{"nothing structured: the end of the output", "line 1\nline 2\nnope\n\n", Diagnosis{}, []string{"line 1\nline 2\nnope"}},
		{"no output at all", "", Diagnosis{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Read("the test", 1, tt.output)
			if got.Test != "the test" || got.ExitCode != 1 {
				t.Errorf("test %q exit %d", got.Test, got.ExitCode)
			}
			if !slices.Equal(got.Failing, tt.want.Failing) || got.At != tt.want.At || got.Message != tt.want.Message ||
				got.Expected != tt.want.Expected || got.Got != tt.want.Got {
				t.Errorf("got failing %q at %q message %q expected %q got %q\nwant failing %q at %q message %q expected %q got %q",
					got.Failing, got.At, got.Message, got.Expected, got.Got,
					tt.want.Failing, tt.want.At, tt.want.Message, tt.want.Expected, tt.want.Got)
			}
			for _, h := range tt.outputHas {
				if !strings.Contains(got.Output, h) {
					t.Errorf("output excerpt lacks %q:\n%s", h, got.Output)
				}
			}
		})
	}
}

// The excerpt keeps the failure, not the noise around it: a stack's
// runtime frames and the runner's banners stay out.
func TestReadKeepsWhatMatters(t *testing.T) {
	d := Read("pytest", 1, pytestOutput)
	for _, noise := range []string{"test session starts", "collected 1 item"} {
		if strings.Contains(d.Output, noise) {
			t.Errorf("excerpt holds %q:\n%s", noise, d.Output)
		}
	}
	long := strings.Repeat("noise\n", 10000) + goOutput
	d = Read("go test", 1, long)
	if len(d.Output) > maxOutputBytes || strings.Contains(d.Output, "noise") {
		t.Errorf("excerpt of %d bytes:\n%s", len(d.Output), d.Output)
	}
	// A user's shell tools' start-up lines are no part of it, even where
	// nothing else stands out and the output's end is kept.
	d = Read("sh t.sh", 1, "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\nboom\npyenv: cannot rehash: /root/.pyenv/shims isn't writable\n")
	if d.Output != "boom" {
		t.Errorf("excerpt %q, want only the test's own line", d.Output)
	}
	d = Read("sh t.sh", 1, strings.Repeat("x\n", 1000))
	if n := strings.Count(d.Output, "\n") + 1; n != maxOutputLines {
		t.Errorf("the end of an unstructured output is %d lines, want %d", n, maxOutputLines)
	}
}

// FuzzRead feeds Read arbitrary test output: it must never panic, and what
// it keeps stays valid text within its bounds.
func FuzzRead(f *testing.F) {
	for _, s := range []string{goOutput, goPanicOutput, tapOutput, specOutput, pytestOutput, "", "\n\n", "error: |-", "panic: x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, output string) {
		d := Read("t", 1, output)
		for _, s := range append([]string{d.At, d.Expected, d.Got, d.Message}, d.Failing...) {
			if len(s) > maxField {
				t.Errorf("field of %d bytes", len(s))
			}
			if utf8.ValidString(output) && !utf8.ValidString(s) {
				t.Errorf("field %q is not valid UTF-8", s)
			}
		}
		if len(d.Output) > maxOutputBytes {
			t.Errorf("output excerpt of %d bytes", len(d.Output))
		}
		if len(d.Failing) > maxFailing {
			t.Errorf("%d failing tests named", len(d.Failing))
		}
	})
}
