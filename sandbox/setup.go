package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// Setup runs a project's setup step (its `setup:`, or what the daemon
// fetches by itself: toolchain.SafeSetupOf) in a tree, confined as an
// agent's command is: by Anthropic's sandbox runtime (srt), the sandbox of
// Claude Code as a program of its own, given the policy of an agent's run
// in that tree. It writes the tree and the toolchains' caches, reaches the
// hosts of sandbox.allowed_domains (the registries) through the runtime's
// proxy and nothing else, and cannot read the daemon's state or socket;
// it can do no more than an agent could, so what it makes (node_modules,
// a .venv, the agents' module cache) is what the test runs may be lent.
// With the sandbox off it runs with sh, as agents then run.
type Setup struct {
	// Runtime is srt's program (sandbox.runtime): a name looked up on
	// Env's PATH, or a path.
	Runtime string
	// RuntimeOption is where a person sets Runtime, for the error that
	// says how to fix a missing one; "": sandbox.runtime.
	RuntimeOption string
	// Off runs the step unconfined (sandbox.enabled false).
	Off bool
	// Env is the agents' environment, which the step runs with.
	Env []string
	// Timeout bounds one run of the step; 0: none.
	Timeout time.Duration
	// SettingsDir is where the runtime's settings are written, a
	// directory of the daemon's that no agent can read.
	SettingsDir string
}

// maxOutputKept is how much of a failed setup's output its message keeps.
const maxOutputKept = 1200

// OutputEnd is what a failed setup's message keeps of its output: its
// end, where the error is.
func OutputEnd(out []byte) string {
	return textcut.Tail(strings.TrimSpace(string(out)), maxOutputKept)
}

// ErrNoRuntime is what Run's error wraps when srt cannot be found.
var ErrNoRuntime = errors.New("the sandbox runtime (srt) was not found")

// FindRuntime is the path of the sandbox runtime: Runtime where it is a
// path, or where Env's PATH has it; ErrNoRuntime, with the install, where
// it is not there.
func (s Setup) FindRuntime() (string, error) {
	if filepath.Base(s.Runtime) != s.Runtime {
		if fi, err := os.Stat(s.Runtime); err == nil && !fi.IsDir() {
			return s.Runtime, nil
		}
	} else if found, ok := paths.LookPath(s.Runtime, lookup(s.Env)("PATH")); ok {
		return found, nil
	}
	opt := cmp.Or(s.RuntimeOption, "sandbox.runtime")
	return "", fmt.Errorf("%w as %q (%s): install it (npm install -g @anthropic-ai/sandbox-runtime, and ripgrep, which it needs) or set %s to its path", ErrNoRuntime, s.Runtime, opt, opt)
}

// RuntimeSettings returns p as the settings file of Anthropic's sandbox
// runtime: what Settings gives Claude Code, in the runtime's own shape.
func (p Policy) RuntimeSettings() map[string]any {
	allow := p.AllowWrite
	if p.ProjectDir != "" {
		allow = append([]string{p.ProjectDir}, allow...)
	}
	return map[string]any{
		"filesystem": map[string]any{
			"allowWrite": cleanPaths(allow),
			"denyWrite":  cleanPaths(p.DenyWrite),
			"denyRead":   cleanPaths(p.DenyRead),
		},
		"network": map[string]any{
			"allowedDomains": sorted(p.AllowedDomains),
			"deniedDomains":  []string{},
		},
	}
}

// Run runs script with sh in p.ProjectDir, confined by p, its output
// (stdout and stderr as they came) to out. A cancellation of ctx, or the
// timeout, ends its whole process group. The error names what failed: the
// runtime missing, the step's exit status, its time.
func (s Setup) Run(ctx context.Context, p Policy, script string, out io.Writer) error {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var cmd *exec.Cmd
	if s.Off {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", script)
	} else {
		runtime, err := s.FindRuntime()
		if err != nil {
			return err
		}
		if err := p.Prepare(); err != nil {
			fmt.Fprintf(out, "ctxgraphd: %v\n", err)
		}
		data, err := json.Marshal(p.RuntimeSettings())
		if err != nil {
			return err
		}
		if err := os.MkdirAll(s.SettingsDir, 0o700); err != nil {
			return err
		}
		f, err := os.CreateTemp(s.SettingsDir, "setup-*.json")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, runtime, "--settings", f.Name(), "-c", script)
	}
	cmd.Dir, cmd.Env = p.ProjectDir, s.Env
	cmd.Stdout, cmd.Stderr = out, out
	procgroup.Prepare(cmd)
	began := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		procgroup.KillAndWait(cmd.Process.Pid, procgroup.WaitDelay)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("it did not finish within %s", time.Since(began).Round(time.Second))
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ee):
		return fmt.Errorf("it exited %d", ee.ExitCode())
	}
	return err
}
