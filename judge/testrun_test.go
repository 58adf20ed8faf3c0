package judge

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/testreport"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// The daemon's runs of a feature's test run the agent's code. Each way out
// that a coder's code found when the daemon ran it unconfined is tried here
// by a test command doing it directly; each must fail, and the project, the
// state directory and the daemon's socket must see nothing of it.
func TestRunTestIsConfined(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the daemon's test runs are confined with bubblewrap, on Linux")
	}
	if !sandbox.Confines {
		t.Fatal("sandbox.Confines is false on Linux")
	}
	outside := t.TempDir()
	f := newFixture(t, func(o *Options) {
		o.Jail.Env = append(o.Jail.Env, "HOME="+outside)
		o.Jail.Secrets = sandbox.SecretPaths(outside)
		o.Jail.Limits = sandbox.Limits{FileSize: 1 << 20}
	})
	f.write(map[string]string{"tests/a.sh": "exit 1\n", "src/a.go": "package a\n"})
	f.commitAll("base")
	if err := os.MkdirAll(filepath.Join(outside, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, ".ssh", "id_ed25519"), []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon's socket, in the state directory (which the jail hides),
	// and a TCP listener on loopback (which its own network has not).
	sock, err := net.Listen("unix", filepath.Join(f.proj.StateDir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	accepted := make(chan string, 2)
	for _, l := range []net.Listener{sock, tcp} {
		go func() {
			if c, err := l.Accept(); err == nil {
				accepted <- l.Addr().String()
				c.Close()
			}
		}()
	}
	tcpPort := tcp.Addr().(*net.TCPAddr).Port
	stateFile := filepath.Join(f.proj.StateDir, "next-to-state.db")
	tmpFile := filepath.Join(os.TempDir(), "ctxgraphd-jail-"+rand.Text())
	t.Cleanup(func() { os.Remove(tmpFile) })

	// Writes outside the checkout either fail (a read-only file system) or
	// land in the jail's own /tmp, which goes with it: what counts is that
	// nothing of them is on the machine afterwards (checked below).
	for _, p := range []string{filepath.Join(outside, "planted"), stateFile, tmpFile} {
		if r := f.runTest(t.Context(), "echo x > "+p+"; ls -A "+f.proj.StateDir+" | wc -l"); !strings.HasSuffix(r.Output, "\n0\n") && r.Output != "0\n" {
			t.Errorf("writing %s: the state directory is not empty in the jail: %q", p, r.Output)
		}
	}
	tests := []struct {
		name, script string
		output       string // a substring the output must hold, "" for none
	}{
		{"calls the daemon's socket", "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('" + filepath.Join(f.proj.StateDir, "s.sock") + "')\"", "Operation not permitted"},
		{"creates any Unix socket", "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'", "Operation not permitted"},
		// io_uring can make and connect a Unix socket without socket(2).
		{"sets up io_uring", `python3 -c "import ctypes, os, sys; r = ctypes.CDLL(None, use_errno=True).syscall(425, 1, None); print(os.strerror(ctypes.get_errno())); sys.exit(r < 0)"`, "Operation not permitted"},
		{"reaches a host's port", fmt.Sprintf("python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), timeout=2)\"", tcpPort), ""},
		{"reads a secret of the home directory", "cat " + filepath.Join(outside, ".ssh", "id_ed25519"), ""},
		{"moves a git ref", "git update-ref refs/heads/planted HEAD", ""},
		{"rewrites its own test to pass", "echo 'exit 0' > tests/a.sh && sh tests/a.sh && exit 1", ""},
		{"writes a file past the size limit", "head -c 2000000 /dev/zero > big.bin", ""},
		{"gains a capability back", "unshare -r true || mount -o remount,rw / ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each route must fail: `|| exit 0` turns the failure into a
			// pass, so that a pass says the route was closed and a failure
			// (exit 42) that it went through.
			r := f.runTest(t.Context(), "("+tt.script+") && exit 42 || exit 0")
			if r.ExitCode != 0 || r.CannotRun != "" {
				t.Errorf("%s: exit %d (%s), want the route refused; output:\n%s", tt.name, r.ExitCode, r.CannotRun, r.Output)
			}
			if !strings.Contains(r.Output, tt.output) {
				t.Errorf("%s: output %q does not say %q", tt.name, r.Output, tt.output)
			}
		})
	}
	for _, p := range []string{filepath.Join(outside, "planted"), stateFile, tmpFile} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after the test runs", p)
		}
	}
	if got := f.read("tests/a.sh"); got != "exit 1\n" {
		t.Errorf("tests/a.sh is %q in the project after a test run rewrote it in its checkout", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "big.bin")); !os.IsNotExist(err) {
		t.Error("a file the test wrote in its checkout appeared in the project")
	}
	if out := f.git("for-each-ref", "refs/heads/planted"); out != "" {
		t.Errorf("a test run made a ref: %s", out)
	}
	select {
	case who := <-accepted:
		t.Errorf("%s accepted a connection from a test run", who)
	default:
	}
}

// The test sees exactly the tree it is given, at the project's path,
// whatever the work tree holds now: a checkout of its own.
func TestRunTestRunsOnTheTreeNotTheWorkTree(t *testing.T) {
	f := newFixture(t, nil)
	f.write(map[string]string{"tests/a.sh": "cat src/answer; pwd\n", "src/answer": "judged\n"})
	tree := f.snapshot()
	f.write(map[string]string{"src/answer": "changed since\n", "src/extra": "x\n"})
	r := f.j.RunTest(t.Context(), tree, "sh tests/a.sh; test ! -e src/extra")
	if !r.Passed() || r.Tree != tree {
		t.Fatalf("result %+v", r)
	}
	if !strings.Contains(r.Output, "judged\n"+f.dir+"\n") {
		t.Errorf("output %q, want the tree's content and the project's path", r.Output)
	}
	if left, _ := os.ReadDir(filepath.Join(f.proj.StateDir, "checkouts")); len(left) > 0 {
		t.Errorf("checkouts left behind: %v", left)
	}
}

// TestARunCannotSeeTheRepositoryAboveItsProject: a project in a
// subdirectory of its repository sees, in its test runs, its own
// checkout at its path and the rest of the file system read-only, but
// not the repository's git directory above it, whose objects hold every
// snapshot the daemon took, candidates included, read where no record
// of the run's inputs is made. The test still runs, and passes.
func TestARunCannotSeeTheRepositoryAboveItsProject(t *testing.T) {
	if !sandbox.Confines {
		t.Skip("test runs are not confined on " + runtime.GOOS)
	}
	// Not below /tmp, which a run sees as a fresh one of its own: where
	// projects are.
	top, err := os.MkdirTemp("/var/tmp", "ctxgraphd-judge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if top, err = filepath.EvalSymlinks(top); err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(t.Context(), top); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "answer"), []byte("judged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	repo, err := gitrepo.Open(t.Context(), gitrepo.Options{Dir: dir, Index: filepath.Join(state, "snapshot.index")})
	if err != nil {
		t.Fatal(err)
	}
	j := New(Options{Project: paths.Project{Dir: dir, ID: "p-test", StateDir: state, Socket: filepath.Join(state, "ctl.sock")}, Repo: repo,
		Records: &fakeRecords{}, Jail: sandbox.TestJail{Env: testEnv, Hide: []string{state}}, TestTimeout: time.Minute})
	tree, err := repo.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(top, ".git", "HEAD")); err != nil {
		t.Fatal(err)
	}
	r := j.RunTest(t.Context(), tree, `grep -qx judged answer && test ! -e ../.git/HEAD && test -z "$(ls -A ../.git)" && echo hidden`)
	if !r.Passed() || !strings.Contains(r.Output, "hidden") {
		t.Errorf("a run in %s saw the repository's git directory, or did not pass: %+v", dir, r)
	}
}

// TestEnv gives a test run the toolchains' variables and nothing else: no
// key, token or password of the daemon's environment reaches it, and it
// adds nothing a person's shell would not hold (no CI; the jail's /tmp as
// TMPDIR only where the daemon's environment names one).
func TestTestEnvIsAnAllowList(t *testing.T) {
	daemon := []string{
		"PATH=/usr/bin", "HOME=/home/u", "GOPATH=/home/u/go", "LC_ALL=C",
		"ANTHROPIC_API_KEY=sk-secret", "ANTHROPIC_BASE_URL=http://x", "GITHUB_TOKEN=ghp", "DATABASE_URL=postgres://u:pw@h/db",
		"CTXGRAPH_SOCKET=/run/s.sock", "CLAUDE_CODE_OAUTH_TOKEN=o", "MY_SECRET=s", "CI=true", "LC_SECRET=s",
	}
	got := strings.Join(sandbox.TestEnv(daemon, "/proj", nil, "GOCACHE=/c"), "\n")
	for _, want := range []string{"PATH=/usr/bin", "HOME=/home/u", "GOPATH=/home/u/go", "LC_ALL=C", "GOCACHE=/c"} {
		if !strings.Contains(got, want) {
			t.Errorf("env lacks %s:\n%s", want, got)
		}
	}
	for _, banned := range []string{"ANTHROPIC", "GITHUB_TOKEN", "DATABASE_URL", "CTXGRAPH", "CLAUDE", "SECRET", "CI=", "TMPDIR"} {
		if strings.Contains(got, banned) {
			t.Errorf("env has %s:\n%s", banned, got)
		}
	}
	got = strings.Join(sandbox.TestEnv(append(daemon, "TMPDIR=/run/user/1000/t"), "/proj", nil), "\n")
	if !strings.Contains(got, "TMPDIR=/tmp") || strings.Contains(got, "/run/user") {
		t.Errorf("the daemon's TMPDIR is not the jail's /tmp:\n%s", got)
	}
}

// uniqueSleep is a sleep duration no other process on the machine has in
// its command line, to find a test's processes by.
func uniqueSleep() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1e9))
	return fmt.Sprintf("3%03d.%09d", n.Int64()%1000, n.Int64())
}

// processesRunning are the pids of the machine's processes (in any pid
// namespace) whose command line holds token, zombies left out.
func processesRunning(token string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), token) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// A pass needs the runner's own report that tests ran: a Go test binary
// that ends itself before its tests (os.Exit(0) in init) exits 0 and
// makes `go test` print ok, and is vacuous, not a pass. The same test run
// honestly passes, and a plain script is judged by its exit status.
func TestRunTestNeedsTheRunnersReport(t *testing.T) {
	f := goFixture(t)
	f.write(map[string]string{
		"go.mod":          "module m\n\ngo 1.22\n",
		"a/a.go":          "package a\n\nfunc Answer() int { return 41 }\n",
		"a/a_test.go":     "package a\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n",
		"tests/script.sh": "go test ./a/ && echo script done\n",
	})
	if r := f.runTest(t.Context(), "go test ./a/"); r.Passed() || r.Outcome != testreport.Fail {
		t.Fatalf("a failing Go test: %s (%s)", r.Summary(), r.Outcome)
	}
	f.write(map[string]string{"a/exit.go": "package a\n\nimport (\n\t\"os\"\n\t\"strings\"\n)\n\nfunc init() {\n\tif strings.HasSuffix(os.Args[0], \".test\") {\n\t\tos.Exit(0)\n\t}\n}\n"})
	r := f.runTest(t.Context(), "go test ./a/")
	if r.ExitCode != 0 || r.Passed() || r.Outcome != testreport.Vacuous || !strings.Contains(r.Summary(), "not a pass") {
		t.Errorf("a test binary that ends itself before its tests: exit %d, %s (%s), want exit 0 and vacuous", r.ExitCode, r.Summary(), r.Outcome)
	}
	if strings.Contains(r.Output, `"Action"`) {
		t.Errorf("the output shown is go test's JSON, not its text: %q", r.Output)
	}
	f.remove("a/exit.go")
	f.write(map[string]string{"a/a.go": "package a\n\nfunc Answer() int { return 42 }\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); !r.Passed() || r.Outcome != testreport.Pass {
		t.Errorf("an honest Go test: %s (%s)\n%s", r.Summary(), r.Outcome, r.Output)
	}
	if r := f.runTest(t.Context(), "go test ./a/ 2>&1 | tail -5"); !r.Passed() || r.Outcome != testreport.Unchecked {
		t.Errorf("an honest Go test through a filter: %s (%s)\n%s", r.Summary(), r.Outcome, r.Output)
	}
	if r := f.runTest(t.Context(), "sh tests/script.sh"); !r.Passed() {
		t.Errorf("a script that runs go test: %s (%s)\n%s", r.Summary(), r.Outcome, r.Output)
	}
}

// The verdict's caches are read-only to a test, whatever program writes,
// and writable to the warm-up that fills them (which runs none of the
// project's code).
func TestTheVerdictsCachesAreReadOnlyToTests(t *testing.T) {
	cache := t.TempDir()
	f := newFixture(t, func(o *Options) { o.Jail.Caches = []string{cache} })
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	planted := filepath.Join(cache, "planted")
	f.write(map[string]string{"tests/a.sh": "echo entry > " + planted + " && echo written\n"})
	if r := f.runTest(t.Context(), "sh tests/a.sh"); r.Passed() || strings.Contains(r.Output, "written") {
		t.Errorf("a test wrote the verdict's cache: %s\n%s", r.Summary(), r.Output)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Fatal("a test run left a file in the verdict's cache")
	}
	jail := f.j.opts.Jail.Warming()
	jail.Checkout, jail.Mount = f.dir, f.dir
	jc, err := jail.Command(t.Context(), "echo entry > "+planted)
	if err != nil {
		t.Fatal(err)
	}
	err = jc.Cmd.Start()
	closeFiles(jc.Cmd.ExtraFiles)
	if err == nil {
		err = jc.Cmd.Wait()
	}
	jc.Gone(5 * time.Second)
	if _, serr := os.Stat(planted); err != nil || serr != nil {
		t.Errorf("the warm-up could not fill the cache: %v, %v", err, serr)
	}
}

// goFixture is a fixture whose test runs have Go, with the machine's own
// build cache, warm from building this test (a cold one costs a minute
// on a busy machine), as the verdict's cache: read-only to the tests,
// filled by the warm-up before each. Go's index of module directories is
// off, as in the daemon's test runs (cmd/ctxgraphd's testJail): it would
// write the read-only cache.
func goFixture(t *testing.T) *fixture {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil || machineGoCache == "" {
		t.Skip("go is not installed")
	}
	cache := machineGoCache
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *Options) {
		o.Jail.Env = append(o.Jail.Env, "PATH="+filepath.Dir(goBin)+":/usr/bin:/bin", "HOME="+t.TempDir(),
			"GOCACHE="+cache, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GODEBUG=goindex=0")
		o.Jail.Writable, o.Jail.Caches = nil, []string{cache}
		o.TestTimeout = 10 * time.Minute
	})
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	return f
}

// A sweep runs every frozen test on one tree: the verdict's caches are
// warmed for a tree once, and again for a tree of other content.
func TestATreeIsWarmedOnce(t *testing.T) {
	f := goFixture(t)
	core, logs := observer.New(zap.DebugLevel)
	f.j.log = zap.New(core)
	warmed := func() int { return logs.FilterMessage("the verdict's caches warmed").Len() }
	f.write(map[string]string{
		"go.mod":      "module m\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nfunc Answer() int { return 42 }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n",
	})
	for range 2 {
		if r := f.runTest(t.Context(), "go test ./a/"); !r.Passed() {
			t.Fatalf("%s\n%s", r.Summary(), r.Output)
		}
	}
	if n := warmed(); n != 1 {
		t.Errorf("two test runs of one tree warmed the caches %d times, want once", n)
	}
	f.write(map[string]string{"a/a.go": "package a\n\nfunc Answer() int { return 41 }\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); r.Passed() {
		t.Fatalf("wrong code passed: %s\n%s", r.Summary(), r.Output)
	}
	if n := warmed(); n != 2 {
		t.Errorf("a tree of other content warmed the caches %d times in all, want 2", n)
	}
}

// A test's code cannot plant an entry in the verdict's build cache that
// makes another tree's build pass. The attack, as an agent with a shell
// would write it: compile the package as it will be (wrong) and as it is
// (right), then file the right one's compiled code under the wrong one's
// key; the next verdict of the wrong code would link the right code and
// pass. The cache is read-only to test runs, so the plant fails and the
// wrong code fails its test.
func TestATestCannotPoisonTheVerdictsBuildCache(t *testing.T) {
	f := goFixture(t)
	f.write(map[string]string{
		"go.mod":      "module m\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nfunc Answer() int { return 42 }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n",
		"tools/plant.sh": `set -e
exported() { go list -test -deps -export -f '{{.ImportPath}} {{.Export}}' ./a/ | awk '$1 == "m/a" && $2 == "[m/a.test]" { print $3 }'; }
right=$(exported)
cp a/a.go /tmp/right.go
sed -i 's/return 42/return 41/' a/a.go
wrong=$(exported)
cp /tmp/right.go a/a.go
rid=$(basename "$right" -d)
wid=$(basename "$wrong" -d)
test -n "$rid" && test -n "$wid" && test "$rid" != "$wid"
size=$(stat -c %s "$right")
planted=0
for e in $(grep -rl " $wid " "$GOCACHE" --include='*-a'); do
	printf 'v1 %s %s %20d %20d\n' "$(cut -d' ' -f2 "$e")" "$rid" "$size" "$(date +%s%N)" > "$e"
	planted=1
done
test $planted = 1
echo planted
`,
	})
	plant := f.runTest(t.Context(), "sh tools/plant.sh")
	if strings.Contains(plant.Output, "planted") {
		t.Errorf("a test planted an entry in the verdict's build cache:\n%s", plant.Output)
	}
	f.write(map[string]string{"a/a.go": "package a\n\nfunc Answer() int { return 41 }\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); r.Passed() {
		t.Fatalf("wrong code passed its test after a test run tried to plant a cache entry for it: %s\n%s\nthe plant said:\n%s", r.Summary(), r.Output, plant.Output)
	}
	// The honest side: the right code passes, with the cache warm.
	f.write(map[string]string{"a/a.go": "package a\n\nfunc Answer() int { return 42 }\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); !r.Passed() {
		t.Errorf("right code, read-only cache: %s\n%s", r.Summary(), r.Output)
	}
}

// An agent may write its module cache, where Go keeps every dependency's
// source: an edited dependency would make a feature pass the verdict and
// fail on any other checkout. The verdict's modules are its own, extracted
// by the warm-up from the agents' zips, which Go checks against the
// tree's go.sum, and read-only to the tests: the edit is not in them.
func TestAnEditedDependencyDoesNotReachTheVerdict(t *testing.T) {
	f := goFixture(t)
	proxy := "file://" + filepath.Join(machineModCache, "cache", "download")
	agents, verdicts := t.TempDir(), t.TempDir()
	get := exec.Command("go", "mod", "download", "github.com/google/uuid@v1.6.0")
	get.Dir = f.dir
	get.Env = append(os.Environ(), "GOMODCACHE="+agents, "GOPROXY="+proxy, "GOSUMDB=off", "GOFLAGS=-mod=mod")
	if out, err := get.CombinedOutput(); err != nil {
		t.Skipf("github.com/google/uuid v1.6.0 is not in this machine's module cache (make deps puts it there): %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+w", agents, verdicts).Run() })
	f.j.opts.Jail.Env = append(f.j.opts.Jail.Env, "GOMODCACHE="+verdicts, "GOPROXY=off")
	// (Both are under /tmp, which the jail replaces: bound in. The
	// agents' module cache is in their home in production, which the
	// jail shows read-only.)
	f.j.opts.Jail.Caches = append(f.j.opts.Jail.Caches, verdicts, agents)
	f.j.opts.Jail.WarmEnv = []string{"GOPROXY=file://" + filepath.Join(agents, "cache", "download"), "GOSUMDB=off"}
	f.write(map[string]string{
		"go.mod":      "module m\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n",
		"go.sum":      "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\ngithub.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n",
		"a/a.go":      "package a\n\nimport \"github.com/google/uuid\"\n\nfunc Valid(s string) bool { return uuid.Validate(s) == nil }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestValid(t *testing.T) {\n\tif Valid(\"not a uuid\") {\n\t\tt.Fatal(\"took anything\")\n\t}\n}\n",
	})
	if r := f.runTest(t.Context(), "go test ./a/"); !r.Passed() {
		t.Fatalf("an honest test of code with a dependency: %s\n%s", r.Summary(), r.Output)
	}
	// The agent's edit: Validate takes anything, and a test that wants
	// it to would pass on this machine only.
	src := filepath.Join(agents, "github.com", "google", "uuid@v1.6.0", "uuid.go")
	exec.Command("chmod", "-R", "u+w", filepath.Dir(src)).Run()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "func Validate(s string) error {", "func Validate(s string) error {\n\treturn nil\n", 1)
	if err := os.WriteFile(src, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	f.write(map[string]string{"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestValid(t *testing.T) {\n\tif !Valid(\"not a uuid\") {\n\t\tt.Fatal(\"refused it\")\n\t}\n}\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); r.Passed() {
		t.Errorf("a test passed through a dependency edited in the agents' module cache: %s\n%s", r.Summary(), r.Output)
	}
}

// Go keys a cgo package's build by its own files: a header it includes
// from elsewhere in the tree is not in the key, and the verdict's cache,
// shared between trees, would judge a tree whose header changed with the
// build of the tree before. The test runs of a cgo tree key its cgo
// builds by the tree.
func TestACgoHeaderOutsideThePackageIsJudgedWithItsTree(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler: cgo is off")
	}
	f := goFixture(t)
	f.j.opts.Jail.Env = append(f.j.opts.Jail.Env, "CGO_ENABLED=1")
	f.write(map[string]string{
		"go.mod":         "module m\n\ngo 1.22\n",
		"cdefs/answer.h": "#define ANSWER 42\n",
		"a/a.go":         "package a\n\n// #include \"../cdefs/answer.h\"\nimport \"C\"\n\nfunc Answer() int { return int(C.ANSWER) }\n",
		"a/a_test.go":    "package a\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(\"wrong\", Answer())\n\t}\n}\n",
	})
	if r := f.runTest(t.Context(), "go test ./a/"); !r.Passed() {
		t.Fatalf("the right header: %s\n%s", r.Summary(), r.Output)
	}
	f.write(map[string]string{"cdefs/answer.h": "#define ANSWER 41\n"})
	if r := f.runTest(t.Context(), "go test ./a/"); r.Passed() {
		t.Errorf("a tree whose header is wrong passed with the build of the tree before: %s\n%s", r.Summary(), r.Output)
	}
}

// What a build installed and git does not carry (node_modules) is lent to
// the test from the work tree, read-only.
func TestRunTestSeesTheDependenciesReadOnly(t *testing.T) {
	f := newFixture(t, nil)
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	f.write(map[string]string{".gitignore": "node_modules/\n", "node_modules/dep/index.js": "dep\n"})
	f.commitAll("base")
	r := f.runTest(t.Context(), "cat node_modules/dep/index.js && (echo x > node_modules/dep/index.js) 2>/dev/null && exit 42; exit 0")
	if !r.Passed() || !strings.Contains(r.Output, "dep") {
		t.Errorf("%s\n%s", r.Summary(), r.Output)
	}
	if got := f.read("node_modules/dep/index.js"); got != "dep\n" {
		t.Errorf("the test changed the work tree's node_modules: %q", got)
	}
}

// A test whose program lives in a dependency directory (.venv/bin/python,
// node_modules/.bin/jest) is looked for where its run will see it: in the
// directory lent, not in the checkout git made, which has none. It runs,
// in the project and in a lane whose agents installed nothing yet (before
// any code, the check of red-before-green), which is lent the project's;
// a lane with its own keeps its own; and where no tree has one, the test
// cannot run.
func TestATestsProgramIsFoundInTheDependenciesItIsLent(t *testing.T) {
	f := newFixture(t, nil)
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	f.write(map[string]string{".gitignore": ".venv/\nnode_modules/\n", "tests/t.txt": "x\n"})
	f.commitAll("base")
	for _, test := range []string{".venv/bin/python -m pytest tests/", "node_modules/.bin/jest tests/"} {
		if r := f.runTest(t.Context(), test); r.CannotRun != ".venv/bin/python does not exist" && r.CannotRun != "node_modules/.bin/jest does not exist" {
			t.Errorf("%s with no dependency directory anywhere: %s, want that it cannot run", test, r.Summary())
		}
	}
	f.write(map[string]string{
		".venv/bin/python":       "exec:#!/bin/sh\necho project venv \"$@\"\n",
		"node_modules/.bin/jest": "exec:#!/bin/sh\necho project jest \"$@\"\n",
	})
	tree, err := f.repo.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lane := f.lane(map[string]string{".gitignore": ".venv/\nnode_modules/\n", "tests/t.txt": "x\n"})
	for _, tt := range []struct {
		name string
		root Root
		test string
		want string
	}{
		{"the project's venv", Root{}, ".venv/bin/python -m pytest tests/", "project venv -m pytest tests/"},
		{"the project's node_modules", Root{}, "node_modules/.bin/jest tests/", "project jest tests/"},
		{"a lane with none is lent the project's", lane, ".venv/bin/python -m pytest tests/", "project venv -m pytest tests/"},
	} {
		r := f.j.RunTestIn(t.Context(), tt.root, tree, tt.test)
		// The fake runners print no report: ran is what counts here.
		if r.CannotRun != "" || r.ExitCode != 0 || !strings.Contains(r.Output, tt.want) {
			t.Errorf("%s: %s\n%s", tt.name, r.Summary(), r.Output)
		}
	}
	(&fixture{t: t, dir: lane.Dir}).write(map[string]string{".venv/bin/python": "exec:#!/bin/sh\necho lane venv\n"})
	if r := f.j.RunTestIn(t.Context(), lane, tree, ".venv/bin/python -m pytest"); r.ExitCode != 0 || !strings.Contains(r.Output, "lane venv") {
		t.Errorf("a lane with a venv of its own: %s\n%s", r.Summary(), r.Output)
	}
}

// A test that runs into a bound of sandbox.max_* fails saying which: a
// person raises the bound, or an agent stops doing what crossed it.
func TestRunTestSaysWhichBoundItHit(t *testing.T) {
	tests := []struct {
		name   string
		limits sandbox.Limits
		exit   int
		out    string
		want   string // a substring of the limit named; "" for none
	}{
		{"killed by SIGXFSZ", sandbox.Limits{FileSize: 100 << 20}, 153, "", "sandbox.max_file_mb (100 MiB per file)"},
		{"EFBIG from a program", sandbox.Limits{FileSize: 1 << 20}, 1, "write error: File too large", "sandbox.max_file_mb"},
		{"fork refused", sandbox.Limits{Processes: 200}, 2, "sh: 1: Cannot fork", "sandbox.max_processes (200)"},
		{"bash's fork retry", sandbox.Limits{Processes: 200}, 254, "bash: fork: retry: Resource temporarily unavailable", "sandbox.max_processes"},
		{"python out of memory", sandbox.Limits{Memory: 512 << 20}, 1, "MemoryError", "sandbox.max_memory_mb (512 MiB per process)"},
		{"node out of memory", sandbox.Limits{Memory: 512 << 20}, 134, "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", "sandbox.max_memory_mb"},
		{"a plain failure", sandbox.Limits{FileSize: 1, Processes: 1, Memory: 1}, 1, "FAIL: want 42, got 41", ""},
		{"no bound set, the same words", sandbox.Limits{}, 153, "File too large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := limitHit(tt.limits, tt.exit, tt.out)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("limitHit = %q, want %q", got, tt.want)
			}
		})
	}
	// And in the jail, for real: a write past the file bound.
	f := newFixture(t, func(o *Options) { o.Jail.Limits = sandbox.Limits{FileSize: 1 << 20} })
	if f.j.opts.Jail.Off || !sandbox.Confines {
		return
	}
	r := f.runTest(t.Context(), "head -c 2000000 /dev/zero > big.bin")
	if r.Passed() || !strings.Contains(r.Summary(), "on the bound sandbox.max_file_mb (1 MiB per file)") {
		t.Errorf("a write past the file bound: %s", r.Summary())
	}
}

// A test whose output goes through a pipe, as the shell reads it, is
// judged by its exit status alone (the filter cuts the runner's report).
func TestPipes(t *testing.T) {
	for _, tt := range []struct {
		test string
		want bool
	}{
		{"go test ./...", false},
		{"go test ./... | tail -5", true},
		{"go test ./... |& tee test.log", true},
		{"go test ./... && echo passed", false},
		{"go test ./... || exit 1", false},
		{"sh -c 'go test ./... | tail -5'", false}, // one word to this shell
		{"go test ./... | (", false},               // not a command the shell can read
	} {
		if got := pipes(tt.test); got != tt.want {
			t.Errorf("pipes(%q) = %v, want %v", tt.test, got, tt.want)
		}
	}
}

// The log of a test run says what CPU time it measured (make bench reads
// it).
func TestTheTestRunsLogSaysItsCPU(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := newFixture(t, func(o *Options) { o.Log = zap.New(core) })
	if r := f.runTest(t.Context(), "dd if=/dev/zero of=/dev/null bs=1 count=200000"); !r.Passed() {
		t.Fatalf("the test failed: %s", r.Summary())
	}
	ended := logs.FilterMessage("the daemon's test run ended").All()
	if len(ended) != 1 {
		t.Fatalf("%d logs of the test run's end, want 1", len(ended))
	}
	if cpu, ok := ended[0].ContextMap()["cpu"].(time.Duration); !ok || cpu <= 0 {
		t.Errorf("the test run's CPU time logged as %v", ended[0].ContextMap()["cpu"])
	}
}

// The CPU time a test run logs (make bench reads it) is its processes',
// not only the jail's: a test that computes for a while shows it.
func TestATestRunLogsItsProcessesCPUTime(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := newFixture(t, func(o *Options) { o.Log = zap.New(core) })
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	// The shell says what CPU it used itself (times: its user and system
	// time): the log must hold at least that, however busy the machine.
	f.write(map[string]string{"tests/busy.sh": "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; times\n"})
	r := f.runTest(t.Context(), "sh tests/busy.sh")
	if !r.Passed() {
		t.Fatalf("the busy test: %s\n%s", r.Summary(), r.Output)
	}
	var own time.Duration
	for _, field := range strings.Fields(strings.SplitN(strings.TrimSpace(r.Output), "\n", 2)[0]) {
		var m int
		var sec float64
		if _, err := fmt.Sscanf(field, "%dm%fs", &m, &sec); err != nil {
			t.Fatalf("the shell's times: %q: %v", r.Output, err)
		}
		own += time.Duration(m)*time.Minute + time.Duration(sec*float64(time.Second))
	}
	ended := logs.FilterMessage("the daemon's test run ended").All()
	if len(ended) != 1 {
		t.Fatalf("%d logs of the test run's end, want 1", len(ended))
	}
	cpu, _ := ended[0].ContextMap()["cpu"].(time.Duration)
	if own <= 0 || cpu < own*9/10 {
		t.Errorf("the test run logged %s of CPU where the test's shell used %s itself: want its processes' time, not the jail's alone", cpu, own)
	}
}

// RunTests runs limits.parallel tests at once, each in its own jail, and
// gives their results in the order asked: three tests that each wait for
// the other two to have started all pass only if the three run together,
// and a fourth, failing, is reported as its own.
func TestRunTestsRunsParallelAtOnce(t *testing.T) {
	meet := t.TempDir()
	f := newFixture(t, func(o *Options) {
		o.Parallel = 3
		o.Jail.Writable = append(o.Jail.Writable, meet)
	})
	f.write(map[string]string{"tests/meet.sh": `touch "$1/$2"; i=0
while [ "$(ls "$1" | wc -l)" -lt 3 ]; do
	i=$((i+1)); [ "$i" -gt 100 ] && { echo "alone: only $(ls "$1") came"; exit 1; }
	sleep 0.1
done
`})
	tree := f.snapshot()
	tests := []string{"sh tests/meet.sh " + meet + " a", "sh tests/meet.sh " + meet + " b", "sh tests/meet.sh " + meet + " c", "false"}
	results := f.j.RunTests(t.Context(), tree, tests)
	if len(results) != len(tests) {
		t.Fatalf("%d results for %d tests", len(results), len(tests))
	}
	for i, r := range results {
		if r.Command != tests[i] {
			t.Errorf("result %d is of %q, want %q", i, r.Command, tests[i])
		}
		if want := i < 3; r.Passed() != want {
			t.Errorf("%q passed = %v, want %v: %s", tests[i], r.Passed(), want, r.Summary())
		}
	}

	// Cancelled, nothing starts, and each result says it was cut short.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, r := range f.j.RunTests(ctx, tree, tests) {
		if !r.Interrupted || r.Passed() {
			t.Errorf("%q after a cancellation: %+v", tests[i], r)
		}
	}
}

// Only the framing the testing package marks is a report: code in a Go
// package's init that prints the framing of a pass ("=== RUN", "--- PASS",
// "PASS", as any code can print them) and ends the test binary with
// status 0 is judged not passed, alone or beside honest packages, through
// the daemon's own run in its jail; honest packages pass with -v, -run,
// -count, ./..., skips and subtests, and a failing one fails. Where the
// daemon cannot guard go test (a script runs it), the report's passes are
// no proof and the exit status judges, said so.
func TestRunTestTrustsOnlyTheTestingPackagesFraming(t *testing.T) {
	f := goFixture(t)
	forged := "package forge\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc init() {\n\tif strings.HasSuffix(os.Args[0], \".test\") {\n" +
		"\t\tfmt.Print(\"=== RUN   TestForged\\n--- PASS: TestForged (0.00s)\\nPASS\\n\")\n\t\tos.Exit(0)\n\t}\n}\n"
	f.write(map[string]string{
		"go.mod":          "module m\n\ngo 1.22\n",
		"a/a_test.go":     "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {\n\tfor _, n := range []string{\"x\", \"y\"} {\n\t\tt.Run(n, func(t *testing.T) { t.Log(\"--- FAIL: TestA\") })\n\t}\n}\n\nfunc TestSkipped(t *testing.T) { t.Skip(\"not here\") }\n",
		"forge/forge.go":  forged,
		"forge/f_test.go": "package forge\n\nimport \"testing\"\n\nfunc TestForged(t *testing.T) { t.Fatal(\"never runs\") }\n",
		"fails/f_test.go": "package fails\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Error(\"no\") }\n",
		"tests/script.sh": "go test -json ./forge\n",
	})
	tests := []struct {
		test string
		want testreport.Outcome
	}{
		{"go test ./forge", testreport.Vacuous},
		{"go test -v -count=1 ./a ./forge", testreport.Vacuous},
		{"go test ./...", testreport.Fail},
		{"go test -v -count=1 -run 'TestA|TestSkipped' ./a", testreport.Pass},
		{"go test ./fails", testreport.Fail},
		{"sh tests/script.sh", testreport.Unchecked},
	}
	for _, tt := range tests {
		r := f.runTest(t.Context(), tt.test)
		if r.Outcome != tt.want || r.Passed() != (tt.want == testreport.Pass || tt.want == testreport.Unchecked) {
			t.Errorf("%s: exit %d, %s (%s), want %s\n%s", tt.test, r.ExitCode, r.Outcome, r.Summary(), tt.want, r.Output)
		}
	}
}

// A test that runs out of time because its runner watches for changes (no
// CI in its environment, as in a person's shell) says so, and how to run
// the tests once; one that is slow, or hangs otherwise, does not.
func TestTimedOutWatchModeSaysSo(t *testing.T) {
	tests := []struct {
		command, output string
		watch           bool
	}{
		{"npx vitest", " PASS  Waiting for file changes...\n       press h to show help, press q to quit\n", true},
		{"npx jest --watchAll", "Tests:       1 passed, 1 total\nRan all test suites.\n", true},
		{"npx jest --watch src", "", true},
		{"npx react-scripts test", "", true},
		{"npm test", "\x1b[2mWatch Usage\x1b[22m\n \u203a Press a to run all tests.\n", true},
		{"npx react-scripts test --watchAll=false", "", false},
		{"CI=true npx react-scripts test", "", false},
		{"npx vitest run", "", false},
		{"npx jest --watchAll=false", "", false},
		{"go test ./...", "=== RUN   TestSlow\n", false},
		{"sh tests/a.sh", "waiting for the server\n", false},
	}
	for _, tt := range tests {
		r := TestResult{Command: tt.command, Output: tt.output, TimedOut: true, Took: 10 * time.Minute, ExitCode: -1}
		if got := strings.Contains(r.Summary(), "watch mode"); got != tt.watch {
			t.Errorf("%s: %q says watch mode: %v, want %v", tt.command, r.Summary(), got, tt.watch)
		}
	}
}

// TestATestNotSetUpYetIsToldFromOneThatCannotRun: a test's program in a
// dependency directory that neither the tree nor any lent tree has is
// "not set up yet" (NotSetUp names the directory); a program missing
// elsewhere, or missing inside a dependency directory that is there, is
// one the test cannot run, and nothing else.
func TestATestNotSetUpYetIsToldFromOneThatCannotRun(t *testing.T) {
	f := newFixture(t, nil)
	if f.j.opts.Jail.Off || !sandbox.Confines {
		t.Skip("unconfined")
	}
	f.write(map[string]string{".gitignore": ".venv/\nnode_modules/\nvenv/\n", "tests/t.txt": "x\n", "bin/.keep": ""})
	f.commitAll("base")
	for _, tc := range []struct{ test, notSetUp string }{
		{".venv/bin/python -m unittest", ".venv"},
		{"node_modules/.bin/jest", "node_modules"},
		{"venv/bin/pytest -x", "venv"},
		{"cd . && .venv/bin/python -m pytest 2>&1 | tail -5", ".venv"},
		{"bin/run-tests", ""},         // not a dependency directory
		{"venvs/bin/python -V", ""},   // a near miss of venv
		{".venv2/bin/python -V", ""},  // a near miss of .venv
		{"node_module/.bin/jest", ""}, // a near miss of node_modules
	} {
		r := f.runTest(t.Context(), tc.test)
		if r.NotSetUp != tc.notSetUp || r.CannotRun == "" {
			t.Errorf("%s: NotSetUp %q, CannotRun %q; want NotSetUp %q and cannot run", tc.test, r.NotSetUp, r.CannotRun, tc.notSetUp)
		}
	}
	// The setup made the directory, but not the program: cannot run.
	f.write(map[string]string{".venv/bin/other": "x"})
	if r := f.runTest(t.Context(), ".venv/bin/python -m unittest"); r.NotSetUp != "" || r.CannotRun != ".venv/bin/python does not exist" {
		t.Errorf("with .venv there: NotSetUp %q, CannotRun %q", r.NotSetUp, r.CannotRun)
	}
}
