package orchestrator

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/judge"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// judgeRun is a laneJudge whose JudgeRun answers with jd.
type judgeRun struct {
	laneJudge
	jd judge.Judgement
}

func (j judgeRun) JudgeRun(context.Context, judge.RunEnd) judge.Judgement { return j.jd }

// A judging cut short is an interruption, whichever way it was cut: the
// session stopped while it ran (a coder's run, judged with no test run of
// the daemon's, as much as a tester's), or the daemon's test run in it
// was interrupted. Its judgement is then not the run's verdict: the run
// is redone. A judging that ran to its end is not one.
func TestAJudgingCutShortIsInterrupted(t *testing.T) {
	interrupted := &judge.TestResult{Command: "sh t.sh", ExitCode: -1, Interrupted: true}
	passed := &judge.TestResult{Command: "sh t.sh"}
	for _, tc := range []struct {
		name    string
		stopped bool // the session stopped while the judging ran
		test    *judge.TestResult
		want    string
	}{
		{"a coder's run, the session stopped", true, nil, "stopped"},
		{"a tester's run, the session stopped", true, passed, "stopped"},
		{"its test run interrupted", false, interrupted, "stopped"},
		{"both", true, interrupted, "stopped"},
		{"a coder's run judged to its end", false, nil, ""},
		{"a tester's run judged to its end", false, passed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lane{deps: &laneDeps{judge: judgeRun{jd: judge.Judgement{Test: tc.test}}, log: zap.NewNop()}, project: true}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.stopped {
				cancel()
			}
			events := make(chan any, 1)
			l.judge(ctx, cancel, judging{ev: runJudged{run: store.Run{ID: "run-000003"}}}, events)
			ev, ok := (<-events).(runJudged)
			if !ok || ev.run.ID != "run-000003" {
				t.Fatalf("the judging sent %+v; want run-000003's judgement", ev)
			}
			if ev.interrupted != tc.want {
				t.Errorf("interrupted %q; want %q", ev.interrupted, tc.want)
			}
			if ctx.Err() == nil {
				t.Error("the judging's context was not released at its end")
			}
		})
	}
}
