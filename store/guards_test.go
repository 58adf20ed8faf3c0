package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/guard"
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
	a := guard.Rule{ID: "g-a", Status: guard.GuardProposed, Tool: "Bash", Match: guard.Match{Command: "make deploy"}, Message: "m",
		Source: "pattern failing_command", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := guard.Rule{ID: "g-b", Status: guard.GuardWarn, Role: guard.Coder, Match: guard.Match{Path: "src/x.go"}, Message: "m"}
	if err := s.PutGuards(a, b); err != nil {
		t.Fatal(err)
	}
	a.Status = guard.GuardWarn
	if err := s.PutGuards(a); err != nil {
		t.Fatal(err)
	}
	gs, err := s.Guards()
	if err != nil {
		t.Fatal(err)
	}
	if want := []guard.Rule{a, b}; !reflect.DeepEqual(gs, want) {
		t.Errorf("Guards() = %+v, want %+v", gs, want)
	}
	if err := s.PutGuards(guard.Rule{}); err == nil {
		t.Error("PutGuards(a guard without an id) = nil")
	}
}
