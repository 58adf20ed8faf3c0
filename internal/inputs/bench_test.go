package inputs

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkRecordingAGoTestRun is what a view adds to one test run of a
// small Go module (three packages, each with its own test, the build cache
// warm): `go test -count=1 ./...` run in the tree itself and through a
// view of it, turn about, in the same run. overhead-ratio is the viewed
// run's time over the plain run's (mount and unmount included).
func BenchmarkRecordingAGoTestRun(b *testing.B) {
	files := map[string]string{"go.mod": "module bench\n\ngo 1.22\n"}
	for i := range 3 {
		pkg := fmt.Sprintf("p%d", i)
		files[pkg+"/p.go"] = fmt.Sprintf("package %s\n\nfunc Sum(xs ...int) (n int) {\n\tfor _, x := range xs {\n\t\tn += x\n\t}\n\treturn n\n}\n", pkg)
		files[pkg+"/p_test.go"] = fmt.Sprintf("package %s\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestSum(t *testing.T) {\n\tif _, err := os.ReadFile(\"p.go\"); err != nil || Sum(1, 2) != 3 {\n\t\tt.Fatal(err)\n\t}\n}\n", pkg)
	}
	root := tree(b, files)
	goTest := func(dir string) time.Duration {
		start := time.Now()
		cmd := exec.Command("sh", "-c", `cd "$0" && exec go test -count=1 ./...`, dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go test in %s: %v\n%s", dir, err, out)
		}
		return time.Since(start)
	}
	// One mountpoint for every run: the build cache keys packages by
	// their directory, and a new one each time would be a build each time.
	at := b.TempDir()
	viewed := func() time.Duration {
		start := time.Now()
		v, err := Mount(root, at)
		noFUSE(b, err)
		if err != nil {
			b.Fatal(err)
		}
		goTest(v.Dir)
		if _, err := v.Close(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	goTest(root) // the build cache, warm
	viewed()
	b.ResetTimer()
	var plain, through time.Duration
	for range b.N {
		plain += goTest(root)
		through += viewed()
	}
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "plain-ms")
	b.ReportMetric(float64(through.Milliseconds())/float64(b.N), "viewed-ms")
	b.ReportMetric(float64(through)/float64(plain), "overhead-ratio")
}
