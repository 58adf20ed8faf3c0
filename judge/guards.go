package judge

import (
	"slices"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

// SetGuards makes rules the guards the hooks hold runs to (the active ones
// count: warn and enforce), and leaves them where a hook deciding alone
// finds them, so that no guard fails open when the daemon does not answer.
func (j *Judge) SetGuards(rules []guards.Rule) error {
	var active []guards.Rule
	for _, r := range rules {
		if r.Active() {
			active = append(active, r)
		}
	}
	j.mu.Lock()
	j.guards = active
	j.mu.Unlock()
	return j.saveOffline()
}

// Guards returns the active guards.
func (j *Judge) Guards() []guards.Rule {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.guards)
}

// saveOffline writes what a hook deciding alone needs and only the daemon
// knows: the frozen tests, where tests live, what is writable outside the
// project, and the active guards.
func (j *Judge) saveOffline() error {
	j.mu.Lock()
	o := gates.Offline{
		Frozen: j.frozen.Sorted(), ProtectedGlobs: j.opts.ProtectedGlobs, Writable: j.opts.Writable,
		Network: j.opts.Network, Guards: slices.Clone(j.guards),
	}
	j.mu.Unlock()
	return gates.SaveOffline(j.opts.Project.StateDir, o)
}

// withGuards adds the guards' say to the built-in gates' decision d on a
// PreToolUse call: the built-in gates decide first, and a guard applies
// when they let the action through (d nil, or a warning). It returns the
// decision the model reads and the guards' other decisions, each of which
// is recorded too. Called with j.mu held.
func (j *Judge) withGuards(a gates.Actor, s gates.State, p *gates.Payload, d *control.HookDecision) (*control.HookDecision, []*control.HookDecision) {
	if d.Blocks() {
		return d, nil
	}
	hits := gates.Guards(j.guards, a, s, p)
	if len(hits) == 0 {
		return d, nil
	}
	if d == nil || hits[0].Blocks() {
		return hits[0], hits[1:]
	}
	return d, hits
}
