package judge

import (
	"github.com/ctxgraphd/ctxgraphd/gates"
)

// ChangeRules are the rules a run's change set is held to, for a result
// that arrives as a whole rather than write by write (a worker's bundle,
// branch.ImportResult): the gates' modes, the run's actor and the gates'
// state as its hooks see it. false when token is no run's.
func (j *Judge) ChangeRules(token string) (gates.Modes, gates.Actor, gates.State, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rg := j.runs[token]
	if rg == nil {
		return gates.Modes{}, gates.Actor{}, gates.State{}, false
	}
	return j.opts.Modes, rg.actor, j.state(rg), true
}
