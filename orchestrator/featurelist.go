package orchestrator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// syncList is the one sync of a lane's list: it reads what l's run
// changed in the list in l's tree and folds into the canonical copy what
// it may, by the rules of who may change what:
//
//   - while a run is in flight, its agent may move only its own feature's
//     status (coder: in_progress/completed) or tested/evidence (tester;
//     tested:true is a claim, kept in l for the verdict);
//   - anything else is left out: written back, and reported.
//
// A clone's list is its run's alone, read when the run ends and given
// again whole (giveList). The project's own lane's list is the project's
// file, and its sync has the file's duties too (lane.project, set when the
// lane is made):
//
//   - before the initializer has written a valid list, a valid list on disk
//     becomes canonical (tested reset to false: nothing is tested yet);
//   - while no run is in flight, a person may edit anything, but tested:true
//     only while the session is paused;
//   - an unreadable or invalid file is reported and the last good state
//     kept (listUnreadable).
//
// It reports whether the canonical list changed, or a problem of the
// project's file that held the loop is gone: what can give the loop new
// work.
func (o *Orchestrator) syncList(l *lane, runEnded bool) (changed bool) {
	act := l.active
	if !l.project && (act == nil || o.canonical == nil || l.given == nil) {
		return false // nothing of a clone's is read but its run's
	}
	held := l.project && o.listFile.problem != ""
	defer func() {
		// A problem that held the loop and is gone (the file fixed, or
		// removed) gives the loop its work back, changed list or not.
		if held && o.listFile.problem == "" {
			changed = true
		}
	}()
	disk, data, err := progress.ReadFeatureList(filepath.Join(l.dir, paths.ProgressDir))
	if l.project {
		o.listFile.read, o.listFile.readAfterWrite = data, true
	}
	if err != nil {
		o.listUnreadable(l, data, err, runEnded)
		return false
	}
	if l.project {
		o.setProblem("")
		if o.listFile.ownWrite != nil && bytes.Equal(data, o.listFile.ownWrite) {
			return false
		}
		if o.canonical == nil {
			return o.firstList(l, disk, runEnded)
		}
	}

	merged, shown := o.merge(l, disk)
	changedCanonical := !bytes.Equal(merged.Marshal(), o.canonical.Marshal())
	if changedCanonical {
		o.canonical = merged
		o.pending.FeatureList = merged.Marshal()
		if act == nil {
			// A person's edit: new features are due a test check, and the
			// tests the list names now are frozen as they are.
			o.markNewFeatures()
			o.refreeze("", "a person changed the feature list")
		}
		o.persist()
		if !l.project {
			o.writeFeatureList() // the project's file follows the canonical list
		}
	}
	if !l.project {
		l.giveList(o.canonical)
		return changedCanonical
	}
	rejected := progress.Diff(shown, disk)
	madeOn := o.listFile.heldBack()
	if madeOn != nil {
		// What the file lacks of the daemon's own decisions (its write
		// was held back) is no one's change to revert: only what the
		// save changed of what it was made on, and the daemon refused.
		saved := progress.Diff(madeOn, disk)
		rejected = slices.DeleteFunc(rejected, func(c progress.Change) bool { return !changedField(saved, c) })
	}
	for _, c := range rejected {
		o.violation(act, revertGate(act, c), describeChange(act.actor(), c))
	}
	if madeOn != nil || len(rejected) > 0 {
		o.writeShown(shown)
	}
	return changedCanonical
}

// listUnreadable is syncList's step for a list in l's tree that could not
// be read (err; data, what was there). A clone's is its run's doing, and
// given again. The project's: a deleted list, or something not a file in
// its place, is restored from the canonical copy; an invalid one is
// a person's to fix (and holds the loop until it is valid), or an agent's,
// restored when its run ends (runEnded); while a run is in flight, an
// invalid file that can be its own write half-way is neither, yet.
func (o *Orchestrator) listUnreadable(l *lane, data []byte, err error, runEnded bool) {
	act := l.active
	if !l.project {
		o.violation(act, gates.RoleWritePolicy, fmt.Sprintf("%s left its lane's feature-list.json unreadable (%v); written again", act.actor(), err))
		l.giveList(o.canonical)
		return
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if o.canonical != nil {
			o.opts.Log.Warn("feature-list.json was deleted; restoring the canonical copy")
			o.violation(act, gates.RoleWritePolicy, "feature-list.json was deleted")
			o.writeFeatureList()
		}
		// No file is no problem of a file: a broken one that is gone
		// (a person gave up on it, a run's leftover was put back) no
		// longer holds the loop.
		o.setProblem("")
		return
	case treefile.IsNotFile(err) && o.canonical != nil:
		// A link (or a pipe) in the list's place is not read through: the
		// canonical copy replaces it, as it replaces a deleted list.
		o.opts.Log.Warn("feature-list.json is not a regular file; restoring the canonical copy", zap.Error(err))
		o.violation(act, gates.RoleWritePolicy, "feature-list.json was replaced by something that is not a regular file ("+err.Error()+")")
		o.writeFeatureList()
		o.setProblem("")
		return
	}
	if act != nil && !runEnded && o.agentMayBeWritingList(act.run.ID, data) {
		// The run in flight is writing the file (its Write lands in
		// more than one piece), or its sandbox holds an empty one
		// there for a command: read half-way, it is nobody's problem.
		// Whose it is, if it is still invalid, is told at the run's
		// end, which reads the file again.
		o.opts.Log.Debug("feature-list.json is invalid half-way through the write of the run in flight; it is judged when the run ends", zap.String("run", act.run.ID), zap.Error(err))
		return
	}
	o.listFile.problemFromAgent = act != nil && o.agentMayHaveWrittenList(act.run.ID, data)
	if !o.listFile.problemFromAgent {
		// A person's edit, half-way perhaps: theirs to finish. It is
		// kept, and no run starts until the file is valid again.
		o.setProblem(err.Error() + " (written by a person, not by an agent: the daemon waits until it is valid)")
		return
	}
	o.setProblem(err.Error())
	if o.canonical != nil && runEnded {
		o.opts.Log.Warn("restoring feature-list.json after a run left it invalid", zap.Error(err))
		o.writeFeatureList()
		o.setProblem("")
	}
}

// firstList is syncList's step for the project's list before any is
// canonical: list, valid, becomes canonical (tested reset to false:
// nothing is tested yet). The initializer's is taken when its run has
// ended, and only from a run whose gates were running.
func (o *Orchestrator) firstList(l *lane, list *progress.List, runEnded bool) bool {
	act := l.active
	if act != nil && role.Role(act.run.Role) == role.Initializer && (!runEnded || act.silent) {
		// Not half-way, and not from a run whose hooks never checked in.
		return false
	}
	reset := false
	for i := range list.Features {
		if list.Features[i].Tested {
			list.Features[i].Tested, reset = false, true
			o.violation(act, gates.TestedNeedsEvidence, fmt.Sprintf("%s was written with tested: true before any test ran; reset to false", list.Features[i].ID))
		}
		if list.Features[i].Status == "" {
			list.Features[i].Status = progress.Pending
		}
	}
	o.canonical = list
	o.markNewFeatures()
	o.pending.FeatureList = list.Marshal()
	if act == nil {
		// A person's list: its tests are frozen now. An initializer's
		// are frozen when its run ends, with all it wrote.
		o.refreeze("", "the feature list was accepted")
	}
	o.persist()
	o.opts.Log.Info("feature list accepted", zap.Int("features", len(list.Features)), zap.String("format", list.Format.String()))
	if list.Format == progress.FormatQuickstart {
		o.opts.Log.Warn("feature-list.json is in the quickstart format, which has no test commands: no feature can be accepted as tested until it has one; rewrite it as {\"version\": 1, \"features\": [...]} with a \"test\" for each feature")
	}
	if reset && list.Format == progress.FormatV1 {
		// Keep the author's formatting unless something was reset.
		o.writeFeatureList()
	}
	return true
}

// merge applies the allowed part of disk, the list of l's tree, to the
// canonical copy. It returns the new canonical list and the list as it
// should read on disk (the same, plus l's tester's pending tested:true
// claim).
//
// While a run is in flight, who may change what is gates.ListChange's rule,
// the one the hook applies to an Edit: a change an enforced gate refuses is
// left out (and so written back), a change a gate in warn mode lets through
// is taken and recorded. tested: true never becomes canonical here: a
// tester's is a claim for the verdict. Features added, removed or
// reordered by a run are always written back.
func (o *Orchestrator) merge(l *lane, disk *progress.List) (merged, shown *progress.List) {
	held := (*progress.List)(nil)
	if l.project {
		held = o.listFile.heldBack()
	}
	if l.active == nil {
		merged = disk.Clone()
		if held != nil {
			merged = personsSave(held, disk, o.canonical)
		}
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
		return merged, l.withClaim(merged)
	}
	// The project's file is read against the canonical list it shows; a
	// clone's against the list it was given (giveList).
	base := o.canonical
	switch {
	case !l.project:
		base = l.given
	case held != nil:
		base = held // what the run saw: the daemon's write was held back
	}
	merged = o.canonical.Clone()
	for _, v := range l.runChanges(base, disk, merged) {
		// What the project's run refused is written back, and recorded
		// with the rest of what the write back undoes (syncList); a
		// clone's list is given again whole, so its refusals are
		// recorded here.
		if !v.refused || !l.project {
			o.violationMode(l.active, v.gate, v.code, v.what)
		}
	}
	return merged, l.withClaim(merged)
}

// actor names who changed the list: a's run, or a person between runs
// (a nil).
func (a *activeRun) actor() string {
	if a == nil {
		return "an edit"
	}
	if a.run.Feature != "" {
		return fmt.Sprintf("%s (%s, %s)", a.run.Role, a.run.Feature, a.run.ID)
	}
	return fmt.Sprintf("%s (%s)", a.run.Role, a.run.ID)
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

// revertGate names the gate a reverted change broke: the one the hook names
// when it denies the same change through Write or Edit (gates.ListChange),
// so that a change made where no hook could see it (Bash, a script) is
// traced, counted and grouped like its denial. act is the run in flight
// whose change it was, nil for a person's.
func revertGate(act *activeRun, c progress.Change) string {
	a := gates.Actor{}
	if act != nil {
		a = gates.Actor{Role: act.run.Role, Feature: act.run.Feature, Run: act.run.ID}
	}
	if d := gates.ListChange(gates.Modes{}, a, c); d != nil {
		return d.Gate
	}
	return gates.RoleWritePolicy
}

// violation records a change that was refused and undone on disk, as a
// violation of gate by act's run (nil: a person's change).
func (o *Orchestrator) violation(act *activeRun, gate, what string) {
	o.violationMode(act, gate, "reverted", what)
}

// violationMode records a change of the list a gate refused (code
// "reverted") or, in warn mode, let through.
func (o *Orchestrator) violationMode(act *activeRun, gate, code, what string) {
	o.opts.Log.Warn("violation", zap.String("gate", gate), zap.String("code", code), zap.String("what", what))
	t := control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gate, Code: code,
		Event: control.TraceEvent{WhatHappened: what, WhatWasCorrect: "agents change only their own feature's status, tested and evidence, through the gates", Why: "the canonical feature list is the daemon's"}}
	if act != nil {
		t.Context = control.TraceContext{Agent: act.run.Role, Feature: act.run.Feature, Run: act.run.ID}
	}
	o.trace(t)
}

// afterListChange re-decides when a change of the list can unblock the
// session: new features after done, or anything while idle. l is the lane
// whose list changed.
func (o *Orchestrator) afterListChange(l *lane) {
	if l.active != nil {
		return
	}
	switch statemachine.State(o.session.State) {
	case statemachine.Done:
		o.transition(l, statemachine.Advance, "", "feature list changed")
		o.step(l, nil)
	case statemachine.Idle, statemachine.Next, statemachine.Init:
		o.step(l, nil)
	default:
		o.persist()
	}
}

func (o *Orchestrator) setProblem(p string) {
	if o.listFile.problem == p {
		return
	}
	o.listFile.problem = p
	if p != "" {
		o.opts.Log.Warn("feature-list.json is invalid; keeping the last good state", zap.String("problem", p))
	}
	o.writeMirror()
	o.publish()
}

// writeFeatureList writes the canonical list to the project's tree, with
// the claim pending there (the project's own lane's; a clone's is shown in
// its clone, giveList).
func (o *Orchestrator) writeFeatureList() {
	if o.canonical == nil {
		return
	}
	o.writeShown(o.lanes.home.withClaim(o.canonical))
}

func (o *Orchestrator) writeShown(l *progress.List) {
	if o.listFile.unread(o.opts.Project.Progress()) {
		// A person's save (or a run's write) the daemon has not read yet
		// is not written over: the watcher brings it to syncList, which
		// reads it as made on what the file held before it (heldBack), so
		// that what the daemon decided meanwhile is not taken back, and
		// writes the list again.
		o.opts.Log.Info("feature-list.json changed since the daemon last read it; reading it before writing it")
		if !o.listFile.behind {
			o.listFile.behind = true
			o.listFile.known = o.listFile.lastKnown()
		}
		return
	}
	data, err := progress.WriteFeatureList(o.opts.Project.Progress(), l)
	if err != nil {
		o.opts.Log.Error("could not write feature-list.json", zap.Error(err))
		return
	}
	o.listFile.ownWrite, o.listFile.readAfterWrite = data, false
	o.listFile.behind, o.listFile.known = false, nil
}

// changedField reports whether changes hold a change of c's feature and
// field.
func changedField(changes []progress.Change, c progress.Change) bool {
	return slices.ContainsFunc(changes, func(d progress.Change) bool { return d.FeatureID == c.FeatureID && d.Field == c.Field })
}

// lastKnown is what the daemon last knew the file to hold: its own last
// write, or what it read since.
func (f *listFile) lastKnown() []byte {
	if f.readAfterWrite {
		return f.read
	}
	return f.ownWrite
}

// heldBack is, when a write of the canonical list was held back since the
// daemon last read the file, the list the file held before (what a save
// read now was made on), and nil otherwise: the save is then read against
// the canonical list, which the file showed.
func (f *listFile) heldBack() *progress.List {
	if !f.behind || f.known == nil {
		return nil
	}
	l, err := progress.Parse(f.known)
	if err != nil {
		return nil
	}
	return l
}

// personsSave is a person's save, disk, made on base (the list the file
// held before it) while the canonical list had moved on: what the save
// changed of base (a feature's field, a feature added or removed, the
// order, the setup) is the person's, as any save of theirs is; every field
// it left as base had it keeps the canonical list's value (a verdict given
// meanwhile, say).
func personsSave(base, disk, canonical *progress.List) *progress.List {
	merged := disk.Clone()
	changed := map[string][]string{} // feature: its fields the save changed
	for _, c := range progress.Diff(base, disk) {
		changed[c.FeatureID] = append(changed[c.FeatureID], c.Field)
	}
	for i, f := range merged.Features {
		c := canonical.Feature(f.ID)
		if c == nil || base.Feature(f.ID) == nil {
			continue // the person's alone
		}
		if m, err := overlay(*c, f, changed[f.ID]); err == nil {
			merged.Features[i] = m
		} else {
			merged.Features[i] = f // the save, whole: never a half of each
		}
	}
	return merged.Clone()
}

// overlay is onto with the fields named (their JSON keys) taken from from.
func overlay(onto, from progress.Feature, fields []string) (progress.Feature, error) {
	var o, f map[string]json.RawMessage
	a, err := json.Marshal(onto)
	if err != nil {
		return onto, err
	}
	b, err := json.Marshal(from)
	if err != nil {
		return onto, err
	}
	if err := json.Unmarshal(a, &o); err != nil {
		return onto, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return onto, err
	}
	for _, k := range fields {
		if v, ok := f[k]; ok {
			o[k] = v
		} else {
			delete(o, k)
		}
	}
	data, err := json.Marshal(o)
	if err != nil {
		return onto, err
	}
	var out progress.Feature
	err = json.Unmarshal(data, &out)
	return out, err
}

// unread reports whether the project's feature list in progressDir holds
// bytes the daemon neither wrote nor has read yet: a write the watcher is
// about to report. Before the first read or write nothing is known, and a
// file that cannot be read is the writer's to replace.
func (f *listFile) unread(progressDir string) bool {
	if f.ownWrite == nil && f.read == nil {
		return false
	}
	data, err := treefile.ReadFile(progressDir, progress.FeatureListFile)
	return err == nil && !bytes.Equal(data, f.ownWrite) && !bytes.Equal(data, f.read)
}

// dropUnjudgedClaim takes a tester's tested: true off the disk when no
// verdict judged it: its run was interrupted, timed out or ran without
// hooks. Left there, it would read as tested to anyone who looks, and as a
// claim to the next tester run. l is the lane of the run.
func (o *Orchestrator) dropUnjudgedClaim(l *lane) {
	if l.claim == nil {
		return
	}
	o.opts.Log.Info("dropping an unjudged tested: true", zap.String("feature", l.claim.feature()))
	l.claim = nil
	o.writeFeatureList()
}

// markNewFeatures opens the dossier of every feature the daemon has not
// seen before: its test is due to be run, and to fail, before any code is
// written for it (gate red-before-green).
func (o *Orchestrator) markNewFeatures() {
	if o.canonical == nil {
		return
	}
	for _, f := range o.canonical.Features {
		if _, known := o.counters[f.ID]; !known && !f.Tested {
			o.setCounters(f.ID, store.FeatureCounters{Red: string(statemachine.RedDue)})
		}
	}
}

// agentMayBeWritingList reports whether data, the feature list read while
// the run is in flight, can be the run's write of it half-way. Unconfined,
// any program of the agent's may be writing it.
func (o *Orchestrator) agentMayBeWritingList(runID string, data []byte) bool {
	return !o.opts.Config.Sandbox.Enabled || o.opts.Judge.MayBeWritingList(runID, data)
}

// agentMayHaveWrittenList reports whether the run could have left data in
// the feature list. Confined, an agent writes it only with a file tool,
// which its hooks see; unconfined, any program of its could have.
func (o *Orchestrator) agentMayHaveWrittenList(runID string, data []byte) bool {
	return !o.opts.Config.Sandbox.Enabled || o.opts.Judge.MayHaveWrittenList(runID, data)
}
