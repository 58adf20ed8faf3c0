package orchestrator

import (
	"fmt"
	"unicode/utf8"

	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
)

// command builds the explicit handoff of a run (agents.Command).
func (o *Orchestrator) command(who role.Role, a statemachine.Action, prev statemachine.State) agents.Command {
	cmd := agents.Command{
		Agent:     who,
		Context:   agents.CommandContext{FeatureID: a.Feature, Attempt: a.Attempt, PreviousState: string(prev)},
		NextAgent: "main",
	}
	var f *progress.Feature
	if o.canonical != nil {
		f = o.canonical.Feature(a.Feature)
	}
	cmd.Context.Setup, _ = o.namedSetup()
	cmd.Precedent = o.precedent(who, a.Feature, f)
	if cmd.Precedent == nil {
		cmd.Precedent = []string{}
	}
	switch who {
	case role.Initializer:
		cmd.Task = "initialize_project"
		goal, _ := progress.ReadGoal(o.opts.Project.Progress())
		cmd.Context.Goal, cmd.Context.GoalFile = inlineGoal(goal)
		cmd.Context.FeatureList = filepath.Join(".claude", "progress", progress.FeatureListFile)
		cmd.SuccessCriteria = agents.SuccessCriteria{FeatureListWritten: true}
	case role.Coder:
		cmd.Task = "implement_feature"
		if a.Attempt > 1 {
			cmd.Task = "fix_feature"
			cmd.Context.TesterReport = o.counters[a.Feature].LastFailure
			cmd.Context.Diagnosis = o.counters[a.Feature].Diagnosis
		}
		cmd.Context.Feature = brief(f)
		cmd.SuccessCriteria = agents.SuccessCriteria{Test: testOf(f), FeatureStatus: string(progress.Completed)}
		cmd.NextAgent = string(role.Tester)
	case role.Tester:
		cmd.Task = "validate_feature"
		cmd.Context.Feature = brief(f)
		cmd.SuccessCriteria = agents.SuccessCriteria{Test: testOf(f), TestsPass: true, Tested: true}
	}
	return cmd
}

// precedent is what the run is told of the past: its
// feature's last failure and a person's note first, then what the context
// graph selects, within graph.precedent_tokens.
func (o *Orchestrator) precedent(who role.Role, id string, f *progress.Feature) []string {
	subj := graph.Subject{Role: string(who), Feature: id}
	if f != nil {
		subj.Text = strings.Join(append([]string{f.Title, f.Description}, f.Steps...), "\n")
		subj.Scope = f.Scope
	}
	if id != "" {
		c := o.counters[id]
		// The reason may be the tester's own words, the note is a person's:
		// each is told quoted and labelled, apart from the daemon's words.
		if c.LastFailure != "" {
			subj.History = append(subj.History, graph.Told{Frame: fmt.Sprintf("%s: attempt %d failed", id, c.Failures), By: graph.ByRecord, Text: c.LastFailure})
		}
		if c.Note != "" {
			subj.History = append(subj.History, graph.Told{Frame: id + ":", By: graph.ByPerson, Text: c.Note})
		}
	}
	out, err := graph.Select(o.opts.Store, subj, o.opts.Config.Graph.PrecedentTokens)
	if err != nil {
		o.opts.Log.Warn("could not read past traces for the precedent", zap.String("feature", subj.Feature), zap.Error(err))
	}
	return out
}

func brief(f *progress.Feature) *agents.FeatureBrief {
	if f == nil {
		return nil
	}
	return &agents.FeatureBrief{ID: f.ID, Title: f.Title, Description: f.Description, Steps: f.Steps, Scope: f.Scope, Test: f.Test}
}

func testOf(f *progress.Feature) string {
	if f == nil {
		return ""
	}
	return f.Test
}

// prompts renders the run's prompt (with the command object) and its role
// prompt, which a project may override.
func (o *Orchestrator) prompts(who role.Role, cmd agents.Command) (prompt, system string, err error) {
	system, _, err = agents.RolePrompt(o.opts.Project.Dir, who)
	if err != nil {
		return "", "", fmt.Errorf("role prompt for %s: %w", who, err)
	}
	return cmd.Prompt(), system, nil
}

// maxInlineGoal bounds the goal a command object carries: the command
// object is the CLI's argument, and Linux refuses one argument over 128 KiB
// (E2BIG, "argument list too long").
const maxInlineGoal = 8 << 10

// inlineGoal is the goal as the command object carries it: whole when it is
// short; else its beginning, cut at a line, with the file the initializer
// reads for all of it.
func inlineGoal(goal string) (text, file string) {
	goal = strings.TrimSpace(goal)
	if len(goal) <= maxInlineGoal {
		return goal, ""
	}
	file = filepath.Join(".claude", "progress", progress.GoalFile)
	cut := maxInlineGoal / 2
	for cut > 0 && !utf8.RuneStart(goal[cut]) {
		cut--
	}
	head := goal[:cut]
	if i := strings.LastIndexByte(head, '\n'); i > cut/2 {
		head = head[:i]
	}
	return fmt.Sprintf("%s\n\n[the goal goes on for %d more bytes: read all of it in %s before you write the list]", head, len(goal)-len(head), file), file
}
