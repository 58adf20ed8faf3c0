package e2e

import (
	"fmt"
	"os"
	"testing"
)

// A tier says which of the Makefile's test targets runs a night. Every
// test of this package states its own as its first statement, night(t,
// core) or night(t, extended) (TestEveryNightStatesItsTier), so that what
// `make test` holds is read where each night is written, not in a list
// kept somewhere else.
type tier string

const (
	// core nights run in `make test`, the suite a contributor runs: at
	// least one real-CLI night for each guarantee (each gate both ways,
	// each role's misbehaviour classes, the honest night, crash and kill
	// -9 resume, lanes and the merge queue, workers with a kill,
	// dependencies on a fresh home, the report and the live view).
	core tier = "core"
	// extended nights run in `make test-all` only, which CI runs on every
	// landing: further routes of a guarantee a core night already holds,
	// and the nights too costly for the contributor's fifteen minutes.
	extended tier = "extended"
)

// tierVar selects the nights a run holds: core (make test), extended
// (the rest of make test-all, after make test), or, unset, every night,
// so that `go test ./e2e -run TestX` by hand runs TestX whatever its
// tier.
const tierVar = "CTXGRAPHD_TEST_TIER"

// selectedTier is the tier this run holds, "" for every tier.
var selectedTier = func() tier {
	v := tier(os.Getenv(tierVar))
	switch v {
	case "", core, extended:
		return v
	}
	// A misspelt tier would run nothing, or everything, without a word.
	fmt.Fprintf(os.Stderr, "%s=%q: want %q (make test), %q (the rest of make test-all) or unset (every night)\n", tierVar, v, core, extended)
	os.Exit(2)
	return ""
}()

// night starts an end-to-end test of tier tr: it skips the test when the
// run holds another tier, and otherwise runs it beside the others
// (t.Parallel, doc.go). The skip comes first, so that a night of another
// tier does not wait for a turn only to skip.
func night(t *testing.T, tr tier) {
	t.Helper()
	if selectedTier != "" && tr != selectedTier {
		t.Skipf("a night of the %s tier; this run (%s=%s) holds the %s tier", tr, tierVar, selectedTier, selectedTier)
	}
	t.Parallel()
}
