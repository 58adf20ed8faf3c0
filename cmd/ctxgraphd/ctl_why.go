package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func ctlWhyCmd(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "why ID",
		Short: "The dossier of a feature: its attempts, runs, test outputs, refusals, verdicts and what to do next",
		Long: `why tells the story of one feature: every attempt with its runs (role, outcome,
cost, turns, what the agent said), the refusals and corrections of each, the
verdicts and their commits, the daemon's own test outputs kept as evidence, a
person's notes, and what a person can do next. It works for tested, blocked and
in-progress features.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			proj, err := f.findProject()
			if err != nil {
				return err
			}
			id := args[0]
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (dossier, error) {
				rep, err := c.Report(ctx)
				if err != nil {
					return dossier{}, err
				}
				features, err := c.Features(ctx)
				if err != nil {
					return dossier{}, err
				}
				trs, err := c.Traces(ctx, control.TraceQuery{Feature: id, Level: control.LevelFull})
				if err != nil {
					return dossier{}, err
				}
				return buildDossier(id, rep, features, trs, evidenceOf(proj.Dir, id))
			}, printDossier)
		},
	}
}

// dossier is the answer of `ctl why`.
type dossier struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Outcome     string   `json:"outcome"`
	Test        string   `json:"test,omitempty"`
	Why         string   `json:"why,omitempty"`
	Note        string   `json:"note,omitempty"`
	CostUSD     float64  `json:"cost_usd"`
	Commit      string   `json:"commit,omitempty"`
	Branch      string   `json:"branch,omitempty"`
	OffBranch   string   `json:"off_branch,omitempty"`
	Attempts    []whyTry `json:"attempts"`
	Other       []whyEv  `json:"other,omitempty"` // traces of no run: the list's checks, a person's corrections, blocking
	Evidence    []string `json:"evidence,omitempty"`
	NextActions []string `json:"next"`
}

// whyTry is one attempt: its runs, each with what happened in it.
type whyTry struct {
	Attempt int      `json:"attempt"`
	Runs    []whyRun `json:"runs"`
}

type whyRun struct {
	control.ReportRun
	Traces []whyEv `json:"traces,omitempty"`
}

// whyEv is one trace, told in a line.
type whyEv struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Gate string `json:"gate,omitempty"`
	Code string `json:"code,omitempty"`
	What string `json:"what"`
	Fix  string `json:"instead,omitempty"`
}

// buildDossier puts together what the daemon knows of feature id.
func buildDossier(id string, rep control.Report, features []control.Feature, trs []control.Trace, evidence []string) (dossier, error) {
	i := slices.IndexFunc(rep.Features, func(f control.ReportFeature) bool { return f.ID == id })
	if i < 0 {
		ids := make([]string, len(rep.Features))
		for j, f := range rep.Features {
			ids[j] = f.ID
		}
		if len(ids) == 0 {
			return dossier{}, fmt.Errorf("no feature %s: the project has no feature list yet", id)
		}
		return dossier{}, fmt.Errorf("no feature %s; the features are %s", id, strings.Join(ids, ", "))
	}
	rf := rep.Features[i]
	d := dossier{ID: id, Title: rf.Title, Outcome: rf.Outcome, Test: rf.Test, Why: rf.Why, CostUSD: rf.CostUSD,
		Commit: rf.Commit, Branch: rf.Branch, OffBranch: rf.OffBranch, Evidence: evidence, Attempts: []whyTry{}}
	if j := slices.IndexFunc(features, func(f control.Feature) bool { return f.ID == id }); j >= 0 {
		d.Note = features[j].Note
	}
	byRun := map[string][]whyEv{}
	for _, t := range trs {
		ev := whyEv{ID: t.ID, Type: t.Type, Gate: t.Gate, Code: t.Code, What: t.Event.WhatHappened, Fix: t.Event.WhatWasCorrect}
		if t.Context.Run == "" {
			d.Other = append(d.Other, ev)
			continue
		}
		byRun[t.Context.Run] = append(byRun[t.Context.Run], ev)
	}
	for _, r := range rep.Runs {
		if r.Feature != id {
			continue
		}
		n := len(d.Attempts)
		if n == 0 || d.Attempts[n-1].Attempt != r.Attempt {
			d.Attempts = append(d.Attempts, whyTry{Attempt: r.Attempt})
			n++
		}
		d.Attempts[n-1].Runs = append(d.Attempts[n-1].Runs, whyRun{ReportRun: r, Traces: byRun[r.ID]})
	}
	d.NextActions = nextActions(id, rf)
	return d, nil
}

// nextActions says what a person can do about a feature in its state.
func nextActions(id string, f control.ReportFeature) []string {
	switch f.Outcome {
	case control.OutcomeBlocked:
		return []string{
			fmt.Sprintf("ctxgraphd ctl unblock %s --note \"what the next attempt should know\"", id),
			fmt.Sprintf("ctxgraphd ctl pause; fix its test or its description in feature-list.json; ctxgraphd ctl resume, then ctl retry %s", id),
			fmt.Sprintf("leave it set aside: the work of its last attempt is kept under %s", f.Kept),
		}
	case control.OutcomeTested:
		return []string{"nothing: it passed its own, untouched test; its commit holds exactly the tree that passed"}
	}
	return []string{
		"wait: the daemon works on it (ctxgraphd ctl watch shows the run in flight)",
		fmt.Sprintf("ctxgraphd ctl skip %s to set it aside", id),
	}
}

// evidenceOf lists the logs kept for a feature (the daemon's own test runs
// and the tester's evidence), relative to the project.
func evidenceOf(dir, id string) []string {
	base := filepath.Join(dir, paths.ProgressDir, paths.EvidenceDir, id)
	var out []string
	filepath.WalkDir(base, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if rel, err := filepath.Rel(dir, path); err == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return out
}

func printDossier(w io.Writer, d dossier) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s: %s\n", d.ID, d.Title, d.Outcome)
	if d.Test != "" {
		fmt.Fprintf(&b, "test     %s\n", d.Test)
	}
	if d.Commit != "" {
		where := " on " + d.Branch
		if d.Branch == "" {
			where = " (under its ref only"
			if d.OffBranch != "" {
				where += ": " + d.OffBranch
			}
			where += ")"
		}
		fmt.Fprintf(&b, "commit   %s%s\n", d.Commit, where)
	}
	if d.Why != "" {
		fmt.Fprintf(&b, "why      %s\n", textcut.Fold(d.Why))
	}
	if d.Note != "" {
		fmt.Fprintf(&b, "note     %s\n", textcut.Fold(d.Note))
	}
	fmt.Fprintf(&b, "cost     $%.2f\n", d.CostUSD)
	if len(d.Attempts) == 0 {
		b.WriteString("\nno run yet\n")
	}
	for _, a := range d.Attempts {
		if a.Attempt > 0 {
			fmt.Fprintf(&b, "\nattempt %d\n", a.Attempt)
		} else {
			b.WriteString("\nbefore any attempt\n")
		}
		for _, r := range a.Runs {
			fmt.Fprintf(&b, "  %s %s: %s, $%.2f, %s", r.ID, r.Role, cmp.Or(r.Outcome, "in flight"), r.CostUSD, plural(r.Turns, "turn"))
			if r.Failure != "" {
				fmt.Fprintf(&b, " (%s)", r.Failure)
			}
			if r.LostToRefusals > 0 {
				fmt.Fprintf(&b, ", %s lost to refusals of work the verdict then accepted", plural(r.LostToRefusals, "turn"))
			}
			b.WriteByte('\n')
			if r.Summary != "" {
				fmt.Fprintf(&b, "      said: %s\n", textcut.Runes(textcut.Fold(r.Summary), 160))
			}
			for _, t := range r.Traces {
				printWhyEv(&b, "      ", t)
			}
		}
	}
	if len(d.Other) > 0 {
		b.WriteString("\noutside the runs\n")
		for _, t := range d.Other {
			printWhyEv(&b, "  ", t)
		}
	}
	if len(d.Evidence) > 0 {
		b.WriteString("\ntest outputs and evidence\n")
		for _, e := range d.Evidence {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	b.WriteString("\nwhat you can do\n")
	for _, n := range d.NextActions {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func printWhyEv(b *strings.Builder, indent string, t whyEv) {
	kind := t.Type
	if t.Gate != "" {
		kind += " by " + t.Gate
		if t.Code != "" {
			kind += " (" + t.Code + ")"
		}
	}
	fmt.Fprintf(b, "%s%s %s: %s\n", indent, t.ID, kind, textcut.Runes(textcut.Fold(t.What), 200))
	if t.Fix != "" {
		fmt.Fprintf(b, "%s    instead: %s\n", indent, textcut.Runes(textcut.Fold(t.Fix), 200))
	}
}
