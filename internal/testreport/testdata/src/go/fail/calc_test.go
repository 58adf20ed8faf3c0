package fail

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(1, 2); got != 3 {
		t.Errorf("Add(1, 2) = %d, want 3", got)
	}
}

func TestSub(t *testing.T) {
	if Add(2, 0) != 2 {
		t.Fatal("bad")
	}
}
