package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// writeFile writes a config file, creating its directory.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// layers are the inputs of one Load in a test; empty fields are absent.
type layers struct {
	user, project string // file contents; "" = no file
	env           []string
	flags         map[string]string
}

// load runs Load over layers written to fresh temporary files, and returns
// the files' paths for messages.
func load(t *testing.T, l layers) (cfg *Config, prov Provenance, userPath, projectPath string, err error) {
	t.Helper()
	dir := t.TempDir()
	userPath = filepath.Join(dir, "user", "config.yaml")
	projectDir := filepath.Join(dir, "proj")
	projectPath = ProjectFile(projectDir)
	if l.user != "" {
		writeFile(t, userPath, l.user)
	}
	if l.project != "" {
		writeFile(t, projectPath, l.project)
	}
	env := l.env
	if env == nil {
		env = []string{} // never the test process's environment
	}
	cfg, prov, err = Load(Sources{UserFile: userPath, ProjectDir: projectDir, Env: env, Flags: l.flags})
	return cfg, prov, userPath, projectPath, err
}

func TestDefault(t *testing.T) {
	c := Default()
	want := &Config{
		Agent: Agent{Command: "claude", Timeout: 30 * time.Minute, IdleTimeout: 10 * time.Minute,
			HooksLiveTimeout: 10 * time.Second, StuckAfter: 5},
		Limits: Limits{MaxRetries: 2, MaxBlocked: 3, Parallel: 1, FullSweepEvery: 50, Debounce: 20 * time.Millisecond,
			Backoff: 30 * time.Second, BackoffMax: 30 * time.Minute},
		Gates: map[string]GateMode{
			"tested-needs-evidence": Enforce, "tester-must-test": Enforce, "role-write-policy": Enforce,
			"scope": Enforce, "log-read-limit": Enforce, "hooks-live": Enforce,
			"frozen-tests": Enforce, "red-before-green": Enforce,
		},
		Protected: DefaultProtected,
		Sandbox:   Sandbox{Enabled: true, AllowedDomains: sandbox.DefaultAllowedDomains, FetchDomains: toolchain.DocHosts(), MaxProcesses: 4096, MaxFileMB: 100, Runtime: "srt"},
		Git:       Git{Commit: true},
		Executor:  ExecutorLocal,
		Graph:     Graph{PrecedentTokens: 600, GuardThreshold: 3},
		Log:       Log{Level: "info", Format: "console"},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Default() = %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	// Default returns a fresh value: changing one must not change the next.
	c.Gates["scope"] = Off
	if Default().Gates["scope"] != Enforce {
		t.Error("Default() shares its Gates map between calls")
	}
}

func TestLoadWithNothingIsDefault(t *testing.T) {
	cfg, prov, _, _, err := load(t, layers{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("Load() = %+v, want the defaults", cfg)
	}
	for _, k := range Keys() {
		if got := prov[k.Name]; got != (Origin{Layer: LayerDefault}) {
			t.Errorf("prov[%s] = %+v, want default", k.Name, got)
		}
	}
}

func TestLoadPrecedence(t *testing.T) {
	const (
		user    = "agent:\n  timeout: 1m\n"
		project = "agent:\n  timeout: 2m\n"
		env     = "CTXGRAPHD_AGENT_TIMEOUT=3m"
		flag    = "4m"
	)
	tests := []struct {
		name       string
		l          layers
		want       time.Duration
		wantLayer  string
		wantDetail string // "user" and "project" stand for the files' paths
	}{
		{"default", layers{}, 30 * time.Minute, LayerDefault, ""},
		{"user over default", layers{user: user}, time.Minute, LayerUser, "user"},
		{"project over user", layers{user: user, project: project}, 2 * time.Minute, LayerProject, "project"},
		{"env over project", layers{user: user, project: project, env: []string{env}}, 3 * time.Minute, LayerEnv, "CTXGRAPHD_AGENT_TIMEOUT"},
		{"flag over env", layers{user: user, project: project, env: []string{env}, flags: map[string]string{"agent.timeout": flag}}, 4 * time.Minute, LayerFlag, "--set agent.timeout"},
		{"flag over default", layers{flags: map[string]string{"agent.timeout": flag}}, 4 * time.Minute, LayerFlag, "--set agent.timeout"},
		{"env over user", layers{user: user, env: []string{env}}, 3 * time.Minute, LayerEnv, "CTXGRAPHD_AGENT_TIMEOUT"},
		{"last env assignment wins", layers{env: []string{"CTXGRAPHD_AGENT_TIMEOUT=7m", env}}, 3 * time.Minute, LayerEnv, "CTXGRAPHD_AGENT_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, prov, userPath, projectPath, err := load(t, tt.l)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Agent.Timeout != tt.want {
				t.Errorf("agent.timeout = %v, want %v", cfg.Agent.Timeout, tt.want)
			}
			detail := map[string]string{"user": userPath, "project": projectPath}[tt.wantDetail]
			if detail == "" {
				detail = tt.wantDetail
			}
			if want := (Origin{Layer: tt.wantLayer, Detail: detail}); prov["agent.timeout"] != want {
				t.Errorf("prov[agent.timeout] = %+v, want %+v", prov["agent.timeout"], want)
			}
			// Keys no layer sets keep their default and say so.
			if prov["agent.idle_timeout"] != (Origin{Layer: LayerDefault}) || cfg.Agent.IdleTimeout != 10*time.Minute {
				t.Errorf("agent.idle_timeout = %v from %+v, want the default", cfg.Agent.IdleTimeout, prov["agent.idle_timeout"])
			}
		})
	}
}

// TestLoadLayersMerge checks that each layer changes only the keys it sets.
func TestLoadLayersMerge(t *testing.T) {
	cfg, prov, userPath, projectPath, err := load(t, layers{
		user:    "agent:\n  model: sonnet\nbudget:\n  session_usd: 20\n",
		project: "limits:\n  max_retries: 4\ngates:\n  scope: warn\n",
		env:     []string{"CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENCE=off", "CTXGRAPHD_TEST_CLAUDE=/x/claude", "HOME=/root"},
		flags:   map[string]string{"log.format": "json", "agent.allow_root": "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Agent.Model = "sonnet"
	want.Budget.SessionUSD = 20
	want.Limits.MaxRetries = 4
	want.Gates["scope"] = Warn
	want.Gates["tested-needs-evidence"] = Off
	want.Log.Format = "json"
	want.Agent.AllowRoot = true
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load() = %+v\nwant %+v", cfg, want)
	}
	wantProv := map[string]Origin{
		"agent.model":                 {LayerUser, userPath},
		"budget.session_usd":          {LayerUser, userPath},
		"limits.max_retries":          {LayerProject, projectPath},
		"gates.scope":                 {LayerProject, projectPath},
		"gates.tested-needs-evidence": {LayerEnv, "CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENCE"},
		"log.format":                  {LayerFlag, "--set log.format"},
		"agent.allow_root":            {LayerFlag, "--set agent.allow_root"},
		"agent.command":               {LayerDefault, ""},
		"gates.hooks-live":            {LayerDefault, ""},
	}
	for k, w := range wantProv {
		if prov[k] != w {
			t.Errorf("prov[%s] = %+v, want %+v", k, prov[k], w)
		}
	}
	if len(prov) != len(Keys()) {
		t.Errorf("provenance has %d keys, want one per key (%d)", len(prov), len(Keys()))
	}
}

// TestLoadValueForms checks the spellings each kind accepts.
func TestLoadValueForms(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(*Config)
	}{
		{"durations in Go syntax", "agent:\n  timeout: 1h30m\n  idle_timeout: 90s\nlimits:\n  debounce: 0\n",
			func(c *Config) {
				c.Agent.Timeout = 90 * time.Minute
				c.Agent.IdleTimeout = 90 * time.Second
				c.Limits.Debounce = 0
			}},
		{"durations as quoted strings", "agent:\n  timeout: \"5m\"\n  hooks_live_timeout: '500ms'\n",
			func(c *Config) { c.Agent.Timeout = 5 * time.Minute; c.Agent.HooksLiveTimeout = 500 * time.Millisecond }},
		{"ints, bools and floats", "agent:\n  max_turns: 40\n  allow_root: true\nlimits:\n  max_blocked: 0\nbudget:\n  run_usd: 2.5\n  feature_usd: 10\n",
			func(c *Config) {
				c.Agent.MaxTurns = 40
				c.Agent.AllowRoot = true
				c.Limits.MaxBlocked = 0
				c.Budget.RunUSD = 2.5
				c.Budget.FeatureUSD = 10
			}},
		{"an empty model", "agent:\n  model: \"\"\n", func(c *Config) {}},
		{"a null model", "agent:\n  model:\n", func(c *Config) {}},
		{"a number as a string key", "agent:\n  model: 4\n", func(c *Config) { c.Agent.Model = "4" }},
		{"dotted keys at the top", "agent.timeout: 5m\ngates.scope: off\n",
			func(c *Config) { c.Agent.Timeout = 5 * time.Minute; c.Gates["scope"] = Off }},
		{"empty sections", "agent:\ngates:\n  # scope: off\n", func(c *Config) {}},
		{"comments only", "# nothing yet\n", func(c *Config) {}},
		{"anchors and aliases", "agent:\n  timeout: &t 12m\n  idle_timeout: *t\n",
			func(c *Config) { c.Agent.Timeout = 12 * time.Minute; c.Agent.IdleTimeout = 12 * time.Minute }},
		{"every gate mode", "gates:\n  scope: warn\n  hooks-live: off\n  tester-must-test: enforce\n",
			func(c *Config) { c.Gates["scope"] = Warn; c.Gates["hooks-live"] = Off }},
		{"log keys", "log:\n  level: debug\n  format: json\n", func(c *Config) { c.Log = Log{Level: "debug", Format: "json"} }},
		{"bools in YAML's other cases", "agent:\n  allow_root: True\n", func(c *Config) { c.Agent.AllowRoot = true }},
		{"no memory bound", "sandbox:\n  max_memory_mb: -1\n", func(c *Config) { c.Sandbox.MaxMemoryMB = -1 }},
		{"the least memory bound", "sandbox:\n  max_memory_mb: 1024\n", func(c *Config) { c.Sandbox.MaxMemoryMB = 1024 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, _, _, err := load(t, layers{project: tt.yaml})
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tt.want(want)
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("Load() = %+v\nwant %+v", cfg, want)
			}
		})
	}
}

// TestLoadFileErrors runs each bad file as the user file and as the project
// file: the message must name that file and the line.
func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // FILE stands for the file's path
	}{
		{"negative int", "limits:\n  max_retries: -1\n",
			`FILE:2: limits.max_retries: "-1" is not allowed: want a whole number >= 0`},
		{"fractional int", "agent:\n  max_turns: 2.5\n",
			`FILE:2: agent.max_turns: "2.5" is not allowed: want a whole number >= 0`},
		{"no test at a time", "limits:\n  parallel: 0\n",
			`FILE:2: limits.parallel: "0" is not allowed: want a whole number from 1 to 32`},
		{"more tests at once than any machine should", "limits:\n  parallel: 33\n",
			`FILE:2: limits.parallel: "33" is not allowed: want a whole number from 1 to 32`},
		{"a memory bound Claude Code cannot start under", "sandbox:\n  max_memory_mb: 512\n",
			`FILE:2: sandbox.max_memory_mb: "512" is not allowed: want -1, 0, or a number of MiB >= 1024 (Claude Code itself fails to start with less)`},
		{"a negative memory bound other than -1", "sandbox:\n  max_memory_mb: -2\n",
			`FILE:2: sandbox.max_memory_mb: "-2" is not allowed: want -1, 0, or a number of MiB >= 1024 (Claude Code itself fails to start with less)`},
		{"zero guard threshold", "graph:\n  guard_threshold: 0\n",
			`FILE:2: graph.guard_threshold: "0" is not allowed: want a whole number >= 1`},
		{"retention without a unit", "graph:\n  retention: 30\n",
			`FILE:2: graph.retention: "30" is not allowed: want a duration >= 0 with a unit, such as 20ms or 1s`},
		{"negative retention", "graph:\n  retention: -1h\n",
			`FILE:2: graph.retention: "-1h" is not allowed: want a duration >= 0 with a unit, such as 20ms or 1s`},
		{"hex int", "limits:\n  max_blocked: 0x10\n",
			`FILE:2: limits.max_blocked: "0x10" is not allowed: want a whole number >= 0`},
		{"duration without unit", "agent:\n  timeout: 30\n",
			`FILE:2: agent.timeout: "30" is not allowed: want a duration > 0 with a unit, such as 90s or 30m`},
		{"zero duration where one is needed", "agent:\n  idle_timeout: 0s\n",
			`FILE:2: agent.idle_timeout: "0s" is not allowed: want a duration > 0 with a unit, such as 90s or 30m`},
		{"negative duration", "limits:\n  debounce: -5ms\n",
			`FILE:2: limits.debounce: "-5ms" is not allowed: want a duration >= 0 with a unit, such as 20ms or 1s`},
		{"null duration", "agent:\n  hooks_live_timeout:\n",
			`FILE:2: agent.hooks_live_timeout: "" is not allowed: want a duration > 0 with a unit, such as 90s or 30m`},
		{"yes for a bool", "agent:\n  allow_root: yes\n",
			`FILE:2: agent.allow_root: "yes" is not allowed: want true or false`},
		{"negative float", "budget:\n  run_usd: -2\n",
			`FILE:2: budget.run_usd: "-2" is not allowed: want a number >= 0`},
		{"NaN float", "budget:\n  feature_usd: NaN\n",
			`FILE:2: budget.feature_usd: "NaN" is not allowed: want a number >= 0`},
		{"dollar float", "budget:\n  session_usd: $5\n",
			`FILE:2: budget.session_usd: "$5" is not allowed: want a number >= 0`},
		{"empty command", "agent:\n  command: \"\"\n",
			`FILE:2: agent.command: "" is not allowed: want a program name on PATH or a path to it, not empty`},
		{"bad gate mode", "gates:\n  scope: strict\n",
			`FILE:2: gates.scope: "strict" is not allowed: want one of enforce, warn, off`},
		{"bad log level", "log:\n  level: verbose\n",
			`FILE:2: log.level: "verbose" is not allowed: want one of debug, info, warn, error`},
		{"unknown gate", "gates:\n  scopes: warn\n",
			`FILE:2: unknown gate "scopes" (did you mean "scope"?); the gates are tested-needs-evidence, tester-must-test, role-write-policy, scope, log-read-limit, hooks-live, frozen-tests, red-before-green`},
		{"misspelt key", "agent:\n  command: claude\n\n  timout: 5m\n",
			`FILE:4: unknown key "agent.timout" (did you mean "agent.timeout"?)`},
		{"misspelt section", "agnet:\n  timeout: 5m\n",
			`FILE:1: unknown key "agnet" (did you mean "agent"?)`},
		{"key in the wrong section", "agent:\n  max_retries: 5\n",
			`FILE:2: unknown key "agent.max_retries" (did you mean "limits.max_retries"?)`},
		{"key with no section", "timeout: 5m\n",
			`FILE:1: unknown key "timeout" (did you mean "agent.timeout"?)`},
		{"unknown key far from any", "agent:\n  colour: blue\n",
			`FILE:2: unknown key "agent.colour"; the keys under agent: are command, model, timeout, idle_timeout, max_turns, allow_root, hooks_live_timeout, stuck_after`},
		{"unknown section far from any", "telemetry:\n  on: true\n",
			`FILE:1: unknown key "telemetry"; the sections are agent, limits, budget, gates, sandbox, git, executor, setup, lanes, nats, notify, graph, log`},
		{"value where a section goes", "agent: claude\n",
			`FILE:1: agent: want a mapping of keys (command, model, timeout, idle_timeout, max_turns, allow_root, hooks_live_timeout, stuck_after), found the value "claude"`},
		{"mapping where a value goes", "agent:\n  timeout:\n    run: 5m\n",
			`FILE:3: agent.timeout: want a single value, a duration > 0 with a unit, such as 90s or 30m, found a mapping`},
		{"list where a value goes", "log:\n  level: [info]\n",
			`FILE:2: log.level: want a single value, one of debug, info, warn, error, found a list`},
		{"key set twice", "agent:\n  timeout: 5m\nagent.timeout: 6m\n",
			`FILE:3: agent.timeout is set twice (first on line 2); keep one`},
		{"not a mapping", "- agent\n",
			`FILE:1: want a mapping of keys at the top level, such as agent: or gates:, found a list`},
		// yaml.v3 gives the line of the block the error is in.
		{"syntax error", "agent:\n  timeout: 5m\n model: [x\n",
			`FILE:2: invalid YAML: did not find expected key`},
		{"tab indentation", "agent:\n\ttimeout: 5m\n",
			`FILE:2: invalid YAML: found character that cannot start any token (YAML indents with spaces; this file has a tab)`},
		{"two documents", "agent:\n  timeout: 5m\n---\nlog:\n  level: debug\n",
			`FILE:3: a second YAML document: the file holds one mapping of keys, remove the ---`},
	}
	for _, tt := range tests {
		for _, layer := range []string{LayerUser, LayerProject} {
			t.Run(tt.name+"/"+layer, func(t *testing.T) {
				l := layers{user: tt.yaml}
				if layer == LayerProject {
					l = layers{project: tt.yaml}
				}
				cfg, prov, userPath, projectPath, err := load(t, l)
				if err == nil {
					t.Fatalf("Load() = %+v, want an error", cfg)
				}
				if cfg != nil || prov != nil {
					t.Errorf("Load() returned a configuration with its error")
				}
				path := userPath
				if layer == LayerProject {
					path = projectPath
				}
				if want := strings.ReplaceAll(tt.want, "FILE", path); err.Error() != want {
					t.Errorf("error:\n got %s\nwant %s", err, want)
				}
			})
		}
	}
}

func TestLoadEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"bad gate mode", []string{"CTXGRAPHD_GATES_SCOPE=strict"},
			`CTXGRAPHD_GATES_SCOPE="strict": gates.scope must be one of enforce, warn, off`},
		{"negative int", []string{"CTXGRAPHD_LIMITS_MAX_RETRIES=-1"},
			`CTXGRAPHD_LIMITS_MAX_RETRIES="-1": limits.max_retries must be a whole number >= 0`},
		{"duration without unit", []string{"CTXGRAPHD_AGENT_TIMEOUT=30"},
			`CTXGRAPHD_AGENT_TIMEOUT="30": agent.timeout must be a duration > 0 with a unit, such as 90s or 30m`},
		{"empty duration", []string{"CTXGRAPHD_LIMITS_DEBOUNCE="},
			`CTXGRAPHD_LIMITS_DEBOUNCE="": limits.debounce must be a duration >= 0 with a unit, such as 20ms or 1s`},
		{"bad bool", []string{"CTXGRAPHD_AGENT_ALLOW_ROOT=1"},
			`CTXGRAPHD_AGENT_ALLOW_ROOT="1": agent.allow_root must be true or false`},
		{"infinite float", []string{"CTXGRAPHD_BUDGET_RUN_USD=Inf"},
			`CTXGRAPHD_BUDGET_RUN_USD="Inf": budget.run_usd must be a number >= 0`},
		{"bad enum", []string{"CTXGRAPHD_LOG_FORMAT=text"},
			`CTXGRAPHD_LOG_FORMAT="text": log.format must be one of console, json`},
		{"empty command", []string{"CTXGRAPHD_AGENT_COMMAND="},
			`CTXGRAPHD_AGENT_COMMAND="": agent.command must be a program name on PATH or a path to it, not empty`},
		{"misspelt variable", []string{"CTXGRAPHD_AGENT_TIMOUT=5m"},
			`CTXGRAPHD_AGENT_TIMOUT: unknown configuration variable (did you mean CTXGRAPHD_AGENT_TIMEOUT?)`},
		{"variable without its section", []string{"CTXGRAPHD_MAX_RETRIES=5"},
			`CTXGRAPHD_MAX_RETRIES: unknown configuration variable (did you mean CTXGRAPHD_LIMITS_MAX_RETRIES?)`},
		{"unknown variable", []string{"CTXGRAPHD_VERBOSE=1"},
			`CTXGRAPHD_VERBOSE: unknown configuration variable; a CTXGRAPHD_ variable sets the key it names, e.g. CTXGRAPHD_AGENT_TIMEOUT sets agent.timeout (unset it if it is not meant for ctxgraphd)`},
		{"unknown gate", []string{"CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENSE=off"},
			`CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENSE: unknown gate "tested-needs-evidense" (did you mean "tested-needs-evidence"?); the gates are tested-needs-evidence, tester-must-test, role-write-policy, scope, log-read-limit, hooks-live, frozen-tests, red-before-green`},
		{"every problem, sorted by name", []string{"CTXGRAPHD_LOG_LEVEL=loud", "CTXGRAPHD_AGENT_MAX_TURNS=x", "CTXGRAPHD_TEST_CLAUDE=/x"},
			"CTXGRAPHD_AGENT_MAX_TURNS=\"x\": agent.max_turns must be a whole number >= 0\n" +
				`CTXGRAPHD_LOG_LEVEL="loud": log.level must be one of debug, info, warn, error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, _, err := load(t, layers{env: tt.env})
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestLoadEnvIgnoresOthers checks that only CTXGRAPHD_ configuration
// variables count: the test harness's and the agents' (CTXGRAPH_, no D) do
// not.
func TestLoadEnvIgnoresOthers(t *testing.T) {
	cfg, _, _, _, err := load(t, layers{env: []string{
		"CTXGRAPHD_TEST_CLAUDE=/tools/claude",
		"CTXGRAPHD_TEST_ANYTHING=1",
		"CTXGRAPH_SOCKET=/run/x.sock",
		"CTXGRAPH_AGENT=tester-agent",
		"ctxgraphd_agent_timeout=1s",
		"PATH=/usr/bin",
		"NOEQUALS",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("Load() = %+v, want the defaults", cfg)
	}
}

func TestLoadFlagErrors(t *testing.T) {
	tests := []struct {
		name  string
		flags map[string]string
		want  string
	}{
		{"bad gate mode", map[string]string{"gates.scope": "strict"},
			`--set gates.scope="strict": gates.scope must be one of enforce, warn, off`},
		{"bad duration", map[string]string{"agent.timeout": "5 minutes"},
			`--set agent.timeout="5 minutes": agent.timeout must be a duration > 0 with a unit, such as 90s or 30m`},
		{"misspelt key", map[string]string{"agent.timout": "5m"},
			`--set agent.timout: unknown key "agent.timout" (did you mean "agent.timeout"?)`},
		{"unknown gate", map[string]string{"gates.lint": "off"},
			`--set gates.lint: unknown gate "lint"; the gates are tested-needs-evidence, tester-must-test, role-write-policy, scope, log-read-limit, hooks-live, frozen-tests, red-before-green`},
		{"a section", map[string]string{"gates": "off"},
			`--set gates: "gates" is a section, not a key; set one of gates.tested-needs-evidence, gates.tester-must-test, gates.role-write-policy, gates.scope, gates.log-read-limit, gates.hooks-live, gates.frozen-tests, gates.red-before-green, gates.protected`},
		{"every problem, sorted by key", map[string]string{"log.level": "x", "budget.run_usd": "-1"},
			"--set budget.run_usd=\"-1\": budget.run_usd must be a number >= 0\n" +
				`--set log.level="x": log.level must be one of debug, info, warn, error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, _, err := load(t, layers{flags: tt.flags})
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestLoadReportsEveryProblem checks that one Load reports all problems of
// all layers, in layer order and, within a file, in line order.
func TestLoadReportsEveryProblem(t *testing.T) {
	_, _, userPath, projectPath, err := load(t, layers{
		user:    "log:\n  level: loud\n",
		project: "agent:\n  timout: 5m\n  max_turns: -3\ngates:\n  scope: strict\n  lint: off\n",
		env:     []string{"CTXGRAPHD_BUDGET_RUN_USD=lots"},
		flags:   map[string]string{"limits.max_blocked": "many"},
	})
	want := []string{
		userPath + `:2: log.level: "loud" is not allowed: want one of debug, info, warn, error`,
		projectPath + `:2: unknown key "agent.timout" (did you mean "agent.timeout"?)`,
		projectPath + `:3: agent.max_turns: "-3" is not allowed: want a whole number >= 0`,
		projectPath + `:5: gates.scope: "strict" is not allowed: want one of enforce, warn, off`,
		projectPath + `:6: unknown gate "lint"; the gates are tested-needs-evidence, tester-must-test, role-write-policy, scope, log-read-limit, hooks-live, frozen-tests, red-before-green`,
		`CTXGRAPHD_BUDGET_RUN_USD="lots": budget.run_usd must be a number >= 0`,
		`--set limits.max_blocked="many": limits.max_blocked must be a whole number >= 0`,
	}
	if err == nil {
		t.Fatal("Load() succeeded, want every problem")
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	// Each problem is its own error, for callers that count or list them.
	if j, ok := err.(interface{ Unwrap() []error }); !ok || len(j.Unwrap()) != len(want) {
		t.Errorf("error is not a join of %d problems: %#v", len(want), err)
	}
}

func TestLoadFiles(t *testing.T) {
	t.Run("missing files are no layer", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := Load(Sources{UserFile: filepath.Join(dir, "nope.yaml"), ProjectDir: dir, Env: []string{}})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an unreadable file is an error", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(ProjectFile(dir), 0o755); err != nil { // a directory cannot be read as a file
			t.Fatal(err)
		}
		_, _, err := Load(Sources{UserFile: "-", ProjectDir: dir, Env: []string{}})
		if err == nil || !strings.HasPrefix(err.Error(), "project configuration file: ") || !strings.Contains(err.Error(), ProjectFile(dir)) {
			t.Errorf("error = %v, want one naming the project file", err)
		}
	})
	t.Run("dash is no user file", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", home)
		writeFile(t, filepath.Join(home, "ctxgraphd", "config.yaml"), "agent:\n  model: opus\n")
		cfg, _, err := Load(Sources{UserFile: "-", Env: []string{}})
		if err != nil || cfg.Agent.Model != "" {
			t.Errorf("Load(UserFile: -) = %+v, %v; want the defaults", cfg, err)
		}
		cfg, prov, err := Load(Sources{Env: []string{}})
		if err != nil || cfg.Agent.Model != "opus" || prov["agent.model"] != (Origin{LayerUser, DefaultUserFile()}) {
			t.Errorf("Load() = %+v, %+v, %v; want the default user file's model", cfg, prov["agent.model"], err)
		}
	})
}

func TestDefaultUserFile(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name, xdg, want string
	}{
		{"XDG_CONFIG_HOME", "/etc/xdg-user", "/etc/xdg-user/ctxgraphd/config.yaml"},
		{"unset", "", filepath.Join(home, ".config", "ctxgraphd", "config.yaml")},
		{"relative is ignored", "rel/dir", filepath.Join(home, ".config", "ctxgraphd", "config.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			if got := DefaultUserFile(); got != tt.want {
				t.Errorf("DefaultUserFile() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProjectFile(t *testing.T) {
	if got, want := ProjectFile("/p"), "/p/.claude/ctxgraphd.yaml"; got != want {
		t.Errorf("ProjectFile(/p) = %q, want %q", got, want)
	}
}

func TestDescribe(t *testing.T) {
	cfg, prov, _, projectPath, err := load(t, layers{
		project: "agent:\n  model: claude-sonnet-4-5\n",
		env:     []string{"CTXGRAPHD_AGENT_TIMEOUT=45m"},
		flags:   map[string]string{"gates.scope": "warn"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := keyLines(cfg.Describe(prov))
	want := map[string]string{
		"agent.command":               `agent.command               = claude             # default`,
		"agent.model":                 `agent.model                 = claude-sonnet-4-5  # project ` + projectPath,
		"agent.timeout":               `agent.timeout               = 45m0s              # env CTXGRAPHD_AGENT_TIMEOUT`,
		"limits.debounce":             `limits.debounce             = 20ms               # default`,
		"budget.run_usd":              `budget.run_usd              = 0                  # default`,
		"gates.scope":                 `gates.scope                 = warn               # flag --set gates.scope`,
		"gates.tested-needs-evidence": `gates.tested-needs-evidence = enforce            # default`,
	}
	if len(lines) != len(Keys())+1 || lines[len(lines)-1] != "" {
		t.Fatalf("Describe() has %d lines of keys, want one per key and a final newline:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, k := range Keys() {
		if !strings.HasPrefix(lines[i], k.Name+" ") {
			t.Errorf("line %d = %q, want key %s (the order of Keys)", i, lines[i], k.Name)
		}
		if w, ok := want[k.Name]; ok && lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
	if got := Default().Describe(nil); !strings.Contains(got, "agent.model                 = \"\"       # default\n") {
		t.Errorf("Describe(nil) of the defaults:\n%s\nwant an empty model shown as \"\" and every origin default", got)
	}
}

// keyLines are the lines of Describe's output that show a key, without
// the comment lines below some of them.
func keyLines(out string) []string {
	return slices.DeleteFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, " ") })
}

// Describe says, below sandbox.allowed_domains, which toolchain each host
// of the effective list serves, so that a user can narrow the list to the
// project's own; a host no toolchain fetches from is said to be none.
func TestDescribeNamesEachHostsToolchain(t *testing.T) {
	docs := []string{
		"sandbox.fetch_domains       = go.dev, pkg.go.dev, nodejs.org, developer.mozilla.org, docs.npmjs.com, docs.python.org, docs.pytest.org, doc.rust-lang.org, docs.rs  # default",
		"                              # go.dev                 Go: Go's documentation and specification",
		"                              # pkg.go.dev             Go: Go packages' documentation",
		"                              # nodejs.org             Node: Node.js's documentation",
		"                              # developer.mozilla.org  Node: the JavaScript reference (MDN)",
		"                              # docs.npmjs.com         Node: npm's documentation",
		"                              # docs.python.org        Python: Python's documentation",
		"                              # docs.pytest.org        Python: pytest's documentation",
		"                              # doc.rust-lang.org      Rust: Rust's documentation",
		"                              # docs.rs                Rust: crates' documentation",
	}
	allowWrite := "sandbox.allow_write         = \"\"       # default"
	for _, tc := range []struct {
		name    string
		domains string // --set sandbox.allowed_domains; "-" for the default
		fetch   string // --set sandbox.fetch_domains; "-" for the default
		want    []string
	}{
		{"the defaults", "-", "-", slices.Concat([]string{
			"sandbox.allowed_domains     = proxy.golang.org, sum.golang.org, storage.googleapis.com, registry.npmjs.org, pypi.org, files.pythonhosted.org, crates.io, index.crates.io, static.crates.io  # default",
			"                              # proxy.golang.org        Go: the Go module proxy (GOPROXY's default)",
			"                              # sum.golang.org          Go: the Go checksum database (GOSUMDB's default)",
			"                              # storage.googleapis.com  Go: where proxy.golang.org redirects module zips",
			"                              # registry.npmjs.org      Node: npm's registry (package metadata and tarballs)",
			"                              # pypi.org                Python: PyPI's index (pip's /simple/ pages)",
			"                              # files.pythonhosted.org  Python: PyPI's package files",
			"                              # crates.io               Rust: crates.io's API and index",
			"                              # index.crates.io         Rust: Cargo's sparse index",
			"                              # static.crates.io        Rust: crate downloads",
		}, docs, []string{allowWrite})},
		{"narrowed, with hosts of the project's own", "pypi.org,files.pythonhosted.org,example.com", "docs.python.org,docs.example.com", []string{
			"sandbox.allowed_domains     = pypi.org, files.pythonhosted.org, example.com  # flag --set sandbox.allowed_domains",
			"                              # pypi.org                Python: PyPI's index (pip's /simple/ pages)",
			"                              # files.pythonhosted.org  Python: PyPI's package files",
			"                              # example.com             not a toolchain's registry or documentation",
			"sandbox.fetch_domains       = docs.python.org, docs.example.com  # flag --set sandbox.fetch_domains",
			"                              # docs.python.org   Python: Python's documentation",
			"                              # docs.example.com  not a toolchain's registry or documentation",
			allowWrite,
		}},
		{"none", "", "", []string{
			"sandbox.allowed_domains     = \"\"       # flag --set sandbox.allowed_domains",
			"sandbox.fetch_domains       = \"\"       # flag --set sandbox.fetch_domains",
			allowWrite,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := layers{flags: map[string]string{}}
			if tc.domains != "-" {
				l.flags["sandbox.allowed_domains"] = tc.domains
			}
			if tc.fetch != "-" {
				l.flags["sandbox.fetch_domains"] = tc.fetch
			}
			cfg, prov, _, _, err := load(t, l)
			if err != nil {
				t.Fatal(err)
			}
			out := cfg.Describe(prov)
			at := strings.Index(out, "sandbox.allowed_domains ")
			if at < 0 {
				t.Fatalf("no sandbox.allowed_domains in:\n%s", out)
			}
			got := strings.Split(out[at:], "\n")[:len(tc.want)]
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestDescribeShowsValues: each value is shown as the layers read it back:
// floats in full, durations as Go prints them, lists joined with ", ", and
// an empty value as "".
func TestDescribeShowsValues(t *testing.T) {
	cfg, prov, _, _, err := load(t, layers{flags: map[string]string{
		"budget.run_usd":          "2.75",
		"agent.timeout":           "90s",
		"gates.protected":         "tests/**,**/*_test.go",
		"sandbox.allowed_domains": "",
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"budget.run_usd":          "2.75",
		"agent.timeout":           "1m30s",
		"gates.protected":         "tests/**, **/*_test.go",
		"sandbox.allowed_domains": `""`,
		"sandbox.allow_write":     `""`,
		"agent.model":             `""`,
	}
	for _, line := range keyLines(strings.TrimSuffix(cfg.Describe(prov), "\n")) {
		name, rest, _ := strings.Cut(line, " = ")
		value, _, _ := strings.Cut(rest, "  # ")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if w, ok := want[name]; ok && value != w {
			t.Errorf("%s is shown as %q, want %q", name, value, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s is not shown", name)
	}
}

// TestDescribeAlignsComments: values of up to maxAlignedValue characters
// share one column of comments, just after the widest of them; a longer
// value (a list of globs) shifts only its own comment.
func TestDescribeAlignsComments(t *testing.T) {
	model := strings.Repeat("m", maxAlignedValue)
	cfg, prov, _, _, err := load(t, layers{flags: map[string]string{"agent.model": model}})
	if err != nil {
		t.Fatal(err)
	}
	column := -1
	for _, line := range keyLines(strings.TrimSuffix(cfg.Describe(prov), "\n")) {
		_, rest, _ := strings.Cut(line, " = ")
		value, _, _ := strings.Cut(rest, "  # ")
		at := strings.Index(line, "  # ")
		if len(strings.TrimSpace(value)) > maxAlignedValue {
			if at <= column {
				t.Errorf("a long value's comment is not after the column (%d): %q", column, line)
			}
			continue
		}
		if column < 0 {
			column = at
		}
		if at != column {
			t.Errorf("comment at column %d, want %d like the others: %q", at, column, line)
		}
		if strings.HasPrefix(line, "agent.model ") && !strings.Contains(line, model+"  # ") {
			t.Errorf("the widest aligned value is padded: %q", line)
		}
	}
}

// TestLoadNeverReturnsAnInvalidConfig: what Load returns without an error
// passes Validate, whatever spellings the layers used. A list element with
// a comma outside braces, which the environment and --set could not write,
// may be refused, but never let through into a configuration Validate
// refuses.
func TestLoadNeverReturnsAnInvalidConfig(t *testing.T) {
	tests := []struct {
		name     string
		l        layers
		mustLoad bool
	}{
		{"numbers and bools in other spellings", layers{project: "budget:\n  run_usd: -0\n  feature_usd: 0x1p-2\nagent:\n  max_turns: +5\n  allow_root: TRUE\n"}, true},
		{"globs with braces", layers{project: "gates:\n  protected: [\"src/{a,b}/**\", \"**/*.{test,spec}.{js,ts}\"]\n"}, true},
		{"list elements with blank space", layers{env: []string{"CTXGRAPHD_SANDBOX_ALLOW_WRITE= /opt/x , /var/y "}}, true},
		{"a directory with a comma", layers{project: "sandbox:\n  allow_write: [\"/opt/a,b\"]\n"}, false},
		{"a glob with a comma", layers{project: "gates:\n  protected: [\"tests/**,/abs\"]\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, _, _, err := load(t, tt.l)
			switch {
			case err != nil && tt.mustLoad:
				t.Fatalf("Load() = %v", err)
			case err != nil:
				return
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Load() returned a configuration that Validate refuses: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no gates map: all enforced", func(c *Config) { c.Gates = nil }, ""},
		{"some gates missing", func(c *Config) { delete(c.Gates, "scope") }, ""},
		{"negative retries", func(c *Config) { c.Limits.MaxRetries = -1 },
			`limits.max_retries: "-1" is not allowed: want a whole number >= 0`},
		{"memory bound just under the least", func(c *Config) { c.Sandbox.MaxMemoryMB = MinMemoryMB - 1 },
			`sandbox.max_memory_mb: "1023" is not allowed: want -1, 0, or a number of MiB >= 1024 (Claude Code itself fails to start with less)`},
		{"no memory bound", func(c *Config) { c.Sandbox.MaxMemoryMB = -1 }, ""},
		{"zero timeout", func(c *Config) { c.Agent.Timeout = 0 },
			`agent.timeout: "0s" is not allowed: want a duration > 0 with a unit, such as 90s or 30m`},
		{"bad gate mode", func(c *Config) { c.Gates["scope"] = "strict" },
			`gates.scope: "strict" is not allowed: want one of enforce, warn, off`},
		{"unknown gate", func(c *Config) { c.Gates["scop"] = Off },
			`gates.scop: unknown gate "scop" (did you mean "scope"?); the gates are tested-needs-evidence, tester-must-test, role-write-policy, scope, log-read-limit, hooks-live, frozen-tests, red-before-green`},
		{"empty log level", func(c *Config) { c.Log.Level = "" },
			`log.level: "" is not allowed: want one of debug, info, warn, error`},
		{"backoff cap equal to the first wait", func(c *Config) { c.Limits.BackoffMax = c.Limits.Backoff }, ""},
		{"backoff cap below the first wait", func(c *Config) { c.Limits.Backoff = 2 * time.Minute; c.Limits.BackoffMax = time.Minute },
			"limits.backoff_max: 1m0s is shorter than limits.backoff (2m0s): raise limits.backoff_max or lower limits.backoff"},
		{"webhook https", func(c *Config) { c.Notify.Webhook = "https://hooks.example/ctxgraphd" }, ""},
		{"webhook without a scheme", func(c *Config) { c.Notify.Webhook = "hooks.example/ctxgraphd" },
			`notify.webhook: "hooks.example/ctxgraphd" is not allowed: want an http or https URL, or empty`},
		{"webhook of another scheme", func(c *Config) { c.Notify.Webhook = "ftp://hooks.example/" },
			`notify.webhook: "ftp://hooks.example/" is not allowed: want an http or https URL, or empty`},
		{"webhook without a host", func(c *Config) { c.Notify.Webhook = "https:///x" },
			`notify.webhook: "https:///x" is not allowed: want an http or https URL, or empty`},
		{"executor nats", func(c *Config) { c.Executor = ExecutorNATS }, ""},
		{"unknown executor", func(c *Config) { c.Executor = "kubernetes" },
			`executor: "kubernetes" is not allowed: want one of local, nats`},
		{"nats: an external server", func(c *Config) { c.NATS.URL = "tls://nats.example:4222" }, ""},
		{"nats: a URL of another scheme", func(c *Config) { c.NATS.URL = "http://nats.example:4222" },
			`nats.url: "http://nats.example:4222" is not allowed: want a nats:// or tls:// URL, or empty`},
		{"nats: loopback listener on a port of its own", func(c *Config) { c.NATS.Listen = "127.0.0.1:4222" }, ""},
		{"nats: IPv6 loopback listener", func(c *Config) { c.NATS.Listen = "[::1]:4222" }, ""},
		{"nats: loopback listener with TLS", func(c *Config) { c.NATS.TLS = TLS{Cert: "/etc/c.pem", Key: "/etc/k.pem"} }, ""},
		{"nats: every interface with TLS", func(c *Config) {
			c.NATS.Listen = "0.0.0.0:4222"
			c.NATS.TLS = TLS{Cert: "/etc/c.pem", Key: "/etc/k.pem"}
		}, ""},
		{"nats: every interface without TLS", func(c *Config) { c.NATS.Listen = ":4222" },
			`nats.listen: ":4222" is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1`},
		{"nats: a LAN address without TLS", func(c *Config) { c.NATS.Listen = "10.0.0.5:4222" },
			`nats.listen: "10.0.0.5:4222" is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1`},
		{"nats: localhost is a name, not an address", func(c *Config) { c.NATS.Listen = "localhost:4222" },
			`nats.listen: "localhost:4222" is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1`},
		{"nats: a certificate without its key", func(c *Config) {
			c.NATS.Listen = "0.0.0.0:4222"
			c.NATS.TLS.Cert = "/etc/c.pem"
		}, "nats.tls.key: empty while nats.tls.cert is set: set both (a certificate and its key), or neither\n" +
			`nats.listen: "0.0.0.0:4222" is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1`},
		{"nats: a key without its certificate", func(c *Config) { c.NATS.TLS.Key = "/etc/k.pem" },
			"nats.tls.cert: empty while nats.tls.key is set: set both (a certificate and its key), or neither"},
		{"nats: a relative certificate path", func(c *Config) { c.NATS.TLS = TLS{Cert: "c.pem", Key: "/etc/k.pem"} },
			`nats.tls.cert: "c.pem" is not allowed: want an absolute path to a PEM file, or empty`},
		{"nats: listen without a port", func(c *Config) { c.NATS.Listen = "127.0.0.1" },
			`nats.listen: "127.0.0.1" is not allowed: want host:port, or empty`},
		{"nats: listen on a port out of range", func(c *Config) { c.NATS.Listen = "127.0.0.1:70000" },
			`nats.listen: "127.0.0.1:70000" is not allowed: want host:port, or empty`},
		{"nats: an external server and a listener", func(c *Config) {
			c.NATS.URL = "nats://nats.example:4222"
			c.NATS.Listen = "127.0.0.1:4222"
		}, `nats.url: "nats://nats.example:4222" names a server of its own, so the embedded server's nats.listen and nats.tls are not used: remove one or the other`},
		{"every problem", func(c *Config) { c.Agent.Command = ""; c.Budget.SessionUSD = -1 },
			"agent.command: \"\" is not allowed: want a program name on PATH or a path to it, not empty\n" +
				`budget.session_usd: "-1" is not allowed: want a number >= 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("Validate():\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestRegistryCoversConfig keeps the registry and the Config type in step:
// every field has exactly one key, every key reaches its field, and the
// environment names are distinct.
func TestRegistryCoversConfig(t *testing.T) {
	var fields []string
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := prefix + f.Tag.Get("yaml")
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, name+".")
			case f.Type.Kind() == reflect.Map: // gates: one key per gate
				for _, g := range GateNames {
					fields = append(fields, name+"."+g)
				}
			default:
				fields = append(fields, name)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	var keys []string
	for _, k := range Keys() {
		keys = append(keys, k.Name)
	}
	if !reflect.DeepEqual(fields, keys) {
		t.Errorf("Config's fields:\n%v\nregistry's keys:\n%v", fields, keys)
	}

	envs := map[string]string{}
	for _, k := range registry {
		if other, dup := envs[k.envName()]; dup {
			t.Errorf("%s and %s share the variable %s", k.name, other, k.envName())
		}
		envs[k.envName()] = k.name
	}

	// Setting each key through a layer changes that key and no other
	// (and its companions: keys that are valid only together).
	companions := map[string]map[string]string{
		"nats.tls.cert": {"nats.tls.key": "/x/key.pem"},
		"nats.tls.key":  {"nats.tls.cert": "/x/cert.pem"},
	}
	for _, k := range registry {
		v := nonDefault(k)
		flags := map[string]string{k.name: v}
		for name, cv := range companions[k.name] {
			flags[name] = cv
		}
		cfg, prov, err := Load(Sources{UserFile: "-", Env: []string{}, Flags: flags})
		if err != nil {
			t.Errorf("--set %s=%s: %v", k.name, v, err)
			continue
		}
		if got := raw(k.get(cfg)); got != v {
			t.Errorf("after --set %s=%s the key reads %q", k.name, v, got)
		}
		k.set(cfg, k.get(Default()))
		for name := range companions[k.name] {
			byName[name].set(cfg, byName[name].get(Default()))
		}
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("--set %s changed other keys: %+v", k.name, cfg)
		}
		if prov[k.name].Layer != LayerFlag {
			t.Errorf("prov[%s] = %+v, want flag", k.name, prov[k.name])
		}
	}
}

// nonDefault returns a valid raw value of k that differs from its default.
func nonDefault(k *key) string {
	def := raw(k.get(Default()))
	for _, v := range []string{"x-other", "7m0s", "7", "2048", "true", "false", "2.5", "warn", "debug", "json", "/x/other", "x/**,y/*.sh", "https://hooks.example/x", "nats", "nats://nats.example:4222", "127.0.0.1:4222"} {
		if _, err := k.parse(v); err == nil && v != def {
			return v
		}
	}
	panic("no non-default value for " + k.name)
}

func TestKeys(t *testing.T) {
	keys := Keys()
	byName := map[string]KeyInfo{}
	for _, k := range keys {
		if k.Allowed == "" || k.Help == "" {
			t.Errorf("%s: Allowed %q, Help %q: want both", k.Name, k.Allowed, k.Help)
		}
		byName[k.Name] = k
	}
	for name, def := range map[string]string{
		"agent.timeout": "30m0s", "agent.model": `""`, "limits.max_retries": "2",
		"limits.debounce": "20ms", "gates.hooks-live": "enforce", "log.format": "console",
	} {
		if got := byName[name].Default; got != def {
			t.Errorf("Keys() default of %s = %q, want %q", name, got, def)
		}
	}
	if got := byName["gates.tested-needs-evidence"].Env(); got != "CTXGRAPHD_GATES_TESTED_NEEDS_EVIDENCE" {
		t.Errorf("Env() = %q", got)
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{"agent.timout", "agent.timeout"},
		{"agent.idle-timeout", "agent.idle_timeout"},
		{"Agent.Timeout", "agent.timeout"},
		{"agnet", "agent"},
		{"limit", "limits"},
		{"limits.max_retry", "limits.max_retries"},
		{"bugent", "agent"}, // as close to budget: the name listed first is offered
		{"budget.run", ""},
		{"zzz", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.name, candidateNames()); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"abc", "abc", 0},
		{"timout", "timeout", 1}, {"agnet", "agent", 1}, {"kitten", "sitting", 3},
		{"ca", "abc", 3}, // OSA, not full Damerau: no edit of a swapped pair
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzParseFile feeds arbitrary files to the YAML layer: it must never
// panic, and what it accepts must make a valid configuration.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"agent:\n  timeout: 5m\n", "gates:\n  scope: warn\n", "a: &x [*x]\n", "- 1\n", "agent: {timeout: {x: 1}}\n",
		"agent.timeout: 1s\nagent:\n  timeout: 2s\n", "---\n---\n", "budget: {run_usd: 1e308}\n", "\t", "sandbox:\n  allow_write: [\"/opt/a,b\"]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		values, errs := parseFile("f.yaml", data)
		c := Default()
		for _, p := range values {
			p.key.set(c, p.value)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("accepted values make an invalid config: %v", err)
		}
		for _, err := range errs {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
		}
	})
}

// TestListKeys: lists come as YAML lists in files and comma-separated in
// the environment and flags, with a glob's braces kept whole; a bad element
// is named with the key.
func TestListKeys(t *testing.T) {
	tests := []struct {
		name    string
		l       layers
		key     string
		want    []string
		wantErr string
	}{
		{"yaml list", layers{project: "gates:\n  protected:\n    - tests/**\n    - \"**/*.{test,spec}.js\"\n"}, "gates.protected",
			[]string{"tests/**", "**/*.{test,spec}.js"}, ""},
		{"env, braces kept", layers{env: []string{"CTXGRAPHD_GATES_PROTECTED=tests/**, **/*.{test,spec}.js"}}, "gates.protected",
			[]string{"tests/**", "**/*.{test,spec}.js"}, ""},
		{"flag, braces kept wherever they are", layers{flags: map[string]string{"gates.protected": "**/*.{test,spec}.js,src/{{unit,e2e}/tests,lib}/**,tests/**"}}, "gates.protected",
			[]string{"**/*.{test,spec}.js", "src/{{unit,e2e}/tests,lib}/**", "tests/**"}, ""},
		{"an empty list", layers{project: "sandbox:\n  allowed_domains: []\n"}, "sandbox.allowed_domains", []string{}, ""},
		{"flag", layers{flags: map[string]string{"sandbox.allow_write": "/opt/cache,/var/tmp/x"}}, "sandbox.allow_write",
			[]string{"/opt/cache", "/var/tmp/x"}, ""},
		{"a relative directory", layers{flags: map[string]string{"sandbox.allow_write": "cache"}}, "", nil,
			`--set sandbox.allow_write="cache": sandbox.allow_write must be a list of absolute directory paths`},
		{"a URL is not a host", layers{project: "sandbox:\n  allowed_domains: [\"https://example.com\"]\n"}, "", nil,
			`sandbox.allowed_domains: "https://example.com" is not allowed: want a list of host names`},
		{"a glob out of the project", layers{env: []string{"CTXGRAPHD_GATES_PROTECTED=../x/**"}}, "", nil,
			`CTXGRAPHD_GATES_PROTECTED="../x/**": gates.protected must be a list of glob patterns`},
		{"a mapping in the list", layers{project: "gates:\n  protected:\n    - {a: b}\n"}, "", nil,
			`gates.protected: want a list of glob patterns`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, _, _, err := load(t, tt.l)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := byName[tt.key].get(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.key, got, tt.want)
			}
		})
	}
}

// A list element holding a comma is one element in a file: the check of
// the whole configuration must read it as the file did, not split it.
func TestListElementWithACommaInAFile(t *testing.T) {
	cfg, _, _, projectPath, err := load(t, layers{project: "sandbox:\n  allow_write: [\"/opt/a,b\"]\n"})
	if err != nil {
		t.Fatalf("Load() = %v; want /opt/a,b accepted from %s", err, projectPath)
	}
	if got := cfg.Sandbox.AllowWrite; len(got) != 1 || got[0] != "/opt/a,b" {
		t.Errorf("sandbox.allow_write = %q; want [/opt/a,b]", got)
	}
	cfg.Sandbox.AllowWrite = []string{"relative,dir"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "sandbox.allow_write") {
		t.Errorf("Validate() with a relative element = %v; want it refused naming sandbox.allow_write", err)
	}
}
