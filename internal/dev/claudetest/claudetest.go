// Package claudetest gives tests that drive the real Claude Code CLI one way
// to find it and one isolated environment to run it in.
//
// The CLI is found through CTXGRAPHD_TEST_CLAUDE (set by the Makefile to the
// pinned copy in .tools/) or on PATH. When it is missing a test is skipped on
// a developer's machine and fails in CI (CI=true), so that a broken install
// can never turn the end-to-end suite green by skipping it.
package claudetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary returns the path of the claude executable or ends the test.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("CTXGRAPHD_TEST_CLAUDE"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		missing(tb, "CTXGRAPHD_TEST_CLAUDE="+p+" does not exist")
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	missing(tb, "claude is not on PATH and CTXGRAPHD_TEST_CLAUDE is unset")
	return ""
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("the Claude Code CLI is required in CI: %s (run `make claude`)", why)
	}
	tb.Skipf("skipping: %s (run `make test`, which installs it)", why)
}

// Env returns an environment for claude that talks only to baseURL, keeps its
// configuration in a fresh directory, and may run as root. It starts from the
// test process's environment minus anything that would make claude think it
// is nested inside another Claude Code session.
func Env(tb testing.TB, baseURL string) []string {
	tb.Helper()
	home := tb.TempDir()
	env := Clean(os.Environ())
	env = append(env,
		"HOME="+home,
		"CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY=scripted-model",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
	)
	if os.Geteuid() == 0 {
		// Tests run in throwaway directories: opting in to agents as root is
		// safe here, and CI machines run as root.
		env = append(env, "IS_SANDBOX=1")
	}
	return env
}

// Clean drops variables that would leak the developer's own Claude Code
// session, credentials or endpoint into a test.
func Clean(env []string) []string {
	drop := map[string]bool{
		"CLAUDECODE": true, "CLAUDE_CODE_ENTRYPOINT": true, "CLAUDE_CODE_SESSION_ID": true,
		"CLAUDE_PROJECT_DIR": true, "CLAUDE_CODE_CHILD_SESSION": true, "CLAUDE_PID": true,
		"CLAUDE_CONFIG_DIR": true, "ANTHROPIC_BASE_URL": true, "ANTHROPIC_API_KEY": true,
		"ANTHROPIC_AUTH_TOKEN": true, "CLAUDE_CODE_OAUTH_TOKEN": true, "HOME": true,
		"CTXGRAPH_AGENT": true, "CTXGRAPH_FEATURE": true, "CTXGRAPH_RUN": true, "CTXGRAPH_SOCKET": true,
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}
