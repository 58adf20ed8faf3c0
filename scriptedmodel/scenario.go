package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Behavior is how the coding agent of one feature behaves across attempts.
// It is the only thing a scenario varies: the initializer and the tester are
// honest, so that what a test observes follows from the coding behavior.
type Behavior string

// The behaviors a scenario can give a feature. A misbehaving variant is a
// new value here and a new row in the codingWork table (roles.go).
const (
	Pass      Behavior = "pass"       // coding agent writes working code on every attempt
	FailOnce  Behavior = "fail-once"  // attempt 1 writes broken code, later attempts working code
	NeverPass Behavior = "never-pass" // always broken code
	StopEarly Behavior = "stop-early" // coding agent ends its turn without touching anything on attempt 1 (no status change), works on later attempts
)

// behaviors lists the known behaviors in the order error messages show them.
var behaviors = []Behavior{Pass, FailOnce, NeverPass, StopEarly}

func (b Behavior) known() bool {
	for _, k := range behaviors {
		if b == k {
			return true
		}
	}
	return false
}

// FeatureScript is one feature of a scenario: what the initializer puts in the
// feature list, and how its coding agent behaves.
type FeatureScript struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	DependsOn []string `json:"depends_on,omitempty"`
	Behavior  Behavior `json:"behavior"`
}

// Scenario is the whole script of a scripted project.
type Scenario struct {
	Name     string          `json:"name"`
	Features []FeatureScript `json:"features"`
}

// DefaultScenario is the demo: one feature of each outcome the loop knows
// (tested at once, tested on retry, blocked), and a dependency.
func DefaultScenario() Scenario {
	return Scenario{
		Name: "demo",
		Features: []FeatureScript{
			{ID: "F-001", Title: "Greeting", Behavior: Pass},
			{ID: "F-002", Title: "Farewell", DependsOn: []string{"F-001"}, Behavior: FailOnce},
			{ID: "F-003", Title: "Counter", Behavior: Pass},
			{ID: "F-004", Title: "Flaky network", Behavior: NeverPass},
		},
	}
}

// LoadScenario reads a scenario from a JSON file and checks it.
func LoadScenario(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	sc, err := parseScenario(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

func parseScenario(data []byte) (Scenario, error) {
	var sc Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	// A misspelt key ("behaviour") would otherwise silently fall back to
	// nothing and surface much later as a confusing run.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return Scenario{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Scenario{}, errors.New("invalid JSON: more data after the scenario object")
	}
	if err := sc.validate(); err != nil {
		return Scenario{}, err
	}
	return sc, nil
}

// safeID keeps feature ids usable as they are in file names and in the
// shell commands of the test scripts.
var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (sc Scenario) validate() error {
	if len(sc.Features) == 0 {
		return errors.New(`"features" is empty; a scenario needs at least one feature`)
	}
	first := make(map[string]int, len(sc.Features))
	for i, f := range sc.Features {
		switch {
		case f.ID == "":
			return fmt.Errorf("features[%d].id is missing", i)
		case !safeID.MatchString(f.ID):
			return fmt.Errorf("features[%d].id %q may hold only letters, digits, '.', '_' and '-' (it names files and test scripts)", i, f.ID)
		case strings.TrimSpace(f.Title) == "":
			return fmt.Errorf("features[%d] (%s): title is missing", i, f.ID)
		case f.Behavior == "":
			return fmt.Errorf("features[%d] (%s): behavior is missing; use one of %s", i, f.ID, behaviorList())
		case !f.Behavior.known():
			return fmt.Errorf("features[%d] (%s): behavior %q is unknown; use one of %s", i, f.ID, f.Behavior, behaviorList())
		}
		if j, dup := first[f.ID]; dup {
			return fmt.Errorf("features[%d].id %q is used twice (first at features[%d]); ids must be unique", i, f.ID, j)
		}
		first[f.ID] = i
	}
	// Dependencies are checked once every id is known, so that a feature may
	// depend on one listed after it. Cycles are allowed on purpose: reporting
	// them is the daemon's job, and scenarios exist to test it.
	for i, f := range sc.Features {
		for _, d := range f.DependsOn {
			if _, ok := first[d]; !ok {
				return fmt.Errorf("features[%d] (%s): depends_on %q, which is not a feature of the scenario", i, f.ID, d)
			}
		}
	}
	return nil
}

func behaviorList() string {
	s := make([]string, len(behaviors))
	for i, b := range behaviors {
		s[i] = string(b)
	}
	return strings.Join(s, ", ")
}
