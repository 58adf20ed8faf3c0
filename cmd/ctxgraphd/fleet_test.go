package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// TestFleetProjectNamesEveryProject: whatever a project's directory is
// called, its fleet's name is one the fleet takes, and two directories
// are two names, those that differ only in case or punctuation too.
func TestFleetProjectNamesEveryProject(t *testing.T) {
	root := t.TempDir()
	seen := map[string]string{}
	for _, dir := range []string{
		"shop", "Shop", "My Project", "my_project", "my.project", "_x_", ".hidden", "-dash-", "...",
		"ÜBER café", "日本", "a..b", strings.Repeat("Long-Name_", 10), "v1.2.3", "UPPER",
	} {
		path := filepath.Join(root, dir)
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := paths.ForProjectEnv(path, func(k string) string { return map[string]string{"XDG_STATE_HOME": root}[k] })
		if err != nil {
			t.Fatal(err)
		}
		name := fleetProject(p.ID)
		if _, err := fleet.NewSubjects(name); err != nil {
			t.Errorf("directory %q (id %s): %v", dir, p.ID, err)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("directories %q and %q are both fleet %s", other, dir, name)
		}
		seen[name] = dir
	}
}

// TestCtlWorkers: ctl workers lists the workers with the URL they connect
// to, add says the credentials and the command that starts the worker,
// revoke says it is done, and a daemon without a fleet's refusal is said
// as it is, with exit 1.
func TestCtlWorkers(t *testing.T) {
	proj := ctlProject(t)
	heard := time.Now().Add(-3 * time.Second)
	b := &controltest.Backend{WorkerList: control.WorkerList{URL: "nats://127.0.0.1:4222",
		Workers: []control.Worker{
			{Name: "build-1", PublicKey: "UABC", Credentials: "/s/fleet/workers/build-1.creds", Connected: true, Runs: []string{"run-000004", "run-000007"}, LastHeard: &heard},
			{Name: "gpu-9", PublicKey: "UDEF", Credentials: "/s/fleet/workers/gpu-9.creds", Runs: []string{}, Findings: 2,
				LastFindings: []string{"a request on x asked for its answer on \"y\"", "a second outcome"}},
		}}}
	controltest.Serve(t, proj.Socket, b)

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"workers"}, []string{"workers connect to nats://127.0.0.1:4222\n", "NAME     STATE      RUNS                   LAST HEARD  FINDINGS",
			"build-1  connected  run-000004,run-000007  3s ago      0         UABC", "/s/fleet/workers/build-1.creds",
			"gpu-9    offline    -                      never       2         UDEF",
			"findings against gpu-9 (2; the last 2, newest last):\n  a request on x asked for its answer on \"y\"\n  a second outcome\n"}},
		{[]string{"workers", "add", "gpu-2"}, []string{
			"worker gpu-2: credentials in /fleet/workers/gpu-2.creds (keep them secret",
			"  ctxgraphd worker --nats nats://127.0.0.1:4222 --creds /fleet/workers/gpu-2.creds\n"}},
		{[]string{"workers", "revoke", "gpu-2"}, []string{"worker gpu-2: revoked"}},
	} {
		out, errOut, code := ctl(t, append([]string{"ctl", "--project", proj.Dir}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
	calls := b.Calls()
	if len(calls) != 3 || calls[1] != (controltest.Call{Method: "AddWorker", ID: "gpu-2"}) || calls[2] != (controltest.Call{Method: "RevokeWorker", ID: "gpu-2"}) {
		t.Errorf("the daemon received %+v", calls)
	}

	b.WorkerList.Workers = nil
	if out, _, _ := ctl(t, "ctl", "--project", proj.Dir, "workers", "--json"); !strings.Contains(out, `"workers": []`) {
		t.Errorf("workers --json with none:\n%s", out)
	}
	if _, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "workers", "add"); code != exitUsage {
		t.Errorf("workers add without a name: exit %d, want %d: %s", code, exitUsage, errOut)
	}

	b.Fail("AddWorker", fleetLocalError(t))
	_, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "workers", "add", "w")
	if code != exitFailure || !strings.Contains(errOut, "set executor: nats in .claude/ctxgraphd.yaml") {
		t.Errorf("workers add without a fleet: exit %d: %s", code, errOut)
	}
}

// fleetLocalError is what fleet.Local answers.
func fleetLocalError(t *testing.T) error {
	t.Helper()
	_, err := fleet.Local.AddWorker(t.Context(), "w")
	if err == nil {
		t.Fatal("fleet.Local added a worker")
	}
	return err
}

// TestStartFleet: the daemon starts its fleet's server with executor nats
// on the embedded server, its state in the project's state dir and its
// name the project's; with executor local, or a server of the person's
// own, it starts none, and the control API's fleet says so.
func TestStartFleet(t *testing.T) {
	proj := ctlProject(t)
	log := zaptest.NewLogger(t)
	for _, tt := range []struct {
		name     string
		executor string
		url      string
	}{
		{"local", config.ExecutorLocal, ""},
		{"nats on a server of one's own", config.ExecutorNATS, "nats://nats.example.com:4222"},
	} {
		cfg := config.Default()
		cfg.Executor, cfg.NATS.URL = tt.executor, tt.url
		srv, err := startFleet(t.Context(), proj, cfg, log)
		if srv != nil || err != nil {
			t.Errorf("%s: startFleet = %v, %v; want no server", tt.name, srv, err)
		}
		if _, err := fleetControl(srv).Workers(t.Context()); err == nil || !strings.Contains(err.Error(), "executor: nats") {
			t.Errorf("%s: the control API's workers = %v, want how to have workers", tt.name, err)
		}
	}

	cfg := config.Default()
	cfg.Executor = config.ExecutorNATS
	srv, err := startFleet(t.Context(), proj, cfg, log)
	if err != nil || srv == nil {
		t.Fatalf("startFleet with executor nats = %v, %v", srv, err)
	}
	defer srv.Shutdown()
	if want := "ctxgraphd." + fleetProject(proj.ID); srv.Subjects().Prefix() != want {
		t.Errorf("the fleet's subjects are under %s, want %s", srv.Subjects().Prefix(), want)
	}
	w, err := fleetControl(srv).AddWorker(context.Background(), "build-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(proj.StateDir, "fleet", "workers", "build-1.creds"); w.Credentials != want || !strings.HasPrefix(w.URL, "nats://127.0.0.1:") {
		t.Errorf("AddWorker = %+v, want credentials %s and a loopback URL", w, want)
	}
}

// TestNoBaseAWorkerClonesHoldsThePersonsCopies: the trees the executor
// commits as runs' bases (a lane's clone, the project's own) leave the
// files of lanes.copy out, though the person keeps them untracked and
// unignored: the base bundle sits where any worker may read it, and the
// copies go to the bound worker alone.
func TestNoBaseAWorkerClonesHoldsThePersonsCopies(t *testing.T) {
	ctx := context.Background()
	proj, lane := t.TempDir(), filepath.Join(t.TempDir(), "lane")
	git := func(args ...string) {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(proj, "main.go"), []byte("package main\n"), 0o644)
	git("-C", proj, "init", "-q")
	git("-C", proj, "add", "main.go")
	git("-C", proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
	git("clone", "-q", "--shared", proj, lane)
	for _, dir := range []string{proj, lane} {
		for name, text := range map[string]string{".env": "TOKEN=person\n", "config/local.yaml": "port: 1\n"} {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := paths.Project{Dir: proj}
	repo, err := gitrepo.Open(ctx, gitrepo.Options{Dir: proj, Index: filepath.Join(t.TempDir(), "index")})
	if err != nil {
		t.Fatal(err)
	}
	open := laneRepos(p, repo, t.TempDir(), []string{".env", "config/local.yaml"})
	for _, dir := range []string{lane, proj} {
		r, err := open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files, err := r.Files(ctx, tree)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, f.Path)
		}
		if strings.Join(names, " ") != "main.go" {
			t.Errorf("the base of a run in %s holds %q, want main.go alone", dir, names)
		}
	}
}

// TestAWorkerThatCannotWorkRefusesToStart: a worker with no Claude Code
// where --claude says, and no sandbox runtime where --sandbox-runtime
// says, refuses to start, before it takes any lane, naming each problem
// with the worker's own flag (never a daemon's configuration key, which a
// worker has none of); as root without --allow-root it says that opt-in.
func TestAWorkerThatCannotWorkRefusesToStart(t *testing.T) {
	srv, err := fleet.Start(t.Context(), fleet.Config{Dir: t.TempDir(), Project: "proj"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	w, err := srv.AddWorker(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := ctl(t, "worker", "--nats", srv.ClientURL(), "--creds", w.Path, "--dir", t.TempDir(),
		"--claude", "/nonexistent/claude", "--sandbox-runtime", "/nonexistent/srt")
	if code == 0 {
		t.Fatal("a worker that cannot run Claude Code started")
	}
	want := []string{"ctxgraphd worker cannot start on this machine", `the worker's --claude "/nonexistent/claude" was not found`,
		`the sandbox runtime (srt) was not found as "/nonexistent/srt" (the worker's --sandbox-runtime)`}
	if os.Geteuid() == 0 {
		want = append(want, "run the worker as an ordinary user", "`ctxgraphd worker --allow-root`")
	}
	for _, s := range want {
		if !strings.Contains(errOut, s) {
			t.Errorf("the refusal does not say %q:\n%s", s, errOut)
		}
	}
	for _, s := range []string{"agent.command", "ctxgraphd.yaml", "agent.allow_root", "worker ready"} {
		if strings.Contains(errOut, s) {
			t.Errorf("the refusal says %q, which is no worker's:\n%s", s, errOut)
		}
	}
}
