package orchestrator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// syncFeatureList reads feature-list.json and folds what changed into the
// canonical copy, by the rules of who may change what (SPEC section 2):
//
//   - before the initializer has written a valid list, a valid list on disk
//     becomes canonical (tested reset to false: nothing is tested yet);
//   - while a run is in flight, its agent may move only its own feature's
//     status (coder: in_progress/completed) or tested/evidence (tester;
//     tested:true is a claim, accepted after the run by verdict);
//   - while no run is in flight, a person may edit anything, but tested:true
//     only while the session is paused;
//   - anything else is reverted on disk and reported.
//
// An unreadable or invalid file is reported and the last good state kept.
// A person's broken file is left alone for them to fix; an agent's is
// restored when its run ends (runEnded true). It reports whether the
// canonical list changed, which is what can give the loop new work.
func (o *Orchestrator) syncFeatureList(runEnded bool) (changed bool) {
	dir := o.opts.Project.Progress()
	l, data, err := progress.ReadFeatureList(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if o.canonical != nil {
			o.log.Warn("feature-list.json was deleted; restoring the canonical copy")
			o.violation(guard.RoleWritePolicy, "feature-list.json was deleted")
			o.writeFeatureList()
		}
		return false
	case err != nil:
		o.problemFromAgent = o.active != nil
		o.setProblem(err.Error())
		if o.canonical != nil && runEnded {
			o.log.Warn("restoring feature-list.json after a run left it invalid", zap.Error(err))
			o.writeFeatureList()
			o.setProblem("")
		}
		return false
	}
	o.setProblem("")
	if o.ownWrite != nil && bytes.Equal(data, o.ownWrite) {
		return false
	}

	if o.canonical == nil {
		for i := range l.Features {
			if l.Features[i].Tested {
				l.Features[i].Tested = false
				o.violation(guard.TestedNeedsEvidence, fmt.Sprintf("%s was written with tested: true before any test ran; reset to false", l.Features[i].ID))
			}
			if l.Features[i].Status == "" {
				l.Features[i].Status = progress.Pending
			}
		}
		o.canonical = l
		o.pending.FeatureList = l.Marshal()
		o.commit()
		o.log.Info("feature list accepted", zap.Int("features", len(l.Features)))
		if !bytes.Equal(data, o.pending.FeatureList) && l.Format == progress.FormatV1 {
			// Keep the author's formatting unless something was reset.
			if slices.ContainsFunc(l.Features, func(f progress.Feature) bool { return f.Tested }) {
				o.writeFeatureList()
			}
		}
		return true
	}

	merged, shown := o.merge(l)
	changedCanonical := !bytes.Equal(merged.Marshal(), o.canonical.Marshal())
	if changedCanonical {
		o.canonical = merged
		o.pending.FeatureList = merged.Marshal()
		o.commit()
	}
	rejected := progress.Diff(shown, l)
	if len(rejected) > 0 {
		for _, c := range rejected {
			o.violation(o.revertGate(c), describeChange(o.actor(), c))
		}
		o.writeShown(shown)
	}
	return changedCanonical
}

// merge applies the allowed part of disk to the canonical copy. It returns
// the new canonical list and the list as it should read on disk (the same,
// plus a tester's pending tested:true claim).
func (o *Orchestrator) merge(disk *progress.List) (merged, shown *progress.List) {
	if o.active == nil {
		merged = disk.Clone()
		paused := statemachine.State(o.session.State) == statemachine.Paused
		for i := range merged.Features {
			f := &merged.Features[i]
			if f.Status == "" {
				f.Status = progress.Pending
			}
			was := o.canonical.Feature(f.ID)
			if f.Tested && (was == nil || !was.Tested) && !paused {
				f.Tested = false // only a paused session takes a person's tested:true
			}
		}
		return merged, merged
	}
	merged = o.canonical.Clone()
	run := o.active.run
	m, d := merged.Feature(run.Feature), disk.Feature(run.Feature)
	if m != nil && d != nil {
		switch agents.Role(run.Role) {
		case agents.Coder:
			if d.Status == progress.InProgress || d.Status == progress.Completed {
				m.Status = d.Status
			}
		case agents.Tester:
			if d.Status == progress.InProgress || d.Status == progress.Completed {
				m.Status = d.Status
			}
			m.Evidence = slices.Clone(d.Evidence)
			if d.Tested && !m.Tested {
				o.claim = run.Feature
			} else if !d.Tested {
				o.claim = ""
			}
		}
	}
	shown = merged.Clone()
	if o.claim != "" {
		if f := shown.Feature(o.claim); f != nil {
			f.Tested = true
		}
	}
	return merged, shown
}

func (o *Orchestrator) actor() string {
	if o.active == nil {
		return "an edit"
	}
	if o.active.run.Feature != "" {
		return fmt.Sprintf("%s (%s, %s)", o.active.run.Role, o.active.run.Feature, o.active.run.ID)
	}
	return fmt.Sprintf("%s (%s)", o.active.run.Role, o.active.run.ID)
}

func describeChange(actor string, c progress.Change) string {
	switch c.Kind {
	case progress.Added:
		return fmt.Sprintf("%s added feature %s; reverted", actor, c.FeatureID)
	case progress.Removed:
		return fmt.Sprintf("%s removed feature %s; restored", actor, c.FeatureID)
	}
	if c.FeatureID == "" {
		return fmt.Sprintf("%s changed %s; reverted", actor, c.Field)
	}
	return fmt.Sprintf("%s changed %s.%s from %v to %v; reverted", actor, c.FeatureID, c.Field, c.Old, c.New)
}

// revertGate names the gate a reverted change broke, the one the hook names
// when it denies the same change through Write or Edit, so that a change
// made where no hook could see it (Bash, a script) is traced, counted and
// grouped like its denial: a coding agent's tested: true is
// role-write-policy's (coding agents do not set tested), anyone else's
// tested: true that did not come through the verdict is
// tested-needs-evidence's, and any other change to the list is
// role-write-policy's.
func (o *Orchestrator) revertGate(c progress.Change) string {
	if now, _ := c.New.(bool); c.Kind == progress.Modified && c.Field == "tested" && now {
		if o.active != nil && agents.Role(o.active.run.Role) == agents.Coder {
			return guard.RoleWritePolicy
		}
		return guard.TestedNeedsEvidence
	}
	return guard.RoleWritePolicy
}

// violation records a change that was refused and undone on disk, as a
// violation of gate.
func (o *Orchestrator) violation(gate, what string) {
	o.log.Warn("violation", zap.String("gate", gate), zap.String("what", what))
	t := store.Trace{Type: store.TraceViolation, Source: store.SourceAuto, Gate: gate, Code: "reverted",
		Event: store.TraceEvent{WhatHappened: what, WhatWasCorrect: "agents change only their own feature's status, tested and evidence, through the gates", Why: "the canonical feature list is the daemon's"}}
	if o.active != nil {
		t.Context = store.TraceContext{Agent: o.active.run.Role, Feature: o.active.run.Feature, Run: o.active.run.ID}
	}
	o.trace(t)
}

// afterListChange re-decides when a change of the list can unblock the
// session: new features after done, or anything while idle.
func (o *Orchestrator) afterListChange() {
	if o.active != nil {
		return
	}
	switch statemachine.State(o.session.State) {
	case statemachine.Done:
		o.transition(statemachine.Advance, "", "feature list changed")
		o.step(nil)
	case statemachine.Idle, statemachine.Next, statemachine.Init:
		o.step(nil)
	default:
		o.commit()
	}
}

func (o *Orchestrator) setProblem(p string) {
	if o.problem == p {
		return
	}
	o.problem = p
	if p != "" {
		o.log.Warn("feature-list.json is invalid; keeping the last good state", zap.String("problem", p))
	}
	o.writeMirror()
	o.publish()
}

// writeFeatureList writes the canonical list to disk.
func (o *Orchestrator) writeFeatureList() {
	if o.canonical == nil {
		return
	}
	shown := o.canonical
	if o.claim != "" {
		shown = o.canonical.Clone()
		if f := shown.Feature(o.claim); f != nil {
			f.Tested = true
		}
	}
	o.writeShown(shown)
}

func (o *Orchestrator) writeShown(l *progress.List) {
	data, err := progress.WriteFeatureList(o.opts.Project.Progress(), l)
	if err != nil {
		o.log.Error("could not write feature-list.json", zap.Error(err))
		return
	}
	o.ownWrite = data
}
