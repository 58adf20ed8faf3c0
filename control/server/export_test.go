package server

import (
	"context"
	"net/http"
	"time"
)

// SetAllowPeer replaces the server's peer rule, so that a test running as
// one user can see another user refused.
func SetAllowPeer(s *Server, allow func(uid int) bool) { s.allowPeer = allow }

// SameUserOrRoot is the default peer rule.
var SameUserOrRoot = sameUserOrRoot

// ServeAs serves r as a connection whose peer ConnContext described so:
// uid and pid as the kernel said (pid 0 where the platform does not say),
// known false where the platform cannot tell, err when reading failed.
// It plays platforms and failures a test cannot produce on Linux.
func ServeAs(s *Server, w http.ResponseWriter, r *http.Request, uid, pid int, known bool, err error) {
	s.serveHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, peer{uid: uid, pid: pid, known: known, err: err})))
}

// ServeWithoutPeer serves r as a connection ConnContext never saw.
func ServeWithoutPeer(s *Server, w http.ResponseWriter, r *http.Request) { s.serveHTTP(w, r) }

// HeaderTimeout is how long the server waits for a request's headers.
func HeaderTimeout(s *Server) time.Duration { return s.http.ReadHeaderTimeout }
