// Package tier says which of the Makefile's test targets runs an
// end-to-end night. `make test`, the contributor's suite, runs every
// package's tests and the core nights; `make test-all`, which CI runs on
// every landing, runs `make test` and then the extended nights. A night
// states its tier as its first statement (e2e's night(t, core)), so that
// what `make test` holds is read where each night is written, not in a
// list kept somewhere else; the run's tier comes from the environment
// (Var), which the Makefile sets.
package tier

import (
	"fmt"
	"os"
	"testing"
)

// Tier is a night's tier, or a run's ("" for every tier).
type Tier string

const (
	// Core nights run in `make test`: at least one real-CLI night for each
	// guarantee (each gate both ways, each role's misbehaviour classes,
	// the honest nights, crash and kill -9 resume, lanes and the merge
	// queue, workers with a kill, dependencies on a fresh home, the
	// report and the live view).
	Core Tier = "core"
	// Extended nights run in `make test-all` only: further routes of a
	// guarantee that a core night or a package's test already holds, and
	// the nights too costly for the contributor's suite.
	// docs/DEVELOPING.md names, for each, what holds its guarantee in
	// `make test`.
	Extended Tier = "extended"
)

// Var selects the nights a run holds: core (make test), extended (what
// make test-all adds to make test), or, unset, every night, so that `go
// test ./e2e -run TestX` by hand runs TestX whatever its tier.
const Var = "CTXGRAPHD_TEST_TIER"

// Parse reads Var's value.
func Parse(v string) (Tier, error) {
	switch t := Tier(v); t {
	case "", Core, Extended:
		return t, nil
	}
	return "", fmt.Errorf("%s=%q: want %q (make test), %q (what make test-all adds) or nothing (every night)", Var, v, Core, Extended)
}

// Selected is this run's tier, "" for every tier. A misspelt tier would
// run nothing, or everything, without a word: it stops the test binary
// instead, before any test runs.
var Selected = func() Tier {
	t, err := Parse(os.Getenv(Var))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return t
}()

// RunsIn reports whether a night of tier t runs in a run of tier selected
// ("" for every tier).
func (t Tier) RunsIn(selected Tier) bool {
	return selected == "" || t == selected
}

// Night starts a test of tier t in a run of tier selected: it skips the
// test when the run holds another tier, and otherwise runs it beside the
// others (t.Parallel). The skip comes first, so that a night of another
// tier does not wait for a turn only to skip.
func Night(tb *testing.T, t, selected Tier) {
	tb.Helper()
	if !t.RunsIn(selected) {
		tb.Skipf("a night of the %s tier; this run (%s=%s) holds the %s tier", t, Var, selected, selected)
	}
	tb.Parallel()
}
