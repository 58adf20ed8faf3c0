//go:build unix

package gitrepo

import (
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup makes git and whatever it starts (a filter driver from the
// user's own configuration, say) one process group, killed whole when the
// context is cancelled, so nothing is left holding our pipes.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
}
