package procfd

import "testing"

func TestAdd(t *testing.T) { t.Fatal("no") }
