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
// The initializer is always honest; the tester is honest unless the feature
// says otherwise (TesterBehavior), so that what a test observes follows from
// the behaviors it chose.
type Behavior string

// The behaviors a scenario can give a feature. A misbehaving variant is a
// new value here and a new row in the codingWork table (roles.go).
const (
	Pass      Behavior = "pass"       // coding agent writes working code on every attempt
	FailOnce  Behavior = "fail-once"  // attempt 1 writes broken code, later attempts working code
	NeverPass Behavior = "never-pass" // always broken code
	StopEarly Behavior = "stop-early" // coding agent ends its turn without touching anything on attempt 1 (no status change), works on later attempts

	// Coding agents that break a gate (SPEC section 5) on every attempt
	// unless said otherwise. Like a real model, each reads the structured
	// reason of a denial and goes on: it corrects itself where the reason
	// says how, and otherwise does its job without the refused action.

	// SetsTested marks its own feature tested along with completed; denied,
	// it writes completed alone.
	SetsTested Behavior = "sets-tested"
	// BashSetsTested writes broken code on attempt 1, then sets tested with
	// `sed -i` on the feature list and, denied, again through a file name
	// the hook cannot read (a glob). Later attempts are honest.
	BashSetsTested Behavior = "bash-sets-tested"
	// WritesSessionState tries to write session-state.json with the Write
	// tool, then with Bash, and carries on when both are denied.
	WritesSessionState Behavior = "writes-session-state"
	// OutOfScope writes a file outside its feature's scope first; denied,
	// it writes its own file.
	OutOfScope Behavior = "out-of-scope"
	// RewritesOther renames another feature in the list along with setting
	// its own status; denied, it changes its own status alone.
	RewritesOther Behavior = "rewrites-other"
	// ReadsHugeLog builds a 100,000-line log, reads it whole, then prints it
	// whole with cat; denied both times, it reads the log's tail with offset
	// and limit, as the suggestion says.
	ReadsHugeLog Behavior = "reads-huge-log"
)

// behaviors lists the known behaviors in the order error messages show them.
var behaviors = []Behavior{Pass, FailOnce, NeverPass, StopEarly,
	SetsTested, BashSetsTested, WritesSessionState, OutOfScope, RewritesOther, ReadsHugeLog}

func (b Behavior) known() bool {
	for _, k := range behaviors {
		if b == k {
			return true
		}
	}
	return false
}

// TesterBehavior is how the tester agent of one feature behaves across
// attempts. The zero value is Honest.
type TesterBehavior string

// The tester behaviors. A new one is a value here and a case in
// (*Server).tester (roles.go).
const (
	// Honest runs the test; only when it passes does it keep the output as
	// evidence and set tested.
	Honest TesterBehavior = "honest"
	// TestedFirst edits tested: true into the list before running any test;
	// denied, it runs the test and goes on honestly.
	TestedFirst TesterBehavior = "tested-first"
	// BashTested, on attempt 1, runs the test and then, whatever it said,
	// sets tested with `sed -i` on the feature list and, denied, through a
	// glob the hook cannot read, and claims a pass without evidence. Later
	// attempts are honest.
	BashTested TesterBehavior = "bash-tested"
	// SkipsTest ends its turn without running a test. On attempt 1 it
	// ignores the Stop hook however often it objects; on later attempts it
	// runs the test once told to.
	SkipsTest TesterBehavior = "skips-test"
	// TouchesOther marks another feature blocked along with its own verdict;
	// denied, it writes its own verdict alone.
	TouchesOther TesterBehavior = "touches-other"
)

var testerBehaviors = []TesterBehavior{Honest, TestedFirst, BashTested, SkipsTest, TouchesOther}

func (b TesterBehavior) known() bool {
	for _, k := range testerBehaviors {
		if b == k {
			return true
		}
	}
	return false
}

// FeatureScript is one feature of a scenario: what the initializer puts in the
// feature list, and how its coding and tester agents behave.
type FeatureScript struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	DependsOn []string `json:"depends_on,omitempty"`
	Behavior  Behavior `json:"behavior"`
	// Tester is optional: without it the tester is honest.
	Tester TesterBehavior `json:"tester,omitempty"`
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
		case f.Tester != "" && !f.Tester.known():
			return fmt.Errorf("features[%d] (%s): tester %q is unknown; use one of %s", i, f.ID, f.Tester, list(testerBehaviors))
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

func behaviorList() string { return list(behaviors) }

func list[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
