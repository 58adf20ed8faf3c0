package sandbox

import (
	"context"
	"time"
)

// trialTimeout bounds Check's trial sandbox, which starts and ends in
// milliseconds where it works: a daemon must not hang at start on it.
const trialTimeout = 30 * time.Second

// Check reports whether Claude Code's sandbox can run on this machine. Its
// error wraps ErrUnavailable and says what is missing and how to fix it.
//
// The daemon calls it at start, before any agent runs: with
// failIfUnavailable set, Claude Code refuses to start a run without its
// sandbox (startup_failure_reason "sandbox_required_unavailable"), and a
// machine that cannot sandbox would otherwise look like agents that fail
// every attempt.
func Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, trialTimeout)
	defer cancel()
	return newHost().check(ctx)
}
