// Package report says what happened in a project, for the person who
// started the night and reads it in the morning: each feature's outcome,
// attempts, verdict and commit, why a blocked one is blocked, the gates'
// refusals, costs and time, and the session's timeline.
//
// A report is built from the state of record alone (the store), so that it
// reads the same from a running daemon (over its socket) as from the
// store it left behind; it renders as Markdown, JSON, or one
// self-contained HTML page.
package report

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Report is what happened in a project.
type Report struct {
	Project     string    `json:"project"`
	Dir         string    `json:"dir"`
	GeneratedAt time.Time `json:"generated_at"`
	// State is the session's state (done, stopped, waiting, …) and
	// Message why it is there.
	State   string    `json:"state"`
	Message string    `json:"message,omitempty"`
	Started time.Time `json:"started,omitzero"` // the first transition
	Last    time.Time `json:"last,omitzero"`    // the last transition or run's end
	Totals  Totals    `json:"totals"`
	Cost    Cost      `json:"cost"`
	// Features are in the list's order.
	Features []Feature `json:"features"`
	// Runs are the timeline, in the order they started.
	Runs []Run `json:"runs"`
	// Refusals are what the gates refused or put back, oldest first.
	Refusals []Refusal `json:"refusals"`
}

// Totals count the session.
type Totals struct {
	Features int `json:"features"`
	Tested   int `json:"tested"`
	Blocked  int `json:"blocked"`
	Open     int `json:"open"` // neither tested nor blocked
	Runs     int `json:"runs"`
	Refusals int `json:"refusals"`
	// LostToRefusals is Run.LostToRefusals added up: the turns a night's
	// false refusals cost.
	LostToRefusals int `json:"lost_to_refusals"`
	// AgentTime is the time runs took, start to end, added up.
	AgentTime time.Duration `json:"agent_time_ns"`
}

// Cost says where the money went.
type Cost struct {
	SessionUSD float64            `json:"session_usd"`
	ByRole     map[string]float64 `json:"by_role"`
	// PerTestedFeatureUSD is the session's cost over its tested features
	// (0 when none is): what a green feature cost, failures included.
	PerTestedFeatureUSD float64 `json:"per_tested_feature_usd"`
}

// Feature is one feature's night.
type Feature struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Outcome string `json:"outcome"` // tested, blocked, completed (not yet tested), in_progress, pending
	Test    string `json:"test,omitempty"`
	// Attempts is the highest coding attempt, Runs every run of it.
	Attempts int           `json:"attempts"`
	Runs     int           `json:"runs"`
	CostUSD  float64       `json:"cost_usd"`
	Time     time.Duration `json:"time_ns"`
	// Commit is the commit of exactly the tree it was tested on; Branch
	// the branch that took it, "" when only its ref did.
	Commit string `json:"commit,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Why is why it is blocked, or what its last attempt failed on.
	Why      string `json:"why,omitempty"`
	Refusals int    `json:"refusals"`
}

// Run is one run on the timeline.
type Run struct {
	ID      string    `json:"id"`
	Role    string    `json:"role"`
	Feature string    `json:"feature,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	// Outcome is ok, failed, interrupted, transient, or "" in flight.
	Outcome string  `json:"outcome"`
	Failure string  `json:"failure,omitempty"`
	CostUSD float64 `json:"cost_usd"`
	Turns   int     `json:"turns"`
	Summary string  `json:"summary,omitempty"`
	Commit  string  `json:"commit,omitempty"`
	// LostToRefusals counts the turns a tester run lost to refusals of
	// honest work: the refusals of its claim (tested-needs-evidence) and
	// of its stop (tester-must-test) before the verdict accepted its claim
	// in the same run. A refusal the run never got past is not counted:
	// it may have been right.
	LostToRefusals int `json:"lost_to_refusals,omitempty"`
}

// Refusal is a gate's refusal or revert.
type Refusal struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Feature string    `json:"feature,omitempty"`
	Role    string    `json:"role,omitempty"`
	Gate    string    `json:"gate,omitempty"`
	Code    string    `json:"code,omitempty"`
	What    string    `json:"what"`
}

// Source is the state of record a report is built from.
type Source interface {
	Load() (store.State, error)
	Runs() ([]store.Run, error)
	Transitions() ([]store.Transition, error)
	Traces(store.TraceFilter) ([]store.Trace, error)
}

// Build reads src and says what happened in the project.
func Build(src Source, project, dir string, now time.Time) (Report, error) {
	st, err := src.Load()
	if err != nil {
		return Report{}, err
	}
	runs, err := src.Runs()
	if err != nil {
		return Report{}, err
	}
	trs, err := src.Transitions()
	if err != nil {
		return Report{}, err
	}
	traces, err := src.Traces(store.TraceFilter{})
	if err != nil {
		return Report{}, err
	}
	r := Report{Project: project, Dir: dir, GeneratedAt: now.UTC(), State: st.Session.State, Message: st.Session.Message,
		Cost: Cost{ByRole: map[string]float64{}}, Features: []Feature{}, Runs: []Run{}, Refusals: []Refusal{}}
	if len(trs) > 0 {
		r.Started, r.Last = trs[0].Time, trs[len(trs)-1].Time
	}

	var list *progress.List
	if len(st.FeatureList) > 0 {
		// The canonical list, as the daemon last accepted it; unreadable
		// would be a broken store, and the runs still say what happened.
		list, _ = progress.Parse(st.FeatureList)
	}
	perFeature := map[string]*Feature{}
	if list != nil {
		for _, f := range list.Features {
			c := st.Counters[f.ID]
			rf := Feature{ID: f.ID, Title: f.Title, Outcome: outcome(f), Test: f.Test, CostUSD: c.CostUSD,
				Commit: c.Commit, Branch: c.Branch, Why: firstNonEmpty(c.LastFailure, c.RedDetail)}
			if f.Tested {
				rf.Why = "" // what went wrong before it passed is in its runs
			}
			r.Features = append(r.Features, rf)
		}
		for i := range r.Features {
			perFeature[r.Features[i].ID] = &r.Features[i]
		}
	}

	for _, run := range runs {
		rr := Run{ID: run.ID, Role: run.Role, Feature: run.Feature, Attempt: run.Attempt, Start: run.StartedAt, End: run.EndedAt,
			Outcome: run.Outcome, Failure: run.Failure, CostUSD: run.CostUSD, Turns: run.NumTurns, Summary: run.Summary, Commit: run.Commit}
		r.Runs = append(r.Runs, rr)
		r.Cost.SessionUSD += run.CostUSD
		r.Cost.ByRole[run.Role] += run.CostUSD
		d := time.Duration(0)
		if !run.EndedAt.IsZero() {
			d = run.EndedAt.Sub(run.StartedAt)
			r.Totals.AgentTime += d
			if run.EndedAt.After(r.Last) {
				r.Last = run.EndedAt
			}
		}
		if f := perFeature[run.Feature]; f != nil {
			f.Runs++
			f.Time += d
			if run.Role == "coding-agent" {
				f.Attempts = max(f.Attempts, run.Attempt)
			}
		}
	}
	slices.SortStableFunc(r.Runs, func(a, b Run) int { return a.Start.Compare(b.Start) })

	for _, t := range traces {
		switch {
		case t.Type == store.TraceViolation:
			r.Refusals = append(r.Refusals, Refusal{ID: t.ID, Time: t.Timestamp, Feature: t.Context.Feature, Role: t.Context.Agent,
				Gate: t.Gate, Code: t.Code, What: t.Event.WhatHappened})
			if f := perFeature[t.Context.Feature]; f != nil {
				f.Refusals++
			}
		case t.Type == store.TraceDecision && t.Context.Feature != "":
			// The block's own words: why a person should look.
			if f := perFeature[t.Context.Feature]; f != nil && f.Outcome == "blocked" {
				if why, ok := strings.CutPrefix(t.Event.WhatHappened, f.ID+" blocked: "); ok {
					f.Why = why
				}
			}
		}
	}
	slices.SortStableFunc(r.Refusals, func(a, b Refusal) int { return a.Time.Compare(b.Time) })
	lost := lostToRefusals(traces)
	for i := range r.Runs {
		r.Runs[i].LostToRefusals = lost[r.Runs[i].ID]
		r.Totals.LostToRefusals += lost[r.Runs[i].ID]
	}

	for _, f := range r.Features {
		r.Totals.Features++
		switch f.Outcome {
		case "tested":
			r.Totals.Tested++
		case "blocked":
			r.Totals.Blocked++
		default:
			r.Totals.Open++
		}
	}
	r.Totals.Runs = len(r.Runs)
	r.Totals.Refusals = len(r.Refusals)
	if r.Totals.Tested > 0 {
		r.Cost.PerTestedFeatureUSD = r.Cost.SessionUSD / float64(r.Totals.Tested)
	}
	return r, nil
}

// lostToRefusals counts, by run, the refusals of a claim or a stop that
// came before the verdict accepted the run's claim (its approval).
func lostToRefusals(traces []store.Trace) map[string]int {
	accepted := map[string]time.Time{}
	for _, t := range traces {
		if t.Type == store.TraceApproval && t.Context.Run != "" {
			accepted[t.Context.Run] = t.Timestamp
		}
	}
	lost := map[string]int{}
	for _, t := range traces {
		at, ok := accepted[t.Context.Run]
		if !ok || t.Type != store.TraceViolation || t.Timestamp.After(at) {
			continue
		}
		if t.Gate == "tested-needs-evidence" || t.Gate == "tester-must-test" {
			lost[t.Context.Run]++
		}
	}
	return lost
}

func outcome(f progress.Feature) string {
	switch {
	case f.Tested:
		return "tested"
	case f.Status == progress.Blocked:
		return "blocked"
	}
	return string(cmp.Or(f.Status, progress.Pending))
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
