package inputs

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails a passing run that leaves goroutines behind: a view's
// server ends with its Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
