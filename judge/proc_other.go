//go:build !linux

package judge

// IsRunProcess cannot tell a run's processes here (no /proc): the sandbox,
// which keeps agents off the socket, and the run token, which a client
// started in a run presents, are the guards.
func (j *Judge) IsRunProcess(pid int) bool { return false }
