package sandbox

import (
	"context"
	"fmt"
	"os"
)

// On macOS, Claude Code sandboxes a command with sandbox-exec, which is
// part of the system.

// host is what Check looks at on macOS, replaced in tests.
type host struct {
	sandboxExec string // where sandbox-exec is
}

func newHost() host {
	return host{sandboxExec: "/usr/bin/sandbox-exec"}
}

func (h host) check(context.Context) error {
	if _, err := os.Stat(h.sandboxExec); err != nil {
		return fmt.Errorf("%w: %s is missing (%v); it is part of macOS, so this system has been altered: "+
			"restore it (reinstall macOS) or run ctxgraphd on another machine", ErrUnavailable, h.sandboxExec, err)
	}
	return nil
}
