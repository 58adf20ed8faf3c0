//go:build race

package e2e

// raceEnabled reports whether this test binary was built with -race; the
// ctxgraphd it drives is built the same way (the hook is built as it ships).
const raceEnabled = true
