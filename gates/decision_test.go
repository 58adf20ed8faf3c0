package gates

import (
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// A decision blocks when its gate enforces: the mode a gate decides in
// and the one control.HookDecision.Blocks reads are the same word.
func TestADecisionBlocksWhenItsGateEnforces(t *testing.T) {
	for _, tt := range []struct {
		d    *control.HookDecision
		want bool
	}{
		{decide(Modes{}, Scope, "out_of_scope", "m", "s"), true},
		{decide(Modes{Scope: Warn}, Scope, "out_of_scope", "m", "s"), false},
		{decide(Modes{Scope: Off}, Scope, "out_of_scope", "m", "s"), false},
	} {
		if got := tt.d.Blocks(); got != tt.want {
			t.Errorf("%+v: Blocks() = %v, want %v", tt.d, got, tt.want)
		}
	}
}
