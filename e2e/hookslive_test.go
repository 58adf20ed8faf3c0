package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// TestRunsWithoutHooksAreNotTrusted turns every hook off the way a user
// could by mistake (disableAllHooks in the project's settings). The real
// CLI then runs without gates; the daemon notices that no SessionStart
// checked in, kills those runs, and stops the session rather than trust
// work done without gates.
func TestRunsWithoutHooksAreNotTrusted(t *testing.T) {
	p := newProject(t, scenario("no-hooks", feature("F-001", scriptedmodel.Pass)))
	settings := filepath.Join(p.dir, ".claude", "settings.json")
	if err := os.WriteFile(settings, []byte(`{"disableAllHooks": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "CTXGRAPHD_AGENT_HOOKS_LIVE_TIMEOUT=3s")
	out, log, code := p.ctxgraphd("run", "--exit-when-done")
	if code == 0 {
		t.Fatalf("the daemon finished a session whose hooks never ran\n%s%s", out, log)
	}
	if !strings.Contains(log, "hook session-start") || !strings.Contains(log, "disableAllHooks") {
		t.Errorf("the stop message does not say what to check:\n%s", log)
	}
	// Whether an initializer got as far as writing the list before its run
	// was killed depends on how fast it was; either way nothing is tested,
	// on disk or on the record.
	disk, err := p.featureListIfAny()
	if err != nil {
		t.Fatal(err)
	}
	canonical := p.canonicalList()
	for _, l := range []*progress.List{disk, canonical} {
		if l == nil {
			continue
		}
		for _, f := range l.Features {
			if f.Tested {
				t.Errorf("%s is tested although no gate ran\n%s", f.ID, log)
			}
		}
	}
	if (disk == nil) != (canonical == nil) {
		t.Errorf("feature-list.json holds a valid list: %v, the store holds one: %v; they must agree\n%s", disk != nil, canonical != nil, log)
	}
}
