package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// staleDialTimeout bounds the dial that tells a live daemon from a stale
// socket file. A live daemon accepts at once; a socket that neither accepts
// nor refuses belongs to a process that is alive but stuck.
const staleDialTimeout = time.Second

// Listen opens the control socket at socketPath.
//
// The parent directory is created with mode 0700 (and tightened to 0700 if
// it is ours and looser), so that only this user can reach or replace the
// socket (so give the socket a directory of its own, as internal/paths
// does). A file left at socketPath by a daemon that died is removed, but
// only after a dial shows that nobody answers on it: when a daemon answers,
// Listen fails with control.ErrDaemonRunning instead. The socket itself gets mode
// 0600.
//
// Listen is not the single-daemon lock (two daemons starting at the same
// instant could both find the file stale); the store's lock, taken before
// Listen, is. Closing the listener removes the socket file, unless another
// process has bound the path since.
func Listen(socketPath string) (net.Listener, error) {
	if err := prepareDir(filepath.Dir(socketPath)); err != nil {
		return nil, err
	}
	if err := clearStale(socketPath); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", socketPath, err)
	}
	// Close removes the file itself, and only if it is still ours: see
	// socketListener.Close.
	ln.SetUnlinkOnClose(false)
	// The directory already keeps other users out; 0600 keeps them out of
	// a shared directory such as the /tmp fallback too.
	if err := os.Chmod(socketPath, 0o600); err != nil {
		ln.Close()
		os.Remove(socketPath)
		return nil, fmt.Errorf("control socket %s: %w", socketPath, err)
	}
	fi, err := os.Lstat(socketPath)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", socketPath, err)
	}
	return &socketListener{UnixListener: ln, path: socketPath, file: fi}, nil
}

// prepareDir makes dir exist with mode 0700, or checks that a directory we
// do not own is one we can trust.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	// A sticky directory is a shared one such as /tmp (the fallback when a
	// socket path would not fit in sun_path): not ours to change, and the
	// socket's own mode protects it.
	if fi.Mode()&os.ModeSticky != 0 {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	owner, me := int(st.Uid), os.Geteuid()
	switch {
	case owner == me:
		if fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("socket directory %s has mode %04o and cannot be made private: %w", dir, fi.Mode().Perm(), err)
			}
		}
	case owner != 0:
		// Whoever owns the directory can swap the socket for their own and
		// listen to our clients.
		return fmt.Errorf("socket directory %s belongs to uid %d, not to this user (uid %d); remove it, or set XDG_RUNTIME_DIR to a directory of your own", dir, owner, me)
	}
	return nil
}

// clearStale removes a socket file nobody answers on: the remains of a
// daemon that died without cleaning up.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("control socket %s is a directory; remove it", path)
	}
	conn, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%w %s", control.ErrDaemonRunning, path)
	}
	// Refused: a socket nobody listens on. Not a socket: a file in the way.
	// Gone: someone else cleaned up in between. Anything else (a timeout,
	// a permission) means something may be alive there: leave it alone.
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOTSOCK) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("control socket %s exists but cannot be checked (%w); if no daemon runs for this project, remove it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale control socket: %w", err)
	}
	return nil
}

// socketListener is the listener Listen returns: it removes its socket file
// when closed.
type socketListener struct {
	*net.UnixListener
	path string
	file os.FileInfo // the socket as bound, to recognise it at Close

	closeOnce sync.Once
	closeErr  error
}

// Close stops listening and removes the socket file if it is still the one
// this listener bound. It is safe to call more than once (http.Server closes
// the listener at Shutdown, and the daemon may close it on an early error).
func (l *socketListener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.UnixListener.Close()
		// After we stopped listening another daemon may have found the file
		// stale and bound the path anew: that socket is not ours to remove.
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return l.closeErr
}
