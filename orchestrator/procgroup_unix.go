//go:build unix

package orchestrator

import (
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup makes a verification command and everything it starts one
// process group, killed whole when the command is cancelled.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
}
