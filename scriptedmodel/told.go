package scriptedmodel

import (
	"encoding/json"
	"slices"
)

// Told is what the command object of a run told its agent, as the model
// read it in the request that started the run: what reached the agent's
// prompt, not what the daemon meant to send. Tests read it to see how
// what one agent did is told to the agents after it (Precedent).
type Told struct {
	Agent   string `json:"agent"`
	Feature string `json:"feature,omitempty"`
	Attempt int    `json:"attempt"`
	// Precedent are the lines of the command's precedent, as they are.
	Precedent []string `json:"precedent"`
	// TesterReport is the command's context.tester_report, and Diagnosis
	// its context.diagnosis as the JSON it was: what a retry is told of
	// the attempt before it.
	TesterReport string `json:"tester_report,omitempty"`
	Diagnosis    string `json:"diagnosis,omitempty"`
}

// Told returns the command objects of the runs the model played, in the
// order the runs started.
func (s *Server) Told() []Told {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.told)
}

// told is the command of a turn that starts a run.
func (t *turn) told() Told {
	return Told{Agent: t.cmd.Agent, Feature: t.cmd.Context.FeatureID, Attempt: t.cmd.attempt(), Precedent: slices.Clone(t.cmd.Precedent),
		TesterReport: asText(t.cmd.Context.TesterReport), Diagnosis: asText(t.cmd.Context.Diagnosis)}
}

// asText is a JSON value of the command as a reader takes it: a string's
// text, any other value's JSON, and nothing for null or no value.
func asText(v json.RawMessage) string {
	var s string
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case json.Unmarshal(v, &s) == nil:
		return s
	}
	return string(v)
}
