package diagnose

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
)

// EnvKind names what of the machine, or of the confinement, failed a test.
type EnvKind string

// The kinds of failure of a test's environment. None is the code's doing,
// and no attempt of the code can change them: only a person can.
const (
	// EnvReadOnly: a directory outside the project could not be written
	// (a cache, most often), because the confinement keeps it read-only.
	EnvReadOnly EnvKind = "read_only"
	// EnvHostRefused: the agents' sandbox refused a connection to a host
	// sandbox.allowed_domains does not list.
	EnvHostRefused EnvKind = "host_refused"
	// EnvOffline: the daemon's own run of a test, which has no network,
	// reached for a package registry: the project's dependencies were not
	// fetched where the test finds them offline.
	EnvOffline EnvKind = "offline"
	// EnvNoRunner: a program the test runs by name (its runner: pytest,
	// node, go, make) is not on PATH.
	EnvNoRunner EnvKind = "runner_missing"
	// EnvNoSpace: the disk is full.
	EnvNoSpace EnvKind = "no_space"
)

// Place is where a test ran: what fixes a failure of its environment
// depends on it.
type Place string

// The places a test runs.
const (
	// InSandbox: an agent's command, in Claude Code's sandbox (the
	// project, temp, the toolchains' caches and sandbox.allow_write
	// writable; the hosts of sandbox.allowed_domains reachable).
	InSandbox Place = "sandbox"
	// InJail: the daemon's own run of a feature's test (no network at
	// all; writable only its checkout, /tmp, the verdict's Go build cache
	// and sandbox.allow_write).
	InJail Place = "jail"
)

// Setting is what ReadEnvironment knows of where a test ran.
type Setting struct {
	Place Place
	// ProjectDir is the project: a path in it that could not be written
	// is never the environment's doing (the gates keep agents off some of
	// it, and that refusal is the agent's).
	ProjectDir string
	// Writable are the directories outside the project that runs there
	// may write: one that was read-only all the same did not exist when
	// the run started (the sandbox leaves a missing directory read-only).
	Writable []string
	// Caches are the toolchains' cache directories: a file below one that
	// could not be written names the cache, which is what to let runs
	// write.
	Caches []string
}

// Environment is a test's failure that the machine or the confinement
// caused, not the code: it is never charged to the feature, and the
// session waits for a person to fix it (Explain says how).
type Environment struct {
	Kind  EnvKind `json:"kind"`
	Place Place   `json:"place"`
	// Path is the directory to let runs write (EnvReadOnly).
	Path string `json:"path,omitempty"`
	// Missing: Path is one that runs may write already, but it did not
	// exist when the run started.
	Missing bool `json:"missing,omitempty"`
	// Host is the host that could not be reached (EnvHostRefused,
	// EnvOffline), when the output names it; Toolchain whose registry it
	// is, when known.
	Host      string `json:"host,omitempty"`
	Toolchain string `json:"toolchain,omitempty"`
	// Program is the program that is not on PATH (EnvNoRunner).
	Program string `json:"program,omitempty"`
	// Line is the line of the output that says it, cut.
	Line string `json:"line"`
}

// maxEnvLine bounds the line of output an Environment keeps.
const maxEnvLine = 200

// envRule recognises one kind of failure of the environment in one line
// of a test's output (lines are the output's, the index is the line's).
type envRule struct {
	kind  EnvKind
	place Place // "" for both places
	read  func(lines []string, i int, s Setting) (Environment, bool)
}

// envRules are tried in order, each over the whole output, and the first
// that recognises a line names the failure: a full disk explains whatever
// follows from it, and a Go module cache that cannot be written in the
// daemon's test run is a dependency never fetched, not a cache to open.
var envRules = []envRule{
	{EnvNoSpace, "", readNoSpace},
	{EnvOffline, InJail, readModuleOffline},
	{EnvHostRefused, InSandbox, readRefusedHost},
	{EnvReadOnly, "", readReadOnly},
	{EnvOffline, InJail, readRegistryUnreachable},
	{EnvOffline, InSandbox, readProxyUnreachable},
	{EnvNoRunner, "", readNoRunner},
}

// ReadEnvironment tells, from a failing test's output, a failure of the
// machine or of the confinement from the code's. It recognises only what
// a program of the machine says in its own words (the shell, Go, Python,
// Node, npm, pip, curl, Cargo, the sandbox's report of a refused host):
// anything else is the code's, and the attempt is judged as ever.
//
// The output is what the test's programs printed, so the test's own code
// can print such a line too. What it gains is a session that stops for a
// person, never an accepted claim.
func ReadEnvironment(output string, s Setting) (Environment, bool) {
	if strings.TrimSpace(output) == "" {
		return Environment{}, false
	}
	lines := strings.Split(strings.ReplaceAll(Quiet(output), "\r\n", "\n"), "\n")
	for _, r := range envRules {
		if r.place != "" && r.place != s.Place {
			continue
		}
		for i := range lines {
			if e, ok := r.read(lines, i, s); ok {
				e.Kind, e.Place = r.kind, s.Place
				e.Line = textcut.Line(lines[i], maxEnvLine)
				return e, true
			}
		}
	}
	return Environment{}, false
}

var (
	noSpaceRe = regexp.MustCompile(`(?i)no space left on device|\bENOSPC\b|\[Errno 28\]|disk quota exceeded|\bEDQUOT\b`)

	// Go, in the daemon's test run (GOPROXY=off, the module cache read
	// only): "m.go:3:8: module lookup disabled by GOPROXY=off", or, when
	// the module's directory cannot even be made, "m.go:3:8: mkdir
	// /root/go/pkg/mod/cache/download/github.com/x: read-only file system",
	// or its lock opened, "open …/verdict-cache/mod/cache/download/…/@v/
	// v1.6.0.lock: read-only file system". A module the verdict lacks is
	// one the agents' module cache lacks (the warm-up extracts the rest):
	// fetched ahead, it is there; the daemon's own cache is no place to
	// open.
	goOfflineRe = regexp.MustCompile(`module lookup disabled by GOPROXY=off|(?:mkdir|open) \S*/mod/cache/download/\S*: read-only file system`)

	// The report Claude Code's sandbox adds to a command's output: a
	// block that opens with <sandbox_violations> and names each refused
	// connection "deny network-outbound HOST:PORT (…)".
	refusedHostRe = regexp.MustCompile(`^\s*deny network-outbound ([^\s:]+)`)

	readOnlyRe = regexp.MustCompile(`(?i)read-only file system|\bEROFS\b|\[Errno 30\]|os error 30\b`)
	// goBuildCacheRe: "failed to initialize build cache at DIR: mkdir
	// DIR: read-only file system".
	goBuildCacheRe = regexp.MustCompile(`build cache at (/[^\s:]+)`)
	// madeDirRe finds a directory that was to be made: Go's and Node's
	// "mkdir DIR", coreutils' "cannot create directory 'DIR'", uv's and
	// Cargo's "failed to create directory `DIR`".
	madeDirRe = regexp.MustCompile(`(?:\bmkdir,? |create directory )['"` + "`" + `‘]?(/[^\s'"` + "`" + `’:]+)`)
	// beforeReadOnlyRe finds the path the shell, coreutils and Go name
	// just before the error ("/bin/sh: 1: cannot create /x/y: Read-only
	// file system", "touch: cannot touch '/x/y': Read-only file system",
	// "open /x/y: read-only file system"); afterReadOnlyRe the one Python
	// and Node name after it ("[Errno 30] Read-only file system:
	// '/x/y'", "EROFS: read-only file system, open '/x/y'").
	beforeReadOnlyRe = regexp.MustCompile(`(?i)(?:^|\s)['"‘]?([^\s'"’]+?)['"’]?: read-only file system`)
	afterReadOnlyRe  = regexp.MustCompile(`(?i)read-only file system[:,] (?:\w+ )?['"‘]([^'"’]+)['"’]`)
	// fileOpRe says that the path of a line is a file's.
	fileOpRe = regexp.MustCompile(`(?i)\b(?:open|opening|write|writing|create|touch|rename|unlink|remove)\b`)
	// absPathRe finds an absolute path in a line, quoted or not.
	absPathRe = regexp.MustCompile(`(?:^|[\s'"` + "`" + `‘(=])(/[^\s'"` + "`" + `’:,()]+)`)

	// The daemon's test runs have no network: Go's "dial tcp: lookup
	// HOST on …", curl's "Could not resolve host: HOST", Node's
	// "getaddrinfo EAI_AGAIN HOST", Python's "host='HOST'", or a refused
	// connection to HOST:PORT.
	unreachableHostRe = []*regexp.Regexp{
		regexp.MustCompile(`\blookup ([A-Za-z0-9.-]+\.[A-Za-z]+)(?: on \S+)?: `),
		regexp.MustCompile(`Could not resolve host: ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`getaddrinfo (?:EAI_AGAIN|ENOTFOUND) ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`host='([A-Za-z0-9.-]+)'.*(?:Failed to establish a new connection|Max retries exceeded)`),
		regexp.MustCompile(`(?:dial tcp|connect to) ([A-Za-z0-9.-]+\.[A-Za-z]+):\d+: (?:connect: )?(?:connection refused|network is unreachable)`),
	}
	// pip names no host when it cannot connect, only the index's path.
	pipUnreachableRe = regexp.MustCompile(`Failed to establish a new connection.*/simple/`)

	// The sandbox's proxy could not open the tunnel to an allowed host
	// (readProxyUnreachable), and the address of a registry.
	proxyUnreachableRe = regexp.MustCompile(`CONNECT tunnel failed, response 50[234]|Tunnel connection failed: 50[234]`)
	registryURLRe      = regexp.MustCompile(`https?://([A-Za-z0-9.-]+\.[A-Za-z]+)[/:]`)

	// A program the shell could not find, in the words of dash ("/bin/sh:
	// 1: pytest: not found"), bash ("bash: line 1: pytest: command not
	// found"), zsh ("zsh: command not found: pytest") and env
	// ("/usr/bin/env: ‘node’: No such file or directory"); and Python
	// without its test runner ("python3: No module named pytest",
	// "ModuleNotFoundError: No module named 'pytest'").
	notFoundRe = []*regexp.Regexp{
		regexp.MustCompile(`^(?:\S+: )?(?:line )?\d+: (\S+): (?:command )?not found$`),
		regexp.MustCompile(`^(?:\S+: )?(\S+): command not found$`),
		regexp.MustCompile(`^\S+: command not found: (\S+)$`),
		regexp.MustCompile(`^(?:\S*/)?env: ['‘]?([^'’\s:]+)['’]?: No such file or directory$`),
	}
	noModuleRe = regexp.MustCompile(`No module named '?(pytest|tox|nox)'?$`)
)

func readNoSpace(lines []string, i int, _ Setting) (Environment, bool) {
	return Environment{}, noSpaceRe.MatchString(lines[i])
}

func readModuleOffline(lines []string, i int, _ Setting) (Environment, bool) {
	return Environment{Toolchain: "Go"}, goOfflineRe.MatchString(lines[i])
}

func readRefusedHost(lines []string, i int, _ Setting) (Environment, bool) {
	m := refusedHostRe.FindStringSubmatch(lines[i])
	if m == nil || !inViolations(lines, i) {
		return Environment{}, false
	}
	e := Environment{Host: m[1]}
	if t, ok := toolchain.ByHost(m[1]); ok {
		e.Toolchain = t.Name
	}
	return e, true
}

// inViolations reports whether line i is inside the sandbox's report, a
// block that opens with a <sandbox_violations> line.
func inViolations(lines []string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch strings.TrimSpace(lines[j]) {
		case "<sandbox_violations>":
			return true
		case "</sandbox_violations>":
			return false
		}
	}
	return false
}

func readReadOnly(lines []string, i int, s Setting) (Environment, bool) {
	l := lines[i]
	if !readOnlyRe.MatchString(l) {
		return Environment{}, false
	}
	path, isDir, said := "", false, l
	if m := goBuildCacheRe.FindStringSubmatch(l); m != nil {
		path, isDir = m[1], true
	} else if m := madeDirRe.FindStringSubmatch(l); m != nil {
		path, isDir = m[1], true
	} else if m := afterReadOnlyRe.FindStringSubmatch(l); m != nil {
		path = m[1]
	} else if m := beforeReadOnlyRe.FindStringSubmatch(l); m != nil {
		path = m[1]
	} else {
		// Cargo names the path on an earlier line ("failed to open: P",
		// then "Caused by: Read-only file system (os error 30)").
		for j := i; j >= max(0, i-4) && path == ""; j-- {
			if m := absPathRe.FindStringSubmatch(lines[j]); m != nil {
				path, said = m[1], lines[j]
			}
		}
	}
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) || path == "/" || within(path, s.ProjectDir) {
		return Environment{}, false
	}
	// A file's directory is what to let runs write. Python names the path
	// alone: there, a last element without an extension is taken for the
	// directory it was making.
	dir := path
	if !isDir && (fileOpRe.MatchString(said) || strings.Contains(strings.TrimPrefix(filepath.Base(path), "."), ".")) {
		dir = filepath.Dir(path)
	}
	// Below a cache, the cache is what to open; below a directory runs
	// may write, it is that directory, which was not there in time.
	for _, c := range s.Caches {
		if within(path, c) {
			dir = filepath.Clean(c)
			break
		}
	}
	if dir == "/" {
		return Environment{}, false // the root itself is no directory to open
	}
	e := Environment{Path: dir}
	for _, w := range s.Writable {
		if within(dir, w) {
			e.Path, e.Missing = filepath.Clean(w), true
			break
		}
	}
	return e, true
}

func readRegistryUnreachable(lines []string, i int, _ Setting) (Environment, bool) {
	l := lines[i]
	if pipUnreachableRe.MatchString(l) {
		return Environment{Toolchain: "Python"}, true
	}
	for _, re := range unreachableHostRe {
		if m := re.FindStringSubmatch(l); m != nil {
			// Only a registry: a service of the test's own that does not
			// answer is the code's to start.
			if t, ok := toolchain.ByHost(m[1]); ok {
				return Environment{Host: m[1], Toolchain: t.Name}, true
			}
		}
	}
	return Environment{}, false
}

// readProxyUnreachable: in the sandbox, a registry's host that
// sandbox.allowed_domains lets runs reach, which the sandbox's proxy could
// not reach (no route from this machine): the proxy answers the tunnel with
// 502, in curl's and Cargo's words "CONNECT tunnel failed, response 502",
// in pip's "Tunnel connection failed: 502 Bad Gateway". The host is the
// registry whose address the line, or one of the four before it, names
// (Cargo's "failed to download from `https://index.crates.io/…`"); pip
// names only its index's path (/simple/), which is Python's.
func readProxyUnreachable(lines []string, i int, _ Setting) (Environment, bool) {
	if !proxyUnreachableRe.MatchString(lines[i]) {
		return Environment{}, false
	}
	for j := i; j >= max(0, i-4); j-- {
		if m := registryURLRe.FindStringSubmatch(lines[j]); m != nil {
			if t, ok := toolchain.ByHost(m[1]); ok {
				return Environment{Host: m[1], Toolchain: t.Name}, true
			}
		}
	}
	if strings.Contains(lines[i], "/simple/") {
		return Environment{Toolchain: "Python"}, true
	}
	return Environment{}, true
}

func readNoRunner(lines []string, i int, _ Setting) (Environment, bool) {
	l := strings.TrimSpace(lines[i])
	if m := noModuleRe.FindStringSubmatch(l); m != nil {
		return Environment{Program: m[1], Toolchain: "Python"}, true
	}
	for _, re := range notFoundRe {
		m := re.FindStringSubmatch(l)
		// A program named by a path is the project's, or one the code was
		// to make: not found, it is the code's failure.
		if m != nil && !strings.Contains(m[1], "/") {
			return Environment{Program: m[1]}, true
		}
	}
	return Environment{}, false
}

// within reports whether path is root or below it; an empty root holds
// nothing.
func within(path, root string) bool {
	if root == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Explain says what happened and the exact fix, in the words the session's
// status and the notifications show. allowed is sandbox.allowed_domains as
// configured: the list a host to reach joins, since a project's list
// replaces the default one.
func (e Environment) Explain(allowed []string) string {
	where := "an agent's run of the test, in the sandbox,"
	if e.Place == InJail {
		where = "the daemon's own run of the test"
	}
	said := fmt.Sprintf(" (it said %q)", e.Line)
	const restart = "in .claude/ctxgraphd.yaml, then restart the daemon (a stopped session goes on where it was)"
	const resume = "then `ctxgraphd ctl resume`"
	switch e.Kind {
	case EnvNoSpace:
		return "the disk is full: " + where + " could not write" + said + ". Free some space, " + resume
	case EnvReadOnly:
		if e.Missing {
			return fmt.Sprintf("%s could not write %s%s: runs may write it, but it did not exist when the run started and the daemon could not make it. Create it as the daemon's user (`mkdir -p %s`), %s",
				where, e.Path, said, e.Path, resume)
		}
		return fmt.Sprintf("%s could not write %s, which is read-only there%s. If the test needs it, let runs write it: `sandbox.allow_write: [%s]` %s",
			where, e.Path, said, e.Path, restart)
	case EnvHostRefused:
		return fmt.Sprintf("the sandbox refused a connection to %s, which sandbox.allowed_domains does not list, in an agent's run of the test%s. If the test needs it: `sandbox.allowed_domains: [%s]` (the list replaces the default one) %s",
			e.Host, said, strings.Join(withHost(allowed, e.Host), ", "), restart)
	case EnvOffline:
		if e.Place == InSandbox {
			return sandboxOffline(e, said, resume)
		}
		what := "a package registry"
		if e.Host != "" {
			what = e.Host
		}
		fetch := "fetch the project's dependencies"
		if t, ok := toolchainNamed(e.Toolchain); ok {
			if e.Host == "" {
				what = t.Name + "'s registry"
			}
			fetch += " with " + t.Fetch
		}
		return fmt.Sprintf("%s reached for %s%s, and the daemon's test runs have no network (by design): %s in the project, as the daemon's user, so that the test finds them offline; keep downloads out of the feature's test command; %s",
			where, what, said, fetch, resume)
	case EnvNoRunner:
		if e.Toolchain == "Python" {
			return fmt.Sprintf("%s needs the Python module %s, which the Python on the daemon's PATH does not have%s. Install it for that Python (`python3 -m pip install %s`, or in the project's .venv), %s",
				where, e.Program, said, e.Program, resume)
		}
		return fmt.Sprintf("%s needs `%s`, which is not on its PATH%s. Install it where the daemon's PATH finds it, outside any directory agents can write (the daemon's test runs leave those off PATH), %s",
			where, e.Program, said, resume)
	}
	return where + " failed" + said
}

// sandboxOffline explains a registry that sandbox.allowed_domains lets
// runs reach but this machine cannot: no setting of the daemon's fixes it.
// The dependencies are fetched ahead where they can be, or the machine is
// given a route.
func sandboxOffline(e Environment, said, resume string) string {
	what, fetch := "a package registry", "fetch the project's dependencies ahead"
	if e.Host != "" {
		what = e.Host
	}
	if t, ok := toolchainNamed(e.Toolchain); ok {
		if e.Host == "" {
			what = t.Name + "'s registry"
		}
		fetch += " with " + t.Fetch
	}
	return fmt.Sprintf("an agent's run of the test, in the sandbox, could not reach %s%s: sandbox.allowed_domains lets runs reach it, but this machine has no route to it (its proxy, mirror or firewall). Give the machine a route to it, or %s in the project, as the daemon's user, into the caches the agents' runs read; %s",
		what, said, fetch, resume)
}

// withHost is allowed with host at its end, unless it is there already.
func withHost(allowed []string, host string) []string {
	if slices.Contains(allowed, host) {
		return allowed
	}
	return append(slices.Clip(allowed), host)
}

func toolchainNamed(name string) (toolchain.Toolchain, bool) {
	for _, t := range toolchain.All {
		if t.Name == name {
			return t, true
		}
	}
	return toolchain.Toolchain{}, false
}
