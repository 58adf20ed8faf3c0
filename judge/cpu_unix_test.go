//go:build unix

package judge

import (
	"os/exec"
	"testing"
	"time"
)

// processCPU counts the daemon's own CPU time and that of the children it
// waited for, user and system time both: the verdict's log says what a
// sweep cost from it.
func TestProcessCPUCountsItsOwnAndItsChildrensTime(t *testing.T) {
	before := processCPU()
	sum := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		for i := range 100_000 {
			sum += i % 7
		}
	}
	if got := processCPU() - before; got <= 0 {
		t.Errorf("processCPU grew by %v over 50 ms of work (%d)", got, sum)
	}
	// A child that spends its time in the kernel: a read and a write a byte.
	mid := processCPU()
	cmd := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if cmd.ProcessState.SystemTime() == 0 {
		t.Skip("the child's system time was not measured")
	}
	if got := processCPU() - mid; got < child {
		t.Errorf("processCPU grew by %v over a child that took %v", got, child)
	}
}
