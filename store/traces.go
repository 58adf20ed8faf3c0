package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketTraces   = []byte("traces")
	bucketCommands = []byte("commands")
)

// AppendTraces stores traces, giving each its id and sequence, and files
// them in the indexes. They are on disk when it returns. Appends made at
// the same time (the hooks of concurrent tool calls) share one transaction
// and one fsync: see appendQueue.
func (s *Store) AppendTraces(ts ...control.Trace) ([]control.Trace, error) {
	if len(ts) == 0 {
		return ts, nil
	}
	return ts, s.appends.do(s, ts)
}

// appendTraces writes every batch in one transaction.
func (s *Store) appendTraces(batches [][]control.Trace) error {
	s.commits.Add(1)
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketTraces)
		if err != nil {
			return err
		}
		b.FillPercent = 0.95 // sequence keys: pages are only ever appended to
		x := newIndexer(tx)
		for _, ts := range batches {
			for i := range ts {
				seq, _ := b.NextSequence()
				ts[i].ID = fmt.Sprintf("tr-%d", seq)
				if ts[i].Timestamp.IsZero() {
					ts[i].Timestamp = time.Now().UTC()
				}
				if err := putJSON(b, seqKey(seq), ts[i]); err != nil {
					return err
				}
				if err := s.part("trace " + ts[i].ID); err != nil {
					return err
				}
				if err := x.add(seq, ts[i]); err != nil {
					return err
				}
				if err := s.part("indexes of " + ts[i].ID); err != nil {
					return err
				}
			}
		}
		if err := x.flush(); err != nil {
			return err
		}
		return s.part("term counts")
	})
}

// appendQueue is a group commit. The first appender commits at once; the
// appenders that come while it commits queue, and the next of them
// commits all that queued in one transaction. A lone append never waits
// (bbolt's DB.Batch would hold it up to its MaxBatchDelay, 10 ms, on a
// hook's answer), and a burst costs one fsync, not one each.
type appendQueue struct {
	mu      sync.Mutex
	busy    bool
	pending []*appendReq
	// queued, when set (tests), is told of each append that queues.
	queued func()
}

type appendReq struct {
	ts   []control.Trace
	done chan error    // the append's outcome
	lead chan struct{} // or: commit what is queued
}

func (q *appendQueue) do(s *Store, ts []control.Trace) error {
	q.mu.Lock()
	if q.busy {
		r := &appendReq{ts: ts, done: make(chan error, 1), lead: make(chan struct{}, 1)}
		q.pending = append(q.pending, r)
		if q.queued != nil {
			q.queued()
		}
		q.mu.Unlock()
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
		}
		q.mu.Lock()
		// r leads: it is first in pending and commits the queue.
	} else {
		q.busy = true
		q.pending = append(q.pending, &appendReq{ts: ts})
	}
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()

	all := make([][]control.Trace, len(batch))
	for i, r := range batch {
		all[i] = r.ts
	}
	err := s.appendTraces(all)
	for _, r := range batch[1:] {
		r.done <- err
	}

	q.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].lead <- struct{}{} // the next leader; busy stays
	} else {
		q.busy = false
	}
	q.mu.Unlock()
	return err
}

// TraceFilter selects traces; zero fields match everything.
type TraceFilter struct {
	Type    string
	Agent   string
	Feature string
	Run     string
	Gate    string
	Parent  string // the traces that follow from this one
	// PathUnder: the traces about this file or, ending in a slash, about a
	// file under this directory.
	PathUnder string
	Since     time.Time // at or after
	Until     time.Time // before
	// Before selects the traces appended before this one (an id, tr-N):
	// the next page of a walk from the newest.
	Before string
	Text   string // case-insensitive, in what happened, what was correct, why
	Limit  int    // newest first when set
}

func (f TraceFilter) match(t control.Trace) bool {
	if f.Type != "" && t.Type != f.Type || f.Agent != "" && t.Context.Agent != f.Agent ||
		f.Feature != "" && t.Context.Feature != f.Feature || f.Run != "" && t.Context.Run != f.Run || f.Gate != "" && t.Gate != f.Gate || f.Parent != "" && t.Parent != f.Parent ||
		!f.Since.IsZero() && t.Timestamp.Before(f.Since) || !f.Until.IsZero() && !t.Timestamp.Before(f.Until) ||
		f.Before != "" && seqOfID(t.ID) >= seqOfID(f.Before) || f.PathUnder != "" && !pathUnder(t.Path, f.PathUnder) {
		return false
	}
	if f.Text != "" {
		hay := strings.ToLower(t.Event.WhatHappened + "\n" + t.Event.WhatWasCorrect + "\n" + t.Event.Why + "\n" + t.Code)
		if !strings.Contains(hay, strings.ToLower(f.Text)) {
			return false
		}
	}
	return true
}

// pathUnder reports whether path is the file want or, when want ends in a
// slash, a file under that directory.
func pathUnder(path, want string) bool {
	if strings.HasSuffix(want, "/") {
		return strings.HasPrefix(path, want)
	}
	return path == want
}

// Trace returns one trace by id.
func (s *Store) Trace(id string) (control.Trace, bool, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "tr-"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "tr-") {
		return control.Trace{}, false, nil
	}
	var t control.Trace
	found := false
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTraces)
		if b == nil {
			return nil
		}
		v := b.Get(seqKey(n))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &t)
	})
	return t, found, err
}

// AppendCommand records a command an agent ran.
func (s *Store) AppendCommand(c control.CommandRecord) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCommands)
		if err != nil {
			return err
		}
		seq, _ := b.NextSequence()
		return putJSON(b, seqKey(seq), c)
	})
}

// Commands returns the commands of a run, oldest first ("" for all).
func (s *Store) Commands(run string) ([]control.CommandRecord, error) {
	var out []control.CommandRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCommands)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var c control.CommandRecord
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			if run == "" || c.Run == run {
				out = append(out, c)
			}
			return nil
		})
	})
	return out, err
}
