package agents

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgs(t *testing.T) {
	r := NewRunner(Options{MaxTurns: 40, MaxBudgetUSD: 2, Model: "claude-x"}, nil)
	spec := Spec{SessionID: "s-1", Prompt: "do it", SystemPrompt: "role", Settings: `{"hooks":{}}`}
	got := r.Args(spec)
	want := []string{"-p", "do it", "--output-format", "stream-json", "--verbose", "--session-id", "s-1",
		"--permission-mode", "bypassPermissions", "--settings", `{"hooks":{}}`, "--append-system-prompt", "role",
		"--max-turns", "40", "--max-budget-usd", "2", "--model", "claude-x"}
	if !slices.Equal(got, want) {
		t.Errorf("Args =\n%q\nwant\n%q", got, want)
	}

	spec.Resume, spec.MaxBudgetUSD = true, 0.5
	got = r.Args(spec)
	if i := slices.Index(got, "--resume"); i < 0 || got[i+1] != "s-1" || slices.Contains(got, "--session-id") {
		t.Errorf("resume: %q", got)
	}
	if i := slices.Index(got, "--max-budget-usd"); got[i+1] != "0.5" {
		t.Errorf("the spec's budget must win: %q", got)
	}

	// A prompt that looks like a flag goes after "--", where no flag can
	// take it.
	spec.Prompt = "--dangerous"
	got = r.Args(spec)
	if got[len(got)-2] != "--" || got[len(got)-1] != "--dangerous" || got[1] == "--dangerous" {
		t.Errorf("flag-like prompt: %q", got)
	}
}

func TestEnv(t *testing.T) {
	r := NewRunner(Options{SocketPath: "/run/x.sock", BaseEnv: []string{
		"PATH=/bin", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "CTXGRAPH_RUN=stale", "NOTIFY_SOCKET=/run/systemd/notify", "ANTHROPIC_BASE_URL=http://127.0.0.1:1",
		"CLAUDE_CODE_DISABLE_BACKGROUND_TASKS=0",
	}}, nil)
	env := r.Env(Spec{RunID: "run-000004", Role: role.Tester, FeatureID: "F-002", ExtraEnv: []string{"EXTRA=1"}})
	for _, want := range []string{"PATH=/bin", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "CTXGRAPH_AGENT=tester-agent",
		"CTXGRAPH_FEATURE=F-002", "CTXGRAPH_RUN=run-000004", "CTXGRAPH_SOCKET=/run/x.sock", "DISABLE_AUTOUPDATER=1", "EXTRA=1",
		// Nothing of a run goes on in the background, whatever the
		// daemon's own environment says.
		"CLAUDE_CODE_DISABLE_BACKGROUND_TASKS=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	for _, bad := range []string{"CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "CTXGRAPH_RUN=stale", "NOTIFY_SOCKET=/run/systemd/notify", "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS=0"} {
		if slices.Contains(env, bad) {
			t.Errorf("env keeps %s", bad)
		}
	}
	if slices.Contains(env, "IS_SANDBOX=1") {
		t.Error("IS_SANDBOX set without allow_root")
	}
}

// A run given the daemon's MCP tools reaches them on 127.0.0.1 directly,
// not through a proxy the agents' environment names; what the user set
// stays, and an environment without a proxy is not touched.
func TestEnvKeepsTheMCPToolsOffTheProxy(t *testing.T) {
	const mcp = `{"mcpServers":{}}`
	for _, tt := range []struct {
		name      string
		base      []string
		mcpConfig string
		want      []string // NO_PROXY, no_proxy as the CLI sees them ("" unset)
	}{
		{"no proxy", []string{"PATH=/bin"}, mcp, []string{"", ""}},
		{"a proxy", []string{"HTTPS_PROXY=http://proxy:3128"}, mcp, []string{"127.0.0.1", "127.0.0.1"}},
		{"a lower-case proxy", []string{"http_proxy=http://proxy:3128"}, mcp, []string{"127.0.0.1", "127.0.0.1"}},
		{"a proxy for everything", []string{"ALL_PROXY=socks5://proxy:1080"}, mcp, []string{"127.0.0.1", "127.0.0.1"}},
		{"the user's exceptions kept", []string{"HTTPS_PROXY=http://proxy:3128", "NO_PROXY=.corp,localhost"}, mcp, []string{".corp,localhost,127.0.0.1", "127.0.0.1"}},
		{"loopback already excepted", []string{"HTTPS_PROXY=http://proxy:3128", "NO_PROXY=127.0.0.1", "no_proxy=x,127.0.0.1"}, mcp, []string{"127.0.0.1", "x,127.0.0.1"}},
		{"a run without the MCP tools", []string{"HTTPS_PROXY=http://proxy:3128"}, "", []string{"", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := NewRunner(Options{BaseEnv: tt.base}, nil).Env(Spec{MCPConfig: tt.mcpConfig})
			got := []string{lookupEnv(env, "NO_PROXY"), lookupEnv(env, "no_proxy")}
			if !slices.Equal(got, tt.want) {
				t.Errorf("NO_PROXY, no_proxy = %q, want %q (env %q)", got, tt.want, env)
			}
		})
	}
}

func TestEnvAllowRoot(t *testing.T) {
	r := NewRunner(Options{AllowRoot: true, BaseEnv: []string{"PATH=/bin"}}, nil)
	got := slices.Contains(r.Env(Spec{}), "IS_SANDBOX=1")
	if want := os.Geteuid() == 0; got != want {
		t.Errorf("IS_SANDBOX=1 set: %v, want %v (as root only, and only with allow_root)", got, want)
	}
}

func TestCheckRoot(t *testing.T) {
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		allow   bool
		env     []string
		refused bool
	}{
		{false, nil, root},
		{true, nil, false},
		{false, []string{"IS_SANDBOX=1"}, false},
		{false, []string{"IS_SANDBOX=0"}, root},
	} {
		err := CheckRoot(tc.allow, tc.env, DaemonSettings)
		if (err != nil) != tc.refused {
			t.Errorf("CheckRoot(%v, %q) = %v, want refused=%v", tc.allow, tc.env, err, tc.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "allow_root") {
			t.Errorf("the refusal must say how to opt in: %v", err)
		}
		// A worker's refusal names the worker's own opt-in, and nothing of
		// a project's configuration, which a worker has none of.
		werr := CheckRoot(tc.allow, tc.env, WorkerSettings)
		if (werr != nil) != tc.refused {
			t.Errorf("a worker's CheckRoot(%v, %q) = %v, want refused=%v", tc.allow, tc.env, werr, tc.refused)
		}
		if werr != nil && (!strings.Contains(werr.Error(), "ctxgraphd worker --allow-root") || strings.Contains(werr.Error(), "ctxgraphd.yaml") || !strings.Contains(werr.Error(), "run the worker")) {
			t.Errorf("a worker's refusal must say the worker's opt-in: %v", werr)
		}
	}
}

func TestCommandRoundTrip(t *testing.T) {
	cmd := Command{
		Agent: role.Tester, Task: "validate_feature",
		Context:         CommandContext{FeatureID: "F-003", Attempt: 2, FilesChanged: []string{"a.go"}, PreviousState: "code"},
		Precedent:       []string{"F-003: attempt 1 failed: x"},
		SuccessCriteria: SuccessCriteria{Test: "go test ./...", TestsPass: true},
		NextAgent:       "main",
	}
	p := cmd.Prompt()
	for _, key := range []string{`"command"`, `"agent": "tester-agent"`, `"feature_id": "F-003"`, `"previous_state": "code"`,
		`"success_criteria"`, `"tests_pass": true`, `"next_agent": "main"`, `"precedent"`, `"files_changed"`} {
		if !strings.Contains(p, key) {
			t.Errorf("prompt lacks %s:\n%s", key, p)
		}
	}
	back, err := ParseCommand(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Context.FeatureID != "F-003" || back.Context.Attempt != 2 || back.SuccessCriteria.Test != "go test ./..." || back.Agent != role.Tester {
		t.Errorf("round trip = %+v", back)
	}
}

// A command block cut short (its closing fence lost) is read to the end of
// the prompt.
func TestParseCommandUnclosedBlock(t *testing.T) {
	p := strings.TrimSuffix(Command{Agent: role.Coder, Task: "implement_feature"}.Prompt(), "```\n")
	got, err := ParseCommand(p)
	if err != nil || got.Agent != role.Coder || got.Task != "implement_feature" {
		t.Errorf("ParseCommand(unclosed) = %+v, %v", got, err)
	}
}

func TestParseCommandErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no json here", "command object"},
		{"```json\n{\"cmd\": {}}\n```", "unknown field"},
		{"```json\n{\"command\": {\"agent\": \"boss\"}}\n```", `"boss" is not one of`},
		{"```json\n{}\n```", `missing the "command" key`},
		{"", "no command object"},
		// A block closed at once holds nothing: there is no command,
		// rather than a command that does not parse.
		{"```json```", "no command object"},
	} {
		_, err := ParseCommand(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCommand(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestRolePrompt(t *testing.T) {
	dir := t.TempDir()
	for _, r := range Roles {
		text, src, err := RolePrompt(dir, r)
		if err != nil || src != "embedded" || len(text) < 100 {
			t.Errorf("RolePrompt(%s) = %d bytes from %q, %v", r, len(text), src, err)
		}
	}
	over := filepath.Join(dir, filepath.FromSlash(PromptOverrideDir))
	os.MkdirAll(over, 0o755)
	os.WriteFile(filepath.Join(over, "tester-agent.md"), []byte("Test like we do here.\n"), 0o644)
	text, src, err := RolePrompt(dir, role.Tester)
	if err != nil || text != "Test like we do here.\n" || !strings.HasSuffix(src, "tester-agent.md") {
		t.Errorf("override: %q from %q, %v", text, src, err)
	}
	if _, src, _ := RolePrompt(dir, role.Coder); src != "embedded" {
		t.Errorf("an override of one role changed another: %s", src)
	}
	os.WriteFile(filepath.Join(over, "coding-agent.md"), []byte("  \n"), 0o644)
	if _, _, err := RolePrompt(dir, role.Coder); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty override: %v", err)
	}
	if _, _, err := RolePrompt(dir, role.Role("x")); err == nil {
		t.Error("unknown role accepted")
	}
}

// A project's role prompt may be up to maxPromptBytes long, that size
// included; one byte more is refused, saying so.
func TestRolePromptSizeLimit(t *testing.T) {
	dir := t.TempDir()
	over := filepath.Join(dir, filepath.FromSlash(PromptOverrideDir))
	if err := os.MkdirAll(over, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(over, string(role.Coder)+".md")
	for _, tc := range []struct {
		size int
		ok   bool
	}{{maxPromptBytes, true}, {maxPromptBytes + 1, false}} {
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), tc.size), 0o644); err != nil {
			t.Fatal(err)
		}
		text, src, err := RolePrompt(dir, role.Coder)
		if tc.ok && (err != nil || len(text) != tc.size || src != path) {
			t.Errorf("%d bytes: %d bytes from %q, %v; want it read", tc.size, len(text), src, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "a role prompt may be at most")) {
			t.Errorf("%d bytes: %v; want it refused as too long", tc.size, err)
		}
	}
}

// A file where the overrides' directory would be (the empty file Claude
// Code's sandbox leaves where it denied .claude/ctxgraphd, which was not
// there) is no override: the embedded prompt, not a stop. An override
// that is there and cannot be read is still an error.
func TestRolePromptUnderAFileIsTheEmbeddedOne(t *testing.T) {
	dir := t.TempDir()
	over := filepath.Join(dir, filepath.FromSlash(PromptOverrideDir))
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(over)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Dir(over), nil, 0o644); err != nil { // .claude/ctxgraphd, a file
		t.Fatal(err)
	}
	if text, src, err := RolePrompt(dir, role.Coder); err != nil || src != "embedded" || text == "" {
		t.Errorf("with a file where %s would be: %d bytes from %q, %v; want the embedded prompt", PromptOverrideDir, len(text), src, err)
	}

	dir = t.TempDir()
	over = filepath.Join(dir, filepath.FromSlash(PromptOverrideDir))
	if err := os.MkdirAll(filepath.Join(over, string(role.Coder)+".md"), 0o755); err != nil { // a directory where the file would be
		t.Fatal(err)
	}
	if _, src, err := RolePrompt(dir, role.Coder); err == nil {
		t.Errorf("with a directory where the override would be: from %q, no error; want one", src)
	}
}
