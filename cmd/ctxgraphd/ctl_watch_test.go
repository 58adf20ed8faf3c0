package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
)

func TestProgressBar(t *testing.T) {
	tests := []struct {
		c    control.FeatureCounts
		want string
	}{
		{control.FeatureCounts{}, "[..........]"},
		{control.FeatureCounts{Total: 4, Tested: 2, Pending: 2}, "[#####.....]"},
		{control.FeatureCounts{Total: 4, Tested: 2, Blocked: 1, Pending: 1}, "[#####xx...]"},
		{control.FeatureCounts{Total: 3, Tested: 3}, "[##########]"},
		{control.FeatureCounts{Total: 3, Blocked: 3}, "[xxxxxxxxxx]"},
		{control.FeatureCounts{Total: 3, Tested: 2, Blocked: 1}, "[######xxxx]"},
		{control.FeatureCounts{Total: 3, Tested: 1, Pending: 2}, "[###.......]"},
		{control.FeatureCounts{Total: 1, Tested: 1}, "[##########]"},
	}
	for _, tt := range tests {
		if got := progressBar(tt.c, 10); got != tt.want {
			t.Errorf("progressBar(%+v) = %s, want %s", tt.c, got, tt.want)
		}
	}
}

// The view says what a person needs at a glance, and only what is there.
func TestRenderWatch(t *testing.T) {
	now := time.Date(2026, 11, 23, 23, 0, 0, 0, time.Local)
	until := now.Add(90 * time.Second)
	st := control.Status{State: "code", Project: "/home/me/todo", Confined: true, CostUSD: 1.5, Runs: 3,
		Features: control.FeatureCounts{Total: 2, Tested: 1, InProgress: 1},
		Current:  &control.RunInfo{ID: "run-000004", Role: "coding-agent", Feature: "F-002", Attempt: 2, StartedAt: now.Add(-75 * time.Second), ToolCalls: 7, LastTool: "Bash: go test ./...\n  -run X"}}
	got := renderWatch(st, now)
	for _, want := range []string{
		`ctxgraphd  /home/me/todo  23:00:00`,
		`(?m)^state\s+code$`,
		`(?m)^features\s+\[#{15}\.{15}\]  1 tested, 1 in progress of 2$`,
		`(?m)^run\s+run-000004  coding-agent F-002 attempt 2  1m15s  7 tool calls$`,
		`(?m)^last tool\s+Bash: go test \./\.\.\. -run X$`,
		`(?m)^cost\s+\$1\.50 over 3 runs$`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("the view does not match %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "confinement") || strings.Contains(got, "message") {
		t.Errorf("the view says what is not there:\n%s", got)
	}
	st.Current, st.State, st.WaitingUntil, st.Confined, st.Message = nil, "waiting", &until, false, "rate or usage limit reached (HTTP 429)"
	got = renderWatch(st, now)
	for _, want := range []string{"waiting until 23:01:30 (in 1m30s)", "run", "none", "confinement", "OFF", "message", "rate or usage limit reached (HTTP 429)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the view lacks %q:\n%s", want, got)
		}
	}
}

// With lanes the view shows every lane's run: its feature, role, attempt,
// how long it has run and its last tool call; and what the daemon itself
// is doing beside them.
func TestRenderWatchShowsEveryLane(t *testing.T) {
	now := time.Date(2026, 11, 23, 23, 0, 0, 0, time.Local)
	st := control.Status{State: "code", Project: "/home/me/todo", Confined: true, Working: "judging run-000005 (tester-agent F-003)",
		Features: control.FeatureCounts{Total: 3, InProgress: 2, Completed: 1},
		Lanes: []control.RunInfo{
			{ID: "run-000006", Role: "coding-agent", Feature: "F-001", Attempt: 1, StartedAt: now.Add(-2 * time.Minute), ToolCalls: 3, LastTool: "Write: src/a.go"},
			{ID: "run-000007", Role: "tester-agent", Feature: "F-002", Attempt: 2, StartedAt: now.Add(-10 * time.Second), ToolCalls: 1, LastTool: "Bash: go test ./b/"},
		}}
	got := renderWatch(st, now)
	for _, want := range []string{
		`(?m)^lane F-001\s+run-000006  coding-agent F-001 attempt 1  2m0s  3 tool calls\n\s*last tool\s+Write: src/a\.go$`,
		`(?m)^lane F-002\s+run-000007  tester-agent F-002 attempt 2  10s  1 tool call\n\s*last tool\s+Bash: go test \./b/$`,
		`(?m)^daemon\s+judging run-000005 \(tester-agent F-003\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("the view does not match %s:\n%s", want, got)
		}
	}
	if regexp.MustCompile(`(?m)^run\s`).MatchString(got) {
		t.Errorf("the view shows a single run beside the lanes:\n%s", got)
	}
}

// The wait for the plan's approval shows in the view with how to end it,
// within the message's cut, however many features the plan has.
func TestRenderWatchShowsHowToApproveThePlan(t *testing.T) {
	now := time.Date(2026, 11, 23, 23, 0, 0, 0, time.Local)
	for _, n := range []int{1, 12, 100000} {
		l := &progress.List{Version: 1}
		for i := range n {
			l.Features = append(l.Features, progress.Feature{ID: fmt.Sprintf("F-%06d", i), Title: "t", Status: progress.Pending})
		}
		a := statemachine.Decide(statemachine.Input{List: l, AwaitApproval: true})
		st := control.Status{State: "waiting", Project: "/home/me/todo", Confined: true, Message: a.Reason, Features: control.FeatureCounts{Total: n, Pending: n}}
		if got := renderWatch(st, now); !strings.Contains(got, "ctxgraphd ctl approve") || !strings.Contains(got, fmt.Sprintf("its %d features", n)) {
			t.Errorf("the view of a plan of %d features waiting does not say how to approve it:\n%s", n, got)
		}
	}
}
