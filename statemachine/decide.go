package statemachine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Role is an agent role (a contract: see agents/role). The strings match the
// agents package; statemachine keeps its own type so that the rules depend
// on nothing but the feature list.
type Role string

// Roles.
const (
	Initializer Role = "initializer-agent"
	Coder       Role = "coding-agent"
	Tester      Role = "tester-agent"
)

// Counters are what the session remembers of one feature across runs.
type Counters struct {
	// Failures is the number of failed attempts. Attempt n+1 is the one
	// running or next; a feature is blocked when Failures exceeds MaxRetries.
	Failures int `json:"failures"`
	// CostUSD is what the feature's runs have cost so far.
	CostUSD float64 `json:"cost_usd"`
	// Red is what the daemon's own run of the feature's test found before
	// its first coding attempt (gate red-before-green), and RedDetail
	// says it in a sentence.
	Red       RedState `json:"red,omitempty"`
	RedDetail string   `json:"red_detail,omitempty"`
}

// RedState is what the daemon's run of a feature's test, before any code
// was written for it, found (gate red-before-green).
type RedState string

// The red states. The zero value is a feature from before the gate: never
// checked, and not to be.
const (
	RedDue       RedState = "due"        // to be checked before the next coding attempt
	RedFailing   RedState = "failing"    // the test runs and fails: there is work to do
	RedPasses    RedState = "passes"     // it passes before any code: it tests nothing new
	RedCannotRun RedState = "cannot_run" // it cannot run: no test command, a missing file or program
)

// Attempt is the number of the current (or next) attempt of the feature.
func (c Counters) Attempt() int { return c.Failures + 1 }

// Outcome is how a run ended, as far as the rules care.
type Outcome struct {
	Role    Role
	Feature string
	// Interrupted: the run did not end on its own (the daemon crashed or
	// was stopped, or the run's hooks never checked in). It is redone and
	// does not count as a failed attempt.
	Interrupted bool
	// Transient: the run hit a usage limit or an API error that goes away
	// by waiting. It is redone after a wait and does not count.
	Transient bool
	// OutOfBudget names the budget (budget.session_usd or
	// budget.feature_usd) whose rest the run was capped at and reached: the
	// budget is spent, not the agent wrong. The session stops, or the
	// feature is blocked, and nothing is charged.
	OutOfBudget string
	// Verdict is the tester's accepted verdict; for the other roles false.
	// A tester's tested:true counts only once the daemon has verified it.
	Verdict bool
	// Reason explains a failure in a sentence, for the next agent and the
	// feature's dossier.
	Reason string
}

// Input is everything Decide looks at.
type Input struct {
	// List is the canonical feature list, nil before the initializer wrote one.
	List             *progress.List
	Counters         map[string]Counters
	InitFailures     int // failed initializer runs this session
	BlockedInSession int
	MaxRetries       int
	MaxBlocked       int
	// Budgets in USD (0: none) and what the session has spent. A feature
	// over its budget is blocked; a session over its budget stops; a run
	// is capped at its own budget, lowered to what is left of the others
	// (RunCap).
	RunBudgetUSD     float64
	FeatureBudgetUSD float64
	SessionBudgetUSD float64
	SessionCostUSD   float64
	// CheckTests: a feature's test is run once before its first coding
	// attempt (gate red-before-green not off). TestsMustFail: a test that
	// passes then, or cannot run, blocks the feature (the gate enforced).
	CheckTests    bool
	TestsMustFail bool
	// AwaitApproval: the plan (the feature list, its tests frozen) waits
	// for a person's approval (limits.approve_plan, not approved yet):
	// no feature's work starts, not even the check of its test.
	AwaitApproval bool
	// Outcome is the run that just ended, nil when deciding afresh (at
	// start, after a feature-list change, after ctl resume).
	Outcome *Outcome
	// InFlight are the features whose lanes are busy (a run, or the
	// daemon's own work on them), other than Outcome's: empty with one
	// lane (limits.parallel 1). InFlightCapUSD is the sum of the
	// --max-budget-usd caps of their runs.
	InFlight       []InFlight
	InFlightCapUSD float64
}

// InFlight is a feature whose lane is busy, with its scope
// (progress.Feature.Scope, as it was when the lane started).
type InFlight struct {
	Feature string
	Scope   []string
}

// Kind is what the orchestrator should do.
type Kind int

// Kinds of action.
const (
	Nothing Kind = iota
	SpawnInitializer
	SpawnCoder
	SpawnTester
	BlockFeature // mark Feature blocked, then decide again
	FinishAll    // → done; keep watching
	StopSession  // → stopped; a person is needed
	WaitAndRetry // → waiting; redo the same run after a backoff
	CheckTest    // run Feature's test before its first coding attempt, then decide again
	// WaitForLanes: nothing to start until a lane in flight is free;
	// decide again when one is. Only ever with a lane in flight, and no
	// event: the session stays in the state of the runs in flight.
	WaitForLanes
	// AwaitApproval → waiting, with no end: a feature's work would
	// start, and the plan waits for a person's approval (ctl approve).
	AwaitApproval
)

var kindNames = map[Kind]string{
	Nothing: "nothing", SpawnInitializer: "spawn initializer", SpawnCoder: "spawn coder",
	SpawnTester: "spawn tester", BlockFeature: "block feature", FinishAll: "finish",
	StopSession: "stop session", WaitAndRetry: "wait and retry", CheckTest: "check test",
	WaitForLanes: "wait for lanes", AwaitApproval: "await approval",
}

func (k Kind) String() string { return kindNames[k] }

// Action is Decide's answer.
type Action struct {
	Kind    Kind
	Feature string
	Attempt int
	// Resume: continue the feature's coding session (--resume) with the
	// tester's report, rather than starting a new one.
	Resume bool
	// CountFailure: the attempt that just ended failed. The orchestrator
	// persists Failures+1 for Feature together with the transition.
	CountFailure bool
	// CountInitFailure: the initializer run that just ended failed.
	CountInitFailure bool
	// Redo: the action repeats the run that was interrupted or waited.
	Redo bool
	// NotCharged: a BlockFeature that is a problem of the list (a test that
	// cannot fail or cannot run), not of the agents: it does not count
	// against the session's blocked limit.
	NotCharged bool
	Reason     string
}

// Event is the state-machine event that carries the action out, or "" when
// the action does not change the session state by itself.
func (a Action) Event() Event {
	switch a.Kind {
	case SpawnInitializer:
		return Initialize
	case SpawnCoder:
		return Implement
	case SpawnTester:
		return Validate
	case FinishAll:
		return Finish
	case StopSession:
		return Stop
	case WaitAndRetry, AwaitApproval:
		return Wait
	}
	return ""
}

func (a Action) String() string {
	var b strings.Builder
	b.WriteString(a.Kind.String())
	if a.Feature != "" {
		fmt.Fprintf(&b, " %s", a.Feature)
	}
	if a.Attempt > 0 {
		fmt.Fprintf(&b, " attempt %d", a.Attempt)
	}
	if a.Resume {
		b.WriteString(" (resume)")
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, ": %s", a.Reason)
	}
	return b.String()
}

// Decide applies the orchestration rules (docs/architecture.md#deciding
// has them as a table). It is pure: the
// same input always gives the same action, which is what makes a restart
// after a crash land where the uninterrupted run would have gone.
func Decide(in Input) Action {
	if o := in.Outcome; o != nil {
		if a, decided := afterRun(in, *o); decided {
			return awaitingApproval(in, withinBudget(in, a))
		}
	}
	return awaitingApproval(in, withinBudget(in, selectNext(in)))
}

// awaitingApproval holds a feature's work while the plan waits for a
// person: what would start (a check of a test, a coder, a tester) becomes
// the wait, which says what is waited for. Blocking, finishing and
// stopping go on: they start nothing.
func awaitingApproval(in Input, a Action) Action {
	if !in.AwaitApproval || (a.Kind != CheckTest && a.Kind != SpawnCoder && a.Kind != SpawnTester) {
		return a
	}
	// A feature's work is only ever decided on a list.
	return Action{Kind: AwaitApproval, CountFailure: a.CountFailure, Feature: failedFeature(a),
		Reason: fmt.Sprintf("the plan waits for a person: `ctxgraphd ctl approve` once you have read its %d features in .claude/progress/feature-list.json (to change it, ctl pause and edit it first; limits.approve_plan)", len(in.List.Features))}
}

// withinBudget turns a run the budgets cannot pay for into the outcome a
// person would choose: a feature over budget.feature_usd is blocked, and a
// session over budget.session_usd stops. Runs already paid for are never
// cut short here; --max-budget-usd bounds a single run.
func withinBudget(in Input, a Action) Action {
	if a.Kind != SpawnInitializer && a.Kind != SpawnCoder && a.Kind != SpawnTester {
		return a
	}
	if in.SessionBudgetUSD > 0 && in.SessionCostUSD >= in.SessionBudgetUSD {
		return Action{Kind: StopSession, CountFailure: a.CountFailure, Feature: failedFeature(a),
			Reason: fmt.Sprintf("the session has spent $%.2f, its %s is $%.2f: raise it and restart the daemon to go on", in.SessionCostUSD, SessionBudgetKey, in.SessionBudgetUSD)}
	}
	if a.Feature != "" && in.FeatureBudgetUSD > 0 {
		if spent := in.Counters[a.Feature].CostUSD; spent >= in.FeatureBudgetUSD {
			return Action{Kind: BlockFeature, Feature: a.Feature, CountFailure: a.CountFailure,
				Reason: fmt.Sprintf("%s has cost $%.2f, its %s is $%.2f", a.Feature, spent, FeatureBudgetKey, in.FeatureBudgetUSD)}
		}
	}
	// The runs in flight may spend up to their caps: what they hold is not
	// left for a new run. Yet they may well end under their caps, so this
	// waits for them rather than stopping the session.
	if in.SessionBudgetUSD > 0 && len(in.InFlight) > 0 {
		if left := in.SessionBudgetUSD - in.SessionCostUSD - in.InFlightCapUSD; left < MinRunUSD {
			return Action{Kind: WaitForLanes, CountFailure: a.CountFailure, Feature: failedFeature(a),
				Reason: fmt.Sprintf("of %s ($%.2f) the session has spent $%.2f and the runs in flight may spend $%.2f: nothing starts until one of them ends (next: %s)", SessionBudgetKey, in.SessionBudgetUSD, in.SessionCostUSD, in.InFlightCapUSD, a)}
		}
	}
	return a
}

// The configuration keys of the budgets, as a run capped by one names it.
const (
	SessionBudgetKey = "budget.session_usd"
	FeatureBudgetKey = "budget.feature_usd"
)

// MinRunUSD is the least cap a run is given: to Claude Code a cap of 0
// means none.
const MinRunUSD = 0.01

// RunCap is the --max-budget-usd of a run for feature ("": the
// initializer's, which no feature's budget holds): budget.run_usd lowered
// to what is left of the session's and the feature's budgets, so that no
// run spends past them (checked only between runs, a budget would be
// overshot by up to a whole run). What is left of the session's is less
// the caps of the runs in flight, which may spend that much beside it.
// by is the key of the budget that lowered it, "" when the run's own cap
// holds; 0 is no cap.
func RunCap(in Input, feature string) (usd float64, by string) {
	usd = in.RunBudgetUSD
	lower := func(budget, spent float64, key string) {
		if budget <= 0 {
			return
		}
		if left := max(budget-spent, MinRunUSD); usd == 0 || left < usd {
			usd, by = left, key
		}
	}
	lower(in.SessionBudgetUSD, in.SessionCostUSD+in.InFlightCapUSD, SessionBudgetKey)
	if feature != "" {
		lower(in.FeatureBudgetUSD, in.Counters[feature].CostUSD, FeatureBudgetKey)
	}
	return usd, by
}

// failedFeature keeps the feature of a counted failure when a budget
// replaces the action, so the failure is still counted against it.
func failedFeature(a Action) string {
	if a.CountFailure {
		return a.Feature
	}
	return ""
}

// afterRun handles the run that just ended. decided is false when the
// answer is "pick the next feature".
func afterRun(in Input, o Outcome) (Action, bool) {
	switch o.OutOfBudget {
	case "":
	case SessionBudgetKey:
		return Action{Kind: StopSession,
			Reason: fmt.Sprintf("a run reached what was left of %s ($%.2f, spent $%.2f): raise it and restart the daemon to go on; the run is redone then, not charged", SessionBudgetKey, in.SessionBudgetUSD, in.SessionCostUSD)}, true
	default:
		return Action{Kind: BlockFeature, Feature: o.Feature, NotCharged: true,
			Reason: fmt.Sprintf("%s reached its %s ($%.2f) in the middle of a run", o.Feature, o.OutOfBudget, in.FeatureBudgetUSD)}, true
	}
	if o.Transient {
		return Action{Kind: WaitAndRetry, Feature: o.Feature, Redo: true, Reason: o.Reason}, true
	}
	if o.Role == Initializer {
		if in.List != nil {
			return Action{}, false
		}
		if o.Interrupted {
			return Action{Kind: SpawnInitializer, Redo: true, Reason: "the initializer run was interrupted"}, true
		}
		if in.InitFailures+1 > in.MaxRetries {
			return Action{Kind: StopSession, CountInitFailure: true,
				Reason: fmt.Sprintf("the initializer did not write a valid feature list in %d runs: %s", in.InitFailures+1, o.Reason)}, true
		}
		return Action{Kind: SpawnInitializer, CountInitFailure: true, Reason: o.Reason}, true
	}
	if in.List == nil {
		return Action{}, false
	}
	f := in.List.Feature(o.Feature)
	if f == nil || f.Status == progress.Blocked || f.Tested {
		// Deleted or settled by a person meanwhile (ctl skip, an edit
		// while paused): nothing left to judge.
		return Action{}, false
	}
	c := in.Counters[o.Feature]
	switch o.Role {
	case Coder:
		if f.Status == progress.Completed {
			return Action{Kind: SpawnTester, Feature: f.ID, Attempt: c.Attempt()}, true
		}
		if o.Interrupted {
			return Action{Kind: SpawnCoder, Feature: f.ID, Attempt: c.Attempt(), Redo: true, Reason: "the coding run was interrupted"}, true
		}
		reason := o.Reason
		if reason == "" {
			reason = fmt.Sprintf("the coding run ended without setting %s to completed", f.ID)
		}
		return fail(in, f.ID, c, reason), true
	case Tester:
		if o.Verdict {
			return Action{}, false
		}
		if o.Interrupted {
			return Action{Kind: SpawnTester, Feature: f.ID, Attempt: c.Attempt(), Redo: true, Reason: "the tester run was interrupted"}, true
		}
		reason := o.Reason
		if reason == "" {
			reason = fmt.Sprintf("the tester run ended without an accepted verdict for %s", f.ID)
		}
		return fail(in, f.ID, c, reason), true
	}
	return Action{}, false
}

// fail counts a failed attempt: a retry that resumes the coding session with
// the reason, or, when the retries are used up, the blocked outcome.
func fail(in Input, id string, c Counters, reason string) Action {
	failures := c.Failures + 1
	if failures > in.MaxRetries {
		return Action{Kind: BlockFeature, Feature: id, CountFailure: true,
			Reason: fmt.Sprintf("%d of %d attempts failed; last: %s", failures, in.MaxRetries+1, reason)}
	}
	return Action{Kind: SpawnCoder, Feature: id, Attempt: failures + 1, Resume: true, CountFailure: true, Reason: reason}
}

// Reopen decides what becomes of feature id, tested, whose frozen test a
// later claim's sweep found failing through no doing of that claim's (on
// the branch head alone too, or passing and failing on one tree): its
// verdict did not hold. It is no longer tested, and that is its attempt's
// failure, counted as any other, so that a feature whose verdicts keep
// not holding (a time bomb set again and again) is blocked for a person
// once its retries are used up rather than worked for ever. Otherwise it
// is coded again, from the branch as it is, in a session of its own:
// the one that wrote it ended with its verdict.
func Reopen(in Input, id, reason string) Action {
	a := fail(in, id, in.Counters[id], reason)
	a.Resume = false
	return a
}

// selectNext picks the first feature, in list order, that is not settled,
// whose dependencies are all tested, and that no lane in flight keeps from
// starting (laneConflict).
func selectNext(in Input) Action {
	if in.List == nil {
		return Action{Kind: SpawnInitializer, Reason: "no feature list yet"}
	}
	if in.MaxBlocked > 0 && in.BlockedInSession >= in.MaxBlocked {
		return Action{Kind: StopSession,
			Reason: fmt.Sprintf("%d features were blocked in this session (limit %d); a person should look at them", in.BlockedInSession, in.MaxBlocked)}
	}
	inFlight := map[string]bool{}
	for _, g := range in.InFlight {
		inFlight[g.Feature] = true
	}
	var waiting []string
	for i := range in.List.Features {
		f := &in.List.Features[i]
		if f.Tested || f.Status == progress.Blocked || inFlight[f.ID] {
			continue
		}
		if missing := unmetDependencies(in.List, f, inFlight); len(missing) > 0 {
			waiting = append(waiting, fmt.Sprintf("%s waits on %s", f.ID, strings.Join(missing, ", ")))
			continue
		}
		if why := laneConflict(in.InFlight, f); why != "" {
			waiting = append(waiting, why)
			continue
		}
		c := in.Counters[f.ID]
		if f.Status == progress.Completed {
			return Action{Kind: SpawnTester, Feature: f.ID, Attempt: c.Attempt()}
		}
		if in.CheckTests {
			switch c.Red {
			case RedDue:
				return Action{Kind: CheckTest, Feature: f.ID, Reason: "its test must run, and fail, before any code is written for it"}
			case RedPasses, RedCannotRun:
				if in.TestsMustFail {
					return Action{Kind: BlockFeature, Feature: f.ID, NotCharged: true, Reason: c.RedDetail}
				}
			}
		}
		return Action{Kind: SpawnCoder, Feature: f.ID, Attempt: c.Attempt()}
	}
	if len(in.InFlight) > 0 {
		// Not done while a lane is busy: its run may test a feature others
		// wait on. A cycle is a problem of the list, stopped for once the
		// lanes are free, rather than cutting their runs short.
		var busy []string
		for _, g := range in.InFlight {
			busy = append(busy, g.Feature)
		}
		reason := "in flight: " + strings.Join(busy, ", ")
		if len(waiting) > 0 {
			reason = strings.Join(waiting, "; ") + " (" + reason + ")"
		}
		return Action{Kind: WaitForLanes, Reason: "nothing to start until a lane is free: " + reason}
	}
	if len(waiting) == 0 {
		return Action{Kind: FinishAll, Reason: "every feature is tested or blocked"}
	}
	reason := strings.Join(waiting, "; ")
	if cycles := in.List.Cycles(); len(cycles) > 0 {
		// A problem of the list, which only a person can fix: the session
		// stops for them, as for any other problem of the list.
		var cs []string
		for _, c := range cycles {
			cs = append(cs, strings.Join(c, " -> "))
		}
		sort.Strings(cs)
		return Action{Kind: StopSession, Reason: "dependency cycle in feature-list.json: " + strings.Join(cs, "; ") +
			": none of these features can ever start. Remove one depends_on of each cycle, then `ctxgraphd ctl resume` (" + reason + ")"}
	}
	return Action{Kind: FinishAll, Reason: reason}
}

// laneConflict says why f must wait for a lane in flight, or "" when none
// keeps it. Two features run at once only when both have a scope and the
// scopes do not overlap (ScopesOverlap): a feature without one may change
// any file, so it runs alone.
func laneConflict(lanes []InFlight, f *progress.Feature) string {
	for _, g := range lanes {
		switch {
		case len(f.Scope) == 0:
			return fmt.Sprintf("%s waits for %s (in flight): %s has no scope, so runs alone", f.ID, g.Feature, f.ID)
		case len(g.Scope) == 0:
			return fmt.Sprintf("%s waits for %s (in flight): %s has no scope, so runs alone", f.ID, g.Feature, g.Feature)
		case ScopesOverlap(f.Scope, g.Scope):
			return fmt.Sprintf("%s waits for %s (in flight): their scopes overlap", f.ID, g.Feature)
		}
	}
	return ""
}

// unmetDependencies lists the dependencies of f that are not tested, or
// are in flight (tested or not, their lane may yet change them). An
// unknown id counts as unmet: the list's validation reports it.
func unmetDependencies(l *progress.List, f *progress.Feature, inFlight map[string]bool) []string {
	var missing []string
	for _, dep := range f.DependsOn {
		d := l.Feature(dep)
		switch {
		case inFlight[dep]:
			missing = append(missing, dep+" (in flight)")
		case d == nil:
			missing = append(missing, dep+" (missing)")
		case !d.Tested:
			state := d.Status
			if state == "" {
				state = progress.Pending
			}
			missing = append(missing, fmt.Sprintf("%s (%s)", dep, state))
		}
	}
	return missing
}
