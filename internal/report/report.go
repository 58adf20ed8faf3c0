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

	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"

	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// Source is the state of record a report is built from.
type Source interface {
	Load() (store.State, error)
	Runs() ([]store.Run, error)
	Transitions() ([]store.Transition, error)
	Traces(store.TraceFilter) ([]control.Trace, error)
}

// Build reads src and says what happened in the project.
func Build(src Source, project, dir string, now time.Time) (control.Report, error) {
	st, err := src.Load()
	if err != nil {
		return control.Report{}, err
	}
	runs, err := src.Runs()
	if err != nil {
		return control.Report{}, err
	}
	trs, err := src.Transitions()
	if err != nil {
		return control.Report{}, err
	}
	traces, err := src.Traces(store.TraceFilter{})
	if err != nil {
		return control.Report{}, err
	}
	r := control.Report{Project: project, Dir: dir, GeneratedAt: now.UTC(), State: st.Session.State, Message: st.Session.Message,
		Cost: control.ReportCost{ByRole: map[string]float64{}}, Features: []control.ReportFeature{}, Runs: []control.ReportRun{}, Refusals: []control.Refusal{}}
	if len(trs) > 0 {
		r.Started, r.Last = trs[0].Time, trs[len(trs)-1].Time
	}

	var list *progress.List
	if len(st.FeatureList) > 0 {
		// The canonical list, as the daemon last accepted it; unreadable
		// would be a broken store, and the runs still say what happened.
		list, _ = progress.Parse(st.FeatureList)
	}
	perFeature := map[string]*control.ReportFeature{}
	if list != nil {
		for _, f := range list.Features {
			c := st.Counters[f.ID]
			rf := control.ReportFeature{ID: f.ID, Title: f.Title, Outcome: outcome(f), Test: f.Test, CostUSD: c.CostUSD,
				Commit: c.Commit, Branch: c.Branch, OffBranch: c.OffBranch, Why: firstNonEmpty(c.LastFailure, c.RedDetail)}
			if rf.Outcome == control.OutcomeBlocked {
				rf.Kept = branch.BlockedRef(f.ID)
			}
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
		rr := control.ReportRun{ID: run.ID, Role: run.Role, Feature: run.Feature, Attempt: run.Attempt, Start: run.StartedAt, End: run.EndedAt,
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
	slices.SortStableFunc(r.Runs, func(a, b control.ReportRun) int { return a.Start.Compare(b.Start) })

	for _, t := range traces {
		switch {
		case t.Type == control.TraceViolation:
			r.Refusals = append(r.Refusals, control.Refusal{ID: t.ID, Time: t.Timestamp, Feature: t.Context.Feature, Role: t.Context.Agent,
				Gate: t.Gate, Code: t.Code, What: t.Event.WhatHappened})
			if f := perFeature[t.Context.Feature]; f != nil {
				f.Refusals++
			}
		case t.Type == control.TraceDecision && t.Context.Feature != "":
			// The block's own words: why a person should look.
			if f := perFeature[t.Context.Feature]; f != nil && f.Outcome == "blocked" {
				if why, ok := strings.CutPrefix(t.Event.WhatHappened, f.ID+" blocked: "); ok {
					f.Why = why
				}
			}
		}
	}
	slices.SortStableFunc(r.Refusals, func(a, b control.Refusal) int { return a.Time.Compare(b.Time) })
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
func lostToRefusals(traces []control.Trace) map[string]int {
	accepted := map[string]time.Time{}
	for _, t := range traces {
		if t.Type == control.TraceApproval && t.Context.Run != "" {
			accepted[t.Context.Run] = t.Timestamp
		}
	}
	lost := map[string]int{}
	for _, t := range traces {
		at, ok := accepted[t.Context.Run]
		if !ok || t.Type != control.TraceViolation || t.Timestamp.After(at) {
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
		return control.OutcomeTested
	case f.Status == progress.Blocked:
		return control.OutcomeBlocked
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
