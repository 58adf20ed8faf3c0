package orchestrator

import (
	"maps"
	"slices"

	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// laneSet is every lane the loop drives, and what it holds of their
// work between events: the project's own lane, the clones (lanes.go),
// the daemon's job in flight and the runs that ended while it was. The
// loop owns it; its methods find and walk the lanes, and change nothing
// of the session.
type laneSet struct {
	// home is the lane of the project's own work tree; clones the
	// features worked in clones of their own, by feature.
	home   *lane
	clones map[string]*lane
	// deps is what every lane is handed of the daemon when it is made.
	deps *laneDeps
	// job is the daemon's own work that reads or moves the branch (a
	// test, a verdict), one at a time; queued the runs of clones that
	// ended while it was in flight, judged after it.
	job    *job
	queued []runEnded
}

// byRun is the lane whose run in flight is runID, nil when none is.
func (s *laneSet) byRun(runID string) *lane {
	if a := s.home.active; a != nil && a.run.ID == runID {
		return s.home
	}
	for _, l := range s.clones {
		if l.active != nil && l.active.run.ID == runID {
			return l
		}
	}
	return nil
}

// others are the features, with their scopes in list, whose lanes have a
// run or a job in flight, but the one being decided (in's).
func (s *laneSet) others(list *progress.List, in *lane) []statemachine.InFlight {
	var out []statemachine.InFlight
	for _, id := range slices.Sorted(maps.Keys(s.clones)) {
		l := s.clones[id]
		if l == in || (l.active == nil && l.check == nil && (s.job == nil || s.job.lane != l)) {
			continue
		}
		in := statemachine.InFlight{Feature: id}
		if f := list.Feature(id); f != nil {
			in.Scope = f.Scope
		}
		out = append(out, in)
	}
	return out
}

// inFlightCap is the sum of the --max-budget-usd caps of the runs in
// flight in lanes other than in.
func (s *laneSet) inFlightCap(in *lane) float64 {
	sum := 0.0
	for _, l := range s.clones {
		if l != in && l.active != nil {
			sum += l.active.capUSD
		}
	}
	return sum
}

// activeOf is feature's run in flight, in whichever lane, nil when none.
func (s *laneSet) activeOf(feature string) *activeRun {
	if a := s.home.active; a != nil && a.run.Feature == feature {
		return a
	}
	if l := s.clones[feature]; l != nil {
		return l.active
	}
	return nil
}

// atWork counts the clones with a run or a check in flight: what
// limits.parallel bounds.
func (s *laneSet) atWork() int {
	n := 0
	for _, l := range s.clones {
		if l.active != nil || l.check != nil {
			n++
		}
	}
	return n
}

// inFlight lists the clones with a run in flight.
func (s *laneSet) inFlight() []*lane {
	var out []*lane
	for _, l := range s.clones {
		if l.active != nil {
			out = append(out, l)
		}
	}
	return out
}

// busy reports whether a run or a job of the daemon is in flight in l, or
// the daemon's job that moves the branch: nothing new starts there then.
func (s *laneSet) busy(l *lane) bool { return l.active != nil || s.job != nil || l.check != nil }

// jobs are the daemon's own work in flight: the job, and the lanes' checks.
func (s *laneSet) jobs() []*job {
	var out []*job
	if s.job != nil {
		out = append(out, s.job)
	}
	for _, id := range slices.Sorted(maps.Keys(s.clones)) {
		if c := s.clones[id].check; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// jobOf is the daemon's own work in flight on feature, nil when none.
func (s *laneSet) jobOf(feature string) *job {
	for _, j := range s.jobs() {
		if j.feature == feature {
			return j
		}
	}
	return nil
}

// jobLane is the lane of the job in flight: the project's own when none
// is, or the job is not a clone's.
func (s *laneSet) jobLane() *lane {
	if s.job != nil && s.job.lane != nil {
		return s.job.lane
	}
	return s.home
}

// checkDone takes the check of l's test that reported off the lanes and
// returns it: l's own check, or, the project's lane's check being the
// daemon's job, the job.
func (s *laneSet) checkDone(l *lane) *job {
	if jb := l.check; jb != nil {
		l.check = nil
		return jb
	}
	jb := s.job
	s.job = nil
	return jb
}

// nextQueued takes the first run end queued while a job was in flight.
func (s *laneSet) nextQueued() (runEnded, bool) {
	if len(s.queued) == 0 {
		return runEnded{}, false
	}
	ev := s.queued[0]
	s.queued = s.queued[1:]
	return ev, true
}

// records are the clones as the store keeps them.
func (s *laneSet) records() []store.Lane {
	var out []store.Lane
	for _, id := range slices.Sorted(maps.Keys(s.clones)) {
		l := s.clones[id]
		out = append(out, store.Lane{Feature: id, Dir: l.dir, Branch: l.branch, BaseHead: l.baseHead, Run: l.run})
	}
	return out
}
