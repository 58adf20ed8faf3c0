package e2e

import (
	"fmt"
	"os"
	"strings"
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
	// landing: further routes of a guarantee that a core night or a
	// package's test already holds, and the nights too costly for the
	// contributor's suite. docs/DEVELOPING.md names, for each, what holds
	// its guarantee in `make test`.
	extended tier = "extended"
)

// tierVar selects the nights a run holds: core (make test), extended
// (what make test-all adds to make test), or, unset, every night, so that
// `go test ./e2e -run TestX` by hand runs TestX whatever its tier.
const tierVar = "CTXGRAPHD_TEST_TIER"

// parseTier reads tierVar's value.
func parseTier(v string) (tier, error) {
	switch t := tier(v); t {
	case "", core, extended:
		return t, nil
	}
	return "", fmt.Errorf("%s=%q: want %q (make test), %q (what make test-all adds) or nothing (every night)", tierVar, v, core, extended)
}

// selectedTier is the tier this run holds, "" for every tier. A misspelt
// tier would run nothing, or everything, without a word: it stops the
// test binary instead.
var selectedTier = func() tier {
	t, err := parseTier(os.Getenv(tierVar))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return t
}()

// runsIn reports whether a night of tier tr runs when selected is the
// run's tier ("" for every tier).
func (tr tier) runsIn(selected tier) bool {
	return selected == "" || tr == selected
}

// night starts an end-to-end test of tier tr: it skips the test when the
// run holds another tier, and otherwise runs it beside the others
// (t.Parallel, doc.go). The skip comes first, so that a night of another
// tier does not wait for a turn only to skip.
func night(t *testing.T, tr tier) {
	t.Helper()
	if !tr.runsIn(selectedTier) {
		t.Skipf("a night of the %s tier; this run (%s=%s) holds the %s tier", tr, tierVar, selectedTier, selectedTier)
	}
	t.Parallel()
}

// Each tier runs in its own run and in a run of every tier, never in the
// other's; a tier the variable misspells is refused, naming the variable.
func TestTiers(t *testing.T) {
	night(t, core)
	for _, c := range []struct {
		night, selected tier
		runs            bool
	}{
		{core, "", true}, {extended, "", true},
		{core, core, true}, {extended, extended, true},
		{core, extended, false}, {extended, core, false},
	} {
		if got := c.night.runsIn(c.selected); got != c.runs {
			t.Errorf("a %s night in a run of %q: runs %v, want %v", c.night, c.selected, got, c.runs)
		}
	}
	for _, v := range []string{"", "core", "extended"} {
		if got, err := parseTier(v); err != nil || string(got) != v {
			t.Errorf("parseTier(%q) = %q, %v", v, got, err)
		}
	}
	for _, v := range []string{"Core", "all", "ext", "core ", "full"} {
		if got, err := parseTier(v); err == nil || got != "" {
			t.Errorf("parseTier(%q) = %q, %v; want an error", v, got, err)
		} else if msg := err.Error(); !strings.Contains(msg, tierVar) || !strings.Contains(msg, fmt.Sprintf("%q", v)) || !strings.Contains(msg, `"extended"`) {
			t.Errorf("parseTier(%q): %q does not name the variable, the value and the tiers", v, msg)
		}
	}
}
