package diagnose

import (
	"strings"
	"testing"
)

// Outputs captured from real runs: in the daemon's test jail (bubblewrap,
// no network, GOPROXY=off, the home directory read-only) and in Claude
// Code's sandbox (2.1.330, the hooks' record of a Bash call: "Exit code N"
// and the output, with the sandbox's report of refused hosts), on Debian 12
// with Go 1.26, Python 3.11, Node 18, pip 23 and Cargo 1.9x.
const (
	goBuildCacheReadOnly = "Exit code 1\nfailed to initialize build cache at /root/.cache/go-build-nonexist: mkdir /root/.cache/go-build-nonexist: read-only file system\n"
	goModuleNotFetched   = "go: downloading github.com/nonexistent/dep v1.0.0\n# example.com/m\nm.go:3:8: mkdir /root/go/pkg/mod/cache/download/github.com/nonexistent: read-only file system\nFAIL\texample.com/m [setup failed]\nFAIL\n"
	goVerdictModuleLock  = "f001/f001.go:3:8: open /home/me/.local/state/ctxgraphd/p-1/verdict-cache/mod/cache/download/github.com/google/uuid/@v/v1.6.0.lock: read-only file system\nFAIL\texample.com/m/f001 [setup failed]\n"
	// Seen with Claude Code 2.1.330's sandbox, crates.io and PyPI allowed
	// but out of the machine's reach.
	cargoNoRoute       = "    Updating crates.io index\nerror: failed to get `itoa` as a dependency of package `x v0.1.0 (/p)`\n\nCaused by:\n  download of config.json failed\n\nCaused by:\n  failed to download from `https://index.crates.io/config.json`\n\nCaused by:\n  [56] Failure when receiving data from the peer (CONNECT tunnel failed, response 502)\n"
	pipNoRoute         = "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 502 Bad Gateway'))': /simple/requests/\nERROR: Could not find a version that satisfies the requirement requests (from versions: none)\n"
	goProxyOff         = "go: downloading github.com/nonexistent/dep v1.0.0\n# example.com/m\nm.go:3:8: module lookup disabled by GOPROXY=off\nFAIL\texample.com/m [setup failed]\nFAIL\n"
	goProxyUnreachable = "go: downloading github.com/nonexistent/dep v1.0.0\n# example.com/m\nm.go:3:8: github.com/nonexistent/dep@v1.0.0: Get \"https://proxy.golang.org/github.com/nonexistent/dep/@v/v1.0.0.zip\": dial tcp: lookup proxy.golang.org on 10.255.255.53:53: dial udp 10.255.255.53:53: connect: network is unreachable\nFAIL\texample.com/m [setup failed]\nFAIL\n"
	// The proxy answered: the module does not exist. The code's mistake.
	goModuleDoesNotExist = "Exit code 1\ngo: downloading github.com/nonexistent/dep v1.0.0\n# example.com/m\nm.go:3:8: github.com/nonexistent/dep@v1.0.0: reading https://proxy.golang.org/github.com/nonexistent/dep/@v/v1.0.0.zip: 403 Forbidden\n\tserver response: This module version is not available.\nFAIL\texample.com/m [setup failed]\nFAIL\n"
	goMissingSum         = "# example.com/m\nm.go:3:8: missing go.sum entry for module providing package github.com/nonexistent/dep (imported by example.com/m); to add:\n\tgo get example.com/m\nFAIL\texample.com/m [setup failed]\nFAIL\n"
	curlRefused          = "Exit code 56\ncurl: (56) CONNECT tunnel failed, response 403\n\n<sandbox_violations>\ndeny network-outbound example.com:443 (host is not on the allow list)\n</sandbox_violations>\n"
	pipRefused           = "Looking in links: /opt/wheels\nWARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 403 host is not on the allow list'))': /simple/requests/\nERROR: Could not find a version that satisfies the requirement requests (from versions: none)\nERROR: No matching distribution found for requests\n<sandbox_violations>\ndeny network-outbound pypi.org:443 (host is not on the allow list)\ndeny network-outbound pypi.org:443 (host is not on the allow list)\n</sandbox_violations>\n"
	npmRefused           = "npm error code E403\nnpm error 403 403 host is not on the allow list - GET https://registry.npmjs.org/left-pad\nnpm error 403 In most cases, you or one of your dependencies are requesting a package version that is forbidden by your security policy, or on a server you do not have access to.\nnpm error A complete log of this run can be found in: /tmp/claude-0/npmc/_logs/2026-11-25T17_16_15_568Z-debug-0.log\n<sandbox_violations>\ndeny network-outbound registry.npmjs.org:443 (host is not on the allow list)\n</sandbox_violations>\n"
	npmOffline           = "npm error code EAI_AGAIN\nnpm error syscall getaddrinfo\nnpm error errno EAI_AGAIN\nnpm error request to https://registry.npmjs.org/left-pad failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org\nnpm error A complete log of this run can be found in: /tmp/npmc/_logs/2026-11-25T17_14_46_404Z-debug-0.log\n"
	pipOffline           = "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7ff32beca310>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/requests/\nERROR: Could not find a version that satisfies the requirement requests (from versions: none)\nERROR: No matching distribution found for requests\n"
	cargoOffline         = "Caused by:\n  download of config.json failed\n\nCaused by:\n  failed to download from `https://index.crates.io/config.json`\n\nCaused by:\n  [6] Could not resolve hostname (Could not resolve host: index.crates.io)\n"
	curlOffline          = "curl: (6) Could not resolve host: registry.npmjs.org\n"
	bashNotFound         = "Exit code 127\nhi\n/bin/bash: line 1: pytest-nonexist: command not found\n"
	dashNotFound         = "/bin/sh: 1: pytest: not found\n"
	dashNodeNotFound     = "/bin/sh: 1: node: not found\n"
	envNotFound          = "/usr/bin/env: ‘node’: No such file or directory\n"
	pythonNoPytest       = "/root/.pyenv/versions/3.11.7/bin/python3: No module named pytest\n"
	projectProgram       = "/bin/sh: 1: ./bin/app: not found\n"
	cpNoSpace            = "cp: error writing '/dev/full': No space left on device\n"
	pythonNoSpace        = "OSError: [Errno 28] No space left on device\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nOSError: [Errno 28] No space left on device\n"
	pythonReadOnlyDir    = "  File \"<frozen os>\", line 225, in makedirs\nOSError: [Errno 30] Read-only file system: '/root/.cache/myapp-x'\n"
	npmReadOnly          = "npm error code EROFS\nnpm error syscall mkdir\nnpm error path /root/.npm/_cacache\nnpm error errno -30\nnpm error rofs EROFS: read-only file system, mkdir '/root/.npm/_cacache'\n"
	goTestFails          = "--- FAIL: TestAdd (0.00s)\n    calc_test.go:7: Add(1, 2) = -1, want 3\nFAIL\nFAIL\texample.com/calc\t0.009s\nFAIL\n"
)

func TestReadEnvironment(t *testing.T) {
	sandbox := Setting{Place: InSandbox, ProjectDir: "/home/me/shop"}
	jail := Setting{Place: InJail, ProjectDir: "/home/me/shop"}
	withCaches := func(s Setting, caches ...string) Setting { s.Caches = caches; return s }
	withWritable := func(s Setting, dirs ...string) Setting { s.Writable = dirs; return s }
	for _, tc := range []struct {
		name    string
		output  string
		setting Setting
		want    *Environment // nil: the code's failure
	}{
		{"a Go build cache the sandbox holds read-only", goBuildCacheReadOnly, sandbox,
			&Environment{Kind: EnvReadOnly, Path: "/root/.cache/go-build-nonexist"}},
		{"a Go build cache runs may write, missing at the run's start", goBuildCacheReadOnly, withWritable(sandbox, "/root/.cache/go-build-nonexist"),
			&Environment{Kind: EnvReadOnly, Path: "/root/.cache/go-build-nonexist", Missing: true}},
		{"a Go module never fetched, in the daemon's run", goModuleNotFetched, jail, &Environment{Kind: EnvOffline, Toolchain: "Go"}},
		{"the Go module cache read-only in the sandbox names the cache", goModuleNotFetched, withCaches(sandbox, "/root/go/pkg/mod"),
			&Environment{Kind: EnvReadOnly, Path: "/root/go/pkg/mod"}},
		{"GOPROXY=off", goProxyOff, jail, &Environment{Kind: EnvOffline, Toolchain: "Go"}},
		{"Go's proxy unreachable from the daemon's run", goProxyUnreachable, jail, &Environment{Kind: EnvOffline, Host: "proxy.golang.org", Toolchain: "Go"}},
		{"Cargo in the sandbox, crates.io out of this machine's reach", cargoNoRoute, sandbox, &Environment{Kind: EnvOffline, Host: "index.crates.io", Toolchain: "Rust"}},
		{"pip in the sandbox, its index out of reach", pipNoRoute, sandbox, &Environment{Kind: EnvOffline, Toolchain: "Python"}},
		{"curl in the sandbox, a host out of reach", "curl: (56) CONNECT tunnel failed, response 502\n", sandbox, &Environment{Kind: EnvOffline}},
		{"a registry out of reach named only in the daemon's run is the jail's rule", cargoNoRoute, jail, nil},
		{"a module the verdict's own module cache lacks, its lock refused", goVerdictModuleLock, jail, &Environment{Kind: EnvOffline, Toolchain: "Go"}},
		{"a module that does not exist is the code's", goModuleDoesNotExist, sandbox, nil},
		{"a missing go.sum entry is the code's", goMissingSum, jail, nil},
		{"a host the sandbox refused", curlRefused, sandbox, &Environment{Kind: EnvHostRefused, Host: "example.com"}},
		{"PyPI refused", pipRefused, sandbox, &Environment{Kind: EnvHostRefused, Host: "pypi.org", Toolchain: "Python"}},
		{"npm's registry refused", npmRefused, sandbox, &Environment{Kind: EnvHostRefused, Host: "registry.npmjs.org", Toolchain: "Node"}},
		{"a refusal printed outside the sandbox's report is no refusal", "Exit code 1\ndeny network-outbound example.com:443\n", sandbox, nil},
		{"the sandbox's report printed in the daemon's run is no refusal", curlRefused, jail, nil},
		{"npm offline in the daemon's run", npmOffline, jail, &Environment{Kind: EnvOffline, Host: "registry.npmjs.org", Toolchain: "Node"}},
		{"pip offline in the daemon's run", pipOffline, jail, &Environment{Kind: EnvOffline, Toolchain: "Python"}},
		{"Cargo offline in the daemon's run", cargoOffline, jail, &Environment{Kind: EnvOffline, Host: "index.crates.io", Toolchain: "Rust"}},
		{"curl to a registry in the daemon's run", curlOffline, jail, &Environment{Kind: EnvOffline, Host: "registry.npmjs.org", Toolchain: "Node"}},
		{"a service of the test's own that does not answer is the code's", "Get \"http://localhost:8080/health\": dial tcp 127.0.0.1:8080: connect: connection refused\n", jail, nil},
		{"a host that is no registry is the code's", "curl: (6) Could not resolve host: api.example.com\n", jail, nil},
		{"bash without the runner", bashNotFound, sandbox, &Environment{Kind: EnvNoRunner, Program: "pytest-nonexist"}},
		{"dash without pytest", dashNotFound, jail, &Environment{Kind: EnvNoRunner, Program: "pytest"}},
		{"dash without node", dashNodeNotFound, jail, &Environment{Kind: EnvNoRunner, Program: "node"}},
		{"env without node", envNotFound, jail, &Environment{Kind: EnvNoRunner, Program: "node"}},
		{"zsh without the runner", "zsh: command not found: jest\n", sandbox, &Environment{Kind: EnvNoRunner, Program: "jest"}},
		{"Python without pytest", pythonNoPytest, jail, &Environment{Kind: EnvNoRunner, Program: "pytest", Toolchain: "Python"}},
		{"a test file importing pytest", "E   ModuleNotFoundError: No module named 'pytest'\n", jail, &Environment{Kind: EnvNoRunner, Program: "pytest", Toolchain: "Python"}},
		{"a module of the project's own is the code's", "E   ModuleNotFoundError: No module named 'shop'\n", jail, nil},
		{"a program of the project's own is the code's", projectProgram, jail, nil},
		{"a full disk", cpNoSpace, jail, &Environment{Kind: EnvNoSpace}},
		{"a full disk, Python", pythonNoSpace, sandbox, &Environment{Kind: EnvNoSpace}},
		{"a full disk explains what follows", "mkdir /root/.cache/x: no space left on device\n/bin/sh: 1: pytest: not found\n", jail, &Environment{Kind: EnvNoSpace}},
		{"Python making a directory", pythonReadOnlyDir, jail, &Environment{Kind: EnvReadOnly, Path: "/root/.cache/myapp-x"}},
		{"a file that cannot be written names its directory", "OSError: [Errno 30] Read-only file system: '/root/.config/app/settings.json'\n", jail, &Environment{Kind: EnvReadOnly, Path: "/root/.config/app"}},
		{"npm's cache", npmReadOnly, withCaches(sandbox, "/root/.npm"), &Environment{Kind: EnvReadOnly, Path: "/root/.npm"}},
		{"Cargo names the path lines before", "error: failed to open: /root/.cargo/registry/.package-cache\n\nCaused by:\n  Read-only file system (os error 30)\n", sandbox,
			&Environment{Kind: EnvReadOnly, Path: "/root/.cargo/registry"}},
		{"a read-only path in the project is the gates' business", "/bin/bash: line 1: /home/me/shop/tests/F-001.sh: Read-only file system\n", sandbox, nil},
		{"a relative read-only path is in the project", "/bin/bash: line 1: tests/F-001.sh: Read-only file system\n", sandbox, nil},
		{"a failing test", goTestFails, jail, nil},
		{"nothing", "", jail, nil},
		{"noise of the user's shell says nothing", "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\n--- FAIL: TestX\n", sandbox, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ReadEnvironment(tc.output, tc.setting)
			if tc.want == nil {
				if ok {
					t.Fatalf("ReadEnvironment = %+v, want the code's failure", got)
				}
				return
			}
			if !ok {
				t.Fatalf("ReadEnvironment found nothing, want %+v", *tc.want)
			}
			want := *tc.want
			want.Place, want.Line = tc.setting.Place, got.Line
			if got != want {
				t.Errorf("ReadEnvironment =\n %+v\nwant\n %+v", got, want)
			}
			if got.Line == "" || !strings.Contains(tc.output, strings.Fields(got.Line)[0]) {
				t.Errorf("line %q is not the output's", got.Line)
			}
		})
	}
}

// What a person is told names the exact fix: the key and the value to
// set, the command to run, the program to install, and how to go on.
func TestEnvironmentExplain(t *testing.T) {
	allowed := []string{"proxy.golang.org", "sum.golang.org"}
	for _, tc := range []struct {
		name string
		env  Environment
		want []string
	}{
		{"a directory to let runs write", Environment{Kind: EnvReadOnly, Place: InSandbox, Path: "/root/.cache/uv", Line: "x"},
			[]string{"could not write /root/.cache/uv", "`sandbox.allow_write: [/root/.cache/uv]` in .claude/ctxgraphd.yaml, then restart the daemon"}},
		{"a directory runs may write, missing", Environment{Kind: EnvReadOnly, Place: InSandbox, Path: "/root/.cache/go-build", Missing: true, Line: "x"},
			[]string{"did not exist when the run started", "`mkdir -p /root/.cache/go-build`", "then `ctxgraphd ctl resume`"}},
		{"a host to reach joins the configured list", Environment{Kind: EnvHostRefused, Place: InSandbox, Host: "example.com", Line: "x"},
			[]string{"the sandbox refused a connection to example.com, which sandbox.allowed_domains does not list, in an agent's run of the test", "`sandbox.allowed_domains: [proxy.golang.org, sum.golang.org, example.com]`", "restart the daemon"}},
		{"a host already listed is not listed twice", Environment{Kind: EnvHostRefused, Place: InSandbox, Host: "sum.golang.org", Line: "x"},
			[]string{"`sandbox.allowed_domains: [proxy.golang.org, sum.golang.org]`"}},
		{"Go offline", Environment{Kind: EnvOffline, Place: InJail, Toolchain: "Go", Line: "x"},
			[]string{"the daemon's own run of the test reached for Go's registry", "have no network", "with `go mod download` in the project", "then `ctxgraphd ctl resume`"}},
		{"npm offline", Environment{Kind: EnvOffline, Place: InJail, Host: "registry.npmjs.org", Toolchain: "Node", Line: "x"},
			[]string{"reached for registry.npmjs.org", "with `npm ci`"}},
		{"a runner to install", Environment{Kind: EnvNoRunner, Place: InJail, Program: "pytest", Line: "x"},
			[]string{"needs `pytest`, which is not on its PATH", "Install it where the daemon's PATH finds it", "then `ctxgraphd ctl resume`"}},
		{"a Python module to install", Environment{Kind: EnvNoRunner, Place: InJail, Program: "pytest", Toolchain: "Python", Line: "x"},
			[]string{"the Python module pytest", "`python3 -m pip install pytest`"}},
		{"a registry allowed but out of the machine's reach", Environment{Kind: EnvOffline, Place: InSandbox, Host: "index.crates.io", Toolchain: "Rust", Line: "x"},
			[]string{"an agent's run of the test, in the sandbox, could not reach index.crates.io", "this machine has no route to it", "with `cargo fetch` in the project", "then `ctxgraphd ctl resume`"}},
		{"a full disk", Environment{Kind: EnvNoSpace, Place: InJail, Line: "x"}, []string{"the disk is full", "Free some space, then `ctxgraphd ctl resume`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.env.Explain(allowed)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Explain() = %q\nwant it to hold %q", got, w)
				}
			}
		})
	}
	if len(allowed) != 2 {
		t.Errorf("Explain changed the configured list: %v", allowed)
	}
}

// FuzzReadEnvironment feeds ReadEnvironment arbitrary output: it never
// panics, and what it finds is bounded and names a place to act on.
func FuzzReadEnvironment(f *testing.F) {
	for _, s := range []string{cargoNoRoute, pipNoRoute, goBuildCacheReadOnly, goModuleNotFetched, goProxyOff, goProxyUnreachable, curlRefused, pipRefused, npmRefused,
		npmOffline, pipOffline, cargoOffline, bashNotFound, dashNotFound, envNotFound, pythonNoPytest, cpNoSpace, pythonReadOnlyDir, npmReadOnly, "", "<sandbox_violations>\n"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, output string, jail bool) {
		s := Setting{Place: InSandbox, ProjectDir: "/p", Caches: []string{"/c"}, Writable: []string{"/w"}}
		if jail {
			s.Place = InJail
		}
		e, ok := ReadEnvironment(output, s)
		if !ok {
			return
		}
		if len(e.Line) > maxEnvLine || e.Place != s.Place {
			t.Errorf("%+v: line of %d bytes, place %q", e, len(e.Line), e.Place)
		}
		if e.Kind == EnvReadOnly && (!strings.HasPrefix(e.Path, "/") || e.Path == "/" || within(e.Path, "/p")) {
			t.Errorf("%+v: a read-only path must be absolute, below the root, outside the project", e)
		}
		if e.Explain(nil) == "" {
			t.Errorf("%+v explains nothing", e)
		}
	})
}
