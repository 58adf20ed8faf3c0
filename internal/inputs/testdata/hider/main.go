// Command hider is a test's code that tries to use files of its tree
// without the view's record holding them: through a directory's
// descriptor, through /proc/self/cwd, and with a path another thread
// rewrites while the kernel reads it. It prints what it saw.
package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

func main() {
	// Relative to a descriptor of a directory opened long before.
	dfd, err := syscall.Open("a", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		panic(err)
	}
	fd, err := syscall.Openat(dfd, "by-dirfd", syscall.O_RDONLY, 0)
	if err != nil {
		panic(err)
	}
	syscall.Close(fd)
	// Through the process's own view of its directory.
	if _, err := os.ReadFile("/proc/self/cwd/by-proc"); err != nil {
		panic(err)
	}
	// A path whose bytes flip between a decoy and the secret while the
	// kernel resolves it: the record is to hold whatever it resolved.
	buf := []byte("decoy\x00")
	var stop atomic.Bool
	go func() {
		for !stop.Load() {
			copy(buf, "secrt\x00")
			copy(buf, "decoy\x00")
		}
	}()
	found := 0
	for range 20000 {
		var st syscall.Stat_t
		_, _, errno := syscall.Syscall6(syscall.SYS_NEWFSTATAT, uintptr(dfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
		if errno == 0 {
			found++
		}
	}
	stop.Store(true)
	fmt.Println(found)
}
