package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	bolt "go.etcd.io/bbolt"
)

// PruneOptions say which traces compaction may touch: those older than
// Before of the Finished features (tested or blocked: the orchestrator
// knows from its canonical list), and of runs that ended.
type PruneOptions struct {
	Before   time.Time
	Finished []string
}

// Prune compacts the old traces of finished features, one feature per
// transaction, so that a hook's append never waits long behind it:
//
//   - repeated violations in one run with the same gate and reason are
//     folded into the newest of them, whose Count says how many there were
//     (the refusals of each role stay counted in full: graph.Select);
//   - the hooks' decisions (tool-level records, such as a turn ended on an
//     API error) are dropped;
//   - everything else is kept: verdicts and approvals, corrections,
//     lessons, the daemon's decisions (blocks, run ends), transitions,
//     handoffs, anything a person wrote, the first refusal of each kind
//     in each run, and any trace another trace, a run or a feature names
//     as its node or parent, so that `ctl why` and `ctl trace` tell the
//     same story after compaction;
//   - the commands of the runs concerned keep their failures and tests and
//     lose the successful rest.
//
// A trace of a run that has not ended, or of no feature, is never touched.
func (s *Store) Prune(o PruneOptions) (control.PruneResult, error) {
	var res control.PruneResult
	if o.Before.IsZero() {
		return res, fmt.Errorf("store: prune: no cutoff: say which traces are old (before what time)")
	}
	nodes, ended, err := s.graphNodes()
	if err != nil {
		return res, err
	}
	for _, f := range o.Finished {
		if f == "" {
			continue
		}
		err := s.update(func(tx *bolt.Tx) error { return pruneFeature(tx, f, o.Before, nodes, ended, &res, s.part) })
		if err != nil {
			return res, fmt.Errorf("store: prune traces of %s: %w", f, err)
		}
	}
	finished := map[string]bool{}
	for _, f := range o.Finished {
		finished[f] = true
	}
	err = s.update(func(tx *bolt.Tx) error { return pruneCommands(tx, o.Before, finished, ended, &res, s.part) })
	return res, err
}

// graphNodes are the traces runs and features name as their nodes, and
// the runs that ended.
func (s *Store) graphNodes() (nodes, ended map[string]bool, err error) {
	nodes, ended = map[string]bool{}, map[string]bool{}
	err = s.view(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketRuns).ForEach(func(_, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			nodes[r.Trace] = true
			if !r.EndedAt.IsZero() || r.Outcome != "" {
				ended[r.ID] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketCounters).ForEach(func(_, v []byte) error {
			var c FeatureCounters
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			nodes[c.Trace], nodes[c.AttemptTrace], nodes[c.BlockTrace] = true, true, true
			return nil
		})
	})
	delete(nodes, "")
	return nodes, ended, err
}

func pruneFeature(tx *bolt.Tx, feature string, before time.Time, nodes, ended map[string]bool, res *control.PruneResult, part func(string) error) error {
	b, idx := tx.Bucket(bucketTraces), tx.Bucket(bucketTraceIndex)
	ic := &indexCursor{c: idx.Cursor(), prefix: indexPrefix(fieldFeature, feature)}
	cutoff := timeBits(before)
	var old []control.Trace
	for bound := uint64(1<<64 - 1); ; {
		seq, v, ok := ic.below(bound)
		if !ok {
			break
		}
		bound = seq
		if stamp(v) >= cutoff {
			continue
		}
		var t control.Trace
		if err := json.Unmarshal(b.Get(seqKey(seq)), &t); err != nil {
			return fmt.Errorf("trace %d: %w", seq, err)
		}
		old = append(old, t) // newest first
	}
	// What other traces hang from must stay: a parent is a node.
	pc := idx.Cursor()
	parent := func(id string) bool {
		p := indexPrefix(fieldParent, id)
		k, _ := pc.Seek(p)
		return k != nil && len(k) == len(p)+8 && string(k[:len(p)]) == string(p)
	}
	x := newIndexer(tx)
	type kind struct{ run, gate, code string }
	newestOf := map[kind]*control.Trace{}
	var folded []control.Trace
	for i := range old {
		t := &old[i]
		res.Examined++
		switch {
		case t.Context.Run == "" || !ended[t.Context.Run] || nodes[t.ID] || parent(t.ID) || t.Source == control.SourceUser:
			res.Kept++
		case t.Type == control.TraceDecision && t.Source == control.SourceHook:
			if err := removeTrace(x, *t); err != nil {
				return err
			}
			if err := part("drop " + t.ID); err != nil {
				return err
			}
			res.Dropped++
		case t.Type == control.TraceViolation:
			k := kind{t.Context.Run, t.Gate, t.Code}
			if keep := newestOf[k]; keep != nil {
				keep.Count = max(1, keep.Count) + max(1, t.Count)
				folded = append(folded, *t)
				continue
			}
			newestOf[k] = t
			res.Kept++
		default:
			res.Kept++
		}
	}
	for _, t := range folded {
		if err := removeTrace(x, t); err != nil {
			return err
		}
		if err := part("fold " + t.ID); err != nil {
			return err
		}
		res.Folded++
	}
	// The newest of each kind now counts those folded into it. Its count
	// is not indexed: the index of mistakes counted them as they came.
	for _, t := range newestOf {
		if t.Count > 1 {
			if err := putJSON(b, seqKey(seqOfID(t.ID)), t); err != nil {
				return err
			}
			if err := part("count of " + t.ID); err != nil {
				return err
			}
		}
	}
	if err := x.flush(); err != nil {
		return err
	}
	return part("term counts")
}

// pruneCommands drops the successful commands that are not tests of ended
// runs of finished features, older than before.
func pruneCommands(tx *bolt.Tx, before time.Time, finished, ended map[string]bool, res *control.PruneResult, part func(string) error) error {
	b := tx.Bucket(bucketCommands)
	if b == nil {
		return nil
	}
	var drop [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var c control.CommandRecord
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("command %d: %w", binary.BigEndian.Uint64(k), err)
		}
		if !finished[c.Feature] || !ended[c.Run] || !c.Time.Before(before) {
			return nil
		}
		if c.ExitCode != 0 || c.IsTest {
			res.CommandsKept++
			return nil
		}
		drop = append(drop, slices.Clone(k))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return err
		}
		if err := part(fmt.Sprintf("drop command %d", binary.BigEndian.Uint64(k))); err != nil {
			return err
		}
		res.CommandsDropped++
	}
	return nil
}

func seqOfID(id string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(id, "tr-"), 10, 64)
	return n
}

// removeTrace deletes trace t, as stored, and takes it out of every index
// (the counters when x is flushed).
func removeTrace(x *indexer, t control.Trace) error {
	seq, err := strconv.ParseUint(strings.TrimPrefix(t.ID, "tr-"), 10, 64)
	if err != nil || !strings.HasPrefix(t.ID, "tr-") {
		return fmt.Errorf("store: remove trace %q: not a trace id (tr-N)", t.ID)
	}
	if err := x.tx.Bucket(bucketTraces).Delete(seqKey(seq)); err != nil {
		return err
	}
	return x.remove(seq, t)
}
