package judge

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/inputs"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// TestMain gives every test the same git configuration whatever the machine
// has: a HOME of our own whose .gitconfig sets no identity and forbids git
// to guess one, so that a commit of the judge that works got its identity
// from the Signature it passes.
func TestMain(m *testing.M) {
	if dir := os.Getenv(holdViewEnv); dir != "" {
		holdView(filepath.Join(filepath.Dir(dir), "checkout"), dir) // a daemon's process, to be killed
	}
	// The machine's Go caches, found before HOME moves: warm from building
	// these tests, and holding this module's dependencies.
	if out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			machineGoCache, machineModCache = f[0], f[1]
		}
	}
	home, err := os.MkdirTemp("", "judge-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	const config = "[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_CONFIG_HOME")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GIT_") {
			os.Unsetenv(k)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(home) }))
}

// machineGoCache and machineModCache are the machine's Go build and
// module caches ("" without Go).
var machineGoCache, machineModCache string

// fakeRecords keeps what the judge records.
type fakeRecords struct {
	mu       sync.Mutex
	commands []control.CommandRecord
	traces   []control.Trace
}

func (r *fakeRecords) AppendCommand(c control.CommandRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commands = append(r.commands, c)
	return nil
}

func (r *fakeRecords) AppendTraces(ts ...control.Trace) ([]control.Trace, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(ts)
	for i := range out {
		out[i].ID = fmt.Sprintf("tr-%d", len(r.traces)+1)
		r.traces = append(r.traces, out[i])
	}
	return out, nil
}

// QueueTraces stores at once: the store's order and settling are the
// store's to test.
func (r *fakeRecords) QueueTraces(done func(error), ts ...control.Trace) {
	_, err := r.AppendTraces(ts...)
	done(err)
}

func (r *fakeRecords) Commands() []control.CommandRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.commands)
}

func (r *fakeRecords) Traces() []control.Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.traces)
}

// fixture is a judge of a fresh project with a git repository.
type fixture struct {
	t    testing.TB
	dir  string // the project's real path
	proj paths.Project
	repo *gitrepo.Repo
	rec  *fakeRecords
	j    *Judge
	// tools is a directory on the test runs' PATH, where a test has put
	// one ("" when none).
	tools string
}

// testEnv is the environment of the daemon's test runs in these tests.
var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

// newFixture makes a project (git init, no commit) and a judge of it with
// the default gates.protected; adjust changes the options first.
func newFixture(t testing.TB, adjust func(*Options)) *fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	proj := paths.Project{Dir: dir, ID: "p-test", StateDir: state, Socket: filepath.Join(state, "ctl.sock")}
	// The progress directory is the daemon's: it is not in a change set.
	// .claude/settings*.json is, so that its gate can be seen at work.
	repo, err := gitrepo.Open(t.Context(), gitrepo.Options{Dir: dir, Index: filepath.Join(state, "snapshot.index"), Exclude: []string{".claude/progress"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &fakeRecords{}
	opts := Options{
		Project: proj, Records: rec, Repo: repo, Jail: sandbox.TestJail{Env: testEnv, Hide: []string{state}},
		Writable:       []string{filepath.Join(state, "tmp")},
		ProtectedGlobs: []string{"tests/**", "**/*_test.go"},
		TestTimeout:    time.Minute,
	}
	if adjust != nil {
		adjust(&opts)
	}
	return &fixture{t: t, dir: dir, proj: proj, repo: repo, rec: rec, j: New(opts)}
}

// runTest runs test as the daemon would on the project's tree as it is now.
func (f *fixture) runTest(ctx context.Context, test string) TestResult {
	f.t.Helper()
	tree, err := f.repo.Snapshot(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.j.RunTest(ctx, tree, test)
}

// write creates or replaces project files; content "exec:…" makes an
// executable file, "link:…" a symbolic link.
func (f *fixture) write(files map[string]string) {
	f.t.Helper()
	for p, content := range files {
		name := filepath.Join(f.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			f.t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if c, ok := strings.CutPrefix(content, "exec:"); ok {
			content, mode = c, 0o755
		}
		os.Remove(name)
		if target, ok := strings.CutPrefix(content, "link:"); ok {
			if err := os.Symlink(target, name); err != nil {
				f.t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(name, []byte(content), mode); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) remove(rel ...string) {
	f.t.Helper()
	for _, p := range rel {
		if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(p))); err != nil {
			f.t.Fatal(err)
		}
	}
}

// read returns a project file's content, or "<absent>".
func (f *fixture) read(rel string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

func (f *fixture) snapshot() gitrepo.Tree {
	f.t.Helper()
	tree, err := f.repo.Snapshot(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	return tree
}

// git runs git in the project as its user would, with an identity of the
// user's own (the judge's commits must not need one).
func (f *fixture) git(args ...string) string {
	f.t.Helper()
	return gitIn(f.t, f.dir, args...)
}

func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %q: %v: %s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// commitAll commits the whole work tree as the user would and returns HEAD.
func (f *fixture) commitAll(msg string) string {
	f.t.Helper()
	f.git("add", "-A")
	f.git("commit", "-q", "-m", msg)
	return f.git("rev-parse", "HEAD")
}

// blobID is the id git gives content.
func (f *fixture) blobID(content string) string {
	f.t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Dir = f.dir
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// list is a feature list of the given features.
func list(fs ...progress.Feature) *progress.List {
	for i := range fs {
		if fs[i].Status == "" {
			fs[i].Status = progress.Pending
		}
		if fs[i].Title == "" {
			fs[i].Title = "feature " + fs[i].ID
		}
	}
	return &progress.List{Version: 1, Features: fs}
}

// findings renders findings as "gate/code path mode", sorted.
func findings(fs []gates.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Gate+"/"+f.Code+" "+f.Path+" "+string(f.Mode))
	}
	slices.Sort(out)
	return out
}

// processAlive reports whether pid is a process that has not exited (a
// zombie has).
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// waitDead waits up to 10s for pid to exit and reports whether it did.
func waitDead(pid int) bool {
	return eventually.Within(10*time.Second, func() bool { return !processAlive(pid) })
}

// groupOf returns the process group of pid, or 0.
func groupOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return 0
	}
	pgid, _ := strconv.Atoi(f[2])
	return pgid
}

// groupMembers lists the processes of group pgid that have not exited.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if groupOf(pid) == pgid && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// waitForFile waits for a file to appear (written by a process the test
// started) and returns its content.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	var data []byte
	eventually.True(t, 20*time.Second, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil
	}, "%s appearing", path)
	return string(data)
}

// pids parses whitespace-separated pids.
func pids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, w := range strings.Fields(s) {
		n, err := strconv.Atoi(w)
		if err != nil {
			t.Fatalf("pid %q: %v", w, err)
		}
		out = append(out, n)
	}
	return out
}

// holdViewEnv makes the test binary a daemon that mounts a recording view
// at the directory it names, of the checkout beside it, and serves it
// until it is killed.
const holdViewEnv = "JUDGE_TEST_HOLD_VIEW"

func holdView(tree, dir string) {
	if _, err := inputs.Mount(tree, dir); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("serving")
	select {}
}
