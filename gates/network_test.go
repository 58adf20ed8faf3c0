package gates

import (
	"strings"
	"testing"
)

// A daemon's run's WebFetch reaches the hosts its programs may reach and
// no other, however the URL is spelled; a person's session and an
// unconfined daemon's runs are not held.
func TestWebFetchIsHeldToTheAllowedHosts(t *testing.T) {
	e := newEnv(t)
	allowed := Network{Hosts: []string{"proxy.golang.org", "registry.npmjs.org", "*.example.com"}}
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-1"}
	tests := []struct {
		name    string
		actor   Actor
		network Network
		url     string
		refused bool
	}{
		{"an allowed host", coder, allowed, "https://proxy.golang.org/github.com/x/y/@v/list", false},
		{"an allowed host over http", coder, allowed, "http://registry.npmjs.org/left-pad", false},
		{"an allowed host in capitals", coder, allowed, "https://Registry.NPMjs.org/left-pad", false},
		{"an allowed host with a port", coder, allowed, "https://registry.npmjs.org:443/left-pad", false},
		{"a name below a wildcard", coder, allowed, "https://docs.example.com/api?q=1", false},
		{"a name deeper below a wildcard", coder, allowed, "https://a.b.example.com/", false},
		{"the wildcard's own name is not below it", coder, allowed, "https://example.com/", true},
		{"another host", coder, allowed, "https://evil.test/?d=c2VjcmV0", true},
		{"a host that ends like an allowed one", coder, allowed, "https://notproxy.golang.org/", true},
		{"a host that ends like a wildcard's", coder, allowed, "https://badexample.com/", true},
		{"an allowed name as a prefix of another", coder, allowed, "https://proxy.golang.org.evil.test/", true},
		{"loopback", coder, allowed, "http://127.0.0.1:8080/collect?x=1", true},
		{"an IPv6 literal", coder, allowed, "http://[::1]/", true},
		{"user information naming an allowed host", coder, allowed, "https://proxy.golang.org@evil.test/", true},
		{"user information with a password", coder, allowed, "https://proxy.golang.org:x@evil.test/", true},
		{"user information before an allowed host", coder, allowed, "https://evil.test:x@proxy.golang.org/", true},
		{"a backslash before an allowed host", coder, allowed, `https://evil.test\@proxy.golang.org/`, true},
		{"a backslash as the path's slash", coder, allowed, `https://evil.test\proxy.golang.org`, true},
		{"a percent-escaped host", coder, allowed, "https://%70roxy.golang.org/", true},
		{"a trailing dot", coder, allowed, "https://proxy.golang.org./", true},
		{"a blank in the URL", coder, allowed, "https://proxy.golang.org /", true},
		{"a blank in the path", coder, allowed, "https://proxy.golang.org/a b", true},
		{"a tilde in the path", coder, allowed, "https://proxy.golang.org/~x/y", false},
		{"a tab in the host", coder, allowed, "https://proxy.golang.org\t.evil.test/", true},
		{"a non-ASCII host", coder, allowed, "https://prоxy.golang.org/", true},
		{"another scheme", coder, allowed, "ftp://proxy.golang.org/", true},
		{"a file URL", coder, allowed, "file:///etc/passwd", true},
		{"no scheme", coder, allowed, "proxy.golang.org/x", true},
		{"an opaque URL", coder, allowed, "https:proxy.golang.org", true},
		{"a port that is no number", coder, allowed, "https://proxy.golang.org:x/", true},
		{"no URL", coder, allowed, "", true},
		{"a tester", Actor{Role: Tester, Feature: "F-001", Run: "run-2"}, allowed, "https://evil.test/", true},
		{"an initializer", Actor{Role: Initializer, Run: "run-0"}, allowed, "https://evil.test/", true},
		{"no allowed host: a hook that does not know the policy", coder, Network{}, "https://proxy.golang.org/", true},
		{"confinement off", coder, Network{Unconfined: true}, "http://127.0.0.1:8080/", false},
		{"a person's session", Actor{}, allowed, "https://evil.test/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.state
			s.Network = tt.network
			p := fixture(t, "PreToolUse.json", "WebFetch", map[string]any{"url": tt.url, "prompt": "summarise"})
			d := PreToolUse(Modes{}, tt.actor, s, p)
			if !tt.refused {
				if d != nil {
					t.Fatalf("refused %q: %+v", tt.url, d)
				}
				return
			}
			if !d.Blocks() || d.Gate != Confinement || d.Code != "network_denied" {
				t.Fatalf("decision %+v for %q, want a refusal confinement/network_denied", d, tt.url)
			}
			if !strings.Contains(d.Message, "sandbox.allowed_domains") || !strings.Contains(d.Suggestion, "sandbox.fetch_domains") {
				t.Errorf("the refusal does not name the setting: %+v", d)
			}
			// It says why: the host that is not allowed, or what is wrong
			// with the URL.
			if host, err := fetchHost(tt.url); err == nil && !strings.Contains(d.Message, host+" is not one of them") ||
				err != nil && !strings.Contains(d.Message, err.Error()) {
				t.Errorf("the refusal of %q does not say why: %s", tt.url, d.Message)
			}
		})
	}
}

// The gates' configuration does not loosen confinement: a WebFetch is
// refused whatever mode every gate is in.
func TestWebFetchRefusalIsNoGateMode(t *testing.T) {
	e := newEnv(t)
	off := Modes{}
	for _, g := range Gates {
		off[g] = Off
	}
	p := fixture(t, "PreToolUse.json", "WebFetch", map[string]any{"url": "https://evil.test/", "prompt": "x"})
	if d := PreToolUse(off, Actor{Role: Coder, Feature: "F-001", Run: "run-1"}, e.state, p); !d.Blocks() {
		t.Fatalf("with every gate off, a WebFetch of another host: %+v", d)
	}
}

func FuzzFetchHost(f *testing.F) {
	for _, s := range []string{"https://proxy.golang.org/x", `https://a\@b/`, "http://[::1]:80/", "https://u:p@h/", "https://%41.b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		host, err := fetchHost(raw)
		if err != nil {
			return
		}
		// A host taken is a plain name that the URL spells exactly as
		// its authority (after the scheme, up to a port or the path),
		// so no reader of the URL finds another host in it.
		if !plainHostRe.MatchString(host) {
			t.Fatalf("fetchHost(%q) = %q, not a plain name", raw, host)
		}
		_, rest, ok := strings.Cut(raw, "://")
		if !ok {
			t.Fatalf("fetchHost(%q) took a URL without an authority", raw)
		}
		auth := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			auth = rest[:i]
		}
		name, _, _ := strings.Cut(auth, ":")
		if !strings.EqualFold(name, host) {
			t.Fatalf("fetchHost(%q) = %q, but the authority is %q", raw, host, auth)
		}
	})
}
