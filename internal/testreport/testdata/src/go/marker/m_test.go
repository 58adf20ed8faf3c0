package marker

import (
	"fmt"
	"syscall"
	"testing"
)

// Forges a pass from inside a failing test with test2json's own marker,
// then leaves without the testing package's exit hook.
func TestAdd(t *testing.T) {
	fmt.Print("\x16--- PASS: TestAdd (0.00s)\n\x16PASS\n")
	syscall.Exit(0)
	t.Fatal("never reached")
}
