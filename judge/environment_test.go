package judge

import (
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
)

// The daemon's own run of a test tells what the machine or the jail kept
// from running (a runner missing from PATH, a directory held read-only, a
// registry out of reach) from what the code got wrong, which is the
// attempt's. Each case runs in the jail, for real.
func TestRunTestTellsTheMachinesFailures(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name string
		test string
		want *diagnose.Environment // nil: the code's
	}{
		{"a runner missing from PATH", "no-such-runner-ctxgraphd -q", &diagnose.Environment{Kind: diagnose.EnvNoRunner, Program: "no-such-runner-ctxgraphd"}},
		{"a directory outside the checkout, read-only in the jail", "mkdir /var/lib/ctxgraphd-test-cache", &diagnose.Environment{Kind: diagnose.EnvReadOnly, Path: "/var/lib/ctxgraphd-test-cache"}},
		{"a program of the project's own, never built", "./bin/app", nil},
		{"a failing test", "echo 'want 2, got 1' >&2; exit 1", nil},
		{"a passing test", "true", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.runTest(t.Context(), tc.test)
			if tc.want == nil {
				if r.Env != nil {
					t.Errorf("Env = %+v, want the code's (%s)", *r.Env, r.Summary())
				}
				return
			}
			if r.Env == nil {
				t.Fatalf("Env = nil, want %+v (%s; output %q)", *tc.want, r.Summary(), r.Output)
			}
			got := *r.Env
			if got.Kind != tc.want.Kind || got.Path != tc.want.Path || got.Program != tc.want.Program || got.Place != diagnose.InJail {
				t.Errorf("Env = %+v, want %+v in the jail", got, *tc.want)
			}
			if r.Passed() {
				t.Error("a test its machine kept from running passed")
			}
		})
	}
}

// A tester's failing test command whose output shows a failure of the
// machine or of the sandbox is kept with its run; the output of a command
// that ran no test, or of a test that failed on its own, is not. The
// errors are the PostToolUseFailure payloads' as Claude Code 2.1.330 sends
// them from its sandbox (a refused host; a build cache missing when the
// run started).
func TestHookKeepsWhatTheMachineKeptATestFrom(t *testing.T) {
	refused := "Exit code 56\ncurl: (56) CONNECT tunnel failed, response 403\n\n<sandbox_violations>\ndeny network-outbound example.com:443 (host is not on the allow list)\n</sandbox_violations>"
	cache := "Exit code 1\nfailed to initialize build cache at /root/.cache/go-build: mkdir /root/.cache/go-build: read-only file system"
	for _, tc := range []struct {
		name     string
		payloads []map[string]any
		want     *diagnose.Environment
	}{
		{"its feature's test, a host refused", []map[string]any{bashFailurePayload("sh tests/a.sh", refused)},
			&diagnose.Environment{Kind: diagnose.EnvHostRefused, Host: "example.com"}},
		{"a known runner, a cache the sandbox let it write but that was missing", []map[string]any{bashFailurePayload("go test ./...", cache)},
			&diagnose.Environment{Kind: diagnose.EnvReadOnly, Path: "/root/.cache/go-build", Missing: true}},
		{"the first one is kept", []map[string]any{bashFailurePayload("go test ./...", cache), bashFailurePayload("sh tests/a.sh", refused)},
			&diagnose.Environment{Kind: diagnose.EnvReadOnly, Path: "/root/.cache/go-build", Missing: true}},
		{"the test's output, on a success", []map[string]any{{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "sh tests/a.sh"},
			"tool_response": map[string]any{"stdout": "", "stderr": "/bin/sh: 1: pytest: not found"}}}, nil},
		{"a command that is no test", []map[string]any{bashFailurePayload("curl https://example.com", refused)}, nil},
		{"a test failing on its own", []map[string]any{bashFailurePayload("sh tests/a.sh", "Exit code 1\nwant 2, got 1")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.Writable = []string{"/root/.cache/go-build"} })
			f.j.SetList(twoFeatures())
			token := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-1"})
			for _, p := range tc.payloads {
				event := map[any]string{"PostToolUse": "post-tool-use", "PostToolUseFailure": "post-tool-use-failure"}[p["hook_event_name"]]
				f.mustHook(token, event, p)
			}
			got := f.j.Environment("run-1")
			if tc.want == nil {
				if got != nil {
					t.Errorf("Environment = %+v, want none", *got)
				}
				return
			}
			if got == nil {
				t.Fatalf("Environment = nil, want %+v", *tc.want)
			}
			if got.Kind != tc.want.Kind || got.Host != tc.want.Host || got.Path != tc.want.Path || got.Missing != tc.want.Missing || got.Place != diagnose.InSandbox {
				t.Errorf("Environment = %+v, want %+v in the sandbox", *got, *tc.want)
			}
			if !strings.Contains(got.Explain(nil), "then") {
				t.Errorf("Explain() = %q says no way on", got.Explain(nil))
			}
		})
	}
}
