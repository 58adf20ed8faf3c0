package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

// Guards live in a bucket of their own, made by the first write: a database
// that never had one reads as no guards, and what is written reads back as
// it was, a later write of an id replacing the earlier one.
func TestGuardsRoundTrip(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if gs, err := s.Guards(); err != nil || len(gs) != 0 {
		t.Fatalf("Guards() before any = %v, %v", gs, err)
	}
	a := guards.Rule{ID: "g-a", Status: guards.Proposed, Tool: "Bash", Match: guards.Match{Command: "make deploy"}, Message: "m",
		Source: "pattern failing_command", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := guards.Rule{ID: "g-b", Status: guards.Warn, Role: gates.Coder, Match: guards.Match{Path: "src/x.go"}, Message: "m"}
	if err := s.PutGuards(a, b); err != nil {
		t.Fatal(err)
	}
	a.Status = guards.Warn
	if err := s.PutGuards(a); err != nil {
		t.Fatal(err)
	}
	gs, err := s.Guards()
	if err != nil {
		t.Fatal(err)
	}
	if want := []guards.Rule{a, b}; !reflect.DeepEqual(gs, want) {
		t.Errorf("Guards() = %+v, want %+v", gs, want)
	}
	if err := s.PutGuards(guards.Rule{}); err == nil {
		t.Error("PutGuards(a guard without an id) = nil")
	}
}
