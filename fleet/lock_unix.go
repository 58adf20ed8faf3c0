//go:build unix

package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes dir for one worker: two workers in one directory would
// remove each other's clones. The lock goes with the process, however it
// ends.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("worker: another worker runs in %s; give each worker a directory of its own (--dir)", dir)
		}
		return nil, fmt.Errorf("worker: locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
