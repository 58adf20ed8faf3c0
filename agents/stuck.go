package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// stuckWatch spots an agent going round in circles: the same tool call,
// the same tool with the same input, failing again and again with nothing
// succeeding in between. Such a run burns the night's budget without
// getting anywhere; the idle timeout never sees it, since the stream is
// busy.
type stuckWatch struct {
	after int // failures in a row that make the run stuck; 0: never
	// calls are the run's tool calls waiting for their results, by id.
	calls map[string]toolCall
	last  toolCall // the call that failed last
	count int      // how many times in a row it failed
}

type toolCall struct {
	key    string // the tool and its input, compacted
	detail string // for people: "Bash: go build ./..."
}

func newStuckWatch(after int) *stuckWatch {
	return &stuckWatch{after: after, calls: map[string]toolCall{}}
}

// call notes a tool call of the run's own (not a subagent's).
func (w *stuckWatch) call(id, name string, input json.RawMessage) {
	if w.after <= 0 || id == "" {
		return
	}
	var in bytes.Buffer
	if json.Compact(&in, input) != nil {
		in.Reset()
		in.Write(input)
	}
	w.calls[id] = toolCall{key: name + "\x00" + in.String(), detail: name + ": " + toolDetail(name, input)}
}

// result notes a tool call's result and reports, once, what the run is
// stuck on: "" while it is not.
func (w *stuckWatch) result(id string, isError bool) string {
	c, ok := w.calls[id]
	if !ok {
		return ""
	}
	delete(w.calls, id)
	switch {
	case !isError:
		w.last, w.count = toolCall{}, 0
		return ""
	case c.key == w.last.key:
		w.count++
	default:
		w.last, w.count = c, 1
	}
	if w.count == w.after {
		return fmt.Sprintf("`%s` failed %d times in a row with nothing done in between", c.detail, w.count)
	}
	return ""
}
