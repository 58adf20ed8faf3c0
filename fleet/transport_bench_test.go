package fleet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// The project of BenchmarkLaneTransport: transportFiles source files of
// about 10 KiB (2 MiB in all) in transportDirs directories, with
// transportCommits commits of history that each change a tenth of them;
// a run's result changes transportChanged of them and adds as many.
const (
	transportFiles   = 200
	transportDirs    = 20
	transportCommits = 20
	transportChanged = 4
)

// transportSource is a file's content, about 10 KiB of Go-like lines
// varying with rng, so that packs compress as source does.
func transportSource(rng *rand.Rand) []byte {
	var b bytes.Buffer
	for b.Len() < 9*1024+rng.IntN(2*1024) {
		fmt.Fprintf(&b, "func f%d(x int) int { return x*%d + %d } // %x\n", rng.IntN(1e6), rng.IntN(100), rng.IntN(1000), rng.Uint64())
	}
	return b.Bytes()
}

func transportName(i int) string {
	return fmt.Sprintf("pkg%02d/file%03d.go", i%transportDirs, i)
}

// writeFiles writes files (by slash path) below dir.
func writeFiles(tb testing.TB, dir string, files map[string][]byte) {
	tb.Helper()
	for p, data := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// transportProject makes the project, with its history, and returns it,
// its directory and its head. Packed, its objects are in a pack (`git
// gc`), as a project's cloned or long used are; otherwise each is a loose
// object, as commits leave them until git packs them.
func transportProject(b *testing.B, packed bool) (*gitrepo.Repo, string, string) {
	b.Helper()
	ctx := b.Context()
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gitrepo.Init(ctx, dir); err != nil {
		b.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=p", "-c", "user.email=p@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	files := map[string][]byte{}
	for i := range transportFiles {
		files[transportName(i)] = transportSource(rng)
	}
	writeFiles(b, dir, files)
	git("add", "-A")
	git("commit", "-q", "-m", "the project")
	for c := range transportCommits {
		changed := map[string][]byte{}
		for range transportFiles / 10 {
			changed[transportName(rng.IntN(transportFiles))] = transportSource(rng)
		}
		writeFiles(b, dir, changed)
		git("add", "-A")
		git("commit", "-q", "-m", fmt.Sprintf("change %d", c))
	}
	if packed {
		git("gc", "-q")
	}
	repo, err := gitrepo.Open(ctx, gitrepo.Options{Dir: dir, Index: filepath.Join(b.TempDir(), "index"), Exclude: []string{paths.ProgressDir}})
	if err != nil {
		b.Fatal(err)
	}
	return repo, dir, git("rev-parse", "HEAD")
}

// transportFleet is the embedded server with worker a: the daemon's
// JetStream and the worker's, each on its own connection.
func transportFleet(b *testing.B) (s *Server, daemon, worker jetstream.JetStream) {
	b.Helper()
	s = start(b, Config{})
	nc, err := connect(b, s, addWorker(b, s, "a").Path)
	if err != nil {
		b.Fatal(err)
	}
	if daemon, err = jetstream.New(s.Conn()); err != nil {
		b.Fatal(err)
	}
	if worker, err = jetstream.New(nc); err != nil {
		b.Fatal(err)
	}
	return s, daemon, worker
}

// bucket opens an object store of the fleet, as js's side sees it.
func bucket(b *testing.B, js jetstream.JetStream, name string) jetstream.ObjectStore {
	b.Helper()
	store, err := js.ObjectStore(b.Context(), name)
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// ms is d over n iterations, in milliseconds.
func ms(d time.Duration, n int) float64 { return float64(d) / float64(n) / 1e6 }

// BenchmarkLaneTransport is what a lane's way to a worker and back costs
// against a local lane's (issue 27), on a project of 200 files (2 MiB)
// with twenty commits of history, over the fleet's embedded server on this
// machine. ns/op is the way over NATS alone; each iteration also makes
// the local lane's equivalent, timed apart, so that both see the same
// machine.
//
// base (of the project's objects loose, then packed: git reuses a pack's
// deltas): NATS, the daemon writes the base bundle (branch.WriteBase) and
// puts it in the base bucket (as Executor.putBase), the worker gets it and
// clones it (branch.CloneBase, as its prepare); local, the lane's clone
// the daemon makes (branch.Clone, gitrepo.AddClone: shared objects).
// result: a run changed four files and added four; NATS, the worker
// snapshots and commits them, writes the result bundle (WriteResult) and
// puts it in its results bucket (as its putResult), the daemon gets it and
// imports it (branch.ImportResult, its checks included) and releases it;
// local, the snapshot and commit of the same change in a local lane, whose
// objects land in the project's store.
//
// Figures: bundle-MB, the bundle's size; local-ms, the local lane's way;
// nats/local, the ratio of ns/op to it; and the steps of the way over
// NATS: write-ms, put-ms, then get-clone-ms or get-import-ms (the
// object is streamed into the clone or the import), and, of a result,
// commit-ms (the snapshot and commit, the same work as local-ms).
func BenchmarkLaneTransport(b *testing.B) {
	b.Run("base/loose", func(b *testing.B) { benchBaseTransport(b, false) })
	b.Run("base/packed", func(b *testing.B) { benchBaseTransport(b, true) })
	b.Run("result", benchResultTransport)
}

func benchBaseTransport(b *testing.B, packed bool) {
	ctx := b.Context()
	repo, _, head := transportProject(b, packed)
	s, daemon, worker := transportFleet(b)
	put := bucket(b, daemon, s.Subjects().BaseBucket())
	got := bucket(b, worker, s.Subjects().BaseBucket())
	lanes := b.TempDir()
	var local, write, putting, cloning time.Duration
	size := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(lanes, fmt.Sprintf("local%d", i))
		start := time.Now()
		if err := branch.Clone(ctx, repo, dir, "F-001", head); err != nil {
			b.Fatal(err)
		}
		local += time.Since(start)
		os.RemoveAll(dir)
		dir = filepath.Join(lanes, fmt.Sprintf("worker%d", i))
		b.StartTimer()

		start = time.Now()
		var buf bytes.Buffer
		if err := branch.WriteBase(ctx, repo, &buf, head); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		if _, err := put.PutBytes(ctx, head, buf.Bytes()); err != nil {
			b.Fatal(err)
		}
		stored := time.Now()
		obj, err := got.Get(ctx, head)
		if err != nil {
			b.Fatal(err)
		}
		if err := branch.CloneBase(ctx, obj, DefaultMaxBundle, dir, "F-001", head); err != nil {
			b.Fatal(err)
		}
		obj.Close()
		write, putting, cloning = write+written.Sub(start), putting+stored.Sub(written), cloning+time.Since(stored)
		size = buf.Len()

		b.StopTimer()
		if err := put.Delete(ctx, head); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(dir)
		b.StartTimer()
	}
	b.StopTimer()
	nats := write + putting + cloning
	b.ReportMetric(float64(size)/(1<<20), "bundle-MB")
	b.ReportMetric(ms(local, b.N), "local-ms")
	b.ReportMetric(float64(nats)/float64(local), "nats/local")
	b.ReportMetric(ms(write, b.N), "write-ms")
	b.ReportMetric(ms(putting, b.N), "put-ms")
	b.ReportMetric(ms(cloning, b.N), "get-clone-ms")
}

func benchResultTransport(b *testing.B) {
	ctx := b.Context()
	repo, projectDir, head := transportProject(b, false)
	s, daemon, worker := transportFleet(b)
	put := bucket(b, worker, s.Subjects().ResultsBucket("a"))
	got := bucket(b, daemon, s.Subjects().ResultsBucket("a"))

	// The two lanes the run's change is made in: the local one, sharing
	// the project's objects, and the worker's clone of the base bundle.
	localDir := filepath.Join(b.TempDir(), "local")
	if err := branch.Clone(ctx, repo, localDir, "F-001", head); err != nil {
		b.Fatal(err)
	}
	localLane, err := gitrepo.Open(ctx, gitrepo.Options{Dir: localDir, Index: filepath.Join(b.TempDir(), "index"), Exclude: []string{paths.ProgressDir}, Objects: repo.ObjectsDir()})
	if err != nil {
		b.Fatal(err)
	}
	var base bytes.Buffer
	if err := branch.WriteBase(ctx, repo, &base, head); err != nil {
		b.Fatal(err)
	}
	workerDir := filepath.Join(b.TempDir(), "worker")
	if err := branch.CloneBase(ctx, &base, DefaultMaxBundle, workerDir, "F-001", head); err != nil {
		b.Fatal(err)
	}
	workerLane, err := gitrepo.Open(ctx, gitrepo.Options{Dir: workerDir, Index: filepath.Join(b.TempDir(), "index"), Exclude: []string{paths.ProgressDir}})
	if err != nil {
		b.Fatal(err)
	}
	sig := gitrepo.Signature{Name: "ctxgraphd worker", Email: "ctxgraphd@localhost"}
	commit := func(lane *gitrepo.Repo) string {
		tree, err := lane.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tip, err := lane.Commit(ctx, tree, []string{head}, "ctxgraphd: what the run left", sig)
		if err != nil {
			b.Fatal(err)
		}
		return tip
	}

	rng := rand.New(rand.NewPCG(7, 8))
	var local, committing, write, putting, importing time.Duration
	size := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// A fresh change each time: new blobs, as a run's are.
		change := map[string][]byte{}
		for j := range transportChanged {
			change[transportName(rng.IntN(transportFiles))] = transportSource(rng)
			change[fmt.Sprintf("feature/f%d.go", j)] = transportSource(rng)
		}
		writeFiles(b, localDir, change)
		writeFiles(b, workerDir, change)
		start := time.Now()
		commit(localLane)
		local += time.Since(start)
		key := ResultKey(fmt.Sprintf("run-%d", i), 1)
		res := branch.Result{
			Run: key, Base: head, MaxBytes: DefaultMaxBundle,
			Actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: key},
			State: gates.State{ProjectDir: projectDir, MaxFileSize: 10 << 20},
		}
		b.StartTimer()

		start = time.Now()
		tip := commit(workerLane)
		committed := time.Now()
		var buf bytes.Buffer
		if err := branch.WriteResult(ctx, workerLane, &buf, head, tip); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		if _, err := put.PutBytes(ctx, key, buf.Bytes()); err != nil {
			b.Fatal(err)
		}
		stored := time.Now()
		obj, err := got.Get(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		imp, err := branch.ImportResult(ctx, repo, obj, res)
		if err != nil {
			b.Fatal(err)
		}
		obj.Close()
		if err := branch.ReleaseResult(ctx, repo, key, imp.Commit); err != nil {
			b.Fatal(err)
		}
		committing, write, putting = committing+committed.Sub(start), write+written.Sub(committed), putting+stored.Sub(written)
		importing += time.Since(stored)
		size = buf.Len()
		if imp.Commit != tip {
			b.Fatalf("imported %s, the worker's tip is %s", imp.Commit, tip)
		}

		b.StopTimer()
		if err := got.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	nats := committing + write + putting + importing
	b.ReportMetric(float64(size)/(1<<20), "bundle-MB")
	b.ReportMetric(ms(local, b.N), "local-ms")
	b.ReportMetric(float64(nats)/float64(local), "nats/local")
	b.ReportMetric(ms(committing, b.N), "commit-ms")
	b.ReportMetric(ms(write, b.N), "write-ms")
	b.ReportMetric(ms(putting, b.N), "put-ms")
	b.ReportMetric(ms(importing, b.N), "get-import-ms")
}
