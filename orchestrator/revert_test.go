package orchestrator

import (
	"context"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// A coding agent that writes the list where no hook sees it (Bash, a
// script) and sets its own tested, or renames another feature, is reverted,
// and each revert is a violation of the gate the hook would have named.
func TestRevertsAreTracedUnderTheirGate(t *testing.T) {
	tests := []struct {
		name   string
		change func(l *progress.List, self string)
		want   string // gate of the revert
		field  string
	}{
		{"own tested", func(l *progress.List, self string) { l.Feature(self).Tested = true }, gates.RoleWritePolicy, "tested"},
		{"another feature's title", func(l *progress.List, self string) { l.Feature("F-002").Title = "renamed" }, gates.RoleWritePolicy, "title"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
				res := coderCompletes(ctx, spec, h)
				if spec.FeatureID == "F-001" && spec.Attempt == 1 {
					h.edit(func(l *progress.List) { tt.change(l, spec.FeatureID) })
				}
				return res
			}
			if err := h.runToEnd(); err != nil {
				t.Fatal(err)
			}
			// The honest tester's verdict is what makes F-001 tested.
			if got, want := summary(h.list()), "F-001=tested F-002=tested"; got != want {
				t.Fatalf("features = %s, want %s", got, want)
			}
			if f := h.list().Feature("F-002"); f.Title != "feature F-002" {
				t.Fatalf("F-002 title %q: the rename was not reverted", f.Title)
			}
			trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
			if err != nil {
				t.Fatal(err)
			}
			if len(trs) != 1 {
				t.Fatalf("%d violations, want the one revert: %+v", len(trs), trs)
			}
			v := trs[0]
			if v.Gate != tt.want || v.Code != "reverted" || v.Source != control.SourceAuto ||
				v.Context.Agent != string(role.Coder) || v.Context.Feature != "F-001" || v.Context.Run == "" {
				t.Errorf("revert traced as %+v, want gate %s, code reverted, the coding run of F-001", v, tt.want)
			}
		})
	}
}

func TestRevertGate(t *testing.T) {
	tested := progress.Change{FeatureID: "F-001", Field: "tested", Kind: progress.Modified, Old: false, New: true}
	untested := progress.Change{FeatureID: "F-001", Field: "tested", Kind: progress.Modified, Old: true, New: false}
	title := progress.Change{FeatureID: "F-001", Field: "title", Kind: progress.Modified, Old: "a", New: "b"}
	removed := progress.Change{FeatureID: "F-001", Field: "feature", Kind: progress.Removed}
	active := func(role role.Role) *activeRun {
		return &activeRun{run: store.Run{Role: string(role), Feature: "F-001"}}
	}
	tests := []struct {
		name   string
		active *activeRun
		c      progress.Change
		want   string
	}{
		{"coder sets tested", active(role.Coder), tested, gates.RoleWritePolicy},
		{"initializer sets tested", active(role.Initializer), tested, gates.TestedNeedsEvidence},
		{"a person sets tested between runs", nil, tested, gates.TestedNeedsEvidence},
		{"coder clears tested", active(role.Coder), untested, gates.RoleWritePolicy},
		{"tester renames", active(role.Tester), title, gates.RoleWritePolicy},
		{"coder removes a feature", active(role.Coder), removed, gates.RoleWritePolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := revertGate(tt.active, tt.c); got != tt.want {
				t.Errorf("revertGate = %s, want %s", got, tt.want)
			}
		})
	}
}
