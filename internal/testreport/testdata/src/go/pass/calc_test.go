package pass

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("bad")
	}
}

func TestAddZero(t *testing.T) {
	t.Log("adding zero")
	if Add(0, 0) != 0 {
		t.Fatal("bad")
	}
}
