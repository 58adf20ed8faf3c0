package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
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
// other's, and night skips or runs a test as this run's tier says; a tier
// the variable misspells is refused, naming the variable.
func TestTiers(t *testing.T) {
	night(t, core)
	// night itself, on a test of each tier: each subtest waits for its
	// turn (t.Parallel) after this function returns, and the cleanup runs
	// once both have ended.
	runs := map[tier]string{"": "core extended", core: "core", extended: "extended"}[selectedTier]
	var mu sync.Mutex
	var ran []string
	for _, tr := range []tier{core, extended} {
		t.Run(string(tr), func(t *testing.T) {
			night(t, tr)
			mu.Lock()
			ran = append(ran, string(tr))
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		slices.Sort(ran)
		if got := strings.Join(ran, " "); got != runs {
			t.Errorf("in a run of %s=%q, night ran the nights of %q, want %q", tierVar, selectedTier, got, runs)
		}
	})
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

// The Makefile runs the tiers as the README says: `make test` one go test
// of every package with the core nights, `make test-all` that same go test
// and then one of ./e2e with the extended nights, in that order; and CI
// runs `make test-all`. Read from `make -n`, which prints the commands
// without running them.
// A misspelt tier stops the test binary before anything runs, with what
// the variable may be, rather than run nothing or everything.
func TestAMisspeltTierStopsTheTests(t *testing.T) {
	night(t, core)
	cmd := exec.Command(os.Args[0], "-test.run=^TestTiers$")
	cmd.Env = append(os.Environ(), tierVar+"=Core")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tierVar+`="Core"`) {
		t.Errorf("the tests with %s=Core: %v, want exit status 2 naming the value:\n%s", tierVar, err, out)
	}
}

func TestMakeRunsEachTier(t *testing.T) {
	night(t, core)
	goTests := func(target string) []string {
		t.Helper()
		cmd := exec.Command("make", "-n", "-C", "..", target)
		cmd.Env = append(os.Environ(), "MAKEFLAGS=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n %s: %v", target, err)
		}
		var runs []string
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.Contains(line, " test -json ") {
				continue
			}
			tierSet := regexp.MustCompile(tierVar + `=(\S*)`).FindStringSubmatch(line)
			pkgs := regexp.MustCompile(` -parallel \S+ (\S+)`).FindStringSubmatch(line)
			if tierSet == nil || pkgs == nil {
				t.Fatalf("make -n %s: a go test without %s or packages: %s", target, tierVar, line)
			}
			runs = append(runs, tierSet[1]+" "+pkgs[1])
		}
		return runs
	}
	if got, want := strings.Join(goTests("test"), "; "), "core ./..."; got != want {
		t.Errorf("make test runs go test with %q, want %q", got, want)
	}
	if got, want := strings.Join(goTests("test-all"), "; "), "core ./...; extended ./e2e"; got != want {
		t.Errorf("make test-all runs go test with %q, want %q", got, want)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test-all$`).Match(ci) {
		t.Errorf(".ci/run does not run make test-all:\n%s", ci)
	}
}
