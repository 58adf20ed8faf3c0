package gates

import (
	"fmt"
	"path"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/lazyregexp"
	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// judgeFeatureList computes the file as the tool would leave it and checks
// every change against who may make it.
func judgeFeatureList(m Modes, a Actor, s State, tool, path string, in ToolInput) *control.HookDecision {
	var next []byte
	switch tool {
	case "Write":
		next = []byte(in.Content)
	case "Edit", "MultiEdit":
		cur, err := s.read(path)
		if err != nil && s.Remote {
			return listUnseen(m)
		}
		if err != nil {
			return nil // the tool will fail by itself
		}
		text, ok := applyEdits(string(cur), tool, in)
		if !ok && s.Remote {
			// The list as the daemon knows it, not the run's file: the
			// tool may well find what is not here.
			return listUnseen(m)
		}
		if !ok {
			return nil // the tool will refuse it
		}
		next = []byte(text)
	default:
		return decide(m, RoleWritePolicy, "bash_writes_feature_list", "feature-list.json is changed with Edit or Write only", "use the Edit tool")
	}
	l, err := progress.Parse(next)
	if err != nil {
		return decide(m, RoleWritePolicy, "invalid_feature_list",
			fmt.Sprintf("the change would leave an invalid feature list: %v", err), "keep the file valid JSON in the version 1 format; change only your feature's fields")
	}
	if s.List == nil {
		return judgeFirstList(m, a, l)
	}
	for _, c := range progress.Diff(s.List, l) {
		d := ListChange(m, a, c)
		if d == nil && a.Role == Tester && c.Field == "tested" && c.New == true {
			d = judgeTested(m, a, s, l)
		}
		if d != nil {
			return d
		}
	}
	return nil
}

// applyEdits is text as an Edit or a MultiEdit with input in leaves it;
// false when the tool would refuse the edit (a string it does not find).
func applyEdits(text, tool string, in ToolInput) (string, bool) {
	edits := in.Edits
	if tool == "Edit" {
		edits = append(edits[:0:0], struct {
			OldString  string `json:"old_string"`
			NewString  string `json:"new_string"`
			ReplaceAll bool   `json:"replace_all"`
		}{in.OldString, in.NewString, in.ReplaceAll})
	}
	for _, e := range edits {
		if e.OldString == "" || !strings.Contains(text, e.OldString) {
			return "", false
		}
		if e.ReplaceAll {
			text = strings.ReplaceAll(text, e.OldString, e.NewString)
		} else {
			text = strings.Replace(text, e.OldString, e.NewString, 1)
		}
	}
	return text, true
}

// ListAfter is the feature list as p, a Write or an Edit of it, leaves
// it, read through s (ReadFile, for a Remote run); false when that cannot
// be known. The daemon keeps it for a run on a worker, whose file it
// cannot read, to judge the run's next Edit of the list against.
func ListAfter(s State, p *Payload) ([]byte, bool) {
	in := p.Input()
	switch p.ToolName {
	case "Write":
		return []byte(in.Content), true
	case "Edit", "MultiEdit":
		cur, err := s.read(s.resolve(toolPath(p.ToolName, in)))
		if err != nil {
			return nil, false
		}
		text, ok := applyEdits(string(cur), p.ToolName, in)
		return []byte(text), ok
	}
	return nil, false
}

// listUnseen refuses an Edit of the feature list of a Remote run that
// the gates cannot apply to the list as they know it: what the edit would
// leave is unknown, and a change of the list is let through only when it
// is known. A Write says it all.
func listUnseen(m Modes) *control.HookDecision {
	return decide(m, RoleWritePolicy, "feature_list_unseen",
		"this run's feature list is on a worker, and this edit does not apply to the list as the daemon knows it, so what it would leave cannot be checked",
		"Read the feature list, then Write it whole, changing only your feature's fields")
}

// judgeFirstList judges the list that starts a project: the initializer's
// (or a person's). Nothing is tested before a test ran, and a feature
// without a test command could never become tested.
func judgeFirstList(m Modes, a Actor, l *progress.List) *control.HookDecision {
	for _, f := range l.Features {
		if f.Tested {
			return decide(m, TestedNeedsEvidence, "tested_before_test",
				fmt.Sprintf("%s cannot be tested before any test ran", f.ID), "write every feature with \"tested\": false")
		}
	}
	if a.Role != Initializer && a.Role != "" {
		return decide(m, RoleWritePolicy, "feature_rewrite", "only the initializer writes the first feature list", "report what is missing instead")
	}
	if a.Role == Initializer {
		for _, f := range l.Features {
			if strings.TrimSpace(f.Test) == "" {
				return decide(m, RedBeforeGreen, "no_test_command",
					fmt.Sprintf("%s has no test command, and a feature without one can never be accepted as tested", f.ID),
					"give every feature a \"test\": one shell command, run from the project's root, that fails until the feature exists and passes once it works; write the test it runs before the list")
			}
		}
	}
	return nil
}

// ListChange judges one change of the feature list by who makes it: the
// rule of who may change what, the same for a hook judging an Edit and for the
// daemon judging what it finds on disk. Who may touch a field at all is
// the field's policy (progress.Fields); which values are allowed is said
// here. A tester's tested: true passes here as a claim: the hook holds it
// to the run's test record (judgeTested) and the daemon to its verdict.
func ListChange(m Modes, a Actor, c progress.Change) *control.HookDecision {
	fd, isField := progress.FieldByKey(c.Field)
	if c.Kind != progress.Modified || !isField {
		if a.Role == "" {
			return nil // a person at an interactive session directs the list
		}
		what := c.Field
		switch {
		case c.Field == "setup":
			return decide(m, RoleWritePolicy, "feature_rewrite", "setup: the setup the initializer proposed is fixed, as the tests are; it is the person's to change",
				"prepare what your work needs in your own commands; if the setup is wrong, say so in your report")
		case c.Kind == progress.Added:
			what = "adding feature " + c.FeatureID
		case c.Kind == progress.Removed:
			what = "removing feature " + c.FeatureID
		}
		return decide(m, RoleWritePolicy, "feature_rewrite", what+": the features and their order are fixed once the initializer wrote them",
			"change only the status, tested and evidence of your own feature; the user changes the list with ctxgraphd ctl")
	}
	settingTested := c.Field == "tested" && c.New == true
	if a.Role == "" {
		if settingTested {
			return decide(m, TestedNeedsEvidence, "not_tester",
				fmt.Sprintf("only the tester run of %s may set tested: true", c.FeatureID), "let the daemon's tester verify the feature")
		}
		return nil
	}
	if fd.Policy == progress.Fixed {
		return decide(m, RoleWritePolicy, "feature_rewrite",
			fmt.Sprintf("%s %s: ids, titles, steps, tests, scopes and dependencies are fixed once the initializer wrote them", c.FeatureID, c.Field),
			"change only the status, tested and evidence of your own feature; the user changes the list with ctxgraphd ctl")
	}
	if c.FeatureID != a.Feature {
		return decide(m, RoleWritePolicy, "not_your_feature",
			fmt.Sprintf("%s may change only %s, not %s", a.Role, a.Feature, c.FeatureID), "leave other features to their own runs")
	}
	if !fd.MayWrite(role.Role(a.Role)) {
		switch {
		case c.Field == "tested" && !settingTested:
			return nil // nothing to fear from tested: false
		case settingTested && a.Role == Coder:
			return decide(m, RoleWritePolicy, "coder_sets_tested",
				fmt.Sprintf("only the tester run of %s may set tested: true", a.Feature), "set status to completed; a tester agent will verify the feature")
		case settingTested:
			return decide(m, TestedNeedsEvidence, "not_tester",
				fmt.Sprintf("only the tester run of %s may set tested: true", a.Feature), "set status to completed; a tester agent will verify the feature")
		case c.Field == "evidence" && a.Role == Coder:
			return decide(m, RoleWritePolicy, "coder_sets_evidence", "evidence is the tester's to write",
				"run the feature's test yourself if you like, but leave evidence and tested to the tester")
		}
		return decide(m, RoleWritePolicy, "feature_rewrite",
			fmt.Sprintf("%s %s: ids, titles, steps, tests, scopes and dependencies are fixed once the initializer wrote them", c.FeatureID, c.Field),
			"change only the status, tested and evidence of your own feature; the user changes the list with ctxgraphd ctl")
	}
	if fd.Kind == progress.StatusField {
		if st := fmt.Sprint(c.New); st != string(progress.InProgress) && st != string(progress.Completed) {
			return decide(m, RoleWritePolicy, "status_not_allowed",
				fmt.Sprintf("%s may set status to in_progress or completed, not %q", a.Role, st), "the daemon decides when a feature is blocked")
		}
	}
	return nil
}

// judgeTested holds a tester's tested: true to its run: the feature's test
// ran in this run and passed, and evidence is listed.
func judgeTested(m Modes, a Actor, s State, next *progress.List) *control.HookDecision {
	if s.Offline {
		return decide(m, TestedNeedsEvidence, "daemon_unreachable",
			"the ctxgraphd daemon is not answering, so no test run can be verified; tested: true is refused until it is back",
			"leave tested false and end with your report; the feature will be verified again")
	}
	test := ""
	if f := s.feature(a.Feature); f != nil {
		test = f.Test
	}
	runs := RanTest(s.Commands, test, s.ProjectDir)
	want := TestName(test)
	switch {
	case !runs.Ran && runs.Near != "":
		return decide(m, TestedNeedsEvidence, "no_test_run",
			fmt.Sprintf("tested: true for %s needs a run of %s in this session that passes; `%s` is not one as the shell reads it (its status hidden, in the background, only text of it, another target, or a listing)", a.Feature, want, textLine(runs.Near)),
			TestHint(test)+", see it pass, then set tested: true")
	case !runs.Ran:
		return decide(m, TestedNeedsEvidence, "no_test_run",
			fmt.Sprintf("tested: true for %s needs a run of %s in this session that passes, and none of this session's commands ran it", a.Feature, want),
			TestHint(test)+", see it pass, then set tested: true")
	case !runs.Claimable():
		return decide(m, TestedNeedsEvidence, "test_failed",
			fmt.Sprintf("%s ran in this session but never passed (last exit status %d), so %s is not tested", want, runs.Failed, a.Feature),
			fmt.Sprintf("leave tested false and report what failed (the coding agent fixes it); tested: true needs a run of %s in this session that passes", want))
	}
	if nf := next.Feature(a.Feature); nf == nil || len(nf.Evidence) == 0 {
		return decide(m, TestedNeedsEvidence, "no_evidence",
			fmt.Sprintf("tested: true for %s needs evidence", a.Feature),
			fmt.Sprintf("save the test's output under .claude/progress/evidence/%[1]s/ (e.g. `%[2]s > .claude/progress/evidence/%[1]s/test.log 2>&1`), list that file in the feature's evidence, then set tested: true", a.Feature, cmpOr(test, "the test")))
	}
	return nil
}

// TestRuns is what a run's recorded commands say of a feature's test.
type TestRuns struct {
	// Ran: a command ran the test, whatever its outcome.
	Ran bool
	// Passed: one of them passed, with its exit status the test's own.
	Passed bool
	// Unknown: one of them ran it with an outcome its exit status does
	// not tell (`… | tail`, `…; cat log`, `-run X`): enough for a claim to
	// go to the verdict, where the daemon runs the test itself, never a
	// pass by itself.
	Unknown bool
	// Failed is the exit status of the last failed run, 0 when none
	// failed.
	Failed int
	// Near is the last command that names the test but is not a run of
	// it, "" when none: what a refusal tells the agent about.
	Near string
}

// Claimable reports whether a claim may go to the verdict: a run of the
// test passed, or ran with an outcome only the daemon's run can tell.
func (t TestRuns) Claimable() bool { return t.Passed || t.Unknown }

// RanTest says what a run's recorded commands say of the feature's test
// (or, for a feature without one, of any recognised test command), as
// shellcmd.RunOf reads each command with its exit status; dir is the
// project's absolute path. It is the one answer to "this run ran this test
// and saw it pass", for the hook and the verdict alike.
func RanTest(cmds []control.CommandRecord, test, dir string) TestRuns {
	var t TestRuns
	for _, c := range cmds {
		o := shellcmd.RunOf(c.Command, test, dir, c.ExitCode)
		if test == "" && c.IsTest {
			o = shellcmd.Failed
			if c.Passed() {
				o = shellcmd.Passed
			}
		}
		switch o {
		case shellcmd.NotRun:
			if test != "" && strings.Contains(c.Command, testWord(test)) {
				t.Near = c.Command
			}
			continue
		case shellcmd.Passed:
			t.Passed = true
		case shellcmd.Unknown:
			t.Unknown = true
		case shellcmd.Failed:
			t.Failed = c.ExitCode
		}
		t.Ran = true
	}
	return t
}

// testWord is the word of a test that a command meaning to run it names:
// its script, or its longest word.
func testWord(test string) string {
	if tc := shellcmd.ParseTest(test); len(tc.Scripts) > 0 {
		return path.Base(tc.Scripts[0])
	}
	best := ""
	for _, w := range strings.Fields(test) {
		if len(w) > len(best) && !strings.HasPrefix(w, "-") {
			best = w
		}
	}
	return best
}

// TestHint says in a line how to run test so that it counts.
func TestHint(test string) string {
	if test == "" {
		return "run the feature's test command with the Bash tool"
	}
	return "run `" + test + "` with the Bash tool (redirections like `> log 2>&1`, `| tail`, `cd` or `mkdir -p` before it with `&&` are fine; not `|| true`, not in the background, not only echoed)"
}

// TestName is how messages name a feature's test.
func TestName(test string) string {
	if test == "" {
		return "a test command"
	}
	return "`" + test + "`"
}

// testRe recognises the common test runners, for features without a test
// command of their own.
var testRe = lazyregexp.New(`\bgo\s+test\b|\bpytest\b|\bpython3?\s+-m\s+(pytest|unittest)\b|\b(npm|yarn|pnpm)\s+(run\s+)?test\b|\bnode\s+--test\b|\bcargo\s+(test|nextest)\b|\bmake\s+(test|check)\b|\bctest\b|\bmvn\b.*\btest\b|\bgradle\w*\s+test\b|\brspec\b|\bphpunit\b|\bjest\b|\bvitest\b|\bmocha\b|\bbats\b|\btox\b|(^|[\s/])tests?/\S+`)

// IsTestCommand reports whether cmd, exiting with exit, ran tests: the
// feature's own test (run by shellcmd.RunOf's rule, whatever its
// outcome), or a known test runner.
func IsTestCommand(cmd, featureTest, dir string, exit int) bool {
	if featureTest != "" && shellcmd.RunOf(cmd, featureTest, dir, exit).Ran() {
		return true
	}
	return testRe.MatchString(cmd)
}

// textLine is a command in one short line, for a message.
func textLine(cmd string) string { return textcut.Runes(textcut.Fold(cmd), 120) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
