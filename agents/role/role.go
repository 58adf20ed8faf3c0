// Package role names the three agent roles of ctxgraphd. The names are a
// contract: the command object's "agent" field, the CTXGRAPH_AGENT variable
// of a run, the file names of prompt overrides and the traces' agent.
//
// It is a leaf package on purpose: the gates and the hook binary need the
// names, and the hook must not link the agents package's process
// supervision and logging, since it starts on every tool call.
package role

// Role names an agent's job.
type Role string

// The three roles of the loop.
const (
	Initializer Role = "initializer-agent"
	Coder       Role = "coding-agent"
	Tester      Role = "tester-agent"
)

// All lists every role, in the order of the loop.
var All = []Role{Initializer, Coder, Tester}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool {
	for _, x := range All {
		if r == x {
			return true
		}
	}
	return false
}
