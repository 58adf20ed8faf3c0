package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/internal/lanecopy"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
)

// kind is how a key's raw text is parsed and checked.
type kind int

const (
	kindString   kind = iota // any text; nonEmpty refuses ""
	kindDuration             // Go syntax ("90s", "30m"), >= 0 or > 0 (positive)
	kindInt                  // a whole number >= 0, or as intOK says
	kindBool                 // true or false
	kindFloat                // a finite number >= 0
	kindEnum                 // one of enum
	kindList                 // a YAML list, or comma-separated text in the environment and flags
)

// key is one entry of the registry: everything Load, Validate, Describe and
// Keys know about a setting.
type key struct {
	name     string
	kind     kind
	help     string
	enum     []string          // kindEnum: the allowed values
	positive bool              // kindDuration, kindInt: 0 is refused
	nonEmpty bool              // kindString: "" is refused
	check    func(string) bool // kindString: nil accepts any text
	intOK    func(int) bool    // kindInt: nil accepts n >= 0 (n >= 1 if positive)
	what     string            // kindString, kindList, kindInt with intOK: what the value (an element) is, for messages
	// elem checks one element of a kindList; nil accepts any non-empty one.
	elem func(string) bool
	// notes are comment lines Describe prints below the key's line: what
	// the elements of a value are for, so that a user can narrow it.
	notes func(*Config) []string
	access
}

// access reads and writes a key's value in a Config; values are typed as
// parse returns them for the key's kind.
type access struct {
	get func(*Config) any
	set func(*Config, any)
}

// field makes the access of a key stored in a plain Config field.
func field[T any](p func(*Config) *T) access {
	return access{
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, v any) { *p(c) = v.(T) },
	}
}

// gate makes the access of a key stored in Config.Gates.
func gate(name string) access {
	return access{
		get: func(c *Config) any {
			if m, ok := c.Gates[name]; ok {
				return string(m)
			}
			return string(Enforce) // a gate missing from the map is enforced
		},
		set: func(c *Config, v any) {
			if c.Gates == nil {
				c.Gates = make(map[string]GateMode, len(GateNames))
			}
			c.Gates[name] = GateMode(v.(string))
		},
	}
}

// gateHelp says what each gate guards (docs/gates.md says it at length).
var gateHelp = map[string]string{
	"tested-needs-evidence": "tested: true only from the feature's tester run, after its test passed, with evidence",
	"tester-must-test":      "a tester run may not stop before it ran a test",
	"frozen-tests":          "the acceptance tests keep the content they had when the list was accepted",
	"red-before-green":      "a feature's test must run, and fail, before its first coding attempt",
	"role-write-policy":     "testers do not edit source, coders do not set tested, no agent writes the daemon's files",
	"scope":                 "a coding agent writes only inside its feature's scope",
	"log-read-limit":        "reading a huge log file whole is denied with a suggestion",
	"hooks-live":            "a run whose hooks did not check in with the daemon is killed",
}

var gateModes = []string{string(Enforce), string(Warn), string(Off)}

// registry lists every key, in the order Describe and Keys show them.
var registry = buildRegistry()

// byName indexes the registry by dotted name; byEnv by variable name.
var byName, byEnv = indexRegistry(registry)

// sections are the proper prefixes of the keys ("agent", "gates"): YAML
// mappings that hold keys rather than values.
var sections = sectionsOf(registry)

func buildRegistry() []*key {
	keys := []*key{
		{name: "agent.command", kind: kindString, nonEmpty: true, what: "a program name on PATH or a path to it",
			help: "the Claude Code binary", access: field(func(c *Config) *string { return &c.Agent.Command })},
		{name: "agent.model", kind: kindString, what: "a model name, or empty for Claude Code's default",
			help: "passed as --model when set", access: field(func(c *Config) *string { return &c.Agent.Model })},
		{name: "agent.timeout", kind: kindDuration, positive: true,
			help: "wall time of one run", access: field(func(c *Config) *time.Duration { return &c.Agent.Timeout })},
		{name: "agent.idle_timeout", kind: kindDuration, positive: true,
			help: "no stream event for this long: the run is stuck", access: field(func(c *Config) *time.Duration { return &c.Agent.IdleTimeout })},
		{name: "agent.max_turns", kind: kindInt,
			help: "passed as --max-turns; 0: no limit", access: field(func(c *Config) *int { return &c.Agent.MaxTurns })},
		{name: "agent.allow_root", kind: kindBool,
			help: "run agents as root (sets IS_SANDBOX=1 for them)", access: field(func(c *Config) *bool { return &c.Agent.AllowRoot })},
		{name: "agent.hooks_live_timeout", kind: kindDuration, positive: true,
			help: "a run's tool call the hooks gate may go on this long before a hook of the run has checked in with the daemon (gate hooks-live)", access: field(func(c *Config) *time.Duration { return &c.Agent.HooksLiveTimeout })},
		{name: "agent.stuck_after", kind: kindInt,
			help: "the same tool call failing this many times in a row stops the run as stuck; 0: never", access: field(func(c *Config) *int { return &c.Agent.StuckAfter })},
		{name: "limits.max_retries", kind: kindInt,
			help: "failed tests before a feature is blocked", access: field(func(c *Config) *int { return &c.Limits.MaxRetries })},
		{name: "limits.max_blocked", kind: kindInt,
			help: "blocked features before the session stops; 0: no limit", access: field(func(c *Config) *int { return &c.Limits.MaxBlocked })},
		{name: "limits.parallel", kind: kindInt, intOK: validParallel, what: fmt.Sprintf("a whole number from 1 to %d", MaxParallel),
			help: "features worked at once, each in a lane of its own (a git clone that shares the repository's objects) when above 1; and frozen tests a verdict's regression sweep runs at once", access: field(func(c *Config) *int { return &c.Limits.Parallel })},
		{name: "limits.full_sweep_every", kind: kindInt,
			help: "regression sweeps between full ones; between them a sweep runs only the frozen tests the claim's change can affect (what each test read, as recorded), and the branch's tip is swept in full before a session ends; 1: every sweep runs every test", positive: true, access: field(func(c *Config) *int { return &c.Limits.FullSweepEvery })},
		{name: "limits.debounce", kind: kindDuration,
			help: "quiet time after a change of feature-list.json before the daemon reacts", access: field(func(c *Config) *time.Duration { return &c.Limits.Debounce })},
		{name: "limits.backoff", kind: kindDuration, positive: true,
			help: "first wait after a failure that waiting cures (429, 529, 5xx, no network); doubles up to limits.backoff_max", access: field(func(c *Config) *time.Duration { return &c.Limits.Backoff })},
		{name: "limits.backoff_max", kind: kindDuration, positive: true,
			help: "longest wait of the backoff (a usage limit's reset time is waited for whatever it is)", access: field(func(c *Config) *time.Duration { return &c.Limits.BackoffMax })},
		{name: "limits.approve_plan", kind: kindBool,
			help: "once the initializer's feature list is accepted and its tests frozen, wait for a person's `ctxgraphd ctl approve` before any feature is worked", access: field(func(c *Config) *bool { return &c.Limits.ApprovePlan })},
		{name: "budget.run_usd", kind: kindFloat,
			help: "USD per run, passed as --max-budget-usd (lowered to what is left of the session's and the feature's budgets); 0: no limit", access: field(func(c *Config) *float64 { return &c.Budget.RunUSD })},
		{name: "budget.feature_usd", kind: kindFloat,
			help: "USD per feature, all attempts; 0: no limit", access: field(func(c *Config) *float64 { return &c.Budget.FeatureUSD })},
		{name: "budget.session_usd", kind: kindFloat,
			help: "USD per session; 0: no limit", access: field(func(c *Config) *float64 { return &c.Budget.SessionUSD })},
	}
	for _, g := range GateNames {
		keys = append(keys, &key{name: "gates." + g, kind: kindEnum, enum: gateModes,
			help: "gate: " + gateHelp[g], access: gate(g)})
	}
	keys = append(keys,
		&key{name: "gates.protected", kind: kindList, what: "glob patterns of project paths, such as tests/** or **/*_test.go", elem: validGlob,
			help: "where the project's tests live: frozen with the feature list (gate frozen-tests)", access: field(func(c *Config) *[]string { return &c.Protected })},
		&key{name: "sandbox.enabled", kind: kindBool,
			help: "confine every agent run in Claude Code's sandbox; false turns confinement off, visibly", access: field(func(c *Config) *bool { return &c.Sandbox.Enabled })},
		&key{name: "sandbox.allowed_domains", kind: kindList, what: "host names, such as proxy.golang.org or *.example.com", elem: validDomain,
			help: "hosts that agents' programs and WebFetch calls may reach", notes: domainNotes, access: field(func(c *Config) *[]string { return &c.Sandbox.AllowedDomains })},
		&key{name: "sandbox.fetch_domains", kind: kindList, what: "host names, such as pkg.go.dev or *.example.com", elem: validDomain,
			help: "hosts whose pages agents' WebFetch calls may read besides sandbox.allowed_domains (their programs may not reach them)", notes: fetchNotes, access: field(func(c *Config) *[]string { return &c.Sandbox.FetchDomains })},
		&key{name: "sandbox.allow_write", kind: kindList, what: "absolute directory paths", elem: filepath.IsAbs,
			help: "directories agents may write besides the project, temp and the Go, Node and Python caches", access: field(func(c *Config) *[]string { return &c.Sandbox.AllowWrite })},
		&key{name: "sandbox.max_processes", kind: kindInt,
			help: "processes an agent run or a test run of the daemon may have at once (not enforced by Linux for root); 0: no bound", access: field(func(c *Config) *int { return &c.Sandbox.MaxProcesses })},
		&key{name: "sandbox.max_memory_mb", kind: kindInt, intOK: validMemoryMB,
			what: fmt.Sprintf("-1, 0, or a number of MiB >= %d (Claude Code itself fails to start with less)", MinMemoryMB),
			help: "memory of each process of an agent run or a test run, in MiB; 0: half the machine's memory; -1: no bound", access: field(func(c *Config) *int { return &c.Sandbox.MaxMemoryMB })},
		&key{name: "sandbox.max_file_mb", kind: kindInt,
			help: "largest file an agent run or a test run may write, in MiB; 0: no bound", access: field(func(c *Config) *int { return &c.Sandbox.MaxFileMB })},
		&key{name: "sandbox.runtime", kind: kindString, nonEmpty: true, what: "a program name or an absolute path",
			help: "Anthropic's sandbox runtime (npm @anthropic-ai/sandbox-runtime), which confines the setup step as agents' commands are confined", access: field(func(c *Config) *string { return &c.Sandbox.Runtime })},
		&key{name: "git.commit", kind: kindBool,
			help: "commit exactly the tested tree for each tested feature", access: field(func(c *Config) *bool { return &c.Git.Commit })},
		&key{name: "executor", kind: kindEnum, enum: []string{ExecutorLocal, ExecutorNATS},
			help: "where lanes run: local, on this machine; nats, on workers over NATS JetStream (`ctxgraphd worker`)", access: field(func(c *Config) *string { return &c.Executor })},
		&key{name: "setup", kind: kindString, what: "a shell command, or empty",
			help:   "the command that prepares a tree's environment (dependencies, a venv), run by the daemon with sh in every tree before checks and agents, confined, registries only; \"\": fetch what committed manifests name where that runs no project code",
			access: field(func(c *Config) *string { return &c.Setup })},
		&key{name: "lanes.copy", kind: kindList, what: "paths relative to the project, such as .env", elem: lanecopy.ValidName,
			help: "untracked paths of the person's tree copied into every lane and lent to every test run; never committed, never in traces or reports", access: field(func(c *Config) *[]string { return &c.Lanes.Copy })},
		&key{name: "nats.url", kind: kindString, what: "a nats:// or tls:// URL, or empty", check: validNATSURL,
			help: "the NATS server of executor nats; \"\": the server embedded in the daemon", access: field(func(c *Config) *string { return &c.NATS.URL })},
		&key{name: "nats.listen", kind: kindString, what: "host:port, or empty", check: validListen,
			help: "where the embedded NATS server listens for workers; \"\": 127.0.0.1 only, on a port of the system's choosing; an address other machines reach needs nats.tls.cert and nats.tls.key", access: field(func(c *Config) *string { return &c.NATS.Listen })},
		&key{name: "nats.tls.cert", kind: kindString, what: "an absolute path to a PEM file, or empty", check: emptyOrAbs,
			help: "the embedded NATS server's TLS certificate (with its chain), PEM; with nats.tls.key, workers must connect with TLS", access: field(func(c *Config) *string { return &c.NATS.TLS.Cert })},
		&key{name: "nats.tls.key", kind: kindString, what: "an absolute path to a PEM file, or empty", check: emptyOrAbs,
			help: "the private key of nats.tls.cert, PEM", access: field(func(c *Config) *string { return &c.NATS.TLS.Key })},
		&key{name: "nats.monitor", kind: kindString, what: "host:port, or empty", check: validListen,
			help: "the embedded NATS server's monitoring listener (HTTP, unauthenticated: figures of the queue, for a scaler of workers such as KEDA); \"\": none", access: field(func(c *Config) *string { return &c.NATS.Monitor })},
		&key{name: "notify.webhook", kind: kindString, what: "an http or https URL, or empty", check: validWebhook,
			help: "POST each event (feature tested or blocked, session done, stopped or waiting) as JSON here", access: field(func(c *Config) *string { return &c.Notify.Webhook })},
		&key{name: "notify.command", kind: kindString, what: "a shell command, or empty",
			help: "run with sh -c for each event, with CTXGRAPHD_EVENT, CTXGRAPHD_MESSAGE, … in its environment", access: field(func(c *Config) *string { return &c.Notify.Command })},
	)
	keys = append(keys,
		&key{name: "graph.precedent_tokens", kind: kindInt,
			help: "what each run is told of the past (its feature's history, lessons, its role's mistakes on other features, similar traces), in tokens; 0: nothing", access: field(func(c *Config) *int { return &c.Graph.PrecedentTokens })},
		&key{name: "graph.guard_threshold", kind: kindInt, positive: true,
			help: "how often the same refusal, failing command or file put back must happen before a guard is proposed against it (ctl guards)", access: field(func(c *Config) *int { return &c.Graph.GuardThreshold })},
		&key{name: "graph.retention", kind: kindDuration,
			help: "how long the traces of tested and blocked features are kept in full; older ones are compacted (repeated refusals folded, tool-level records dropped; ctl traces --prune says what); 0: kept forever", access: field(func(c *Config) *time.Duration { return &c.Graph.Retention })},
		&key{name: "log.level", kind: kindEnum, enum: []string{"debug", "info", "warn", "error"},
			help: "the daemon's log level", access: field(func(c *Config) *string { return &c.Log.Level })},
		&key{name: "log.format", kind: kindEnum, enum: []string{"console", "json"},
			help: "the daemon's log format", access: field(func(c *Config) *string { return &c.Log.Format })},
	)
	return keys
}

func indexRegistry(keys []*key) (byName, byEnv map[string]*key) {
	byName = make(map[string]*key, len(keys))
	byEnv = make(map[string]*key, len(keys))
	for _, k := range keys {
		byName[k.name] = k
		byEnv[k.envName()] = k
	}
	return byName, byEnv
}

func sectionsOf(keys []*key) map[string]bool {
	s := map[string]bool{}
	for _, k := range keys {
		for i, r := range k.name {
			if r == '.' {
				s[k.name[:i]] = true
			}
		}
	}
	return s
}

// envName is the key's environment variable: CTXGRAPHD_ and the key in
// upper case with '.' and '-' as '_' (agent.timeout: CTXGRAPHD_AGENT_TIMEOUT).
func (k *key) envName() string { return envNameOf(k.name) }

func envNameOf(name string) string {
	return envPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(name))
}

// allowed says what the key accepts, phrased to follow "want" or "must be".
func (k *key) allowed() string {
	switch k.kind {
	case kindString:
		if k.nonEmpty {
			return k.what + ", not empty"
		}
		return k.what
	case kindDuration:
		// "with a unit" because a bare "30" is the usual mistake.
		if k.positive {
			return "a duration > 0 with a unit, such as 90s or 30m"
		}
		return "a duration >= 0 with a unit, such as 20ms or 1s"
	case kindInt:
		if k.intOK != nil {
			return k.what
		}
		if k.positive {
			return "a whole number >= 1"
		}
		return "a whole number >= 0"
	case kindBool:
		return "true or false"
	case kindFloat:
		return "a number >= 0"
	case kindEnum:
		return "one of " + strings.Join(k.enum, ", ")
	case kindList:
		return "a list of " + k.what + " (comma-separated in the environment and in --set)"
	}
	panic("config: unknown kind")
}

// errNotAllowed is parse's only error: the caller knows where the value came
// from and says so, with k.allowed().
var errNotAllowed = errors.New("not allowed")

// parse turns raw text into the key's typed value, or errNotAllowed.
func (k *key) parse(raw string) (any, error) {
	switch k.kind {
	case kindString:
		if k.nonEmpty && strings.TrimSpace(raw) == "" {
			return nil, errNotAllowed
		}
		if k.check != nil && !k.check(raw) {
			return nil, errNotAllowed
		}
		return raw, nil
	case kindDuration:
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 || (k.positive && d == 0) {
			return nil, errNotAllowed
		}
		return d, nil
	case kindInt:
		// Base 10 only: "0x10" or "1_000" in a config file is more likely
		// a mistake than a wish.
		n, err := strconv.ParseInt(raw, 10, strconv.IntSize)
		if err != nil {
			return nil, errNotAllowed
		}
		if k.intOK != nil {
			if !k.intOK(int(n)) {
				return nil, errNotAllowed
			}
			return int(n), nil
		}
		if n < 0 || (k.positive && n == 0) {
			return nil, errNotAllowed
		}
		return int(n), nil
	case kindBool:
		// Only true and false: YAML 1.1's yes/no/on/off are exactly the
		// ambiguity a user should be told about.
		switch strings.ToLower(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, errNotAllowed
	case kindFloat:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errNotAllowed
		}
		return f, nil
	case kindEnum:
		if slices.Contains(k.enum, raw) {
			return raw, nil
		}
		return nil, errNotAllowed
	case kindList:
		return k.parseList(splitList(raw))
	}
	panic("config: unknown kind")
}

// parseList checks the elements of a list value.
func (k *key) parseList(elems []string) (any, error) {
	out := []string{}
	for _, e := range elems {
		e = strings.TrimSpace(e)
		if e == "" || (k.elem != nil && !k.elem(e)) {
			return nil, errNotAllowed
		}
		out = append(out, e)
	}
	return out, nil
}

// splitList splits comma-separated text, leaving commas inside braces
// alone: a glob's alternatives ({js,ts}) are one element.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth = max(0, depth-1)
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// validWebhook accepts an absolute http or https URL, or nothing.
func validWebhook(s string) bool {
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// validNATSURL accepts a nats:// or tls:// URL with a host, or nothing.
func validNATSURL(s string) bool {
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "nats" || u.Scheme == "tls") && u.Host != ""
}

// validListen accepts host:port with a port number (0: the system's
// choice), or nothing. An empty host is every interface.
func validListen(s string) bool {
	if s == "" {
		return true
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= math.MaxUint16
}

func emptyOrAbs(s string) bool { return s == "" || filepath.IsAbs(s) }

// ListenIsLoopback says whether a nats.listen address is reachable from
// this machine only: empty (the default, 127.0.0.1), or a loopback IP.
// Only a literal address counts: a name such as localhost is whatever the
// resolver says at start-up. Anything else needs TLS, since a worker's
// lanes, hooks and bundles would otherwise cross the network in clear.
func ListenIsLoopback(listen string) bool {
	if listen == "" {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MinMemoryMB is the least sandbox.max_memory_mb that is not 0 or -1: the
// bound is on each process's address space, and Claude Code's Node runtime
// reserves some 640 MiB of it at start, so that a lower bound kills every
// run before its first turn, with nothing in its output to say why.
const MinMemoryMB = 1024

// MaxParallel bounds limits.parallel: every test at once is a jail, a
// checkout and a toolchain's memory at once.
const MaxParallel = 32

func validParallel(n int) bool { return n >= 1 && n <= MaxParallel }

// validMemoryMB accepts -1 (no bound), 0 (half the machine's memory) and
// MinMemoryMB or more.
func validMemoryMB(n int) bool {
	return n == -1 || n == 0 || n >= MinMemoryMB
}

func validGlob(g string) bool {
	return doublestar.ValidatePattern(g) && !strings.HasPrefix(g, "/") && !strings.HasPrefix(g, "../")
}

// validDomain accepts a host name, optionally with a leading wildcard
// label, as the sandbox's network proxy matches them.
func validDomain(d string) bool {
	return domainRe.MatchString(d)
}

var domainRe = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9-]+\.)*[A-Za-z0-9-]+$`)

// raw formats a typed value so that parse reads it back unchanged.
func raw(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case time.Duration:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return strings.Join(v, ",")
	}
	panic(fmt.Sprintf("config: value of type %T", v))
}

// display formats a typed value for people: like raw (durations as
// Duration.String, "30m0s", which people and ParseDuration both read), but
// an empty string shows as "" so that it does not look like a missing column.
// domainNotes says, for each host of sandbox.allowed_domains, the
// toolchain it serves and what for: the default list holds every
// toolchain's registries, and a project needs only its own.
func domainNotes(c *Config) []string { return hostNotes(c.Sandbox.AllowedDomains) }

// fetchNotes says the same of sandbox.fetch_domains: every toolchain's
// documentation by default.
func fetchNotes(c *Config) []string { return hostNotes(c.Sandbox.FetchDomains) }

// hostNotes says, for each of hosts, whose registry or documentation it
// is, the hosts aligned.
func hostNotes(hosts []string) []string {
	width := 0
	for _, h := range hosts {
		width = max(width, len(h))
	}
	var out []string
	for _, h := range hosts {
		what, ok := toolchain.About(h)
		if !ok {
			what = "not a toolchain's registry or documentation"
		}
		out = append(out, pad(h, width)+"  "+what)
	}
	return out
}

func display(v any) string {
	if l, ok := v.([]string); ok && len(l) > 0 {
		return strings.Join(l, ", ")
	}
	if s := raw(v); s != "" {
		return s
	}
	return `""`
}

// KeyInfo describes one configuration key, for docs and
// `ctxgraphd config --keys`.
type KeyInfo struct {
	Name    string // dotted name, e.g. "agent.timeout"; gates are gates.<name>
	Default string // the built-in value, as Describe prints it
	Allowed string // what the key accepts, e.g. "a whole number >= 0"
	Help    string // what the key does
}

// Env returns the environment variable that sets the key,
// e.g. CTXGRAPHD_AGENT_TIMEOUT.
func (i KeyInfo) Env() string { return envNameOf(i.Name) }

// Keys lists every configuration key in the order Describe prints them.
func Keys() []KeyInfo {
	def := Default()
	out := make([]KeyInfo, len(registry))
	for i, k := range registry {
		out[i] = KeyInfo{Name: k.name, Default: display(k.get(def)), Allowed: k.allowed(), Help: k.help}
	}
	return out
}

// Validate checks a Config built or changed in code (Load checks every value
// as it applies it) against the same rules as Load, and reports every
// problem: each names the key, the value and what is allowed.
func (c *Config) Validate() error {
	var errs []error
	for _, k := range registry {
		v := k.get(c)
		if l, ok := v.([]string); ok {
			// Element by element, as a file's list is read: text would
			// split an element that holds a comma.
			if _, err := k.parseList(l); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not allowed: want %s", k.name, display(v), k.allowed()))
			}
			continue
		}
		// Formatting then parsing applies exactly the rules a layer's
		// text goes through.
		s := raw(v)
		if _, err := k.parse(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not allowed: want %s", k.name, s, k.allowed()))
		}
	}
	var unknown []string
	for g := range c.Gates {
		if !slices.Contains(GateNames, g) {
			unknown = append(unknown, g)
		}
	}
	slices.Sort(unknown)
	for _, g := range unknown {
		errs = append(errs, fmt.Errorf("gates.%s: %s", g, unknownGate(g)))
	}
	// The one rule between keys: a cap below the first wait would make
	// every wait the cap, which is not what either key says.
	if l := c.Limits; l.Backoff > 0 && l.BackoffMax < l.Backoff {
		errs = append(errs, fmt.Errorf("limits.backoff_max: %s is shorter than limits.backoff (%s): raise limits.backoff_max or lower limits.backoff", l.BackoffMax, l.Backoff))
	}
	errs = append(errs, c.NATS.validate()...)
	return errors.Join(errs...)
}

// validate holds the rules between the nats keys.
func (n NATS) validate() []error {
	var errs []error
	switch {
	case n.TLS.Cert != "" && n.TLS.Key == "":
		errs = append(errs, errors.New("nats.tls.key: empty while nats.tls.cert is set: set both (a certificate and its key), or neither"))
	case n.TLS.Key != "" && n.TLS.Cert == "":
		errs = append(errs, errors.New("nats.tls.cert: empty while nats.tls.key is set: set both (a certificate and its key), or neither"))
	}
	// A listen address that is not host:port has its own error already.
	if validListen(n.Listen) && !ListenIsLoopback(n.Listen) && (n.TLS.Cert == "" || n.TLS.Key == "") {
		errs = append(errs, fmt.Errorf("nats.listen: %q is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1", n.Listen))
	}
	if n.URL != "" && (n.Listen != "" || n.TLS.Cert != "" || n.TLS.Key != "") {
		errs = append(errs, fmt.Errorf("nats.url: %q names a server of its own, so the embedded server's nats.listen and nats.tls are not used: remove one or the other", n.URL))
	}
	return errs
}
