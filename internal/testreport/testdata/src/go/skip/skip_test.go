package skip

import "testing"

func TestLater(t *testing.T) { t.Skip("not yet") }

func TestNow(t *testing.T) {}
