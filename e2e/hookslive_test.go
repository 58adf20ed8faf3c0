package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
)

// TestRunsWithoutHooksAreNotTrusted turns every hook off the way a user
// could by mistake (disableAllHooks in the project's settings). The real
// CLI then runs without gates; the daemon notices that the runs call the
// tools the hooks gate while no hook of theirs checks in, kills those
// runs, and stops the session rather than trust work done without gates.
func TestRunsWithoutHooksAreNotTrusted(t *testing.T) {
	night(t, core)
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
	if !strings.Contains(log, "never reached the daemon") || !strings.Contains(log, "disableAllHooks") {
		t.Errorf("the stop message does not say what to check:\n%s", log)
	}
	// Whether or not an initializer got as far as writing the list before
	// its run was killed, nothing of it is taken: the store holds no list,
	// and no list is left where a restart would take it for a person's.
	if l := p.canonicalList(); l != nil {
		t.Errorf("the store took a list written without gates: %+v\n%s", l, log)
	}
	if disk, err := p.featureListIfAny(); err != nil || disk != nil {
		t.Errorf("feature-list.json holds a list written without gates (%v)\n%s", err, log)
	}
}
