package server

// SetAllowPeer replaces the server's peer rule, so that a test running as
// one user can see another user refused.
func SetAllowPeer(s *Server, allow func(uid int) bool) { s.allowPeer = allow }

// SameUserOrRoot is the default peer rule.
var SameUserOrRoot = sameUserOrRoot
