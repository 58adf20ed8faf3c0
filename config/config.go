// Package config is ctxgraphd's layered configuration, with the provenance
// of every value.
//
// Layers, lowest to highest: built-in defaults, the user
// file ($XDG_CONFIG_HOME/ctxgraphd/config.yaml), the project file
// (<project>/.claude/ctxgraphd.yaml, contract), CTXGRAPHD_* environment
// variables, then flags (`run --set key=value`). Every key lives in one
// registry (keys.go) that gives its dotted name, kind, default, allowed values
// and where it goes in Config; the files, the environment and the flags are
// all flattened to dotted keys and applied through it, so a rule is written
// once and holds in every layer.
//
// Invalid configuration never starts a daemon half-configured: Load reports
// every problem of every layer at once (a user fixes them in one go), each
// naming where it was found (file and line, variable, or flag), the key, the
// value and what is allowed.
package config

import (
	"errors"
	"slices"

	"os"
	"path/filepath"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// GateMode is how a gate acts: enforce blocks the action, warn lets it
// through and records it, off does nothing.
type GateMode string

// Gate modes.
const (
	Enforce GateMode = "enforce"
	Warn    GateMode = "warn"
	Off     GateMode = "off"
)

// GateNames lists the built-in gates (docs/gates.md), each configurable as
// gates.<name> and enforced by default. They are named once, in package
// guard, where they are enforced.
var GateNames = gates.Gates

// Config is the effective configuration of one project's daemon.
type Config struct {
	Agent  Agent  `yaml:"agent"`
	Limits Limits `yaml:"limits"`
	Budget Budget `yaml:"budget"`
	// Gates maps gate names to modes; a gate missing from the map is
	// enforced, so that no gate fails open.
	Gates map[string]GateMode `yaml:"gates"`
	// Protected (gates.protected) are globs of where the project's tests
	// live: frozen with the feature list, so that no agent adds, changes
	// or removes a test (gate frozen-tests).
	Protected []string `yaml:"gates.protected"` // the dotted name: a key of the gates section
	Sandbox   Sandbox  `yaml:"sandbox"`
	Git       Git      `yaml:"git"`
	// Executor is where lanes run: ExecutorLocal or ExecutorNATS.
	Executor string `yaml:"executor"`
	// Setup is the command that prepares a tree's environment (its
	// dependencies, a venv), run by the daemon in every tree it works in
	// before the first check of a test there; "": the daemon fetches what
	// the committed manifests name where that runs no project code
	// (toolchain.SafeSetup).
	Setup  string `yaml:"setup"`
	Lanes  Lanes  `yaml:"lanes"`
	NATS   NATS   `yaml:"nats"`
	Notify Notify `yaml:"notify"`
	Graph  Graph  `yaml:"graph"`
	Log    Log    `yaml:"log"`
}

// Graph configures the context graph.
type Graph struct {
	// PrecedentTokens bounds what each run is told of the past (its own
	// feature's history, the project's lessons, the mistakes agents of
	// its role made on other features, similar traces); 0: nothing.
	PrecedentTokens int `yaml:"precedent_tokens"`
	// GuardThreshold is how often a pattern must happen before a guard is
	// proposed against it.
	GuardThreshold int `yaml:"guard_threshold"`
	// Retention is how long the traces of finished features are kept in
	// full; older ones are compacted (store.Prune) when the daemon starts
	// and then as they come of age. 0 keeps everything.
	Retention time.Duration `yaml:"retention"`
}

// Notify says where the daemon tells a person what happened: a feature
// tested or blocked, the session done, stopped or waiting.
type Notify struct {
	// Webhook is a URL that gets a POST of each event as JSON; "": none.
	Webhook string `yaml:"webhook"`
	// Command is run by sh -c with the event in its environment; "": none.
	Command string `yaml:"command"`
}

// Sandbox configures the confinement of agent runs by Claude Code's own
// sandbox.
type Sandbox struct {
	// Enabled is true unless the user turns confinement off, which only an
	// explicit setting can do, and which ctl status and the logs then say.
	Enabled        bool     `yaml:"enabled"`
	AllowedDomains []string `yaml:"allowed_domains"` // hosts agents' programs and WebFetch calls may reach
	FetchDomains   []string `yaml:"fetch_domains"`   // hosts agents' WebFetch calls may read besides, documentation
	AllowWrite     []string `yaml:"allow_write"`     // absolute directories writable besides the project, temp and tool caches
	// MaxProcesses, MaxMemoryMB and MaxFileMB bound every agent run and
	// every test run of the daemon (see sandbox.Limits); 0: no bound.
	// MaxMemoryMB 0 is half the machine's memory, which an honest build
	// does not reach and a runaway one does long before the machine
	// swaps; -1 is no bound.
	MaxProcesses int `yaml:"max_processes"`
	MaxMemoryMB  int `yaml:"max_memory_mb"`
	MaxFileMB    int `yaml:"max_file_mb"`
	// Runtime is Anthropic's sandbox runtime (srt, the sandbox of Claude
	// Code as a program of its own), which confines the setup step as
	// agents' commands are confined.
	Runtime string `yaml:"runtime"`
}

// Lanes configures what a lane holds besides its clone.
type Lanes struct {
	// Copy are untracked paths of the person's tree (.env, local
	// settings), relative to the project, copied into every lane and lent
	// to every test run of the daemon; never snapshotted, so never
	// committed, judged or reported.
	Copy []string `yaml:"copy"`
}

// Git configures what the daemon does with the project's repository.
type Git struct {
	// Commit: one commit of exactly the tested tree per tested feature.
	Commit bool `yaml:"commit"`
}

// Executors: where a lane runs. With ExecutorNATS the daemon starts its
// fleet's server (package fleet); a server of the person's own (NATS.URL)
// is refused at start.
const (
	ExecutorLocal = "local" // in clones on the daemon's machine
	ExecutorNATS  = "nats"  // on workers that pull lanes over NATS JetStream
)

// NATS configures the transport of executor nats.
type NATS struct {
	// URL is the NATS server the daemon and its workers meet on; "": the
	// server embedded in the daemon.
	URL string `yaml:"url"`
	// Listen is the embedded server's one client listener, host:port;
	// "": 127.0.0.1 on a port of the system's choosing. A listener other
	// machines can reach needs TLS (ListenIsLoopback).
	Listen string `yaml:"listen"`
	TLS    TLS    `yaml:"tls"`
	// Monitor is the embedded server's monitoring listener (HTTP,
	// /jsz and the like: the queue's depth for a scaler of workers),
	// host:port; "": none. It has no authentication: it shows stream,
	// consumer and connection figures, never a message or a credential.
	Monitor string `yaml:"monitor"`
}

// TLS is the embedded server's certificate: PEM files, both or neither.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Agent configures the `claude -p` runs.
type Agent struct {
	Command          string        `yaml:"command"`            // the Claude Code binary
	Model            string        `yaml:"model"`              // passed as --model when set
	Timeout          time.Duration `yaml:"timeout"`            // wall time of one run
	IdleTimeout      time.Duration `yaml:"idle_timeout"`       // no stream event for this long: stuck
	MaxTurns         int           `yaml:"max_turns"`          // 0: no limit
	AllowRoot        bool          `yaml:"allow_root"`         // run agents as root (IS_SANDBOX=1)
	HooksLiveTimeout time.Duration `yaml:"hooks_live_timeout"` // how long a gated call may go on before the run's hooks check in
	// StuckAfter: the same tool call failing this many times in a row,
	// with nothing done in between, stops the run as stuck; 0: never.
	StuckAfter int `yaml:"stuck_after"`
}

// DefaultFullSweepEvery is limits.full_sweep_every's default. Between
// full sweeps a sweep runs only what the claim's change can affect, and
// the session's last sweep is full whatever this says, so a larger value
// costs no verification of the morning's tip, only how soon a miss of
// the records is found (and bisected to its landing). At 50 a night of 40
// features runs 3 tests per feature, the sweeps included (make bench's
// BenchmarkNightSweeps); at 20 it would be 4.5.
const DefaultFullSweepEvery = 50

// Limits are the loop's counters.
type Limits struct {
	MaxRetries int `yaml:"max_retries"` // failed tests before a feature is blocked
	MaxBlocked int `yaml:"max_blocked"` // blocked features before the session stops; 0: no limit
	// Parallel is how many features are worked at once, each in a lane
	// of its own when it is above 1, and how many frozen tests a
	// verdict's regression sweep runs at once.
	Parallel int `yaml:"parallel"`
	// FullSweepEvery is how many regression sweeps apart the full ones
	// are; between them a sweep runs only the frozen tests the claim's
	// change can affect, by the record of what each read. 1: every sweep
	// is full.
	FullSweepEvery int           `yaml:"full_sweep_every"`
	Debounce       time.Duration `yaml:"debounce"` // quiet time after a feature-list change
	// Backoff is the first wait after a failure that waiting cures (a
	// rate limit, an overloaded or failing API, no network); each
	// failure in a row doubles it, up to BackoffMax.
	Backoff    time.Duration `yaml:"backoff"`
	BackoffMax time.Duration `yaml:"backoff_max"`
	// ApprovePlan holds the session once the initializer's feature list
	// is accepted and its tests frozen, until a person approves the plan
	// (ctxgraphd ctl approve): nothing is coded, and nothing paid for,
	// before they have read it.
	ApprovePlan bool `yaml:"approve_plan"`
}

// Budget caps spending in USD; 0 means no limit.
type Budget struct {
	RunUSD     float64 `yaml:"run_usd"`
	FeatureUSD float64 `yaml:"feature_usd"`
	SessionUSD float64 `yaml:"session_usd"`
}

// Log configures the daemon's own log.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // console | json
}

// Default returns the built-in configuration: the values that hold when no
// layer sets a key. It is the one place defaults are written; Keys reports
// them from here.
func Default() *Config {
	gates := make(map[string]GateMode, len(GateNames))
	for _, g := range GateNames {
		gates[g] = Enforce
	}
	return &Config{
		Agent: Agent{
			Command:          "claude",
			Timeout:          30 * time.Minute,
			IdleTimeout:      10 * time.Minute,
			HooksLiveTimeout: 10 * time.Second,
			StuckAfter:       5,
		},
		Limits:    Limits{MaxRetries: 2, MaxBlocked: 3, Parallel: 1, FullSweepEvery: DefaultFullSweepEvery, Debounce: 20 * time.Millisecond, Backoff: 30 * time.Second, BackoffMax: 30 * time.Minute},
		Gates:     gates,
		Protected: slices.Clone(DefaultProtected),
		Sandbox: Sandbox{Enabled: true, AllowedDomains: slices.Clone(sandbox.DefaultAllowedDomains), FetchDomains: toolchain.DocHosts(),
			MaxProcesses: 4096, MaxFileMB: 100, Runtime: "srt"},
		Git:      Git{Commit: true},
		Executor: ExecutorLocal,
		// About a screen of text: a model reads it on every turn.
		Graph: Graph{PrecedentTokens: 600, GuardThreshold: 3},
		Log:   Log{Level: "info", Format: "console"},
	}
}

// DefaultProtected are the test layouts of Go, Python and JavaScript
// projects, frozen with the feature list (gates.protected).
var DefaultProtected = []string{
	// Go
	"**/*_test.go", "**/testdata/**",
	// Python
	"**/test_*.py", "**/*_test.py", "**/conftest.py", "pytest.ini", "tox.ini",
	// JavaScript and TypeScript
	"**/*.{test,spec}.{js,jsx,ts,tsx,mjs,cjs}", "**/__tests__/**", "jest.config.*", "vitest.config.*", ".mocharc*",
	// the usual test directories
	"tests/**", "test/**", "spec/**",
}

// Layer names, as found in Origin.Layer.
const (
	LayerDefault = "default"
	LayerUser    = "user"
	LayerProject = "project"
	LayerEnv     = "env"
	LayerFlag    = "flag"
)

// Origin says where a value came from.
type Origin struct {
	Layer  string // LayerDefault, LayerUser, LayerProject, LayerEnv or LayerFlag
	Detail string // the file's path, the variable's name or the flag; empty for defaults
}

// String is the origin as Describe prints it: "default",
// "project /p/.claude/ctxgraphd.yaml", "env CTXGRAPHD_AGENT_TIMEOUT".
func (o Origin) String() string {
	if o.Layer == "" {
		return LayerDefault
	}
	if o.Detail == "" {
		return o.Layer
	}
	return o.Layer + " " + o.Detail
}

// Provenance maps every dotted key to the origin of its effective value.
type Provenance map[string]Origin

// Sources says where Load looks for each layer.
type Sources struct {
	// UserFile is the user's file: "" means DefaultUserFile(), "-" means
	// no user file (tests, and runs that must not depend on the user).
	UserFile string
	// ProjectDir is the project root, whose ProjectFile is read; "" means
	// no project file.
	ProjectDir string
	// Env is the environment as "NAME=value" entries; nil means
	// os.Environ().
	Env []string
	// Flags maps dotted keys to raw values, e.g. "agent.timeout": "5m".
	Flags map[string]string
}

// envPrefix starts the name of every configuration variable.
const envPrefix = "CTXGRAPHD_"

// ProjectFile returns the path of a project's configuration file
// (contract: <dir>/.claude/ctxgraphd.yaml).
func ProjectFile(projectDir string) string {
	return filepath.Join(projectDir, ".claude", "ctxgraphd.yaml")
}

// DefaultUserFile returns the path of the user's configuration file:
// $XDG_CONFIG_HOME/ctxgraphd/config.yaml, else ~/.config/ctxgraphd/config.yaml.
// macOS uses ~/.config too, not ~/Library/Application Support, because that
// is where people who run command-line daemons look for their files. It
// returns "" when neither variable gives a place.
func DefaultUserFile() string {
	// The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be
	// ignored; internal/paths treats XDG_STATE_HOME the same way.
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "ctxgraphd", "config.yaml")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "ctxgraphd", "config.yaml")
}

// Load builds the effective configuration from src's layers over the
// defaults. A missing user or project file is not an error; an unreadable
// one is. On any problem Load returns no configuration and an error that
// joins every problem of every layer, one per line.
func Load(src Sources) (*Config, Provenance, error) {
	c := Default()
	prov := make(Provenance, len(registry))
	for _, k := range registry {
		prov[k.name] = Origin{Layer: LayerDefault}
	}
	var errs []error

	userFile := src.UserFile
	if userFile == "" {
		userFile = DefaultUserFile()
	}
	if userFile != "" && userFile != "-" {
		errs = append(errs, loadFile(c, prov, LayerUser, userFile)...)
	}
	if src.ProjectDir != "" {
		errs = append(errs, loadFile(c, prov, LayerProject, ProjectFile(src.ProjectDir))...)
	}
	env := src.Env
	if env == nil {
		env = os.Environ()
	}
	errs = append(errs, applyEnv(c, prov, env)...)
	errs = append(errs, applyFlags(c, prov, src.Flags)...)

	if len(errs) == 0 {
		// Each value was checked as it was applied; this catches rules
		// that span keys, should any be added.
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return c, prov, nil
}
