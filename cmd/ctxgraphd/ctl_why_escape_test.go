package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// TestWhyDoesNotPassAgentsTerminalEscapes: `ctl why` prints, to a
// person's terminal, text an agent wrote: its run's final message (the
// run's summary), the trace it stored with store_trace (source agent, of
// its own feature, so in the feature's dossier), and the end of the output
// of the daemon's own run of the test (its code's output, in the feature's
// "why" and in the verdict_rejected trace). textcut.Fold only folds
// whitespace: ESC and the other C0/C1 controls pass through, so an agent
// can erase the line that says its verdict was rejected and draw another
// ("\x1b[1A\x1b[2K"), retitle the terminal, or, in terminals that honour
// OSC 52, set the person's clipboard. graph.Quote escapes the same text
// for agents; nothing escapes it for people.
func TestWhyDoesNotPassAgentsTerminalEscapes(t *testing.T) {
	const forged = "\x1b[1A\x1b[2K\r  run-000003 tester-agent: ok \x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x9b2K"
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	rep := control.Report{
		Features: []control.ReportFeature{{ID: "F-001", Title: "Parse", Outcome: "blocked", Test: "sh tests/F-001.sh",
			Why: "the daemon ran the test itself and it did not pass: `sh tests/F-001.sh` failed (exit 1): " + forged}},
		Runs: []control.ReportRun{{ID: "run-000003", Role: "tester-agent", Feature: "F-001", Attempt: 1, Start: at, Outcome: "failed", Summary: "done " + forged}},
	}
	trs := []control.Trace{{ID: "tr-7", Type: "lesson", Source: "agent", Context: control.TraceContext{Feature: "F-001", Run: "run-000003"},
		Event: control.TraceEvent{WhatHappened: "note " + forged}}}
	d, err := buildDossier("F-001", rep, nil, trs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := printDossier(&out, d); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(out.String(), "\n") {
		if strings.ContainsAny(line, "\x1b\x07\r\u009b") {
			t.Errorf("line %d of `ctl why` carries an agent's terminal control characters: %q", i+1, line)
		}
	}
}

// `ctl traces --id` prints a trace whole, field by field: an agent's trace
// (store_trace) reaches the terminal as text, one line a field.
func TestTraceDetailDoesNotPassAgentsTerminalEscapes(t *testing.T) {
	const forged = "\x1b[1A\x1b[2K\rforged\x1b]52;c;cm0=\x07\nsecond line"
	tr := control.Trace{ID: "tr-7", Type: "lesson", Source: "agent", Context: control.TraceContext{Feature: "F-001", Run: "run-000003"},
		Event: control.TraceEvent{WhatHappened: "note " + forged, WhatWasCorrect: forged, Why: forged}}
	var out strings.Builder
	if err := printTrace(&out, tr); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\r") {
		t.Errorf("the trace's detail carries an agent's terminal control characters: %q", out.String())
	}
	if got := strings.Count(out.String(), "\n"); got != 9 {
		t.Errorf("%d lines, want 9 (one a field):\n%s", got, out.String())
	}
}
