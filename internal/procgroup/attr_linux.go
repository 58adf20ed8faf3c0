package procgroup

import "syscall"

// sysProcAttr: a group of its own, and the kernel kills the command if the
// daemon dies without a chance to.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
