package branch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// Project of a realistic size for the bundle benchmarks: benchFiles
// source files of 1 to 8 KiB in benchDirs directories, with benchCommits
// commits of history that each change a tenth of them.
const (
	benchFiles   = 400
	benchDirs    = 40
	benchCommits = 30
)

// benchSource is a file's content: lines of Go-like text, varying with
// seed so that packs compress as source does, not as repeated bytes.
func benchSource(rng *rand.Rand) string {
	var b strings.Builder
	size := 1024 + rng.IntN(7*1024)
	for b.Len() < size {
		fmt.Fprintf(&b, "func f%d(x int) int { return x*%d + %d } // %x\n", rng.IntN(1e6), rng.IntN(100), rng.IntN(1000), rng.Uint64())
	}
	return b.String()
}

// benchProject makes the project with its history and returns its head.
func benchProject(b *testing.B) (*fixture, string) {
	b.Helper()
	f := newFixture(b)
	rng := rand.New(rand.NewPCG(1, 2))
	name := func(i int) string { return fmt.Sprintf("pkg%02d/file%03d.go", i%benchDirs, i) }
	files := map[string]string{}
	for i := range benchFiles {
		files[name(i)] = benchSource(rng)
	}
	f.write(files)
	head := f.commitAll("the project")
	for c := range benchCommits {
		changed := map[string]string{}
		for range benchFiles / 10 {
			changed[name(rng.IntN(benchFiles))] = benchSource(rng)
		}
		f.write(changed)
		head = f.commitAll(fmt.Sprintf("change %d", c))
	}
	return f, head
}

// BenchmarkBundleBase measures a lane's way out: the base bundle of the
// whole history written (WriteBase) and a worker's clone made of it
// (CloneBase). It reports the bundle's size.
func BenchmarkBundleBase(b *testing.B) {
	f, head := benchProject(b)
	ctx := b.Context()
	var size int
	var write, clone time.Duration
	n := 0
	for b.Loop() {
		var out bytes.Buffer
		start := time.Now()
		if err := WriteBase(ctx, f.repo, &out, head); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		size = out.Len()
		if err := CloneBase(ctx, &out, int64(size), filepath.Join(b.TempDir(), "lane"), "F-001", head); err != nil {
			b.Fatal(err)
		}
		write, clone, n = write+written.Sub(start), clone+time.Since(written), n+1
	}
	b.ReportMetric(float64(size), "bundle-bytes")
	b.ReportMetric(float64(write)/float64(n)/1e6, "write-ms")
	b.ReportMetric(float64(clone)/float64(n)/1e6, "clone-ms")
}

// BenchmarkBundleResult measures a lane's way back: a result of three
// commits changing thirty files, written on the worker (WriteResult),
// imported and checked by the daemon (ImportResult), then released. It
// reports the bundle's size.
func BenchmarkBundleResult(b *testing.B) {
	f, head := benchProject(b)
	ctx := b.Context()
	var base bytes.Buffer
	if err := WriteBase(ctx, f.repo, &base, head); err != nil {
		b.Fatal(err)
	}
	clone := filepath.Join(b.TempDir(), "lane")
	if err := CloneBase(ctx, &base, int64(base.Len()), clone, "F-001", head); err != nil {
		b.Fatal(err)
	}
	worker, err := gitrepo.Open(ctx, gitrepo.Options{Dir: clone, Index: filepath.Join(b.TempDir(), "worker.index")})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var tip string
	for c := range 3 {
		files := map[string]string{}
		for i := range 10 {
			files[fmt.Sprintf("feature/f%d_%d.go", c, i)] = benchSource(rng)
			files[fmt.Sprintf("pkg%02d/file%03d.go", i, i+benchDirs*c)] = benchSource(rng)
		}
		for p, content := range files {
			name := filepath.Join(clone, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		gitOut(b, clone, nil, "add", "-A")
		gitOut(b, clone, nil, "commit", "-q", "-m", fmt.Sprintf("work %d", c))
		tip = gitOut(b, clone, nil, "rev-parse", "HEAD")
	}
	res := Result{
		Run: "run-bench", Base: head, MaxBytes: 64 << 20,
		Actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-bench"},
		State: gates.State{ProjectDir: f.dir, MaxFileSize: 10 << 20},
	}
	var size int
	var write, imp time.Duration
	n := 0
	for b.Loop() {
		var out bytes.Buffer
		start := time.Now()
		if err := WriteResult(ctx, worker, &out, head, tip); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		size = out.Len()
		got, err := ImportResult(ctx, f.repo, &out, res)
		if err != nil {
			b.Fatal(err)
		}
		imp, write, n = imp+time.Since(written), write+written.Sub(start), n+1
		if err := ReleaseResult(ctx, f.repo, res.Run, got.Commit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "bundle-bytes")
	b.ReportMetric(float64(write)/float64(n)/1e6, "write-ms")
	b.ReportMetric(float64(imp)/float64(n)/1e6, "import-ms")
}
