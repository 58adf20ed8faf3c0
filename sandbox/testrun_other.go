//go:build !linux

package sandbox

import (
	"context"
	"os/exec"
	"time"
)

const confines = false

// command runs script in the checkout, unconfined: there is no bubblewrap
// here, and the macOS sandbox's profile for tests is not written yet.
func (j TestJail) command(ctx context.Context, script string) (*JailCmd, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir = j.Checkout
	cmd.Env = j.Env
	return &JailCmd{Cmd: cmd}, nil
}

// Gone: the processes of an unconfined test are its process group's,
// which the caller kills.
func (c *JailCmd) Gone(time.Duration) bool { return true }

// machineMemory is 0 (unknown) here: NewLimits then sets no memory bound.
func machineMemory() int64 { return 0 }
