package sandbox

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSettings(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   string
	}{
		{
			name:   "an empty policy still sandboxes, with empty lists",
			policy: Policy{},
			want: `{"allowUnsandboxedCommands":false,"autoAllowBashIfSandboxed":true,"enabled":true,"failIfUnavailable":true,` +
				`"filesystem":{"allowWrite":[],"denyRead":[],"denyWrite":[]},"network":{"allowedDomains":[],"strictAllowlist":true}}`,
		},
		{
			// The project is writable through the settings themselves, not
			// only because the CLI makes its working directory writable.
			name:   "the project alone is writable",
			policy: Policy{ProjectDir: "/p/src/.."},
			want: `{"allowUnsandboxedCommands":false,"autoAllowBashIfSandboxed":true,"enabled":true,"failIfUnavailable":true,` +
				`"filesystem":{"allowWrite":["/p"],"denyRead":[],"denyWrite":[]},"network":{"allowedDomains":[],"strictAllowlist":true}}`,
		},
		{
			name: "paths are cleaned, deduplicated and sorted; the project is writable",
			policy: Policy{
				ProjectDir:     "/p/",
				DenyWrite:      []string{"/p/tests/", "/p/.claude/progress/feature-list.json", "/p/tests", ""},
				DenyRead:       []string{"/state/b", "/state/./a"},
				AllowWrite:     []string{"/home/u/.cache/go-build", "/tmp//x", "/p"},
				AllowedDomains: []string{"pypi.org", " proxy.golang.org", "pypi.org"},
			},
			want: `{"allowUnsandboxedCommands":false,"autoAllowBashIfSandboxed":true,"enabled":true,"failIfUnavailable":true,` +
				`"filesystem":{"allowWrite":["/home/u/.cache/go-build","/p","/tmp/x"],"denyRead":["/state/a","/state/b"],` +
				`"denyWrite":["/p/.claude/progress/feature-list.json","/p/tests"]},"network":{"allowedDomains":["proxy.golang.org","pypi.org"],"strictAllowlist":true}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.policy.Settings())
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Settings:\n got  %s\n want %s", b, tt.want)
			}
		})
	}
}
