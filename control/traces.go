package control

import (
	"fmt"
	"slices"
	"strings"
)

// Trace types (contract): `ctl traces --type`, scripts and the store name
// them. The store's constants are these.
const (
	TraceDecision   = "decision"
	TraceViolation  = "violation"
	TraceCorrection = "correction"
	TraceApproval   = "approval"
	TraceHandoff    = "handoff"
	TraceTransition = "transition"
	TraceLesson     = "lesson"
)

// Trace sources (contract).
const (
	SourceHook  = "enforcement_hook"
	SourceUser  = "user_correction"
	SourceAuto  = "auto_detected"
	SourceAgent = "agent"
)

// TraceTypes lists the valid trace types.
var TraceTypes = []string{TraceDecision, TraceViolation, TraceCorrection, TraceApproval, TraceHandoff, TraceTransition, TraceLesson}

// CheckTraceType says what is wrong with a trace type asked for: "" for
// none (any type) or a known one, else an error that lists the types.
func CheckTraceType(t string) error {
	if t == "" || slices.Contains(TraceTypes, t) {
		return nil
	}
	return fmt.Errorf("unknown trace type %q; the types are %s", t, strings.Join(TraceTypes, ", "))
}

// The levels of detail of a trace query (TraceQuery.Level): an agent looks
// wide and cheap, then deep.
const (
	LevelMetadata = "metadata" // ids, types, contexts, gates and times: no text
	LevelSummary  = "summary"  // and what happened, cut to a line
	LevelFull     = "full"     // every field, whole
)

// Levels lists the valid levels, cheapest first.
var Levels = []string{LevelMetadata, LevelSummary, LevelFull}

// CheckLevel says what is wrong with a level asked for: "" (the route's
// default) or a known one, else an error that lists the levels.
func CheckLevel(l string) error {
	if l == "" || slices.Contains(Levels, l) {
		return nil
	}
	return fmt.Errorf("unknown level %q; the levels are %s", l, strings.Join(Levels, ", "))
}
