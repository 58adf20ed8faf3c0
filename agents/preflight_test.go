package agents

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeCLI writes an executable shell script named name into dir that
// answers --version and auth status as told.
func fakeCLI(t *testing.T, dir, name, shebang, version, auth string, authExit int) string {
	t.Helper()
	script := shebang + "\n" + `case "$1" in
--version) printf '%s\n' '` + version + `' ;;
auth) printf '%s\n' '` + auth + `'; exit ` + strconv.Itoa(authExit) + ` ;;
*) exit 9 ;;
esac
`
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	loggedIn  = `{"loggedIn": true, "authMethod": "api_key"}`
	loggedOut = `{"loggedIn": false, "authMethod": "none"}`
)

// Preflight finds every problem of the CLI the agents would run before a
// run is spent on it, and says what to do about each.
func TestPreflight(t *testing.T) {
	sh := "#!/bin/sh"
	tests := []struct {
		name    string
		setup   func(t *testing.T, bin string) (command string)
		node    string // a fake node's --version on PATH, "" for none
		want    []string
		wantNil bool
	}{
		{name: "ready", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.1.330 (Claude Code)", loggedIn, 0)
			return "claude"
		}, wantNil: true},
		{name: "newer", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.10.0 (Claude Code)", loggedIn, 0)
			return "claude"
		}, wantNil: true},
		{name: "by its path", setup: func(t *testing.T, bin string) string {
			return fakeCLI(t, t.TempDir(), "my-claude", sh, "3.0.0 (Claude Code)", loggedIn, 0)
		}, wantNil: true},
		{name: "missing", setup: func(t *testing.T, bin string) string { return "claude" },
			want: []string{`agent.command "claude" was not found on the agents' PATH`, "set agent.command to its full path"}},
		{name: "a path that is not there", setup: func(t *testing.T, bin string) string { return "/nonexistent/claude" },
			want: []string{`agent.command "/nonexistent/claude" was not found`}},
		{name: "older", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.1.329 (Claude Code)", loggedIn, 0)
			return "claude"
		}, want: []string{"Claude Code 2.1.329 is older than 2.1.330", "update"}},
		{name: "older by a major version", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "1.99.999 (Claude Code)", loggedIn, 0)
			return "claude"
		}, want: []string{"Claude Code 1.99.999 is older than 2.1.330"}},
		{name: "not a version", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "Usage: claude", loggedIn, 0)
			return "claude"
		}, want: []string{`printed "Usage: claude", which is not a Claude Code version`}},
		{name: "not logged in", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.1.330 (Claude Code)", loggedOut, 1)
			return "claude"
		}, want: []string{"Claude Code could not authenticate: not logged in", "/login", "ANTHROPIC_API_KEY", "auth status", "then `ctxgraphd run`"}},
		{name: "auth status not JSON", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.1.330 (Claude Code)", "unknown command auth", 1)
			return "claude"
		}, want: []string{"auth status` failed", "unknown command auth"}},
		{name: "old and logged out: both said", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", sh, "2.0.1 (Claude Code)", loggedOut, 1)
			return "claude"
		}, want: []string{"Claude Code 2.0.1 is older", "could not authenticate"}},
		{name: "a Node script on a Node that is too old", node: "v20.11.1", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", "#!/usr/bin/env node", "2.1.330 (Claude Code)", loggedIn, 0)
			return "claude"
		}, want: []string{"Claude Code runs on Node.js 22 or later", "v20.11.1"}},
		{name: "a Node script without Node", setup: func(t *testing.T, bin string) string {
			fakeCLI(t, bin, "claude", "#!/usr/bin/env -S node --no-warnings", "2.1.330 (Claude Code)", loggedIn, 0)
			return "claude"
		}, want: []string{"is a Node.js script, and node was not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			command := tt.setup(t, bin)
			if tt.node != "" {
				fakeCLI(t, bin, "node", sh, tt.node, "", 0)
			}
			// The fake CLIs are shell scripts (#!/bin/sh); nothing of
			// the machine's is on PATH, so that no real claude or node is
			// found. A Node script's fake CLI runs under the fake node,
			// whose answer is then no Claude Code version: only what is
			// said of Node is looked for.
			env := []string{"PATH=" + bin, "HOME=" + t.TempDir()}
			err := Preflight(context.Background(), command, env, DaemonSettings)
			if tt.wantNil {
				if err != nil {
					t.Fatalf("Preflight: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Preflight: nil, want problems")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Preflight: %v\nwant it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "ctl resume") {
				t.Errorf("Preflight: %v\nadvises ctl resume, but no daemon runs yet", err)
			}
		})
	}
}

func TestNodeInterpreter(t *testing.T) {
	tests := []struct {
		line   string
		interp string
		isNode bool
	}{
		{"#!/usr/bin/env node", "node", true},
		{"#!/usr/bin/env -S node --no-warnings", "node", true},
		{"#!/usr/bin/env NODE_OPTIONS=--x node", "node", true},
		{"#!/usr/local/bin/node", "/usr/local/bin/node", true},
		{"#!/usr/bin/nodejs", "/usr/bin/nodejs", true},
		{"#!/bin/sh", "", false},
		{"#!/usr/bin/env python3", "", false},
		{"\x7fELF\x02\x01", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "claude")
		if err := os.WriteFile(p, []byte(tt.line+"\nrest\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, ok := nodeInterpreter(p)
		if ok != tt.isNode || (ok && got != tt.interp) {
			t.Errorf("%q: %q, %v; want %q, %v", tt.line, got, ok, tt.interp, tt.isNode)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"2.1.330", "2.1.330", 0},
		{"2.1.331", "2.1.330", 1},
		{"2.1.33", "2.1.330", -1},
		{"2.2", "2.1.330", 1},
		{"2.1", "2.1.0", 0},
		{"2.1.0", "2.1", 0},
		{"2.1.1", "2.1", 1},
		{"10.0.0", "9.99.99", 1},
	}
	for _, tt := range tests {
		a, _ := parseVersion(tt.a)
		b, _ := parseVersion(tt.b)
		if got := compareVersions(a, b); got != tt.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	for _, bad := range []string{"", "2.x.1", "v2.1.0", "2..1", "-1.0"} {
		if _, ok := parseVersion(bad); ok {
			t.Errorf("parseVersion(%q) accepted it", bad)
		}
	}
}

// A Node script of the CLI runs on Node.js MinNode or later, MinNode
// itself included; a node that cannot say its version, or says something
// else, is reported as such.
func TestCheckNode(t *testing.T) {
	tests := []struct {
		name string
		node string // the fake node's --version; "" for a node that fails
		want string // what the problem says; "" for none
	}{
		{"the oldest supported", "v22.0.0", ""},
		{"newer", "v24.1.0", ""},
		{"one major too old", "v21.99.0", "Claude Code runs on Node.js 22 or later"},
		{"not a version", "Welcome to Node", `printed "Welcome to Node", which is not a Node.js version`},
		{"not a number", "vX.1.0", "which is not a Node.js version"},
		{"fails", "", "--version` failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			exe := fakeCLI(t, bin, "claude", "#!/usr/bin/env node", "2.1.330 (Claude Code)", loggedIn, 0)
			if tt.node != "" {
				fakeCLI(t, bin, "node", "#!/bin/sh", tt.node, "", 0)
			} else if err := os.WriteFile(filepath.Join(bin, "node"), []byte("#!/bin/sh\necho broken >&2\nexit 3\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := checkNode(context.Background(), exe, bin, []string{"PATH=" + bin})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkNode: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkNode: %v, want it to say %q", err, tt.want)
			}
		})
	}
}
