// Package eventually waits, in tests, for what happens in its own time: a
// process that ends, a file another process writes, a loop that gets
// somewhere. It asks a condition now and again until it holds or a bound
// passes; the bound fails a broken test instead of hanging it, and is never
// a measurement: a test that works passes long before it.
//
// Waiting for a channel beats waiting for a condition: use this only where
// nothing tells the test that the thing has happened.
package eventually

import (
	"testing"
	"time"
)

// The pause between two asks starts short, for the common case of a
// condition that holds at once, and grows to maxPause, so that a long wait
// leaves the machine to what is being waited for. A condition that costs
// (one that starts a process: `ctxgraphd ctl status`, git) waits costFactor
// times as long as it took to ask, so that asking takes at most a fifth of
// a core however long the wait: asked back to back, end-to-end tests'
// waits once took some 170 CPU-seconds of a run of the suite.
const (
	firstPause = time.Millisecond
	maxPause   = 25 * time.Millisecond
	costFactor = 4
)

// Within reports whether cond holds within d. It asks cond at once, then
// again after growing pauses, and a last time once d has passed. It is for
// goroutines other than the test's (which must not call t.Fatal) and for
// tests that say themselves what a false means.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := firstPause
	for {
		asked := time.Now()
		if cond() {
			return true
		}
		took := time.Since(asked)
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(max(pause, costFactor*took), left))
		<-t.C
		pause = min(2*pause, maxPause)
	}
}

// True fails the test at once (t.Fatalf), saying what it waited for in
// format and args, unless cond holds within d.
func True(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("not within %s: "+format, append([]any{d}, args...)...)
	}
}
