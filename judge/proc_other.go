//go:build !linux

package judge

import "io/fs"

// IsRunProcess cannot tell a run's processes here (no /proc): the sandbox,
// which keeps agents off the socket, and the run token, which a client
// started in a run presents, are the guards.
func (j *Judge) IsRunProcess(pid int) bool { return false }

// statChange is nothing here: the sweeps' settings then rest on the
// files' sizes and modification times.
func statChange(fs.FileInfo) string { return "" }
