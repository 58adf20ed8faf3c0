package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the effective uid (and, where the kernel tells, the
// pid; 0 otherwise) of the process at the other end of a Unix socket
// connection, as the kernel recorded them at connect time.
func peerCred(c net.Conn) (uid, pid int, known bool, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, 0, false, errNotUnix
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, false, err
	}
	if credErr != nil {
		return 0, 0, false, credErr
	}
	return int(cred.Uid), int(cred.Pid), true, nil
}
