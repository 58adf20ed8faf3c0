// Package statemachine holds the session states of ctxgraphd and the rules
// that move a project from a goal to a tested feature list.
//
// Two halves: Machine, the session state on github.com/looplab/fsm, which
// refuses transitions the design does not allow; and Decide, a pure function
// from what is known (the feature list, the counters, the run that just
// ended) to what to do next. The orchestrator owns both from one goroutine,
// persists every transition and counter change before acting on it, and so
// can always replay where it was after a crash.
package statemachine

import (
	"context"
	"fmt"

	"github.com/looplab/fsm"
)

// State is a session state. The names are a contract: session-state.json
// and `ctl status --json` carry them.
type State string

// Session states.
const (
	Idle    State = "idle"    // started, nothing decided yet
	Init    State = "init"    // the initializer is writing the feature list
	Code    State = "code"    // a coding agent works on a feature
	Test    State = "test"    // a tester agent judges a feature
	Next    State = "next"    // choosing the next feature
	Done    State = "done"    // nothing left to do; still watching for new features
	Paused  State = "paused"  // a person asked to hold; no new runs start
	Waiting State = "waiting" // usage limit, budget or backoff; resumes by itself
	Stopped State = "stopped" // the session needs a person (too many blocked features, ctl stop)
)

// States lists every session state, in the order the docs list them.
var States = []State{Idle, Init, Code, Test, Next, Done, Paused, Waiting, Stopped}

// Event names the transitions. They are verbs of the orchestrator, so that a
// transition log reads as a story: implement, validate, advance, finish.
type Event string

// Events of the session state machine.
const (
	Initialize Event = "initialize" // → init
	Implement  Event = "implement"  // → code
	Validate   Event = "validate"   // → test
	Advance    Event = "advance"    // → next
	Finish     Event = "finish"     // → done
	Pause      Event = "pause"      // → paused
	Wait       Event = "wait"       // → waiting
	Stop       Event = "stop"       // → stopped
)

var working = []string{string(Idle), string(Init), string(Code), string(Test), string(Next)}

// transitions is the whole graph. Anything not listed is refused by Fire.
var transitions = fsm.Events{
	{Name: string(Initialize), Src: []string{string(Idle), string(Next), string(Done), string(Init)}, Dst: string(Init)},
	// Code → code: a coding run interrupted by a crash is run again.
	{Name: string(Implement), Src: []string{string(Idle), string(Next), string(Test), string(Done), string(Code)}, Dst: string(Code)},
	{Name: string(Validate), Src: []string{string(Idle), string(Next), string(Code), string(Test)}, Dst: string(Test)},
	{Name: string(Advance), Src: append([]string{string(Done), string(Paused), string(Waiting), string(Stopped)}, working...), Dst: string(Next)},
	{Name: string(Finish), Src: []string{string(Idle), string(Next), string(Done)}, Dst: string(Done)},
	{Name: string(Pause), Src: append([]string{string(Done), string(Waiting), string(Stopped)}, working...), Dst: string(Paused)},
	{Name: string(Wait), Src: append([]string{string(Waiting)}, working...), Dst: string(Waiting)},
	{Name: string(Stop), Src: append([]string{string(Done), string(Paused), string(Waiting), string(Stopped)}, working...), Dst: string(Stopped)},
}

// Machine is the session state. It is not safe for concurrent use: one
// goroutine, the orchestrator's loop, owns it.
type Machine struct {
	f *fsm.FSM
}

// New returns a machine in state s, which is where the store says the
// session was.
func New(s State) *Machine {
	// No callbacks: side effects belong to the orchestrator, after the
	// transition is persisted, never inside the fsm (whose callbacks must
	// not re-enter it).
	return &Machine{f: fsm.NewFSM(string(s), transitions, nil)}
}

// State returns the current state.
func (m *Machine) State() State { return State(m.f.Current()) }

// Target returns the state that e leads to from the current state, or an
// error naming both when the graph has no such edge. The orchestrator asks
// before it persists a transition, so that it never records one that Fire
// would then refuse.
func (m *Machine) Target(e Event) (State, error) {
	if !m.f.Can(string(e)) {
		return "", fmt.Errorf("statemachine: event %q is not allowed in state %q", e, m.State())
	}
	for _, t := range transitions {
		if t.Name == string(e) {
			return State(t.Dst), nil
		}
	}
	return "", fmt.Errorf("statemachine: unknown event %q", e)
}

// Fire moves the machine along e. A transition onto the same state (a run
// redone after a crash) is not an error.
func (m *Machine) Fire(e Event) error {
	// A cancelled context wedges looplab/fsm for good; a transition, once
	// persisted, must happen whatever the caller's context says.
	err := m.f.Event(context.WithoutCancel(context.Background()), string(e))
	if _, same := err.(fsm.NoTransitionError); same {
		return nil
	}
	if err != nil {
		return fmt.Errorf("statemachine: %s from %s: %w", e, m.State(), err)
	}
	return nil
}

// Valid reports whether s is a known session state.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}
