// Package sdnotify tells systemd about the daemon's state (Type=notify
// units): READY=1 once the control socket answers, STOPPING=1 on the way out.
package sdnotify

import (
	"net"
	"os"
)

// Ready reports that the daemon is up.
func Ready() error { return Send("READY=1") }

// Stopping reports that the daemon is shutting down.
func Stopping() error { return Send("STOPPING=1") }

// Send writes state to $NOTIFY_SOCKET. Outside systemd it does nothing.
func Send(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' { // abstract namespace
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
