package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/claudetest"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

func TestExplore(t *testing.T) {
	var calls []scriptedmodel.ProbeCall
	for _, c := range strings.Split(os.Getenv("EXPLORE"), "\n---\n") {
		calls = append(calls, scriptedmodel.ProbeCall{Tool: "Bash", Input: map[string]any{"command": c, "description": "probe"}})
	}
	m := scriptedmodel.NewProbe(calls, nil)
	url, _ := m.Start()
	defer m.Close()
	dir := t.TempDir()
	p := Policy{ProjectDir: dir, DenyRead: strings.Split(os.Getenv("EXPLORE_DENYREAD"), ":")}
	run := runClaude(t, claudetest.Binary(t), dir, claudetest.Env(t, url), p)
	t.Logf("err %v stderr %s\nRESULT:\n%s", run.err, run.stderr, run.result["result"])
}
