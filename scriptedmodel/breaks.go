package scriptedmodel

import (
	"fmt"
	"strings"
)

// The behaviors of this file are about features worked at once (lanes):
// work that passes its own test alone and breaks another feature's once
// both are on one tree, and an order in which features end. Each acts on
// its own files alone; it is the merge that breaks, not a gate.

// BreaksAnother, on attempt 1, writes working code and then, in its
// scope, its override of another feature (BreakingFile): a file whose
// presence the test of the feature it breaks forbids. That feature is
// the next one of the scenario after it, or the first for the last
// (Victim), and its test says so (Overridden) when it finds the file.
// Alone, each feature passes its test; on a tree that holds both, the
// victim's fails. Later attempts are honest. Breaker and victim are of
// kind text, and the victim's test is the initializer's shell script.
const BreaksAnother Behavior = "breaks-another"

// BreakingFile is the file a breaks-another agent of feature id writes,
// in its scope.
func BreakingFile(id string) string { return "src/" + id + "-override.txt" }

// Overridden is what the test of feature victim prints, and fails with,
// when it finds breaker's BreakingFile: whoever reads the failure knows
// which feature broke it, and that it is not the victim's own code.
func Overridden(victim, breaker string) string {
	return fmt.Sprintf("%s is overridden by %s", victim, BreakingFile(breaker))
}

// Victim is the feature a breaks-another agent of feature id breaks: the
// next one of sc after it, or the first for the last; "" when sc has no
// other.
func (sc Scenario) Victim(id string) string {
	if v := sc.otherFeature(id); v != id {
		return v
	}
	return ""
}

// otherFeature is the next feature of the scenario after id, or, for the
// last, the first that is not id; id itself when there is no other.
func (sc Scenario) otherFeature(id string) string {
	for i, f := range sc.Features {
		if f.ID == id && i+1 < len(sc.Features) {
			return sc.Features[i+1].ID
		}
	}
	for _, f := range sc.Features {
		if f.ID != id {
			return f.ID
		}
	}
	return id
}

// breakers are the breaks-another features of sc whose victim is id, in
// the scenario's order.
func (sc Scenario) breakers(id string) []string {
	var out []string
	for _, f := range sc.Features {
		if f.Behavior == BreaksAnother && sc.Victim(f.ID) == id {
			out = append(out, f.ID)
		}
	}
	return out
}

// breakScope is what a feature's scope holds for BreaksAnother besides
// its source: its override, which it writes.
func (f FeatureScript) breakScope() []string {
	if f.Behavior == BreaksAnother {
		return []string{BreakingFile(f.ID)}
	}
	return nil
}

// victimTestBody is the test of text feature id that breakers can break:
// its working line, as every text feature's test wants, and none of
// their overrides.
func victimTestBody(id string, breakers []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\ngrep -qx '%s' %s || exit 1\n", workingLine(id), sourcePath(id))
	for _, br := range breakers {
		fmt.Fprintf(&b, "if test -e %s; then echo '%s'; exit 1; fi\n", BreakingFile(br), Overridden(id, br))
	}
	return b.String()
}

// breakProblem says what is wrong with sc's use of BreaksAnother by the
// feature f, nil when nothing is.
func (sc Scenario) breakProblem(f FeatureScript) error {
	if f.Behavior != BreaksAnother {
		return nil
	}
	if f.Kind != "" && f.Kind != Text {
		return fmt.Errorf("behavior %s writes its override beside a text feature's source (%s); it needs kind %s, not %s", f.Behavior, BreakingFile(f.ID), Text, f.Kind)
	}
	v := sc.Victim(f.ID)
	if v == "" {
		return fmt.Errorf("behavior %s breaks another feature's test, and the scenario has no other feature", f.Behavior)
	}
	for _, o := range sc.Features {
		if o.ID != v {
			continue
		}
		if (o.Kind != "" && o.Kind != Text) || o.PlantsHelper || o.NoTest {
			return fmt.Errorf("behavior %s breaks the test of %s, the next feature, which must be a text feature with the initializer's test (kind %s, no plants_helper, no no_test)", f.Behavior, v, Text)
		}
	}
	return nil
}

// afterProblem says what is wrong with f's After, nil when nothing is.
func (sc Scenario) afterProblem(f FeatureScript) error {
	switch {
	case f.After == "":
		return nil
	case f.After == f.ID:
		return fmt.Errorf("after %q: a feature cannot wait for its own end", f.After)
	}
	for _, o := range sc.Features {
		if o.ID == f.After {
			return nil
		}
	}
	return fmt.Errorf("after %q, which is not a feature of the scenario", f.After)
}

// EndedMark is what the coder of a feature whose After is other prints
// once git in the project shows other's end.
func EndedMark(other string) string { return other + " has ended" }

// awaitEnd is the shell command that waits until feature other has
// ended: its verdict's commit (the daemon's ctxgraphd-feature trailer)
// on the project's branch, or its work kept as blocked. In a lane, the
// project is the clone's origin (a lane is a clone of the project's
// repository), which its runs may read; elsewhere it is the work tree.
// It gives up after nine minutes, within the ten Bash allows.
func awaitEnd(other string) string {
	return fmt.Sprintf(`project=$(git remote get-url origin 2>/dev/null || pwd); n=0
until git -C "$project" log --format=%%B HEAD | grep -qx 'ctxgraphd-feature: %[1]s' || git -C "$project" rev-parse -q --verify refs/ctxgraphd/blocked/%[1]s >/dev/null; do
	n=$((n+1)); [ "$n" -lt 2700 ] || { echo '%[1]s has not ended'; exit 1; }; sleep 0.2
done
echo '%[2]s'`, other, EndedMark(other))
}

// awaitTimeout is the Bash tool's timeout of the waiting step, in
// milliseconds: the most the CLI allows.
const awaitTimeout = 600000

// awaiting prepends to the coder's script of a feature with After, on
// its first attempt, the step that waits for that feature's end. Should
// the wait give up, the coder goes on all the same: the order a test
// wanted did not happen, which is for the test to notice.
func (s *Server) awaiting(t *turn, sc script) script {
	f, ok := s.features[t.cmd.Context.FeatureID]
	if !ok || f.After == "" || t.cmd.attempt() > 1 {
		return sc
	}
	c := bashCall(awaitEnd(f.After), "Wait for "+f.After+" to land on the branch")
	c.Input["timeout"] = awaitTimeout
	wait := step{tool: "Bash", call: func() (toolCall, error) { return c, nil }}.tolerant()
	sc.steps = append([]step{wait}, sc.steps...)
	sc.bound = max(sc.bound, maxToolCalls) + 1
	return sc
}
