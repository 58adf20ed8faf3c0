package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// On Linux, Claude Code sandboxes a command with bubblewrap, and reaches
// its network proxy through socat; it refuses to start when either is
// missing from PATH.

// trialArgs start the smallest sandbox that needs what Claude Code's does:
// a new session, user, pid and network namespace, the root read-only.
var trialArgs = []string{
	"--new-session", "--die-with-parent",
	"--unshare-user", "--unshare-pid", "--unshare-net",
	"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
	"--", "/bin/true",
}

// host is what Check looks at on Linux, replaced in tests.
type host struct {
	// path is the PATH searched for bwrap and socat, as Claude Code does.
	path string
	// run runs a program to its end and returns what it wrote to stderr.
	run func(ctx context.Context, name string, args ...string) (stderr []byte, err error)
}

func newHost() host {
	return host{path: os.Getenv("PATH"), run: runStderr}
}

func (h host) check(ctx context.Context) error {
	var missing []string
	found := map[string]string{}
	for _, tool := range []string{"bwrap", "socat"} {
		p, ok := paths.LookPath(tool, h.path)
		if !ok {
			missing = append(missing, tool)
		}
		found[tool] = p
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found on PATH %q; install bubblewrap and socat: "+
			"apt install bubblewrap socat (Debian/Ubuntu), dnf install bubblewrap socat (Fedora)",
			ErrUnavailable, strings.Join(missing, " and "), h.path)
	}
	stderr, err := h.run(ctx, found["bwrap"], trialArgs...)
	if err != nil {
		return fmt.Errorf("%w: bubblewrap cannot create a sandbox here: `%s %s` failed (%v): %q. "+
			"Unprivileged user namespaces are probably restricted. The known case is Ubuntu 24.04, "+
			"where AppArmor restricts them: allow them with `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "+
			"(and the same line in /etc/sysctl.d/ to keep it), or run ctxgraphd where they are allowed",
			ErrUnavailable, found["bwrap"], strings.Join(trialArgs, " "), err, strings.TrimSpace(string(stderr)))
	}
	return nil
}

func runStderr(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return stderr.Bytes(), err
}
