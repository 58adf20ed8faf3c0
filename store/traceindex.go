package store

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/terms"
)

// The traces' indexes (schema 2). A query of a million traces must not
// decode a million JSON records, so every trace is also filed, in the same
// transaction as the trace itself, under each of its fields, its time and,
// for violations, its words. Index keys end with the trace's big-endian
// sequence, so that within one value they are in the order the traces were
// appended and a query walks them backwards from the newest.
var (
	// field | len | value | seq → timestamp; fieldAll | 0 | seq → timestamp;
	// fieldTime | timestamp | seq → nothing.
	bucketTraceIndex = []byte("trace_index")
	// len | term | seq → term frequency, words in the trace, its feature:
	// the postings of the violations' words.
	bucketTraceTerms = []byte("trace_terms")
	// term → how many violations hold it (BM25's document frequency).
	bucketTraceTermDF = []byte("trace_term_df")
	// keyDocs, keyWords → how many violations are indexed and their words.
	bucketTraceStats = []byte("trace_stats")
	// role | gate | code | feature → count, newest sequence: the refusals
	// of agents of a role, counted as they are appended.
	bucketTraceMistakes = []byte("trace_mistakes")

	keyDocs  = []byte("docs")
	keyWords = []byte("words")
)

// traceIndexBuckets are the buckets schema 2 adds.
var traceIndexBuckets = [][]byte{bucketTraceIndex, bucketTraceTerms, bucketTraceTermDF, bucketTraceStats, bucketTraceMistakes}

// Fields of the trace index.
const (
	fieldAll     = 'S' // every trace: the walk when no field is asked for
	fieldType    = 't'
	fieldAgent   = 'a'
	fieldFeature = 'f'
	fieldRun     = 'r'
	fieldGate    = 'g'
	fieldParent  = 'p'
	fieldPath    = 'P' // the file a trace is about, and each directory above it
	fieldTime    = 'T'
)

// maxIndexedValue bounds the bytes of a value in an index key (bbolt keys
// are at most 32 KiB). A longer value is filed under its first bytes; the
// query checks every candidate against the whole filter anyway.
const maxIndexedValue = 512

func indexPrefix(field byte, value string) []byte {
	if len(value) > maxIndexedValue {
		value = value[:maxIndexedValue]
	}
	k := make([]byte, 0, 3+len(value)+8)
	k = append(k, field)
	k = binary.BigEndian.AppendUint16(k, uint16(len(value)))
	return append(k, value...)
}

// timeBits orders timestamps as unsigned integers, those before 1970 too.
func timeBits(t time.Time) uint64 { return uint64(t.UnixNano()) ^ 1<<63 }

func timeKey(t time.Time, seq uint64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, fieldTime)
	k = binary.BigEndian.AppendUint64(k, timeBits(t))
	return binary.BigEndian.AppendUint64(k, seq)
}

// indexFields are the (field, value) pairs a trace is filed under; empty
// values are not filed (a filter never asks for one).
func indexFields(t control.Trace) [][2]string {
	out := [][2]string{{string(rune(fieldAll)), ""}}
	for _, fv := range [][2]string{
		{string(rune(fieldType)), t.Type}, {string(rune(fieldAgent)), t.Context.Agent}, {string(rune(fieldFeature)), t.Context.Feature},
		{string(rune(fieldRun)), t.Context.Run}, {string(rune(fieldGate)), t.Gate}, {string(rune(fieldParent)), t.Parent},
	} {
		if fv[1] != "" {
			out = append(out, fv)
		}
	}
	for _, p := range pathKeys(t.Path) {
		out = append(out, [2]string{string(rune(fieldPath)), p})
	}
	return out
}

// pathKeys are where a trace about file path is filed: the file, and each
// directory above it with a trailing slash ("src/a/b.go", "src/a/",
// "src/"), so that the traces about a directory's files are one walk.
func pathKeys(path string) []string {
	if path == "" {
		return nil
	}
	keys := []string{path}
	for i := len(path) - 1; i > 0; i-- {
		if path[i-1] == '/' {
			keys = append(keys, path[:i])
		}
	}
	return keys
}

// mistakeKey is where a violation counts among its role's mistakes, and
// whether it counts at all: what an agent stored is its word, not a
// refusal, and a violation of no agent is no role's mistake.
func mistakeKey(t control.Trace) ([]byte, bool) {
	if t.Type != control.TraceViolation || t.Source == control.SourceAgent || t.Context.Agent == "" {
		return nil, false
	}
	return tuple(t.Context.Agent, t.Gate, t.Code, t.Context.Feature), true
}

// tuple joins strings, each after its length, so that each can be read
// back and a tuple of the first n is a prefix of any longer one.
func tuple(parts ...string) []byte {
	var k []byte
	for _, p := range parts {
		if len(p) > maxIndexedValue {
			p = p[:maxIndexedValue]
		}
		k = binary.BigEndian.AppendUint16(k, uint16(len(p)))
		k = append(k, p...)
	}
	return k
}

// TraceText is the text of a trace that queries search and the index of
// words holds: what happened, what was correct, why.
func TraceText(t control.Trace) string {
	return t.Event.WhatHappened + " " + t.Event.WhatWasCorrect + " " + t.Event.Why
}

// wordsOf are a violation's terms with their frequency, and its length in
// terms; nothing for other traces (only violations are searched by
// likeness: graph.Select).
func wordsOf(t control.Trace) (map[string]int, int) {
	if t.Type != control.TraceViolation {
		return nil, 0
	}
	ws := terms.Of(TraceText(t))
	tf := make(map[string]int, len(ws))
	for _, w := range ws {
		tf[w]++
	}
	return tf, len(ws)
}

func postingPrefix(term string) []byte {
	k := make([]byte, 0, 1+len(term)+8)
	k = append(k, byte(len(term)))
	return append(k, term...)
}

// indexer files traces in the indexes within one transaction. The
// counters many traces share (a word's document frequency, the size of
// the collection, a role's mistakes) are summed in memory and written
// once, when the transaction's traces are all filed (flush): a commit of
// a hundred violations writes each counter once, not a hundred times.
type indexer struct {
	tx        *bolt.Tx
	idx, post *bolt.Bucket
	df        map[string]int64
	docs      int64
	words     int64
	mistakes  map[string]*mistakeDelta
}

type mistakeDelta struct {
	count  uint64
	newest uint64
}

func newIndexer(tx *bolt.Tx) *indexer {
	x := &indexer{tx: tx, idx: tx.Bucket(bucketTraceIndex), post: tx.Bucket(bucketTraceTerms), df: map[string]int64{}, mistakes: map[string]*mistakeDelta{}}
	// Keys come in at the end of their value's range, rarely in between:
	// fuller pages make a smaller file and fewer pages to write.
	x.idx.FillPercent, x.post.FillPercent = 0.9, 0.9
	return x
}

// add files trace t, stored under seq, in every index.
func (x *indexer) add(seq uint64, t control.Trace) error {
	ts := binary.BigEndian.AppendUint64(nil, timeBits(t.Timestamp))
	for _, fv := range indexFields(t) {
		if err := x.idx.Put(binary.BigEndian.AppendUint64(indexPrefix(fv[0][0], fv[1]), seq), ts); err != nil {
			return err
		}
	}
	if err := x.idx.Put(timeKey(t.Timestamp, seq), nil); err != nil {
		return err
	}
	if k, ok := mistakeKey(t); ok {
		m := x.mistakes[string(k)]
		if m == nil {
			m = &mistakeDelta{}
			x.mistakes[string(k)] = m
		}
		m.count += uint64(max(1, t.Count))
		m.newest = max(m.newest, seq)
	}
	tf, n := wordsOf(t)
	if n == 0 {
		return nil
	}
	for w, f := range tf {
		v := binary.AppendUvarint(nil, uint64(f))
		v = binary.AppendUvarint(v, uint64(n))
		v = append(v, t.Context.Feature...)
		if err := x.post.Put(binary.BigEndian.AppendUint64(postingPrefix(w), seq), v); err != nil {
			return err
		}
		x.df[w]++
	}
	x.docs++
	x.words += int64(n)
	return nil
}

// remove takes trace t, stored under seq, out of every index but the
// mistakes' counts: those count what happened, and compaction keeps the
// newest of each kind with the count of those it folds into it.
func (x *indexer) remove(seq uint64, t control.Trace) error {
	for _, fv := range indexFields(t) {
		if err := x.idx.Delete(binary.BigEndian.AppendUint64(indexPrefix(fv[0][0], fv[1]), seq)); err != nil {
			return err
		}
	}
	if err := x.idx.Delete(timeKey(t.Timestamp, seq)); err != nil {
		return err
	}
	tf, n := wordsOf(t)
	if n == 0 {
		return nil
	}
	for w := range tf {
		if err := x.post.Delete(binary.BigEndian.AppendUint64(postingPrefix(w), seq)); err != nil {
			return err
		}
		x.df[w]--
	}
	x.docs--
	x.words -= int64(n)
	return nil
}

// flush writes the counters; the indexer is spent.
func (x *indexer) flush() error {
	df := x.tx.Bucket(bucketTraceTermDF)
	for w, d := range x.df {
		if d == 0 {
			continue
		}
		if err := addCounter(df, []byte(w), d); err != nil {
			return err
		}
	}
	stats := x.tx.Bucket(bucketTraceStats)
	if err := addCounter(stats, keyDocs, x.docs); err != nil {
		return err
	}
	if err := addCounter(stats, keyWords, x.words); err != nil {
		return err
	}
	b := x.tx.Bucket(bucketTraceMistakes)
	for k, m := range x.mistakes {
		count, newest := uint64(0), uint64(0)
		if v := b.Get([]byte(k)); len(v) == 16 {
			count, newest = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		}
		v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, count+m.count), max(newest, m.newest))
		if err := b.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// addCounter adds d to the big-endian counter at k, deleting it at zero.
func addCounter(b *bolt.Bucket, k []byte, d int64) error {
	if d == 0 {
		return nil
	}
	var n int64
	if v := b.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += d
	if n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

func counter(b *bolt.Bucket, k []byte) int {
	if v := b.Get(k); len(v) == 8 {
		return int(binary.BigEndian.Uint64(v))
	}
	return 0
}

// migrateTraceIndexes is schema 1 → 2: the indexes, built for the traces
// already there.
func migrateTraceIndexes(tx *bolt.Tx) error {
	for _, name := range traceIndexBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	b := tx.Bucket(bucketTraces)
	if b == nil {
		return nil
	}
	x := newIndexer(tx)
	err := b.ForEach(func(k, v []byte) error {
		var t control.Trace
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("trace %d: %w", binary.BigEndian.Uint64(k), err)
		}
		return x.add(binary.BigEndian.Uint64(k), t)
	})
	if err != nil {
		return err
	}
	return x.flush()
}

// indexCursor walks the entries of one value of an index, whose keys are
// prefix | seq, from the newest down.
type indexCursor struct {
	c      *bolt.Cursor
	prefix []byte
	buf    []byte
	at     uint64 // the sequence the cursor is on, when on
	on     bool
}

// below returns the entry with the greatest sequence under bound, and its
// value (valid for the transaction). Asked for the entry just under the
// one it is on, it steps back; otherwise it seeks.
func (ic *indexCursor) below(bound uint64) (seq uint64, v []byte, ok bool) {
	var k []byte
	if ic.on && ic.at == bound {
		k, v = ic.c.Prev()
	} else {
		ic.buf = binary.BigEndian.AppendUint64(append(ic.buf[:0], ic.prefix...), bound)
		k, v = ic.c.Seek(ic.buf)
		if k == nil {
			k, v = ic.c.Last()
		} else {
			k, v = ic.c.Prev()
		}
	}
	if k == nil || len(k) != len(ic.prefix)+8 || string(k[:len(ic.prefix)]) != string(ic.prefix) {
		ic.on = false
		return 0, nil, false
	}
	ic.at, ic.on = binary.BigEndian.Uint64(k[len(ic.prefix):]), true
	return ic.at, v, true
}

// stamp reads the timestamp an entry of the trace index holds.
func stamp(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// Traces returns the traces matching f, oldest first (the newest Limit when
// Limit is set). It walks the indexes of the fields asked for together,
// from the newest trace down, and decodes only the traces that match, so
// that its cost follows what it returns, not how many traces there are.
// A text filter is checked on each candidate.
func (s *Store) Traces(f TraceFilter) ([]control.Trace, error) {
	var out []control.Trace
	err := s.view(func(tx *bolt.Tx) error {
		b, idx := tx.Bucket(bucketTraces), tx.Bucket(bucketTraceIndex)
		if b == nil || idx == nil {
			return nil
		}
		q := query{f: f, traces: b, out: &out}
		if !f.Since.IsZero() {
			q.since = timeBits(f.Since)
		}
		q.until = math.MaxUint64
		if !f.Until.IsZero() {
			q.until = timeBits(f.Until)
		}
		q.before = math.MaxUint64
		if f.Before != "" {
			q.before = seqOfID(f.Before)
		}
		var cursors []*indexCursor
		for _, fv := range [][2]string{
			{string(rune(fieldType)), f.Type}, {string(rune(fieldAgent)), f.Agent}, {string(rune(fieldFeature)), f.Feature},
			{string(rune(fieldRun)), f.Run}, {string(rune(fieldGate)), f.Gate}, {string(rune(fieldParent)), f.Parent},
			{string(rune(fieldPath)), f.PathUnder},
		} {
			if fv[1] != "" {
				cursors = append(cursors, &indexCursor{c: idx.Cursor(), prefix: indexPrefix(fv[0][0], fv[1])})
			}
		}
		if len(cursors) == 0 && (!f.Since.IsZero() || !f.Until.IsZero()) {
			return q.byTime(idx)
		}
		if len(cursors) == 0 {
			cursors = append(cursors, &indexCursor{c: idx.Cursor(), prefix: indexPrefix(fieldAll, "")})
		}
		return q.intersect(cursors)
	})
	slices.Reverse(out)
	return out, err
}

// query is one Traces call under way: the filter, its time bounds as
// index bits, and what matched so far, newest first.
type query struct {
	f            TraceFilter
	since, until uint64 // since ≤ time < until
	before       uint64 // sequence < before
	traces       *bolt.Bucket
	out          *[]control.Trace
}

func (q *query) inTime(ts uint64) bool { return ts >= q.since && ts < q.until }

func (q *query) full() bool { return q.f.Limit > 0 && len(*q.out) >= q.f.Limit }

// take decodes the trace at seq and keeps it if it matches the whole filter.
func (q *query) take(seq uint64) error {
	v := q.traces.Get(seqKey(seq))
	if v == nil {
		return fmt.Errorf("store: the trace index names trace %d, which is not stored: the index is damaged; restore the database from a backup", seq)
	}
	var t control.Trace
	if err := json.Unmarshal(v, &t); err != nil {
		return fmt.Errorf("store: trace %d: %w", seq, err)
	}
	if q.f.match(t) {
		*q.out = append(*q.out, t)
	}
	return nil
}

// intersect walks the traces every cursor holds, newest first: each
// cursor in turn jumps to the greatest sequence not above the others'
// (a zig-zag join), so that traces matching one field only are skipped a
// B-tree seek at a time, never decoded.
func (q *query) intersect(cs []*indexCursor) error {
	bound := q.before // exclusive
	for !q.full() {
		seq, v, ok := cs[0].below(bound)
		ts := stamp(v)
		if !ok {
			return nil
		}
		agree := true
		for _, c := range cs[1:] {
			s2, _, ok := c.below(seq + 1)
			if !ok {
				return nil
			}
			if s2 != seq {
				bound, agree = s2+1, false
				break
			}
		}
		if !agree {
			continue
		}
		if q.inTime(ts) {
			if err := q.take(seq); err != nil {
				return err
			}
		}
		bound = seq
	}
	return nil
}

// byTime answers a filter of time (and text) alone. Two walks go in
// step: every trace from the newest down, checking its time, and the
// traces of the time range in the time index. The first to finish
// answers: the newest when the range holds many traces (the Limit is
// reached early), the range when it holds few.
func (q *query) byTime(idx *bolt.Bucket) error {
	all := &indexCursor{c: idx.Cursor(), prefix: indexPrefix(fieldAll, "")}
	rc := idx.Cursor()
	lo := []byte{fieldTime}
	lo = binary.BigEndian.AppendUint64(lo, q.since)
	var inRange []uint64
	rk, _ := rc.Seek(lo)
	bound := q.before
	for {
		// The newest-first walk: one trace.
		if q.f.Limit > 0 {
			seq, v, ok := all.below(bound)
			if !ok {
				return nil
			}
			if q.inTime(stamp(v)) {
				if err := q.take(seq); err != nil {
					return err
				}
				if q.full() {
					return nil
				}
			}
			bound = seq
		}
		// The range walk: one entry.
		if rk == nil || rk[0] != fieldTime || len(rk) != 17 || binary.BigEndian.Uint64(rk[1:]) >= q.until {
			break
		}
		if seq := binary.BigEndian.Uint64(rk[9:]); seq < q.before {
			inRange = append(inRange, seq)
		}
		rk, _ = rc.Next()
	}
	// The range is all there is: its traces, newest first.
	*q.out = (*q.out)[:0]
	slices.Sort(inRange)
	for _, seq := range slices.Backward(inRange) {
		if err := q.take(seq); err != nil {
			return err
		}
		if q.full() {
			break
		}
	}
	return nil
}

// TraceID is the id of the trace stored under seq.
func TraceID(seq uint64) string { return "tr-" + strconv.FormatUint(seq, 10) }

// MistakeKind counts the refusals of agents of one role by one gate for
// one reason: the aggregate graph.Select reads instead of the violations
// themselves.
type MistakeKind struct {
	Gate, Code string
	Count      int
	// Features are where they happened, the most recent first.
	Features []string
	// Newest is the id of the newest, NewestSeq its sequence (the
	// greater, the newer).
	Newest    string
	NewestSeq uint64
}

// Mistakes returns the refusals of agents of role on features other than
// except, by gate and reason, counted since the first trace (what an agent
// stored is not counted), in no particular order.
func (s *Store) Mistakes(role, except string) ([]MistakeKind, error) {
	type seen struct {
		feature string
		seq     uint64
	}
	var out []MistakeKind
	var where [][]seen
	byKind := map[string]int{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTraceMistakes)
		if b == nil {
			return nil
		}
		prefix := tuple(role)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			// The key's parts after the role: gate, code, feature.
			rest := k[len(prefix):]
			var parts [3][]byte
			ok := len(v) == 16
			for i := range parts {
				if len(rest) < 2 || len(rest) < 2+int(binary.BigEndian.Uint16(rest)) {
					ok = false
					break
				}
				n := int(binary.BigEndian.Uint16(rest))
				parts[i], rest = rest[2:2+n], rest[2+n:]
			}
			if !ok || len(rest) != 0 || string(parts[2]) == except {
				continue
			}
			kind := k[len(prefix) : len(k)-2-len(parts[2])] // gate and code, as keyed
			i, found := byKind[string(kind)]
			if !found {
				i = len(out)
				byKind[string(kind)] = i
				out = append(out, MistakeKind{Gate: string(parts[0]), Code: string(parts[1])})
				where = append(where, nil)
			}
			seq := binary.BigEndian.Uint64(v[8:])
			out[i].Count += int(binary.BigEndian.Uint64(v))
			where[i] = append(where[i], seen{string(parts[2]), seq})
			if seq > out[i].NewestSeq {
				out[i].NewestSeq = seq
			}
		}
		return nil
	})
	for i := range out {
		slices.SortFunc(where[i], func(a, b seen) int { return cmp.Compare(b.seq, a.seq) })
		out[i].Features = make([]string, len(where[i]))
		for j, w := range where[i] {
			out[i].Features[j] = w.feature
		}
		out[i].Newest = TraceID(out[i].NewestSeq)
	}
	return out, err
}

// Posting is one violation that holds a term.
type Posting struct {
	Seq     uint64 // the trace's sequence: TraceID(Seq) is its id
	TF      int    // how often the term is in it
	Len     int    // how many terms it has
	Feature string // its feature
}

// Collection describes the indexed violations as BM25 needs it.
type Collection struct {
	Docs  int            // how many violations are indexed
	Words int            // their terms, all told
	DF    map[string]int // per term asked for, how many violations hold it
}

// Postings calls visit with the violations that hold each term, newest
// first, until visit returns false, and returns the counts of the whole
// collection. The ranking is the caller's (graph); the store keeps the
// postings.
func (s *Store) Postings(ts []string, visit func(term string, p Posting) bool) (Collection, error) {
	col := Collection{DF: map[string]int{}}
	err := s.view(func(tx *bolt.Tx) error {
		post, df, stats := tx.Bucket(bucketTraceTerms), tx.Bucket(bucketTraceTermDF), tx.Bucket(bucketTraceStats)
		if post == nil || df == nil || stats == nil {
			return nil
		}
		col.Docs, col.Words = counter(stats, keyDocs), counter(stats, keyWords)
		for _, term := range ts {
			if len(term) > terms.MaxLen {
				term = term[:terms.MaxLen]
			}
			col.DF[term] = counter(df, []byte(term))
			ic := &indexCursor{c: post.Cursor(), prefix: postingPrefix(term)}
			bound := uint64(math.MaxUint64)
			for {
				seq, v, ok := ic.below(bound)
				if !ok {
					break
				}
				tf, n1 := binary.Uvarint(v)
				l, n2 := binary.Uvarint(v[max(n1, 0):])
				if n1 <= 0 || n2 <= 0 {
					return fmt.Errorf("store: posting of %q in trace %d is unreadable: the index is damaged", term, seq)
				}
				if !visit(term, Posting{Seq: seq, TF: int(tf), Len: int(l), Feature: string(v[n1+n2:])}) {
					break
				}
				bound = seq
			}
		}
		return nil
	})
	return col, err
}
