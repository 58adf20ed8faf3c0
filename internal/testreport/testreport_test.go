package testreport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadCaptured reads the captured outputs of real runners (see
// testdata/README.md) and judges them as the daemon would.
func TestReadCaptured(t *testing.T) {
	tests := []struct {
		file, test string
		exit       int
		runner     string
		found      bool

		ran, passed, failed, skipped int
		want                         Outcome
	}{
		// go test -json
		{"go-pass.json", "go test ./pass", 0, GoTest, true, 2, 2, 0, 0, Pass},
		{"go-fail.json", "go test ./fail", 1, GoTest, true, 2, 1, 1, 0, Fail},
		{"go-skip.json", "go test ./skip", 0, GoTest, true, 2, 1, 0, 1, Pass},
		{"go-notests.json", "go test ./notests", 0, GoTest, true, 0, 0, 0, 0, Vacuous},
		{"go-buildfail.json", "go test ./buildfail", 1, GoTest, true, 0, 0, 1, 0, Fail},
		// os.Exit(0) in init: go test says ok, with no run event, and
		// the testing package never closed with PASS.
		{"go-exitinit.json", "go test ./exitinit", 0, GoTest, false, 0, 0, 0, 0, Vacuous},
		// JSON events printed by the code are Output text, not events.
		{"go-fakejson.json", "go test ./fakejson", 0, GoTest, false, 0, 0, 0, 0, Vacuous},
		// A fake fail event and a fake --- FAIL printed inside a running
		// test are text too: subtests count, the skip counts.
		{"go-mixed.json", "go test -json ./mixed", 0, GoTest, true, 4, 3, 0, 1, Pass},
		// Framing lines printed before the first test, without
		// test2json's marker: with the guard Instrument adds, text of the
		// test "(before tests)", and the package never closed with PASS;
		// without it (a go test run by a script, or with an -exec of its
		// own), events that the exit status alone may judge.
		{"go-fake.guarded.json", "go test ./fake", 0, GoTest, false, 0, 0, 0, 0, Vacuous},
		{"go-fake.guarded.json", Instrument("go test ./fake"), 0, GoTest, false, 0, 0, 0, 0, Vacuous},
		{"go-fake.json", "sh tests/run.sh", 0, GoTest, true, 1, 1, 0, 0, Unchecked},
		{"go-fake.json", "go test -exec=env ./fake", 0, GoTest, true, 1, 1, 0, 0, Unchecked},
		// The limit the package doc states: framing lines with the
		// marker are events, guarded or not.
		{"go-marker.json", "go test ./marker", 0, GoTest, true, 1, 1, 0, 0, Pass},
		{"go-marker.guarded.json", "go test ./marker", 0, GoTest, true, 1, 1, 0, 0, Pass},
		// The output of go test without -json has no events: the command
		// was not instrumented, or the binary was ended before go test
		// could report.
		{"pytest-pass.txt", "go test ./...", 0, GoTest, false, 0, 0, 0, 0, Vacuous},

		// pytest
		{"pytest-pass.txt", "python3 -m pytest tests/", 0, Pytest, true, 3, 2, 0, 1, Pass},
		{"pytest-pass.q.txt", "pytest -q", 0, Pytest, true, 3, 2, 0, 1, Pass},
		{"pytest-fail.txt", "pytest", 1, Pytest, true, 2, 1, 1, 0, Fail},
		{"pytest-fail.q.txt", "pytest -q", 1, Pytest, true, 2, 1, 1, 0, Fail},
		{"pytest-fail.q.txt", "pytest -q || true", 0, Pytest, true, 2, 1, 1, 0, Fail},
		{"pytest-error.txt", "py.test", 2, Pytest, true, 1, 0, 1, 0, Fail},
		{"pytest-none.txt", "pytest", 0, Pytest, true, 0, 0, 0, 0, Vacuous},
		{"pytest-none.q.txt", "pytest -q", 0, Pytest, true, 0, 0, 0, 0, Vacuous},
		// os._exit(0) during collection, with pytest's capture: no
		// report at all.
		{"pytest-fake.capture.txt", "pytest", 0, Pytest, false, 0, 0, 0, 0, Vacuous},
		// The limit the package doc states: with -s the code's own
		// summary line is all there is.
		{"pytest-fake.txt", "pytest -s", 0, Pytest, true, 3, 3, 0, 0, Pass},

		// node --test
		{"node-pass.tap.txt", "node --test --test-reporter=tap", 0, Node, true, 4, 2, 0, 2, Pass},
		{"node-pass.spec.txt", "node --test", 0, Node, true, 4, 2, 0, 2, Pass},
		{"node-fail.tap.txt", "node --test", 1, Node, true, 2, 1, 1, 0, Fail},
		{"node-fail.spec.txt", "node --test", 1, Node, true, 2, 1, 1, 0, Fail},
		// A file that exits before any test: node counts the file as a
		// passing test; it ran none.
		{"node-exit.tap.txt", "node --test test/", 0, Node, true, 0, 0, 0, 0, Vacuous},
		{"node-exit.spec.txt", "node --test test/", 0, Node, true, 0, 0, 0, 0, Vacuous},
		// A test that prints a fake summary and calls process.exit(0).
		{"node-exit2.tap.txt", "node --test", 0, Node, true, 0, 0, 0, 0, Vacuous},
		{"node-exit2.spec.txt", "node --test", 0, Node, true, 0, 0, 0, 0, Vacuous},
		// A fake summary printed before a failing test: node's own last
		// summary counts, and a failure anywhere wins.
		{"node-fake.tap.txt", "node --test", 1, Node, true, 1, 0, 1, 0, Fail},
		{"node-fake.spec.txt", "node --test", 1, Node, true, 1, 0, 1, 0, Fail},

		// jest and vitest
		{"jest-pass.txt", "npx jest add.test.js", 0, Jest, true, 3, 2, 0, 1, Pass},
		{"jest-fail.txt", "jest", 1, Jest, true, 5, 3, 1, 1, Fail},
		{"vitest-pass.txt", "npx vitest run", 0, Vitest, true, 3, 2, 0, 1, Pass},
		{"vitest-fail.txt", "vitest run", 1, Vitest, true, 5, 3, 1, 1, Fail},
		// npm test: package.json decides, the output says.
		{"jest-pass.txt", "npm test", 0, Jest, true, 3, 2, 0, 1, Pass},
		{"vitest-pass.txt", "npm ci && npm run test", 0, Vitest, true, 3, 2, 0, 1, Pass},

		// cargo test: unit, integration and doc tests summed.
		{"cargo-pass.txt", "cargo test", 0, Cargo, true, 5, 4, 0, 1, Pass},
		{"cargo-fail.txt", "cargo test", 101, Cargo, true, 3, 1, 1, 1, Fail},
		// A test ended the binary with process::exit(0): its heading has
		// no closing line.
		{"cargo-exit.txt", "cargo test --lib", 0, Cargo, false, 0, 0, 0, 0, Vacuous},

		// A script's output is read for any runner's report.
		{"cargo-pass.txt", "sh tests/F-001.sh", 0, Cargo, true, 5, 4, 0, 1, Pass},
		// (go test's passes are its exit status's to judge there: the
		// daemon's guard is not in the script's go test.)
		{"go-pass.json", "./tests/run.sh", 0, GoTest, true, 2, 2, 0, 0, Unchecked},
		{"go-fail.json", "./tests/run.sh", 0, GoTest, true, 2, 1, 1, 0, Fail},
		{"pytest-none.txt", "bash tests/F-001.sh", 0, Pytest, true, 0, 0, 0, 0, Vacuous},
		{"node-exit.tap.txt", "make test", 0, Node, true, 0, 0, 0, 0, Vacuous},
		// …and with none in it, the exit status is all there is.
		{"README.md", "sh tests/F-001.sh", 0, "", false, 0, 0, 0, 0, Unchecked},
		{"README.md", "sh tests/F-001.sh", 3, "", false, 0, 0, 0, 0, Fail},
		// Not a runner: never read, whatever the output says.
		{"pytest-pass.txt", "curl -sf localhost:8080/health", 0, "", false, 0, 0, 0, 0, Unchecked},
		{"go-exitinit.json", "echo go test ./...", 0, "", false, 0, 0, 0, 0, Unchecked},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.test, func(t *testing.T) {
			r := Read(tt.test, readFile(t, tt.file))
			if r.Runner != tt.runner || r.Found != tt.found {
				t.Errorf("Runner, Found = %q, %v; want %q, %v", r.Runner, r.Found, tt.runner, tt.found)
			}
			if r.Ran != tt.ran || r.Passed != tt.passed || r.Failed != tt.failed || r.Skipped != tt.skipped {
				t.Errorf("ran, passed, failed, skipped = %d, %d, %d, %d; want %d, %d, %d, %d",
					r.Ran, r.Passed, r.Failed, r.Skipped, tt.ran, tt.passed, tt.failed, tt.skipped)
			}
			got, reason := r.Verdict(tt.exit)
			if got != tt.want {
				t.Errorf("Verdict(%d) = %s (%s), want %s", tt.exit, got, reason, tt.want)
			}
			if reason == "" || strings.Contains(reason, "\n") {
				t.Errorf("reason %q is not one line", reason)
			}
		})
	}
}

// TestGuardedForgeryBesideAnHonestPackage: with the guard, a package whose
// binary printed a pass's framing (and "PASS") before its tests and ended
// is missing its report even beside a package that ran tests: what it
// printed is text of the test "(before tests)", and its "PASS" no closing.
func TestGuardedForgeryBesideAnHonestPackage(t *testing.T) {
	out := append(readFile(t, "go-pass.json"), readFile(t, "go-fake.guarded.json")...)
	r := Read(Instrument("go test ./pass ./fake"), out)
	if o, reason := r.Verdict(0); o != Vacuous || r.Ran != 2 || r.Passed != 2 {
		t.Errorf("%s (%s), ran %d passed %d; want vacuous, the honest package's 2 tests counted", o, reason, r.Ran, r.Passed)
	}
	if !strings.Contains(r.Text, "--- PASS: TestAdd (0.00s)\nPASS\n") {
		t.Errorf("the forged lines are not in the text: %q", r.Text)
	}
}

// TestGoText: people and agents read go test's text, not its events; the
// lines that are not events (another command's output) stay as they were.
func TestGoText(t *testing.T) {
	out := append([]byte("building…\n"), readFile(t, "go-fail.json")...)
	r := Read("go build ./... && go test ./fail", out)
	want := "building…\n" +
		"=== RUN   TestAdd\n" +
		"    calc_test.go:7: Add(1, 2) = -1, want 3\n" +
		"--- FAIL: TestAdd (0.00s)\n" +
		"=== RUN   TestSub\n" +
		"--- PASS: TestSub (0.00s)\n" +
		"FAIL\n" +
		"FAIL\texample.com/calc/fail\t"
	if !strings.HasPrefix(r.Text, want) || strings.Contains(r.Text, `"Action"`) {
		t.Errorf("Text =\n%s\nwant it to start with\n%s", r.Text, want)
	}
	// The fake events the code printed are text, as go test printed them.
	r = Read("go test ./fakejson", readFile(t, "go-fakejson.json"))
	if !strings.HasPrefix(r.Text, `{"Action":"run","Package":"example.com/calc/fakejson","Test":"TestAdd"}`+"\n") {
		t.Errorf("Text = %q", r.Text)
	}
	// Build errors go test prints as build-output events.
	r = Read("go test ./buildfail", readFile(t, "go-buildfail.json"))
	if !strings.Contains(r.Text, "undefined: Add\n") || !strings.Contains(r.Text, "[build failed]") {
		t.Errorf("Text = %q", r.Text)
	}
	// Other runners' output is the text itself.
	out = readFile(t, "pytest-fail.txt")
	if r := Read("pytest", out); r.Text != string(out) {
		t.Errorf("pytest Text changed")
	}
}

// TestForgedEvents: only whole event lines are events, and a line printed
// outside go test (not wrapped) that is an event counts like one: which
// is why the package doc lists it among what can be forged.
func TestForgedEvents(t *testing.T) {
	out := "--- PASS: TestAdd (0.00s)\nPASS\nok  \tx\t0.01s\n" +
		`{"Action":"pass","Package":"x"}` + "\n"
	if o, _ := Read("go test ./...", []byte(out)).Verdict(0); o != Vacuous {
		t.Errorf("text framing lines outside events counted: %s", o)
	}
	out += `{"Action":"run","Package":"x","Test":"TestA"}` + "\n" + `{"Action":"pass","Package":"x","Test":"TestA"}` + "\n"
	if o, _ := Read("go test ./...", []byte(out)).Verdict(0); o != Vacuous {
		t.Errorf("a package that passed without the testing package's PASS: %s", o)
	}
	out += `{"Action":"output","Package":"x","Output":"PASS\n"}` + "\n"
	if o, _ := Read("go test ./...", []byte(out)).Verdict(0); o != Pass {
		t.Errorf("whole events: %s", o)
	}
	// A failure anywhere wins over any number of passes.
	out += `{"Action":"fail","Package":"y"}` + "\n"
	if o, _ := Read("go test ./...", []byte(out)).Verdict(0); o != Fail {
		t.Errorf("a package failure: %s", o)
	}
}

// TestTextSummaries: the last summary counts, a failure on any summary
// line wins, and colour does not hide a summary.
func TestTextSummaries(t *testing.T) {
	tests := []struct {
		test, out string
		want      Outcome
	}{
		{"pytest", "3 passed in 0.1s\n", Pass},
		{"pytest", "======= 1 failed, 3 passed in 0.1s =======\n", Fail},
		{"pytest", "1 failed in 0.1s\n5 passed in 0.1s\n", Fail},
		{"pytest", "5 passed in 0.1s\nno tests ran in 0.1s\n", Vacuous},
		{"pytest", "\x1b[32m\x1b[1m3 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m\n", Pass},
		{"pytest", "5 errors in 0.2s\n", Fail},
		{"pytest", "3 skipped in 0.1s\n", Vacuous},
		{"pytest", "2 passed, 1 xfailed in 3.20s (0:00:03)\n", Pass},
		{"pytest", "we have 3 passed in 0.1s\n", Vacuous},
		{"node --test", "# tests 2\n# pass 2\n# fail 1\n# tests 2\n# pass 2\n# fail 0\n", Fail},
		{"node --test", "# tests 0\n# pass 0\n# fail 0\n", Vacuous},
		{"node --test", "ℹ tests 1\nℹ pass 0\nℹ fail 0\nℹ cancelled 1\n", Fail},
		{"node --test", "# \\# tests 3\n# \\# pass 3\n", Vacuous},
		{"jest", "Tests:       2 passed, 2 total\n", Pass},
		{"jest", "Test Suites: 1 failed, 1 total\nTests:       0 total\n", Fail},
		{"jest", "Test Suites: 1 failed, 1 total\n", Fail},
		{"jest", "No tests found, exiting with code 0\n", Vacuous},
		{"vitest run", " Test Files  1 failed (1)\n      Tests  no tests\n", Fail},
		{"vitest run", "      Tests  3 passed (3)\n", Pass},
		{"cargo test", "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n", Vacuous},
		{"cargo test -q", "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n", Fail},
		{"cargo test", "     Running unittests src/lib.rs (target/debug/deps/a-1)\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n", Fail},
		{"pytest", "9999999999999999999999 passed in 0.1s\n", Pass},
	}
	for _, tt := range tests {
		r := Read(tt.test, []byte(tt.out))
		if o, reason := r.Verdict(0); o != tt.want {
			t.Errorf("%s on %q: %s (%s), want %s", tt.test, tt.out, o, reason, tt.want)
		}
	}
}

// TestRunnerOf: the runner is the command's, read as the shell reads it.
func TestRunnerOf(t *testing.T) {
	tests := []struct{ test, runner string }{
		{"go test ./...", GoTest},
		{"cd sub && GOFLAGS=-mod=mod go test -run TestX ./pkg", GoTest},
		{"timeout 300 go test ./...", GoTest},
		{"env CGO_ENABLED=0 /usr/local/go/bin/go test .", GoTest},
		{"go -C sub test ./...", GoTest},
		{"python -m pytest -x", Pytest},
		{"python3.12 -m pytest", Pytest},
		{"node --test-reporter=spec --test test/", Node},
		{"pnpm exec vitest run", Vitest},
		{"yarn jest --ci", Jest},
		{"cargo +stable test --locked", Cargo},
		{"go vet ./... && go test ./... && cargo test", GoTest + " + " + Cargo},
		{"sh -c 'go test ./...'", GoTest},
		// Not runners.
		{"go vet ./...", ""},
		{"go build ./... && ./bin/app --selftest", ""},
		{"node test.js", ""},
		{"python3 -m unittest", ""},
		{"npx eslint .", ""},
		{"cargo build", ""},
		{"echo pytest", ""},
		{"go test ./... && (", ""},
	}
	for _, tt := range tests {
		// An empty output: what the command names is all there is.
		if got := Read(tt.test, nil).Runner; got != tt.runner {
			t.Errorf("Read(%q).Runner = %q, want %q", tt.test, got, tt.runner)
		}
	}
}

// TestInstrument: -json and the guard go into every go test, and nothing
// else changes. {G} stands for the guard's flag as the shell reads it at the
// top of the command.
func TestInstrument(t *testing.T) {
	tests := []struct{ test, want string }{
		{"go test ./...", "go test -json {G} ./..."},
		{"go test", "go test -json {G}"},
		{"cd x &&  go   test  -run 'TestA|TestB' ./...   # why", "cd x &&  go   test -json {G}  -run 'TestA|TestB' ./...   # why"},
		{"go vet ./... && go test ./a && go test ./b", "go vet ./... && go test -json {G} ./a && go test -json {G} ./b"},
		{"timeout 60 go test -count=1 .", "timeout 60 go test -json {G} -count=1 ."},
		{"GOFLAGS=-race go test .", "GOFLAGS=-race go test -json {G} ."},
		{"go test\n", "go test -json {G}\n"},
		// Already machine-readable: the guard alone.
		{"go test -json ./...", "go test {G} -json ./..."},
		{"go test -v -json=true ./...", "go test {G} -v -v=test2json -json=true ./..."},
		// -json after -args is the test binary's.
		{"go test . -args -json", "go test -json {G} . -args -json"},
		// -v would turn the testing package's marks off: the last -v is
		// followed by one that keeps them.
		{"go test -v ./...", "go test -json {G} -v -v=test2json ./..."},
		{"go test -v -count=1 ./... -v=true -args -v", "go test -json {G} -v -count=1 ./... -v=true -v=test2json -args -v"},
		{"go test -json -v=test2json ./...", "go test {G} -json -v=test2json ./..."},
		// An -exec of its own is kept (and the run is unguarded).
		{"go test -exec=env ./...", "go test -json -exec=env ./..."},
		{"go test -json -exec env ./...", "go test -json -exec env ./..."},
		// Instrumented already: nothing more.
		{"go test -json {G} ./...", "go test -json {G} ./..."},
		// Not go test: byte for byte.
		{"go vet ./...", "go vet ./..."},
		{"echo go test", "echo go test"},
		{"pytest -q", "pytest -q"},
		{"cargo test", "cargo test"},
		{"node --test", "node --test"},
		{"sh tests/F-001.sh", "sh tests/F-001.sh"},
		{"go test ./... && (", "go test ./... && ("},
		{"", ""},
		// A quoted program whose text is not the command's bytes is not
		// changed (Read then does not expect JSON from it).
		{`sh -c "go test \"./...\""`, `sh -c "go test \"./...\""`},
	}
	g := "-exec=" + shellQuote(goGuard)
	for _, tt := range tests {
		test, want := strings.ReplaceAll(tt.test, "{G}", g), strings.ReplaceAll(tt.want, "{G}", g)
		if got := Instrument(test); got != want {
			t.Errorf("Instrument(%q) = %q, want %q", tt.test, got, tt.want)
		}
		// Read agrees with Instrument: the instrumented command is the
		// same test.
		if a, b := Read(test, nil), Read(Instrument(test), nil); a.Runner != b.Runner {
			t.Errorf("%q: runner %q, instrumented %q", tt.test, a.Runner, b.Runner)
		}
	}
	if got := Read(`sh -c "go test \"./...\""`, nil).Runner; got != "" {
		t.Errorf("an uninstrumented go test expects JSON: %q", got)
	}
}

// TestInstrumentGivesGoTheGuard runs instrumented commands with a `go`
// that prints its arguments: inside `sh -c` programs quoted every way,
// go receives -json and the guard's -exec word for word, and Read of the
// command as run knows it guarded; a go test with an -exec of its own
// keeps it, and Read knows that one unguarded.
func TestInstrumentGivesGoTheGuard(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	guard := "[test]\n[-json]\n[-exec=" + goGuard + "]\n"
	tests := []struct {
		test, args string
		unguarded  bool
	}{
		{"go test ./...", guard + "[./...]\n", false},
		{"sh -c 'cd . && go test -run \"A|B\" ./...'", guard + "[-run]\n[A|B]\n[./...]\n", false},
		{`bash -c "go test ./..."`, guard + "[./...]\n", false},
		{`sh -c "sh -c 'go test -count=1 ./...'"`, guard + "[-count=1]\n[./...]\n", false},
		{`sh -c 'sh -c "go test ./..."'`, guard + "[./...]\n", false},
		{"env A=1 timeout 60 go test -v .", guard + "[-v]\n[-v=test2json]\n[.]\n", false},
		{`sh -c "go test -v ./..."`, guard + "[-v]\n[-v=test2json]\n[./...]\n", false},
		{"go test -exec=env .", "[test]\n[-json]\n[-exec=env]\n[.]\n", true},
		{"go test -json -exec 'env X=1' .", "[test]\n[-json]\n[-exec]\n[env X=1]\n[.]\n", true},
	}
	for _, tt := range tests {
		run := Instrument(tt.test)
		cmd := exec.Command("/bin/sh", "-c", run)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != tt.args {
			t.Errorf("%s: run as %s\ngo got (%v)\n%s\nwant\n%s", tt.test, run, err, out, tt.args)
		}
		if got := Read(run, []byte(readFile(t, "go-pass.json"))); got.Unguarded != tt.unguarded {
			t.Errorf("%s: Unguarded = %v, want %v", tt.test, got.Unguarded, tt.unguarded)
		}
	}
}

// TestRealGoTest runs go test as the daemon would, on a tiny module: a
// package whose test passes, one whose init ends the test binary, one
// whose init prints the framing of a pass (unmarked, as any code can)
// and then ends it, one that skips and one that fails. Without the guard
// the forged framing makes a pass; with it, the forging package ran no
// test, alone or beside honest ones, while honest packages pass with
// whatever flags.
func TestRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":          "module example.com/m\n\ngo 1.22\n",
		"ok/ok_test.go":   "package ok\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {\n\tt.Log(\"PASS\")\n\tt.Run(\"a sub\", func(t *testing.T) {})\n}\n",
		"early/early.go":  "package early\n\nimport (\n\t\"os\"\n\t\"strings\"\n)\n\nfunc init() {\n\tif strings.HasSuffix(os.Args[0], \".test\") {\n\t\tos.Exit(0)\n\t}\n}\n",
		"early/e_test.go": "package early\n\nimport \"testing\"\n\nfunc TestNever(t *testing.T) { t.Fatal(\"never runs\") }\n",
		"forge/forge.go": "package forge\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc init() {\n\tif strings.HasSuffix(os.Args[0], \".test\") {\n" +
			"\t\tfmt.Print(\"=== RUN   TestForged\\n--- PASS: TestForged (0.00s)\\nPASS\\n\")\n\t\tos.Exit(0)\n\t}\n}\n",
		"forge/f_test.go": "package forge\n\nimport \"testing\"\n\nfunc TestForged(t *testing.T) { t.Fatal(\"never runs\") }\n",
		"skip/s_test.go":  "package skip\n\nimport \"testing\"\n\nfunc TestSkipped(t *testing.T) { t.Skip(\"not here\") }\n\nfunc TestRuns(t *testing.T) {\n\tfor _, n := range []string{\"x\", \"y\"} {\n\t\tt.Run(n, func(t *testing.T) {})\n\t}\n}\n",
		"fails/f_test.go": "package fails\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Error(\"no\") }\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin", "HOME=" + dir, "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off"}
	for _, k := range []string{"GOCACHE", "GOROOT", "GOMODCACHE"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if os.Getenv("GOCACHE") == "" {
		if c, err := exec.Command(goBin, "env", "GOCACHE").Output(); err == nil {
			env = append(env, "GOCACHE="+strings.TrimSpace(string(c)))
		}
	}
	run := func(command string) ([]byte, int) {
		t.Helper()
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return out, code
	}
	// The forgery, unguarded: go test -json believes the framing.
	if out, code := run("go test -json ./forge"); code != 0 {
		t.Fatalf("the forging package, unguarded: exit %d\n%s", code, out)
	} else if o, reason := Read("go test -json ./forge", out).Verdict(code); o != Pass {
		t.Fatalf("the forgery no longer works without the guard (%s: %s): this test shows nothing\n%s", o, reason, out)
	}
	for _, tt := range []struct {
		test string
		want Outcome
	}{
		{"go test ./ok", Pass},
		{"go test -v -count=1 -run 'TestOK' ./ok ./skip", Pass},
		{"go test -count=1 ./ok ./skip", Pass},
		{"go test -json -v ./skip", Pass},
		{"go test -run TestSkipped ./skip", Vacuous},
		{"go test ./fails", Fail},
		{"go test ./ok ./fails", Fail},
		{"go test ./early", Vacuous},
		// One package ran its test; the other's binary ended first.
		{"go test ./ok ./early", Vacuous},
		{"go test ./forge", Vacuous},
		{"go test -v -count=1 -run TestForged ./forge", Vacuous},
		{"go test ./ok ./skip ./forge", Vacuous},
		{"go test ./...", Fail},
		{"sh -c 'go test ./ok ./forge'", Vacuous},
	} {
		out, code := run(Instrument(tt.test))
		r := Read(tt.test, out)
		if o, reason := r.Verdict(code); o != tt.want {
			t.Errorf("%s: %s (%s), want %s; output:\n%s", tt.test, o, reason, tt.want, out)
		}
		if strings.Contains(r.Text, `"Action"`) {
			t.Errorf("%s: Text holds JSON:\n%s", tt.test, r.Text)
		}
	}
}

// FuzzRead feeds Read arbitrary output under each runner: it must never
// panic, counts are never negative, Text keeps every line that is not an
// event, and a failure anywhere is never judged a pass.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"go-mixed.json", "go-buildfail.json", "pytest-fail.txt", "node-pass.tap.txt", "node-exit.spec.txt", "jest-fail.txt", "vitest-fail.txt", "cargo-pass.txt", "cargo-exit.txt"} {
		f.Add(readFile(f, name), uint8(0))
	}
	f.Add([]byte(`{"Action":"output","Package":"x","Output":null}`), uint8(0))
	f.Add([]byte("\x1b[1m1 passed in 1s\n"), uint8(0))
	commands := []string{"go test ./...", "pytest", "node --test", "jest", "vitest run", "cargo test", "sh t.sh", "npm test", "true"}
	f.Fuzz(func(t *testing.T, output []byte, which uint8) {
		test := commands[int(which)%len(commands)]
		r := Read(test, output)
		if r.Ran < 0 || r.Passed < 0 || r.Failed < 0 || r.Skipped < 0 {
			t.Fatalf("negative count: %+v", r)
		}
		if utf8.Valid(output) && !utf8.ValidString(r.Text) && !strings.Contains(string(output), `"Output"`) {
			t.Errorf("Text is not valid UTF-8")
		}
		o, reason := r.Verdict(0)
		if reason == "" {
			t.Error("no reason")
		}
		if r.Failed > 0 && o != Fail {
			t.Errorf("%d failed judged %s", r.Failed, o)
		}
		if o == Pass && (r.Runner == "" || !r.Found || r.Passed == 0) {
			t.Errorf("pass without a report: %+v", r)
		}
		if o, _ := r.Verdict(1); o != Fail {
			t.Errorf("exit 1 judged %s", o)
		}
	})
}
