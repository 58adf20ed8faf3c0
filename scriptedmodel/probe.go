package scriptedmodel

import (
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// ProbeCall is one tool call a probe makes: the tool's name and its input,
// as the Messages API carries them ({"command": "…"} for Bash).
type ProbeCall struct {
	Tool  string
	Input map[string]any
}

// probe is the model of NewProbe: the same calls for any conversation.
type probe struct {
	calls []ProbeCall
}

// NewProbe returns a server that does not play the roles: whatever the
// conversation, it makes calls in order, one per answer, then ends its turn
// with a text that lists every tool result it got, each as
// "[n] <tool>: <result text>" numbered from 1 in the order of the calls.
//
// It is for tests that ask what the CLI lets a run do (its sandbox, its
// hooks): the final text comes back as the stream-json result, so the test
// reads what each call met without a model in the loop. Like the replay, it
// knows how far it got only from the tool results in the history, so a
// failed call does not stop it. A nil log discards the logs.
func NewProbe(calls []ProbeCall, log *zap.Logger) *Server {
	s := New(Scenario{Name: "probe"}, log)
	s.probe = &probe{calls: slices.Clone(calls)}
	return s
}

// answer is the probe's move: the first call the history does not hold
// yet, or the report.
func (p *probe) answer(t *turn) reply {
	if n := len(t.all); n < len(p.calls) {
		c := p.calls[n]
		return reply{call: &toolCall{Name: c.Tool, Input: c.Input}}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Probe done: %d tool results.", len(t.all))
	for i, x := range t.all {
		result := x.result
		if !x.answered {
			result = "(no result)"
		}
		fmt.Fprintf(&b, "\n[%d] %s: %s", i+1, x.call.Name, result)
	}
	return reply{text: b.String()}
}
