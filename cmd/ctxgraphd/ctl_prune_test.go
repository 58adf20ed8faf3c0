package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// ctl traces --prune asks the daemon to compact and says what was dropped
// and what kept; a filter or a bad age is a usage mistake.
func TestCtlTracesPrune(t *testing.T) {
	proj := ctlProject(t)
	b := &controltest.Backend{Pruned: control.PruneResult{Before: "2026-10-26T00:00:00Z", Features: []string{"F-001", "F-002"},
		Examined: 120, Folded: 40, Dropped: 5, Kept: 75, CommandsDropped: 30, CommandsKept: 8}}
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "traces", "--prune", "--older-than", "720h")
	want := "compacted the traces before 2026-10-26T00:00:00Z of 2 finished features (F-001, F-002)\n" +
		"  120 examined\n" +
		"  40 repeated refusals folded into the newest of their kind in their run (its count says how many)\n" +
		"  5 tool-level records of the hooks dropped\n" +
		"  75 kept (verdicts, decisions, corrections, lessons, transitions, what a person wrote, the first refusal of each kind)\n" +
		"  commands of those runs: 30 successful ones dropped, 8 failures and tests kept\n"
	if code != 0 || out != want {
		t.Errorf("ctl traces --prune = %d %q\n%s\nwant:\n%s", code, errOut, out, want)
	}
	if calls := b.Calls(); !slices.Equal(calls, []controltest.Call{{Method: "PruneTraces", Note: "720h"}}) {
		t.Errorf("calls %+v", calls)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--prune", "--older-than", "30"}, `--older-than "30": want a duration >= 0 with a unit`},
		{[]string{"--prune", "--feature", "F-001"}, "--prune takes no query and no filter (--feature)"},
		{[]string{"--prune", "scope"}, "--prune takes no query and no filter (scope)"},
		{[]string{"--older-than", "1h"}, "--older-than goes with --prune"},
	} {
		_, errOut, code := ctl(t, append([]string{"ctl", "--project", proj.Dir, "traces"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, exitUsage, tt.want)
		}
	}
}
