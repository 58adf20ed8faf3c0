package gates

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
)

// Confinement names what the sandbox holds, in the traces and denials of
// its rules: not a gate of gates.<name> that a person may set to warn or
// off, since confinement is turned off whole (sandbox.enabled: false) or
// not at all.
const Confinement = "confinement"

// NetworkDenied is the code of a connection confinement refused: a host
// the sandbox's proxy did not let a program reach, or a WebFetch the hook
// refused.
const NetworkDenied = "network_denied"

// Network is what a daemon's run's WebFetch may reach: the hosts of
// sandbox.allowed_domains, which Claude Code's sandbox holds the run's
// programs to, and the documentation of sandbox.fetch_domains. WebFetch
// fetches from the CLI's own process, outside the sandbox, so the hook
// holds it to them (judgeWebFetch).
//
// The zero Network is confined with no host: a hook that does not know
// the policy fails closed.
type Network struct {
	// Unconfined is sandbox.enabled: false: the run's programs reach any
	// host, and so may WebFetch.
	Unconfined bool `json:"unconfined,omitempty"`
	// Hosts are sandbox.allowed_domains and sandbox.fetch_domains: host
	// names, or "*.example.com" for every name below example.com.
	Hosts []string `json:"hosts"`
}

// Allows reports whether host is one of n's hosts, as the sandbox's
// network proxy matches them: a name exactly, any case; "*.example.com"
// every name below example.com but not example.com itself.
func (n Network) Allows(host string) bool {
	if n.Unconfined {
		return true
	}
	host = strings.ToLower(host)
	for _, h := range n.Hosts {
		h = strings.ToLower(h)
		if base, ok := strings.CutPrefix(h, "*."); ok {
			if strings.HasSuffix(host, "."+base) {
				return true
			}
		} else if host == h {
			return true
		}
	}
	return false
}

// plainHostRe is a host name as Network's hosts are written: labels of
// letters, digits and '-'. Nothing else is taken for a host, so that no
// spelling reads as an allowed host here and another host in the CLI.
var plainHostRe = lazyregexp.New(`^([a-z0-9-]+\.)*[a-z0-9-]+$`)

// fetchHost is the host a WebFetch of raw reaches, or an error that says
// why raw is refused. Go's URL parser and the CLI's (WHATWG's) read some
// URLs differently: a backslash ends the authority for one and not the
// other, and so can an '@' or a percent-escape. Only a URL both read the
// same is taken: http or https, a plain host name, an optional port, no
// user information, no backslash, blank or control character.
func fetchHost(raw string) (string, error) {
	if strings.ContainsFunc(raw, func(r rune) bool { return r == '\\' || r <= ' ' || r == 0x7f || r > 0x7e }) {
		return "", fmt.Errorf("the URL has a backslash, a blank, a control or a non-ASCII character")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("the URL does not parse: %v", err)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", fmt.Errorf("a WebFetch reaches http and https URLs only, not %q", u.Scheme)
	}
	if u.Opaque != "" || u.User != nil || strings.Contains(u.Host, "@") {
		return "", fmt.Errorf("the URL names user information or no host")
	}
	host := strings.ToLower(u.Hostname())
	if !plainHostRe.MatchString(host) {
		return "", fmt.Errorf("%q is not a plain host name", u.Host)
	}
	return host, nil // a port that is no number does not parse
}

// judgeWebFetch holds a daemon's run's WebFetch to the hosts of its
// Network. Claude Code fetches in its own process, where the sandbox's
// proxy does not apply, and under bypassPermissions it asks no one:
// without this, an agent could send what it read anywhere, in a URL's
// query. What the hook cannot see: Claude Code 2.1.330 follows a redirect
// by itself when it stays on the same scheme, port and host, "www." aside
// (so an allowed host's answer can lead to its www twin); any other it
// hands back to the model, whose next fetch comes here. A person's session
// is not a daemon's run: its fetches are the person's business.
func judgeWebFetch(a Actor, s State, rawURL string) *control.HookDecision {
	if a.Role == "" || s.Network.Unconfined {
		return nil
	}
	host, err := fetchHost(rawURL)
	if err == nil && s.Network.Allows(host) {
		return nil
	}
	what := fmt.Sprintf("a daemon's run fetches only from the hosts of sandbox.allowed_domains and sandbox.fetch_domains: %s is not one of them", host)
	if err != nil {
		what = fmt.Sprintf("a daemon's run fetches only plain http(s) URLs of the hosts of sandbox.allowed_domains and sandbox.fetch_domains: %v", err)
	}
	return &control.HookDecision{Gate: Confinement, Code: NetworkDenied, Mode: Enforce, Message: what,
		Suggestion: "work from the project's files, the packages its registries serve and the documentation of sandbox.fetch_domains; a person adds a host to sandbox.fetch_domains if the project needs its pages"}
}
