//go:build unix

package judge

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the daemon has used so far, its own and that
// of the children it has waited for (git, the test jails): what a stretch
// of its own work costs is the difference over the stretch, when nothing
// else of it runs meanwhile.
func processCPU() time.Duration {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	return rusageCPU(&self) + rusageCPU(&children)
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
