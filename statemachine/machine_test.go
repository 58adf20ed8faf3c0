package statemachine

import "testing"

func TestMachineFollowsTheGraph(t *testing.T) {
	m := New(Idle)
	path := []struct {
		e    Event
		want State
	}{
		{Initialize, Init}, {Advance, Next}, {Implement, Code}, {Validate, Test},
		{Implement, Code}, // retry after a failed test
		{Validate, Test}, {Advance, Next}, {Finish, Done}, {Advance, Next},
		{Pause, Paused}, {Advance, Next}, {Wait, Waiting}, {Advance, Next}, {Stop, Stopped}, {Advance, Next},
	}
	for _, p := range path {
		if got, err := m.Target(p.e); err != nil || got != p.want {
			t.Fatalf("Target(%s) from %s = %s, %v; want %s", p.e, m.State(), got, err, p.want)
		}
		if err := m.Fire(p.e); err != nil {
			t.Fatal(err)
		}
		if m.State() != p.want {
			t.Fatalf("after %s: %s, want %s", p.e, m.State(), p.want)
		}
	}
}

func TestMachineRefusesWhatTheDesignForbids(t *testing.T) {
	tests := []struct {
		from State
		e    Event
	}{
		{Done, Validate}, {Paused, Implement}, {Stopped, Implement}, {Init, Finish}, {Code, Finish}, {Waiting, Validate},
	}
	for _, tt := range tests {
		m := New(tt.from)
		if _, err := m.Target(tt.e); err == nil {
			t.Errorf("%s from %s was allowed", tt.e, tt.from)
		}
		if err := m.Fire(tt.e); err == nil {
			t.Errorf("Fire(%s) from %s succeeded", tt.e, tt.from)
		}
		if m.State() != tt.from {
			t.Errorf("refused event moved the machine to %s", m.State())
		}
	}
}

func TestRedoOnSameStateIsNotAnError(t *testing.T) {
	m := New(Code)
	if err := m.Fire(Implement); err != nil {
		t.Fatalf("code → code (a redone run) failed: %v", err)
	}
}

func TestStatesAreTheContractNames(t *testing.T) {
	want := "idle init code test next done paused waiting stopped"
	got := ""
	for i, s := range States {
		if i > 0 {
			got += " "
		}
		got += string(s)
	}
	if got != want {
		t.Fatalf("states %q, contract %q", got, want)
	}
}

// TestStateValid: a state read back from the store is one of the contract's
// states; anything else (an empty record, a name from another version) is not.
func TestStateValid(t *testing.T) {
	for _, s := range States {
		if !s.Valid() {
			t.Errorf("%q is not valid", s)
		}
	}
	for _, s := range []State{"", "running", "Idle"} {
		if s.Valid() {
			t.Errorf("%q is valid", s)
		}
	}
}
