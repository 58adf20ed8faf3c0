//go:build !race

package e2e

// raceEnabled reports whether this test binary was built with -race; the
// ctxgraphd it drives is built the same way, so that benchmarks (run
// without -race) measure the binary users get.
const raceEnabled = false
