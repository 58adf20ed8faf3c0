package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/tier"
)

// Every test of this package states its tier as its first statement,
// night(t, core) or night(t, extended) (TestEveryNightStatesItsTier):
// `make test` runs the core nights, `make test-all` runs make test and
// then the extended ones (internal/dev/tier has the rules and their
// tests).
const (
	core     = tier.Core
	extended = tier.Extended
)

// night starts an end-to-end test of tier tr: skipped in a run of the
// other tier (tier.Var), run beside the others (t.Parallel, doc.go)
// otherwise.
func night(t *testing.T, tr tier.Tier) {
	t.Helper()
	tier.Night(t, tr, tier.Selected)
}

// The Makefile runs the tiers as the README says: `make test` one go test
// of every package with the core nights, `make test-all` that same go test
// and then one of ./e2e with the extended nights, in that order; and CI
// runs `make test-all`. Read from `make -n`, which prints the commands
// without running them.
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
			tierSet := regexp.MustCompile(tier.Var + `=(\S*)`).FindStringSubmatch(line)
			pkgs := regexp.MustCompile(` -parallel \S+ (\S+)`).FindStringSubmatch(line)
			if tierSet == nil || pkgs == nil {
				t.Fatalf("make -n %s: a go test without %s or packages: %s", target, tier.Var, line)
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
