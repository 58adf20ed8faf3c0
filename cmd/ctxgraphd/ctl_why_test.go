package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

func whyReport() control.Report {
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	return control.Report{
		Features: []control.ReportFeature{
			{ID: "F-001", Title: "Parse", Outcome: "tested", Test: "go test ./parse", Commit: "abc123", Branch: "main"},
			{ID: "F-002", Title: "Retry", Outcome: "blocked", Test: "sh tests/F-002.sh", Why: "3 of 3 attempts failed", CostUSD: 0.42, Kept: "refs/ctxgraphd/blocked/F-002"},
			{ID: "F-003", Title: "Later", Outcome: "pending"},
			{ID: "F-004", Title: "Export", Outcome: "tested", Test: "go test ./export", Commit: "def456",
				OffBranch: "main moved while F-004 was worked on, and the tested tree does not hold README.md as the new commits do"},
		},
		Runs: []control.ReportRun{
			{ID: "run-000002", Role: "coding-agent", Feature: "F-002", Attempt: 1, Start: at, Outcome: "ok", CostUSD: 0.1, Turns: 7, Summary: "Implemented F-002"},
			{ID: "run-000003", Role: "tester-agent", Feature: "F-002", Attempt: 1, Start: at, Outcome: "failed", CostUSD: 0.05, Turns: 3, Summary: "the test failed"},
			{ID: "run-000004", Role: "coding-agent", Feature: "F-001", Attempt: 1, Start: at, Outcome: "ok"},
			{ID: "run-000005", Role: "coding-agent", Feature: "F-002", Attempt: 2, Start: at, Outcome: "ok", Turns: 1},
		},
	}
}

func TestBuildDossier(t *testing.T) {
	trs := []control.Trace{
		{ID: "tr-4", Type: "violation", Gate: "scope", Code: "out_of_scope", Context: control.TraceContext{Feature: "F-002", Run: "run-000002"},
			Event: control.TraceEvent{WhatHappened: "Write src/shared.txt", WhatWasCorrect: "write the feature's own files"}},
		{ID: "tr-9", Type: "correction", Context: control.TraceContext{Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "F-002 reopened by ctl unblock", WhatWasCorrect: "use the v2 API"}},
	}
	features := []control.Feature{{ID: "F-002", Note: "use the v2 API"}}
	d, err := buildDossier("F-002", whyReport(), features, trs, []string{".claude/progress/evidence/F-002/daemon-diagnosis-attempt-1.log"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 2 || len(d.Attempts[0].Runs) != 2 || len(d.Attempts[1].Runs) != 1 {
		t.Fatalf("attempts = %+v", d.Attempts)
	}
	if got := d.Attempts[0].Runs[0].Traces; len(got) != 1 || got[0].ID != "tr-4" {
		t.Errorf("run-000002's traces = %+v", got)
	}
	if len(d.Other) != 1 || d.Other[0].ID != "tr-9" || d.Note != "use the v2 API" {
		t.Errorf("other %+v note %q", d.Other, d.Note)
	}
	var out strings.Builder
	if err := printDossier(&out, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"F-002  Retry: blocked\n",
		"why      3 of 3 attempts failed\n",
		"note     use the v2 API\n",
		"\nattempt 1\n  run-000002 coding-agent: ok, $0.10, 7 turns\n      said: Implemented F-002\n      tr-4 violation by scope (out_of_scope): Write src/shared.txt\n          instead: write the feature's own files\n  run-000003 tester-agent: failed, $0.05, 3 turns\n      said: the test failed\n",
		"\nattempt 2\n  run-000005 coding-agent: ok, $0.00, 1 turn\n",
		"\noutside the runs\n  tr-9 correction: F-002 reopened by ctl unblock\n      instead: use the v2 API\n",
		"\ntest outputs and evidence\n  .claude/progress/evidence/F-002/daemon-diagnosis-attempt-1.log\n",
		"ctxgraphd ctl unblock F-002 --note",
		"refs/ctxgraphd/blocked/F-002",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the dossier lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "run-000004") {
		t.Errorf("another feature's run in the dossier:\n%s", out.String())
	}
}

func TestBuildDossierStates(t *testing.T) {
	for _, tt := range []struct{ id, want string }{
		{"F-001", "commit   abc123 on main"},
		{"F-004", "commit   def456 (under its ref only: main moved while F-004 was worked on, and the tested tree does not hold README.md as the new commits do)"},
		{"F-001", "nothing: it passed its own, untouched test"},
		{"F-003", "no run yet"},
		{"F-003", "ctxgraphd ctl skip F-003"},
	} {
		d, err := buildDossier(tt.id, whyReport(), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		printDossier(&out, d)
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s: lacks %q:\n%s", tt.id, tt.want, out.String())
		}
	}
	if _, err := buildDossier("F-9", whyReport(), nil, nil, nil); err == nil || err.Error() != "no feature F-9; the features are F-001, F-002, F-003, F-004" {
		t.Errorf("unknown feature: %v", err)
	}
	if _, err := buildDossier("F-9", control.Report{}, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "no feature list yet") {
		t.Errorf("no list: %v", err)
	}
}

// TestDossierCountsTurnsLostToRefusals: a run that lost turns to refusals of
// work the verdict then accepted says how many, in the dossier and its JSON.
func TestDossierCountsTurnsLostToRefusals(t *testing.T) {
	rep := whyReport()
	rep.Runs[1].LostToRefusals = 2
	d, err := buildDossier("F-002", rep, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printDossier(&b, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "run-000003 tester-agent: failed, $0.05, 3 turns, 2 turns lost to refusals of work the verdict then accepted") {
		t.Errorf("dossier:\n%s", b.String())
	}
	if strings.Count(b.String(), "lost to refusals") != 1 {
		t.Errorf("only the run that lost turns says so:\n%s", b.String())
	}
	data, _ := json.Marshal(d)
	if !strings.Contains(string(data), `"lost_to_refusals":2`) {
		t.Errorf("JSON: %s", data)
	}
}
