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
	return ts, s.appends.append(s, ts)
}

// QueueTraces stores traces after it returns: it queues them behind every
// append queued before, and a writer commits them. It is for a caller that
// must not wait for the disk and does not need the ids: the hook's
// answer, which a violation's commit (its fsync) would hold up several
// times over.
//
// Nothing queued is lost but to a crash: every transaction of the store,
// a read or a write, begins once the traces queued before it are stored,
// so that whatever comes after QueueTraces returned (the next hook, a
// run's judging, `ctl why`) finds them, in the order they were queued;
// and Close stores them before it closes. A crash of the process between
// QueueTraces and the commit loses what was queued.
//
// done, if not nil, is told the outcome once the commit ended. It runs on
// the writer and must not use the store.
func (s *Store) QueueTraces(done func(error), ts ...control.Trace) {
	if len(ts) == 0 {
		if done != nil {
			done(nil)
		}
		return
	}
	s.appends.queue(s, ts, done)
}

// appendTraces writes every batch in one transaction. It is the writer's
// own transaction: it does not wait for the queue (settle), which waits
// for it.
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

// appendQueue is a group commit, in the order the appends came. When no
// commit is under way, a waiting append (AppendTraces) commits at once in
// its caller's goroutine, and a queued one (QueueTraces) starts a writer
// goroutine that commits it after queueDelay. The appends that come while a
// commit is under way, or the writer waits, queue, and the next commit,
// the writer's, takes all of them in one transaction. A lone append never waits for company (bbolt's DB.Batch
// would hold it up to its MaxBatchDelay, 10 ms, on a hook's answer), and a
// burst costs one fsync, not one each.
//
// One commit at a time (busy) keeps the order: ids are given in the order
// the appends were queued.
type appendQueue struct {
	mu      sync.Mutex
	busy    bool
	pending []*appendReq
	// queued and stored count the appends ever queued and those whose
	// commit ended (stored or failed): a transaction waits until stored
	// reaches what queued was when it began (settle).
	queued, stored uint64
	// moved, when made, is closed when stored moves.
	moved chan struct{}
	// hurry tells a writer waiting out queueDelay that someone waits for
	// what is queued: commit now.
	hurry chan struct{}
	// onQueue, when set (tests), is told of each append that queues behind
	// a commit under way.
	onQueue func()
}

// queueDelay is how long a queued append's commit waits, unless someone
// waits for it. The hook that queued it has its answer: the commit's work
// (some 0.7 ms of CPU, then the fsync) is better done once the hook's
// process has printed it and exited than beside it, on a machine whose
// cores the runs keep busy; and the calls that follow a denial (a run's
// next try, concurrent tool calls) share its commit.
const queueDelay = 2 * time.Millisecond

type appendReq struct {
	ts   []control.Trace
	done func(error) // told the commit's outcome
}

// append commits ts and returns once it is stored.
func (q *appendQueue) append(s *Store, ts []control.Trace) error {
	outcome := make(chan error, 1)
	if q.enqueue(&appendReq{ts: ts, done: func(err error) { outcome <- err }}) {
		q.commit(s)
	} else {
		q.hasten()
	}
	return <-outcome
}

// queue has ts committed, and returns at once.
func (q *appendQueue) queue(s *Store, ts []control.Trace, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if q.enqueue(&appendReq{ts: ts, done: done}) {
		go q.commitSoon(s)
	}
}

// enqueue adds r behind what is queued and says whether its caller must
// start the commit: none is under way.
func (q *appendQueue) enqueue(r *appendReq) (lead bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, r)
	q.queued++
	if q.hurry == nil {
		q.hurry = make(chan struct{}, 1)
	}
	if q.busy {
		if q.onQueue != nil {
			q.onQueue()
		}
		return false
	}
	q.busy = true
	return true
}

// commit commits what is queued, in one transaction. What queued meanwhile
// is committed next by a writer goroutine: the caller of a waiting append
// does not wait for others' traces.
func (q *appendQueue) commit(s *Store) {
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()

	all := make([][]control.Trace, len(batch))
	for i, r := range batch {
		all[i] = r.ts
	}
	err := s.appendTraces(all)

	q.mu.Lock()
	q.stored += uint64(len(batch))
	if q.moved != nil {
		close(q.moved)
		q.moved = nil
	}
	more := len(q.pending) > 0
	q.busy = more // the writer below takes over
	q.mu.Unlock()
	for _, r := range batch {
		r.done(err)
	}
	if more {
		go q.commit(s)
	}
}

// commitSoon commits what is queued after queueDelay, or as soon as
// someone waits for it (hasten).
func (q *appendQueue) commitSoon(s *Store) {
	q.mu.Lock()
	hurry := q.hurry
	q.mu.Unlock()
	t := time.NewTimer(queueDelay)
	select {
	case <-t.C:
	case <-hurry:
		t.Stop()
	}
	q.commit(s)
}

// hasten has a writer waiting out queueDelay commit now. A hurry no
// writer takes is left for the next one, which then commits at once.
func (q *appendQueue) hasten() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hastenLocked()
}

func (q *appendQueue) hastenLocked() {
	select {
	case q.hurry <- struct{}{}:
	default: // one is already there
	}
}

// settle returns once every append queued before it began is stored (or
// failed).
func (q *appendQueue) settle() {
	q.mu.Lock()
	want := q.queued
	if q.stored < want {
		q.hastenLocked()
	}
	for q.stored < want {
		if q.moved == nil {
			q.moved = make(chan struct{})
		}
		moved := q.moved
		q.mu.Unlock()
		<-moved
		q.mu.Lock()
	}
	q.mu.Unlock()
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
	err = s.view(func(tx *bolt.Tx) error {
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
	return s.update(func(tx *bolt.Tx) error {
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
	err := s.view(func(tx *bolt.Tx) error {
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
