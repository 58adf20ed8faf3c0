//go:build unix && !linux

package procgroup

import (
	"errors"
	"syscall"
)

// Alive reports whether any process is left in the group, zombies
// included (there is no /proc here to tell them apart).
func Alive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
