package gates

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestSandboxRefusalsAreRead(t *testing.T) {
	failureOf := func(cmd, msg string) *Payload {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		return &Payload{Event: "PostToolUseFailure", ToolName: "Bash", ToolInput: in, Error: msg}
	}
	failure := func(msg string) *Payload { return failureOf("x", msg) }
	success := func(stdout, stderr string) *Payload {
		in, _ := json.Marshal(map[string]string{"command": "x"})
		resp, _ := json.Marshal(BashResponse{Stdout: stdout, Stderr: stderr})
		return &Payload{Event: "PostToolUse", ToolName: "Bash", ToolInput: in, ToolResponse: resp}
	}
	tests := []struct {
		name string
		p    *Payload
		want []Refusal
	}{
		{"a shell redirection", failure("Exit code 1\n/bin/bash: line 1: tests/a.sh: Read-only file system"), []Refusal{{Path: "tests/a.sh"}}},
		{"python", failure("Exit code 1\nTraceback (most recent call last):\nOSError: [Errno 30] Read-only file system: 'tests/a.sh'"), []Refusal{{Path: "tests/a.sh"}}},
		{"node", failure("Exit code 1\nError: EROFS: read-only file system, open 'src/x.js'"), []Refusal{{Path: "src/x.js"}}},
		{"a denied file that does not exist", failure("Exit code 1\n/bin/bash: line 1: .claude/ctxgraphd.yaml: Permission denied"), []Refusal{{Path: ".claude/ctxgraphd.yaml"}}},
		{"sed -i", failure("Exit code 4\nsed: couldn't open temporary file tests/sedX1: Read-only file system"), []Refusal{{Path: "tests/sedX1"}}},
		{"git", failure("Exit code 128\nfatal: Unable to create '/p/.git/index.lock': Read-only file system."), []Refusal{{Path: "/p/.git/index.lock"}}},
		{"sed -i on a denied file, after a cd", failureOf("cd .claude/progress && sed -i 's/a/b/' feature-list.js*", "Exit code 4\nsed: cannot rename ./sedX1: Device or resource busy"),
			[]Refusal{{Path: ".claude/progress/sedX1"}}},
		// Without a cd, a relative path is kept as the error names it.
		{"sed -i on a denied file", failure("Exit code 4\nsed: cannot rename ./sedX1: Device or resource busy"), []Refusal{{Path: "./sedX1"}}},
		{"an absolute path after a cd", failureOf("cd src; echo x > /p/tests/a.sh", "Exit code 1\n/bin/bash: line 1: /p/tests/a.sh: Read-only file system"), []Refusal{{Path: "/p/tests/a.sh"}}},
		{"a host", success("rc=56", "<sandbox_violations>\ndeny network-outbound example.com:443 (host is not on the allow list)\n</sandbox_violations>"), []Refusal{{Host: "example.com"}}},
		{"every path of the output, each once", failure("Exit code 1\n/bin/bash: line 1: tests/a.sh: Read-only file system\n/bin/bash: line 2: tests/b.sh: Read-only file system\n/bin/bash: line 3: tests/a.sh: Read-only file system"),
			[]Refusal{{Path: "tests/a.sh"}, {Path: "tests/b.sh"}}},
		{"every host, each once", success("", "<sandbox_violations>\ndeny network-outbound example.com:443\ndeny network-outbound evil.test:80\ndeny network-outbound example.com:80\n</sandbox_violations>"),
			[]Refusal{{Host: "example.com"}, {Host: "evil.test"}}},
		{"the sandbox's report opens the output", failure("<sandbox_violations>\ndeny network-outbound example.com:443\n</sandbox_violations>"), []Refusal{{Host: "example.com"}}},
		{"a host named outside the sandbox's report", failure("Exit code 1\ndeny network-outbound example.com:443"), nil},
		{"nothing refused", failure("Exit code 1\nFAIL: expected 3, got 2"), nil},
		{"a test that prints the words", success("checking: Read-only file system handling ok", ""), nil},
	}
	for _, tt := range tests {
		got := SandboxRefusals(tt.p)
		if len(got) != len(tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: %+v, want %+v", tt.name, got[i], tt.want[i])
			}
		}
	}
}

func TestRefusalsNameTheirGate(t *testing.T) {
	e := newWriteEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001"}
	tests := []struct {
		path, code string
	}{
		{"tests/F-001.sh", "frozen_test"},
		{".claude/progress/feature-list.json", "bash_writes_feature_list"},
		{".claude/settings.local.json", "daemon_files"},
		{".claude/progress/sedX1", "daemon_files"}, // sed -i's temporary file beside the feature list
		{".git/index.lock", "git_internals"},
		{filepath.Join(e.elsewhere, ".bashrc"), "outside_project"},
		// The project's parent is outside it, not a file of it out of scope.
		{filepath.Dir(e.dir), "outside_project"},
		{"src/F-001.txt", ""}, // nothing to blame: a refusal the rules would not make
	}
	for _, tt := range tests {
		d := JudgeRefusal(coder, e.state, Refusal{Path: tt.path})
		got := ""
		if d != nil {
			got = d.Code
		}
		if got != tt.code {
			t.Errorf("%s: %q, want %q", tt.path, got, tt.code)
		}
	}
}
