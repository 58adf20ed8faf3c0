package tier

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Each tier runs in its own run and in a run of every tier, never in the
// other's.
func TestRunsIn(t *testing.T) {
	for _, c := range []struct {
		night, selected Tier
		runs            bool
	}{
		{Core, "", true}, {Extended, "", true},
		{Core, Core, true}, {Extended, Extended, true},
		{Core, Extended, false}, {Extended, Core, false},
	} {
		if got := c.night.RunsIn(c.selected); got != c.runs {
			t.Errorf("a %s night in a run of %q: runs %v, want %v", c.night, c.selected, got, c.runs)
		}
	}
}

// Night runs or skips a test of each tier as the run's tier says. Each
// subtest calls t.Parallel, so it goes on after its parent's function has
// returned; the parent's cleanup runs once they all have ended.
func TestNight(t *testing.T) {
	for _, c := range []struct {
		selected Tier
		want     string // the nights that run, in order
	}{
		{"", "core extended"},
		{Core, "core"},
		{Extended, "extended"},
	} {
		t.Run(fmt.Sprintf("run of %q", c.selected), func(t *testing.T) {
			var mu sync.Mutex
			var ran []string
			for _, night := range []Tier{Core, Extended} {
				t.Run(string(night), func(t *testing.T) {
					Night(t, night, c.selected)
					mu.Lock()
					defer mu.Unlock()
					ran = append(ran, string(night))
				})
			}
			t.Cleanup(func() {
				slices.Sort(ran)
				if got := strings.Join(ran, " "); got != c.want {
					t.Errorf("in a run of %s=%q the nights of %q ran, want %q", Var, c.selected, got, c.want)
				}
			})
		})
	}
}

// A tier the variable misspells is refused, naming the variable, the value
// and the tiers.
func TestParse(t *testing.T) {
	for _, v := range []string{"", "core", "extended"} {
		if got, err := Parse(v); err != nil || string(got) != v {
			t.Errorf("Parse(%q) = %q, %v", v, got, err)
		}
	}
	for _, v := range []string{"Core", "all", "ext", "core ", "full", "extended,core"} {
		got, err := Parse(v)
		if err == nil || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want an error", v, got, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, Var) || !strings.Contains(msg, fmt.Sprintf("%q", v)) || !strings.Contains(msg, `"extended"`) {
			t.Errorf("Parse(%q): %q does not name the variable, the value and the tiers", v, msg)
		}
	}
}

// The run's tier comes from the environment, and a misspelt one stops the
// test binary before any test runs, with what the variable may be: this
// package's own tests, run again in a process of their own.
func TestSelectedComesFromTheEnvironment(t *testing.T) {
	if os.Getenv("TIER_TEST_CHILD") != "" {
		fmt.Printf("selected=%q\n", Selected)
		return
	}
	for _, c := range []struct{ value, want string }{
		{"", `selected=""`}, {"core", `selected="core"`}, {"extended", `selected="extended"`},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSelectedComesFromTheEnvironment$")
		cmd.Env = append(os.Environ(), Var+"="+c.value, "TIER_TEST_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s=%q: %v, want %s:\n%s", Var, c.value, err, c.want, out)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSelectedComesFromTheEnvironment$")
	cmd.Env = append(os.Environ(), Var+"=Core", "TIER_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), Var+`="Core"`) || strings.Contains(string(out), "selected=") {
		t.Errorf("%s=Core: %v, want exit status 2 naming the value, before any test:\n%s", Var, err, out)
	}
}
