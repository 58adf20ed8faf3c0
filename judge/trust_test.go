package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// TestATestRunAsThePersonIsTheirs: a test run as the person runs it
// (AsThePerson, ctxgraphd verify --unconfined) is the command exactly as
// the list writes it, nothing added (a `go test` is not given -json or an
// -exec of the daemon's), in a checkout named as the project's directory,
// under no directory of the daemon's, with nothing of the daemon's beside
// it; the daemon's own run of the same test is instrumented and in a
// checkout of its own. Code that tells the two apart (by its arguments, its
// path, its neighbours) cannot pass the person's run by being in the
// daemon's.
func TestATestRunAsThePersonIsTheirs(t *testing.T) {
	bin := t.TempDir()
	seen := filepath.Join(t.TempDir(), "seen")
	// A go that says what it was asked, and where, and what is beside it.
	fake := "#!/bin/sh\n{ echo \"args: $*\"; echo \"pwd: $PWD\"; echo \"beside: $(ls -A ..)\"; } >> " + seen + "\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	for _, asPerson := range []bool{true, false} {
		os.Remove(seen)
		f := newFixture(t, func(o *Options) {
			o.Jail = sandbox.TestJail{Off: true, Env: env}
			o.AsThePerson = asPerson
		})
		f.write(map[string]string{"go.mod": "module example.com/x\n", "x_test.go": "package x\n"})
		r := f.runTest(t.Context(), "go test ./...")
		if r.ExitCode != 0 {
			t.Fatalf("as the person %v: %+v", asPerson, r)
		}
		// The person's run passes as they see it pass, by its exit
		// status: no report was asked of the runner.
		if asPerson && !r.Passed() {
			t.Errorf("as the person, a test that exited 0 did not pass: %s", r.Summary())
		}
		b, _ := os.ReadFile(seen)
		got := string(b)
		args, pwd, beside := lineOf(got, "args: "), lineOf(got, "pwd: "), lineOf(got, "beside: ")
		if !asPerson {
			if args == "test ./..." {
				t.Errorf("the daemon's own run was not instrumented: %q", args)
			}
			continue
		}
		if args != "test ./..." {
			t.Errorf("as the person, go was run with %q, want the command as written (test ./...)", args)
		}
		if filepath.Base(pwd) != filepath.Base(f.dir) {
			t.Errorf("as the person, the test ran in %s, not in a directory named as the project's (%s)", pwd, filepath.Base(f.dir))
		}
		for _, ours := range []string{"ctxgraphd", "checkouts", f.proj.StateDir} {
			if strings.Contains(pwd, ours) {
				t.Errorf("as the person, the test's path %s names %q, the daemon's", pwd, ours)
			}
		}
		if beside != filepath.Base(f.dir) {
			t.Errorf("as the person, beside the checkout is %q, want nothing but it", beside)
		}
	}
}

func lineOf(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if s, ok := strings.CutPrefix(l, prefix); ok {
			return s
		}
	}
	return ""
}

// TestARunsCommandsCostTheDaemonABoundedAmount: a run that sends more
// commands than the daemon keeps for it, and one longer than the store
// keeps of any, is held to both bounds: the store keeps a cut of the long
// one, and nothing past the count, whatever the run sends.
func TestARunsCommandsCostTheDaemonABoundedAmount(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	long := "echo " + strings.Repeat("x", 4*maxCommandStored)
	f.mustHook(tok, "post-tool-use", bashPayload(long))
	for i := range maxCommandsKept + 50 {
		f.mustHook(tok, "post-tool-use", bashPayload(fmt.Sprintf("echo %d", i)))
	}
	f.rec.mu.Lock()
	stored := slices.Clone(f.rec.commands)
	f.rec.mu.Unlock()
	if len(stored) != maxCommandsKept {
		t.Errorf("the store holds %d commands of the run, want the %d kept", len(stored), maxCommandsKept)
	}
	if n := len(stored[0].Command); n > maxCommandStored || !strings.HasPrefix(long, strings.TrimSuffix(stored[0].Command, "…")) {
		t.Errorf("the long command is stored as %d bytes, want a cut of it to %d at most", n, maxCommandStored)
	}
	if got := len(f.j.Commands("run-1")); got != maxCommandsKept {
		t.Errorf("the run keeps %d commands, want %d", got, maxCommandsKept)
	}
	if c := f.j.Commands("run-1")[0].Command; c != long {
		t.Error("the run's own record of its long command is not whole")
	}
}
