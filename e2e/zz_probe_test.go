package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

func BenchmarkZZProbe(b *testing.B) {
	sc := scriptedmodel.Scenario{Name: "honest"}
	for i := range 3 {
		sc.Features = append(sc.Features, scriptedmodel.FeatureScript{ID: fmt.Sprintf("F-%03d", i+1), Title: fmt.Sprintf("Feature %d", i+1), Behavior: scriptedmodel.Pass})
	}
	url := startModel(b, sc)
	for i := 0; i < b.N; i++ {
		p := newBenchProject(b, append(modelEnv(b, url), "CTXGRAPHD_LOG_LEVEL=debug"))
		cmd := exec.Command(binary, "run", "--exit-when-done")
		cmd.Dir, cmd.Env = p.dir, p.env
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		start := time.Now()
		err := cmd.Run()
		b.Logf("wall %v err %v", time.Since(start), err)
		os.WriteFile(fmt.Sprintf("/tmp/probe-daemon-%d.log", i), log.Bytes(), 0o644)
		fmt.Fprintf(os.Stderr, "start %s\n", start.UTC().Format("15:04:05.000"))
	}
}
