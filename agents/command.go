package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/diagnose"
)

// Roles lists every role, in the order of the loop.
var Roles = role.All

// Command is the explicit handoff to one run: everything the agent needs to
// know, and nothing it must guess. Its JSON shape is a contract: agents and
// outside tools read these keys, and they change only with a migration.
type Command struct {
	Agent           role.Role       `json:"agent"`
	Task            string          `json:"task"`
	Context         CommandContext  `json:"context"`
	Precedent       []string        `json:"precedent"`
	SuccessCriteria SuccessCriteria `json:"success_criteria"`
	NextAgent       string          `json:"next_agent"`
}

// CommandContext is the situation the run starts from.
type CommandContext struct {
	FeatureID     string   `json:"feature_id,omitempty"`
	Attempt       int      `json:"attempt,omitempty"`
	FilesChanged  []string `json:"files_changed,omitempty"`
	PreviousState string   `json:"previous_state,omitempty"`
	Goal          string   `json:"goal,omitempty"`
	// GoalFile is set when the goal is too long to carry whole: Goal is
	// its beginning, and the file (relative to the project) holds it all.
	GoalFile     string        `json:"goal_file,omitempty"`
	Feature      *FeatureBrief `json:"feature,omitempty"`
	TesterReport string        `json:"tester_report,omitempty"`
	// Diagnosis is the failing test read apart, on a retry: what it
	// expected, what it got, where, and what the last attempt believed.
	Diagnosis   *diagnose.Diagnosis `json:"diagnosis,omitempty"`
	FeatureList string              `json:"feature_list,omitempty"`
	// Setup is the project's setup step (the person's setup:, or the one
	// the feature list holds), which the daemon runs in every tree before
	// its tests: an initializer given one proposes none of its own.
	Setup string `json:"setup,omitempty"`
}

// FeatureBrief is the part of a feature an agent works from, copied from the
// canonical feature list so the agent need not trust what is on disk.
type FeatureBrief struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Steps       []string `json:"steps,omitempty"`
	Scope       []string `json:"scope,omitempty"`
	Test        string   `json:"test,omitempty"`
}

// SuccessCriteria says how the run will be judged; the gates hold the run
// to it whatever the agent claims.
type SuccessCriteria struct {
	Test               string `json:"test,omitempty"`
	TestsPass          bool   `json:"tests_pass,omitempty"`
	FeatureStatus      string `json:"feature_status,omitempty"`
	Tested             bool   `json:"tested,omitempty"`
	FeatureListWritten bool   `json:"feature_list_written,omitempty"`
}

// envelope is the JSON block of the prompt: {"command": {...}}.
type envelope struct {
	Command *Command `json:"command"`
}

// Prompt renders the run's prompt: one line of orientation and the command
// object as a fenced JSON block, which is the part agents act on.
func (c Command) Prompt() string {
	body, err := json.MarshalIndent(envelope{Command: &c}, "", "  ")
	if err != nil {
		// Command holds only strings, ints, bools and slices of them.
		panic(fmt.Sprintf("agents: marshal command: %v", err))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are the %s of ctxgraphd. Carry out the command below; its success_criteria are checked by the daemon, not taken on trust.\n\n", c.Agent)
	b.WriteString("```json\n")
	b.Write(body)
	b.WriteString("\n```\n")
	return b.String()
}

// ParseCommand finds the command object in a prompt (or takes the whole
// input as JSON) and decodes it strictly: unknown keys and roles are
// errors. It is the reader for what a run was told to do; the tests use it
// to check the handoffs the daemon writes. (The scripted model has its own,
// lenient reader: a model must cope with whatever prompt it is given.)
func ParseCommand(prompt string) (Command, error) {
	text := prompt
	if i := strings.Index(text, "```json"); i >= 0 {
		text = text[i+len("```json"):]
		if j := strings.Index(text, "```"); j >= 0 {
			text = text[:j]
		}
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return Command{}, fmt.Errorf("no command object: the prompt has no ```json block")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		return Command{}, fmt.Errorf("command object: %w", err)
	}
	if env.Command == nil {
		return Command{}, fmt.Errorf(`command object: missing the "command" key`)
	}
	if !env.Command.Agent.Valid() {
		return Command{}, fmt.Errorf("command object: agent %q is not one of %s, %s, %s", env.Command.Agent, role.Initializer, role.Coder, role.Tester)
	}
	return *env.Command, nil
}
