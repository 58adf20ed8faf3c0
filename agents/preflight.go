package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// MinVersion is the oldest Claude Code the daemon drives: the version its
// end-to-end tests run (the Makefile pins it). The daemon reads the CLI's
// headless output, its hooks and its sandbox settings, which older
// versions lack or spell differently.
const MinVersion = "2.1.330"

// MinNode is the oldest Node.js Claude Code's npm package supports (its
// engines field). It matters only when the CLI is a Node script; the native
// binary needs no Node at all.
const MinNode = 22

// Settings name where a person sets what the checks of this package are
// about, for the advice that comes with a refusal: the daemon's
// configuration keys, or a worker's flags.
type Settings struct {
	// Command is where the Claude Code CLI is named.
	Command string
	// AllowRoot says how to opt in to agents as root.
	AllowRoot string
}

// The daemon's settings and a worker's.
var (
	DaemonSettings = Settings{Command: "agent.command",
		AllowRoot: "`agent.allow_root: true` in .claude/ctxgraphd.yaml (or CTXGRAPHD_AGENT_ALLOW_ROOT=true, or IS_SANDBOX=1 in the daemon's environment)"}
	WorkerSettings = Settings{Command: "the worker's --claude",
		AllowRoot: "`ctxgraphd worker --allow-root` (or IS_SANDBOX=1 in the worker's environment)"}
)

// preflightTimeout bounds each of the CLI's checks: a cold start of the
// Node CLI takes seconds, a hung one must not hold the daemon's start.
const preflightTimeout = 30 * time.Second

// Preflight checks, before anything is spent, that command is a Claude Code
// CLI the daemon can drive under env, the agents' environment: found on
// env's PATH, new enough, on a Node it supports when it is a Node script,
// and logged in. It returns every problem it found, each saying what to do,
// or nil.
func Preflight(ctx context.Context, command string, env []string, where Settings) error {
	path := lookupEnv(env, "PATH")
	exe, ok := paths.LookPath(command, path)
	if !ok {
		return fmt.Errorf("%s %q was not found on the agents' PATH (%s): install Claude Code "+
			"(npm install -g @anthropic-ai/claude-code@%s, or its native installer) or set %s to its full path", where.Command, command, path, MinVersion, where.Command)
	}
	// The CLI is asked all at once: each start of it takes a while, and
	// the daemon's start waits for the slowest (auth status, often).
	auth := make(chan error, 1)
	go func() { auth <- checkAuth(ctx, exe, env) }()
	var problems []error
	if err := checkNode(ctx, exe, path, env); err != nil {
		problems = append(problems, err)
	}
	out, err := preflightRun(ctx, env, exe, "--version")
	authErr := <-auth
	if err != nil {
		return errors.Join(append(problems, fmt.Errorf("`%s --version` failed (%v): %s; check the install", exe, err, oneLine(out)))...)
	}
	if err := checkVersion(exe, out, where); err != nil {
		problems = append(problems, err)
	}
	if authErr != nil {
		problems = append(problems, authErr)
	}
	return errors.Join(problems...)
}

// checkVersion holds the output of `claude --version` ("2.1.330 (Claude
// Code)") to MinVersion.
func checkVersion(exe, out string, where Settings) error {
	v := strings.Fields(out)
	if len(v) == 0 {
		return fmt.Errorf("`%s --version` printed nothing; check the install", exe)
	}
	got, ok := parseVersion(v[0])
	if !ok {
		return fmt.Errorf("`%s --version` printed %q, which is not a Claude Code version; is %s the Claude Code CLI?", exe, oneLine(out), where.Command)
	}
	min, _ := parseVersion(MinVersion)
	if compareVersions(got, min) < 0 {
		return fmt.Errorf("Claude Code %s is older than %s, the oldest version ctxgraphd drives; update it (`%s update`, or npm install -g @anthropic-ai/claude-code@%s)", v[0], MinVersion, exe, MinVersion)
	}
	return nil
}

// checkAuth asks the CLI whether it can authenticate, without a request to
// the API: `claude auth status` prints {"loggedIn": …} and exits 1 when
// not. The agents' environment is the one asked, so an ANTHROPIC_API_KEY
// given to the service counts.
func checkAuth(ctx context.Context, exe string, env []string) error {
	out, err := preflightRun(ctx, env, exe, "auth", "status")
	var st struct {
		LoggedIn *bool `json:"loggedIn"`
	}
	if jerr := json.Unmarshal([]byte(out), &st); jerr != nil || st.LoggedIn == nil {
		if err != nil {
			return fmt.Errorf("`%s auth status` failed (%v): %s; check the install", exe, err, oneLine(out))
		}
		return fmt.Errorf("`%s auth status` printed %q, not the JSON it prints; check the install", exe, oneLine(out))
	}
	if !*st.LoggedIn {
		return errors.New(Failure{Kind: FailAuth, Detail: "not logged in"}.ExplainAtStart(exe))
	}
	return nil
}

// checkNode checks the Node.js a Node script of the CLI would run on.
func checkNode(ctx context.Context, exe, path string, env []string) error {
	interp, ok := nodeInterpreter(exe)
	if !ok {
		return nil // the native binary
	}
	node, found := paths.LookPath(interp, path)
	if !found {
		return fmt.Errorf("%s is a Node.js script, and %s was not found on the agents' PATH (%s): install Node.js %d or later, or Claude Code's native build", exe, interp, path, MinNode)
	}
	out, err := preflightRun(ctx, env, node, "--version")
	if err != nil {
		return fmt.Errorf("`%s --version` failed (%v): %s", node, err, oneLine(out))
	}
	major, ok := nodeMajor(out)
	if !ok {
		return fmt.Errorf("`%s --version` printed %q, which is not a Node.js version", node, oneLine(out))
	}
	if major < MinNode {
		return fmt.Errorf("Claude Code runs on Node.js %d or later, and %s is %s: install a newer Node.js, or Claude Code's native build", MinNode, node, strings.TrimSpace(out))
	}
	return nil
}

// nodeInterpreter reads exe's #! line and reports the node it names: a
// path, or "node" for `#!/usr/bin/env node`.
func nodeInterpreter(exe string) (string, bool) {
	f, err := os.Open(exe)
	if err != nil {
		return "", false
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return "", false
	}
	// The interpreter is the first word that is not env, its flags (-S)
	// or its variables.
	for _, w := range strings.Fields(string(line[2:])) {
		b := filepath.Base(w)
		if b == "env" || strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
			continue
		}
		return w, b == "node" || b == "nodejs"
	}
	return "", false
}

// nodeMajor reads "v22.3.0".
func nodeMajor(out string) (int, bool) {
	v, ok := strings.CutPrefix(strings.TrimSpace(out), "v")
	if !ok {
		return 0, false
	}
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil
}

// parseVersion reads a dotted version of numbers: "2.1.330".
func parseVersion(s string) ([]int, bool) {
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, len(out) > 0
}

// compareVersions orders two parsed versions; a missing part counts as 0.
func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// preflightRun runs a check of the CLI to its end and returns its output.
func preflightRun(ctx context.Context, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Stdin = nil // /dev/null: an open pipe makes the CLI wait for it
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// lookupEnv is the value of key in env, the last one winning as in exec.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
