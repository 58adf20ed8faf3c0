package orchestrator

import (
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// The session's last sweep finds F-001's test failing on the tip, and its
// bisection blames F-002's landing (judge.Miss): F-002 is reopened and
// charged, told which test its change broke; F-001 is reopened too, not
// charged. A miss the bisection could pin on no landing (the test fails
// where it last passed) is its own feature's, charged, as any verdict
// that did not hold. Each is worked again, and the session ends done.
func TestALastSweepsMissReopensTheLandingThatBrokeIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		miss     judge.Miss
		charged  map[string]int // failures after the night, by feature
		reopened []string       // coded again, in the order they are worked
	}{
		{"blamed on F-002's landing", judge.Miss{Of: "F-001", Landing: 2, Feature: "F-002"}, map[string]int{"F-001": 0, "F-002": 1, "F-003": 0}, []string{"F-002", "F-001"}},
		{"blamed on F-003's landing", judge.Miss{Of: "F-001", Landing: 3, Feature: "F-003"}, map[string]int{"F-001": 0, "F-002": 0, "F-003": 1}, []string{"F-003", "F-001"}},
		{"on no landing", judge.Miss{Of: "F-001", Landing: 1}, map[string]int{"F-001": 1, "F-002": 0, "F-003": 0}, []string{"F-001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.runner.script[role.Initializer] = initializerWrites(3)
			o := h.orchestrator(false)
			ctx := running(t, o)
			tested := func(n int) func() bool {
				return func() bool { s, _ := o.Status(ctx); return s.State == "done" && s.Features.Tested == n }
			}
			eventually.True(t, 30*time.Second, tested(3), "the three features tested")
			worked := len(h.runner.runs())
			miss := tc.miss
			o.runEvents <- tipSwept{sweep: judge.TipSweep{Ran: 3, Broken: []judge.Regression{{
				Feature: "F-001", Miss: &miss,
				Test: judge.TestResult{Command: "sh tests/F-001.sh", ExitCode: 1, Output: "F-001 does not work\n"},
			}}}}
			eventually.True(t, 30*time.Second, func() bool { return len(h.runner.runs()) > worked && tested(3)() }, "the reopened features worked again")
			again := roles(h.runner.runs()[worked:])
			for _, id := range tc.reopened {
				if !strings.Contains(again, "coding:"+id) {
					t.Errorf("runs after the last sweep: %s; want %s coded again", again, id)
				}
			}
			for _, id := range []string{"F-001", "F-002", "F-003"} {
				if !strings.Contains(strings.Join(tc.reopened, " "), id) && strings.Contains(again, "coding:"+id) {
					t.Errorf("runs after the last sweep: %s; %s was not reopened", again, id)
				}
			}
			st := h.session()
			for id, want := range tc.charged {
				if got := st.Counters[id].Failures; got != want {
					t.Errorf("%s's failures = %d, want %d (counters %+v)", id, got, want, st.Counters[id])
				}
			}
			vs, err := h.st.Traces(store.TraceFilter{Type: control.TraceViolation})
			if err != nil {
				t.Fatal(err)
			}
			var said []string
			for _, v := range vs {
				if v.Code == codeSelectionMissed {
					said = append(said, v.Context.Feature+": "+v.Event.WhatHappened)
				}
			}
			if tc.miss.Feature == "" {
				if len(said) != 0 {
					t.Errorf("a miss on no landing traced as selection's: %q", said)
				}
				return
			}
			want := "selection missed F-001 at landing " + string(rune('0'+tc.miss.Landing))
			if len(said) != 2 || !strings.HasPrefix(said[0], tc.miss.Feature+": "+tc.miss.Feature+" reopened: "+want) ||
				!strings.HasPrefix(said[1], "F-001: F-001 reopened, not charged: "+want) {
				t.Errorf("the traces of the miss: %q; want %s's, charged, then F-001's, not charged, each saying %q", said, tc.miss.Feature, want)
			} else if !strings.Contains(said[0], "; the session's last sweep found it and bisected it to that landing") {
				t.Errorf("the trace does not say what found the miss: %q", said[0])
			}
		})
	}
}
