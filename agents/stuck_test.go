package agents

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// The same tool call failing stuck_after times in a row makes the run
// stuck; anything succeeding in between, or another call failing, starts
// the count over; 0 never calls a run stuck.
func TestStuckWatch(t *testing.T) {
	build := `{"command": "go build ./..."}`
	spaced := `{ "command" : "go build ./..." }`
	vet := `{"command": "go vet ./..."}`
	type step struct {
		input string
		fail  bool
	}
	fail := func(in string) step { return step{in, true} }
	ok := func(in string) step { return step{in, false} }
	tests := []struct {
		name  string
		after int
		steps []step
		want  int // the step (1-based) at which the run is stuck; 0: never
	}{
		{"three in a row", 3, []step{fail(build), fail(build), fail(build)}, 3},
		{"the same input however it is spaced", 3, []step{fail(build), fail(spaced), fail(build)}, 3},
		{"a success in between starts over", 3, []step{fail(build), fail(build), ok(vet), fail(build), fail(build)}, 0},
		{"another failing call starts over", 3, []step{fail(build), fail(build), fail(vet), fail(build), fail(build)}, 0},
		{"said once, not again after", 2, []step{fail(build), fail(build), fail(build)}, 2},
		{"zero: never", 0, []step{fail(build), fail(build), fail(build), fail(build)}, 0},
		{"one: the first failure", 1, []step{ok(build), fail(vet)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newStuckWatch(tt.after)
			got := 0
			for i, s := range tt.steps {
				id := fmt.Sprintf("toolu_%d", i)
				w.call(id, "Bash", json.RawMessage(s.input))
				if on := w.result(id, s.fail); on != "" {
					if got != 0 {
						t.Errorf("stuck again at step %d: %s", i+1, on)
					}
					got = i + 1
					if !strings.HasPrefix(on, "`Bash: go ") || !strings.Contains(on, fmt.Sprintf("failed %d times in a row", tt.after)) {
						t.Errorf("stuck on %q", on)
					}
				}
			}
			if got != tt.want {
				t.Errorf("stuck at step %d, want %d", got, tt.want)
			}
		})
	}
	// A result for a call the watch never saw (a subagent's) counts for
	// nothing.
	w := newStuckWatch(1)
	if on := w.result("toolu_unknown", true); on != "" {
		t.Errorf("an unknown call's failure made the run stuck: %s", on)
	}
}

// A run that goes round in circles is stopped, with its whole group, and
// says on what.
func TestRunStoppedWhenStuck(t *testing.T) {
	use := func(i int) string {
		return fmt.Sprintf(`echo '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"make"}}]}}'; `+
			`echo '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t%d","is_error":true,"content":"make: *** No rule"}]}}'; `, i, i)
	}
	body := `echo '{"type":"system","subtype":"init","session_id":"s-1"}'; ` + use(1) + use(2) + use(3) + `sleep 1000`
	res, _ := runFake(t, Options{StuckAfter: 3, IdleTimeout: time.Minute}, body)
	if res.Ended != EndStuck || res.Stuck != "`Bash: make` failed 3 times in a row with nothing done in between" {
		t.Fatalf("ended %s, stuck %q; want stuck on make", res.Ended, res.Stuck)
	}
	if res.Summary != "stopped as stuck: "+res.Stuck {
		t.Errorf("summary %q", res.Summary)
	}
	if procgroup.Alive(res.PID) {
		t.Errorf("process group %d still has members", res.PID)
	}
}
