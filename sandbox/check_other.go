//go:build !linux && !darwin

package sandbox

import (
	"context"
	"fmt"
	"runtime"
)

// host is what Check looks at on other systems: only which one it is.
type host struct {
	goos string
}

func newHost() host {
	return host{goos: runtime.GOOS}
}

func (h host) check(context.Context) error {
	return fmt.Errorf("%w: ctxgraphd confines agents with Claude Code's sandbox on Linux (bubblewrap) "+
		"and macOS (sandbox-exec) only, and this system is %s: run ctxgraphd on Linux or macOS",
		ErrUnavailable, h.goos)
}
