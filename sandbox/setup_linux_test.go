//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runtimeForTest is the sandbox runtime the Makefile installs, or a skip
// (a failure in CI).
func runtimeForTest(t *testing.T) string {
	t.Helper()
	srt := os.Getenv("CTXGRAPHD_TEST_SRT")
	if _, err := os.Stat(srt); srt == "" || err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI machines must have the sandbox runtime (make claude installs it): CTXGRAPHD_TEST_SRT=%q", srt)
		}
		t.Skip("CTXGRAPHD_TEST_SRT is not set: run the tests with make")
	}
	for _, tool := range []string{"bwrap", "socat", "rg", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI (make sandbox)", tool)
			}
			t.Skipf("skipping: %s is not installed", tool)
		}
	}
	return srt
}

// TestSetupIsConfinedAsAnAgentIs: the setup step, run by the real sandbox
// runtime with an agent's policy, writes its tree and the caches agents
// may write, and nothing else: not the home, not a path the policy denies
// in the tree, not the daemon's state (which it cannot read either), and
// reaches no host the policy does not allow. What it made stays.
func TestSetupIsConfinedAsAnAgentIs(t *testing.T) {
	srt := runtimeForTest(t)
	root := t.TempDir()
	tree, cache, home, state := filepath.Join(root, "tree"), filepath.Join(root, "cache"), filepath.Join(root, "home"), filepath.Join(root, "state")
	for _, d := range []string{tree, home, state} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(state, "secret"), []byte("the daemon's"), 0o600)
	os.MkdirAll(filepath.Join(tree, ".claude", "progress"), 0o755)
	p := Policy{ProjectDir: tree, AllowWrite: []string{cache}, DenyWrite: []string{filepath.Join(tree, ".claude", "progress", "feature-list.json"), filepath.Join(tree, "tests")},
		DenyRead: []string{state}, AllowedDomains: []string{"registry.npmjs.org"}}
	s := Setup{Runtime: srt, Env: append(os.Environ(), "HOME="+home), SettingsDir: filepath.Join(root, "settings"), Timeout: time.Minute}
	script := strings.Join([]string{
		"mkdir -p node_modules/dep && echo made > node_modules/dep/index.js",
		"echo cached > " + cache + "/entry",
		"(echo x > " + home + "/planted) 2>/dev/null && echo WROTE-HOME",
		"(echo x > .claude/progress/feature-list.json) 2>/dev/null && echo WROTE-LIST",
		"(mkdir -p tests && echo x > tests/t.sh) 2>/dev/null && echo WROTE-TESTS",
		"cat " + state + "/secret 2>/dev/null && echo READ-STATE",
		"curl -sS -m 10 -o /dev/null https://example.com 2>/dev/null && echo REACHED",
		"echo done",
	}, "; ")
	var out bytes.Buffer
	if err := s.Run(context.Background(), p, script, &out); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, w := range []string{"WROTE-HOME", "WROTE-LIST", "WROTE-TESTS", "READ-STATE", "the daemon's", "REACHED"} {
		if strings.Contains(got, w) {
			t.Errorf("the setup could do what no agent may (%s):\n%s", w, got)
		}
	}
	if !strings.Contains(got, "done") {
		t.Errorf("the setup did not run to its end:\n%s", got)
	}
	for _, f := range []string{filepath.Join(tree, "node_modules", "dep", "index.js"), filepath.Join(cache, "entry")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("what the setup made is not there: %v", err)
		}
	}
	for _, f := range []string{filepath.Join(home, "planted"), filepath.Join(tree, ".claude", "progress", "feature-list.json"), filepath.Join(tree, "tests", "t.sh")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was written", f)
		}
	}
	if ents, _ := os.ReadDir(s.SettingsDir); len(ents) != 0 {
		t.Errorf("the runtime's settings were left behind: %v", ents)
	}
}

// TestSetupSaysWhatFailed: a step that fails, one that runs too long, and
// a runtime that is not there each end in an error that says so, with the
// step's output kept.
func TestSetupSaysWhatFailed(t *testing.T) {
	srt := runtimeForTest(t)
	tree := t.TempDir()
	p := Policy{ProjectDir: tree}
	s := Setup{Runtime: srt, Env: os.Environ(), SettingsDir: t.TempDir(), Timeout: time.Minute}
	var out bytes.Buffer
	err := s.Run(context.Background(), p, "echo fetching; exit 3", &out)
	if err == nil || err.Error() != "it exited 3" || !strings.Contains(out.String(), "fetching") {
		t.Errorf("a failing step: %v, output %q", err, out.String())
	}
	s.Timeout = time.Second
	began := time.Now()
	err = s.Run(context.Background(), p, "sleep 60 & sleep 60", &out)
	if err == nil || !strings.Contains(err.Error(), "did not finish within") || time.Since(began) > 20*time.Second {
		t.Errorf("a step past its time: %v after %s", err, time.Since(began))
	}
	s.Runtime = "srt-not-installed"
	if err := s.Run(context.Background(), p, "true", &out); !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "sandbox.runtime") {
		t.Errorf("a missing runtime: %v", err)
	}
	s.Off = true
	out.Reset()
	if err := s.Run(context.Background(), p, "echo unconfined > made", &out); err != nil {
		t.Errorf("unconfined: %v\n%s", err, out.String())
	} else if b, _ := os.ReadFile(filepath.Join(tree, "made")); string(b) != "unconfined\n" {
		t.Errorf("unconfined, the step ran elsewhere: %q", b)
	}
}

// TestUnconfinedTestRunsGetAPortOfTheirOwn: with OwnPort, every
// unconfined run is given PORT, a port it can listen on; without it (a
// person's run as they would make it: verify --unconfined), none.
func TestUnconfinedTestRunsGetAPortOfTheirOwn(t *testing.T) {
	for _, own := range []bool{true, false} {
		j := TestJail{Off: true, OwnPort: own, Checkout: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}}
		jc, err := j.Command(context.Background(), `echo "port=$PORT"; [ -z "$PORT" ] || python3 -c "import socket,os; s=socket.socket(); s.bind(('127.0.0.1', int(os.environ['PORT']))); print('listened')"`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := jc.Cmd.CombinedOutput()
		got := string(out)
		switch {
		case err != nil:
			t.Errorf("own %v: %v\n%s", own, err, got)
		case own && (strings.Contains(got, "port=\n") || !strings.Contains(got, "listened")):
			t.Errorf("with OwnPort, no port to listen on:\n%s", got)
		case !own && got != "port=\n":
			t.Errorf("without OwnPort, a port was given:\n%s", got)
		}
	}
}
