package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/terms"

	bolt "go.etcd.io/bbolt"
)

// randomTraces are n traces over few values of each field, with times out
// of order, so that every filter matches some and misses others.
func randomTraces(r *rand.Rand, n int) []control.Trace {
	base := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	words := strings.Fields("parser scope outside tested write shared log tail webhook retry backoff config file")
	out := make([]control.Trace, n)
	for i := range out {
		var text []string
		for range 1 + r.IntN(6) {
			text = append(text, words[r.IntN(len(words))])
		}
		out[i] = control.Trace{
			Timestamp: base.Add(time.Duration(r.IntN(1000)) * time.Minute),
			Type:      control.TraceTypes[r.IntN(len(control.TraceTypes))],
			Source:    pick(control.SourceHook, control.SourceAuto, control.SourceUser, control.SourceAgent),
			Gate:      pick("", "scope", "tested-needs-evidence", "log-read-limit"),
			Code:      pick("", "outside_scope", "no_test_run"),
			Parent:    pick("", "", "tr-1", "tr-2", "tr-3"),
			Path:      pick("", "", "src/a.go", "src/sub/b.go", "srcx/c.go", "README.md"),
			Context: control.TraceContext{Agent: pick("", "coding-agent", "tester-agent"), Feature: pick("", "F-001", "F-002", "F-003", "F-004"),
				Run: pick("", "run-000001", "run-000002", "run-000003")},
			Event: control.TraceEvent{WhatHappened: strings.Join(text, " "), WhatWasCorrect: pick("", "stay in scope")},
		}
	}
	return out
}

// stored reads every stored trace, newest first, as a scan does.
func stored(t *testing.T, s *Store) []control.Trace {
	t.Helper()
	var all []control.Trace
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTraces).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var tr control.Trace
			if err := json.Unmarshal(v, &tr); err != nil {
				return err
			}
			all = append(all, tr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// bruteForce is what Traces must return: every trace matched, the newest
// Limit, oldest first.
func bruteForce(all []control.Trace, f TraceFilter) []string {
	var ids []string
	for _, tr := range all {
		if f.match(tr) {
			ids = append(ids, tr.ID)
			if f.Limit > 0 && len(ids) == f.Limit {
				break
			}
		}
	}
	slices.Reverse(ids)
	return ids
}

func randomFilter(r *rand.Rand) TraceFilter {
	base := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	f := TraceFilter{
		Type:    pick("", "", control.TraceViolation, control.TraceDecision, control.TraceLesson),
		Agent:   pick("", "", "coding-agent", "tester-agent"),
		Feature: pick("", "", "F-001", "F-004", "F-999"),
		Run:     pick("", "", "", "run-000002"),
		Gate:    pick("", "", "scope", "log-read-limit"),
		Parent:  pick("", "", "", "tr-2"),
		// A directory's traces, a file's, and a prefix that is not a
		// directory of them ("src/" must not take "srcx/c.go").
		PathUnder: pick("", "", "", "src/", "src/sub/", "src/a.go", "README.md"),
		Text:      pick("", "", "", "SCOPE", "webhook retry"),
		Limit:     []int{0, 1, 5, 50}[r.IntN(4)],
		Before:    pick("", "", "", "tr-1", "tr-700", "tr-1400"),
	}
	if r.IntN(3) == 0 {
		f.Since = base.Add(time.Duration(r.IntN(1000)) * time.Minute)
	}
	if r.IntN(3) == 0 {
		f.Until = base.Add(time.Duration(r.IntN(1000)) * time.Minute)
	}
	return f
}

func idsOf(ts []control.Trace) []string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return ids
}

// checkQueries compares indexed queries with the brute-force scan.
func checkQueries(t *testing.T, s *Store, r *rand.Rand, n int) {
	t.Helper()
	all := stored(t, s)
	for range n {
		f := randomFilter(r)
		got, err := s.Traces(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteForce(all, f); !slices.Equal(idsOf(got), want) {
			t.Fatalf("filter %+v:\n got %v\nwant %v", f, idsOf(got), want)
		}
	}
}

// Every filter the indexes answer answers as a scan of every trace does.
func TestIndexedQueriesMatchAScan(t *testing.T) {
	s, _ := openTemp(t)
	r := rand.New(rand.NewPCG(1, 2))
	trs := randomTraces(r, 1500)
	for i := 0; i < len(trs); i += 250 {
		if _, err := s.AppendTraces(trs[i : i+250]...); err != nil {
			t.Fatal(err)
		}
	}
	checkQueries(t, s, r, 500)

	// Fixed cases a random draw may miss: no filter, time alone, limits.
	base := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for _, f := range []TraceFilter{
		{}, {Limit: 1}, {Limit: 10},
		{Since: base.Add(999 * time.Minute)}, {Since: base.Add(999 * time.Minute), Limit: 3},
		{Since: base.Add(10 * time.Minute), Limit: 3}, {Until: base.Add(2 * time.Minute), Limit: 3},
		{Since: base.Add(500 * time.Minute), Until: base.Add(501 * time.Minute)},
		{Since: base.Add(500 * time.Minute), Until: base.Add(500 * time.Minute)},
		{Text: "no such words"}, {Text: "no such words", Limit: 5},
		{Type: control.TraceLesson, Agent: "coding-agent", Feature: "F-001", Run: "run-000001", Gate: "scope", Parent: "tr-1", Limit: 2},
	} {
		got, err := s.Traces(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteForce(stored(t, s), f); !slices.Equal(idsOf(got), want) {
			t.Errorf("filter %+v:\n got %v\nwant %v", f, idsOf(got), want)
		}
	}
}

// indexEntries counts what the trace index, postings and counters hold.
func indexEntries(t *testing.T, s *Store) (index, postings, docs int) {
	t.Helper()
	s.db.View(func(tx *bolt.Tx) error {
		index = tx.Bucket(bucketTraceIndex).Stats().KeyN
		postings = tx.Bucket(bucketTraceTerms).Stats().KeyN
		docs = counter(tx.Bucket(bucketTraceStats), keyDocs)
		return nil
	})
	return
}

// An index that a write forgets shows: after traces are appended and
// taken out again, every index is as if they had never been.
func TestIndexesFollowAppendAndRemoval(t *testing.T) {
	s, _ := openTemp(t)
	r := rand.New(rand.NewPCG(3, 4))
	kept := randomTraces(r, 200)
	if _, err := s.AppendTraces(kept...); err != nil {
		t.Fatal(err)
	}
	i0, p0, d0 := indexEntries(t, s)
	gone, err := s.AppendTraces(randomTraces(r, 300)...)
	if err != nil {
		t.Fatal(err)
	}
	if i1, p1, _ := indexEntries(t, s); i1 <= i0 || p1 <= p0 {
		t.Fatalf("appending 300 traces left the index at %d entries (was %d) and the postings at %d (was %d)", i1, i0, p1, p0)
	}
	checkQueries(t, s, r, 200)
	err = s.db.Update(func(tx *bolt.Tx) error {
		x := newIndexer(tx)
		for _, g := range gone {
			if err := removeTrace(x, g); err != nil {
				return err
			}
		}
		return x.flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	if i2, p2, d2 := indexEntries(t, s); i2 != i0 || p2 != p0 || d2 != d0 {
		t.Errorf("after removing them: index %d entries (want %d), postings %d (want %d), docs %d (want %d)", i2, i0, p2, p0, d2, d0)
	}
	checkQueries(t, s, r, 200)
}

// Hooks of concurrent tool calls append at once: they share commits
// (one fsync for many), and each trace is stored before its append
// returns.
func TestConcurrentAppendsShareCommits(t *testing.T) {
	s, _ := openTemp(t)
	const n = 20
	// The first append commits alone; the others queue behind it.
	release := make(chan struct{})
	queued := make(chan struct{}, n)
	s.appends.onQueue = func() { queued <- struct{}{} }
	var wg sync.WaitGroup
	first := make(chan struct{})
	wg.Go(func() {
		// Held inside its commit until the others are queued.
		err := s.db.Update(func(*bolt.Tx) error { close(first); <-release; return nil })
		if err != nil {
			t.Error(err)
		}
	})
	<-first
	// bbolt allows one writer: while the Update above holds it, the
	// leader's commit waits, and the rest queue behind the leader.
	ids := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			out, err := s.AppendTraces(control.Trace{Type: control.TraceViolation, Event: control.TraceEvent{WhatHappened: fmt.Sprint("call ", i)}})
			if err != nil {
				t.Error(err)
				return
			}
			got, ok, err := s.Trace(out[0].ID)
			if err != nil || !ok || got.Event.WhatHappened != fmt.Sprint("call ", i) {
				t.Errorf("trace %s not stored when its append returned: %+v %v %v", out[0].ID, got, ok, err)
			}
			ids <- out[0].ID
		})
	}
	for range n - 1 {
		<-queued
	}
	close(release)
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("id %s given twice", id)
		}
		seen[id] = true
	}
	if c := s.commits.Load(); c != 2 {
		t.Errorf("%d appends took %d commits, want 2 (the first alone, the %d that queued behind it together)", n, c, n-1)
	}
}

// A database of schema 1 gets its indexes when a daemon opens it.
func TestMigrationIndexesExistingTraces(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	trs := randomTraces(r, 300)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := migrations[0](tx); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keySchema, []byte("1")); err != nil {
			return err
		}
		b := tx.Bucket(bucketTraces)
		for i := range trs {
			seq, _ := b.NextSequence()
			trs[i].ID = fmt.Sprintf("tr-%d", seq)
			if err := putJSON(b, seqKey(seq), trs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _ := s.Schema(); v != SchemaVersion {
		t.Fatalf("schema %d after migration, want %d", v, SchemaVersion)
	}
	checkQueries(t, s, r, 200)
	if _, _, docs := indexEntries(t, s); docs != len(slices.DeleteFunc(slices.Clone(trs), func(t control.Trace) bool { return t.Type != control.TraceViolation })) {
		t.Errorf("%d violations indexed by their words", docs)
	}
}

// The mistakes' aggregate counts refusals by role, gate and reason, on
// features other than the one asked about, names the newest and where
// they happened, and never counts what an agent stored.
func TestMistakes(t *testing.T) {
	s, _ := openTemp(t)
	v := func(role, feature, gate, code, source string) control.Trace {
		return control.Trace{Type: control.TraceViolation, Source: source, Gate: gate, Code: code, Context: control.TraceContext{Agent: role, Feature: feature}}
	}
	_, err := s.AppendTraces(
		v("coding-agent", "F-001", "scope", "outside_scope", control.SourceHook),
		v("coding-agent", "F-001", "scope", "outside_scope", control.SourceHook),
		v("coding-agent", "F-002", "scope", "outside_scope", control.SourceAuto),
		v("coding-agent", "F-002", "scope", "outside_scope", control.SourceAgent),
		v("tester-agent", "F-001", "scope", "outside_scope", control.SourceHook),
		v("", "F-001", "scope", "outside_scope", control.SourceHook),
		control.Trace{Type: control.TraceDecision, Source: control.SourceHook, Gate: "scope", Context: control.TraceContext{Agent: "coding-agent", Feature: "F-003"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		role, except string
		want         []MistakeKind
	}{
		{"coding-agent", "", []MistakeKind{{Gate: "scope", Code: "outside_scope", Count: 3, Features: []string{"F-002", "F-001"}, Newest: "tr-3", NewestSeq: 3}}},
		{"coding-agent", "F-002", []MistakeKind{{Gate: "scope", Code: "outside_scope", Count: 2, Features: []string{"F-001"}, Newest: "tr-2", NewestSeq: 2}}},
		{"coding-agent", "F-001", []MistakeKind{{Gate: "scope", Code: "outside_scope", Count: 1, Features: []string{"F-002"}, Newest: "tr-3", NewestSeq: 3}}},
		{"tester-agent", "", []MistakeKind{{Gate: "scope", Code: "outside_scope", Count: 1, Features: []string{"F-001"}, Newest: "tr-5", NewestSeq: 5}}},
		{"coding", "", nil}, // a role's prefix is not the role
	} {
		got, err := s.Mistakes(tt.role, tt.except)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, tt.want, func(a, b MistakeKind) bool {
			return a.Gate == b.Gate && a.Code == b.Code && a.Count == b.Count && slices.Equal(a.Features, b.Features) && a.Newest == b.Newest && a.NewestSeq == b.NewestSeq
		}) {
			t.Errorf("Mistakes(%q, except %q) = %+v\nwant %+v", tt.role, tt.except, got, tt.want)
		}
	}
}

// Postings name each violation holding a term, newest first, with the
// counts BM25 needs.
func TestPostings(t *testing.T) {
	s, _ := openTemp(t)
	_, err := s.AppendTraces(
		control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: "Read of the whole build log", WhatWasCorrect: "read its tail"}},
		control.Trace{Type: control.TraceDecision, Event: control.TraceEvent{WhatHappened: "the build log was read"}},
		control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "log log log"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	col, err := s.Postings([]string{"log", "tail", "nothing"}, func(term string, p Posting) bool {
		got = append(got, fmt.Sprintf("%s:%s tf=%d len=%d %s", term, TraceID(p.Seq), p.TF, p.Len, p.Feature))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"log:tr-3 tf=3 len=3 F-002", "log:tr-1 tf=1 len=6 F-001", "tail:tr-1 tf=1 len=6 F-001"}
	if !slices.Equal(got, want) {
		t.Errorf("postings %q, want %q", got, want)
	}
	if col.Docs != 2 || col.Words != 9 || col.DF["log"] != 2 || col.DF["tail"] != 1 || col.DF["nothing"] != 0 {
		t.Errorf("collection %+v", col)
	}
}

func TestTimeBitsOrder(t *testing.T) {
	ts := []time.Time{time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), time.Unix(0, 1), time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(ts); i++ {
		a, b := binary.BigEndian.AppendUint64(nil, timeBits(ts[i-1])), binary.BigEndian.AppendUint64(nil, timeBits(ts[i]))
		if string(a) >= string(b) {
			t.Errorf("%v does not sort before %v", ts[i-1], ts[i])
		}
	}
}

// TestPostingsHoldWordsOfEveryLength: a word of any length a violation
// holds, short, long (a hash, a path run together) or past terms.MaxLen
// (indexed by its cut, as asked for), is found by Postings while the
// violation is there, and no longer once compaction folds it away.
func TestPostingsHoldWordsOfEveryLength(t *testing.T) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{3, 8, 9, 10, 17, 32, terms.MaxLen - 1, terms.MaxLen, terms.MaxLen + 1, 4 * terms.MaxLen} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, _ := openTemp(t)
			word := strings.Repeat("q7", n)[:n]
			run := RunID(1)
			if err := s.Apply(Batch{Runs: []Run{{Seq: 1, ID: run, Feature: "F-001", EndedAt: base, Outcome: "ok"}}}); err != nil {
				t.Fatal(err)
			}
			in := control.TraceContext{Agent: "coding-agent", Feature: "F-001", Run: run}
			_, err := s.AppendTraces(
				control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Context: in, Timestamp: base,
					Event: control.TraceEvent{WhatHappened: "wrote " + word + " outside"}},
				control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Context: in, Timestamp: base.Add(time.Minute),
					Event: control.TraceEvent{WhatHappened: "wrote elsewhere outside"}},
			)
			if err != nil {
				t.Fatal(err)
			}
			postings := func() ([]string, int) {
				var got []string
				col, err := s.Postings([]string{word}, func(_ string, p Posting) bool {
					got = append(got, fmt.Sprintf("%s tf=%d len=%d", TraceID(p.Seq), p.TF, p.Len))
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				return got, col.DF[word[:min(n, terms.MaxLen)]] // Postings asks for the cut
			}
			if got, df := postings(); !slices.Equal(got, []string{"tr-1 tf=1 len=3"}) || df != 1 {
				t.Errorf("a word of %d bytes: postings %q, document frequency %d; want tr-1 alone, 1", n, got, df)
			}
			if res, err := s.Prune(PruneOptions{Before: base.Add(time.Hour), Finished: []string{"F-001"}}); err != nil || res.Folded != 1 {
				t.Fatalf("prune: %+v, %v; want tr-1 folded into tr-2", res, err)
			}
			if got, df := postings(); len(got) != 0 || df != 0 {
				t.Errorf("a word of %d bytes, its violation folded away: postings %q, document frequency %d; want none", n, got, df)
			}
			// A word no violation holds any more leaves nothing behind: the
			// index does not grow with every word it ever saw.
			s.db.View(func(tx *bolt.Tx) error {
				if v := tx.Bucket(bucketTraceTermDF).Get([]byte(word[:min(n, terms.MaxLen)])); v != nil {
					t.Errorf("a word of %d bytes no violation holds still has a document frequency stored: %x", n, v)
				}
				return nil
			})
		})
	}
}

// TestMistakesOfEmptyParts: a refusal is counted whichever of its gate,
// code and feature is empty (the initializer's refusals are on no
// feature), as any other, and "" as the exception leaves out the refusals
// of no feature only.
func TestMistakesOfEmptyParts(t *testing.T) {
	s, _ := openTemp(t)
	const role = "initializer-agent"
	type kind struct{ gate, code string }
	var kinds []kind
	var trs []control.Trace
	for _, gate := range []string{"", "scope"} {
		for _, code := range []string{"", "outside_scope"} {
			kinds = append(kinds, kind{gate, code})
			for _, feature := range []string{"", "F-001"} { // the feature's is the newer
				trs = append(trs, control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: gate, Code: code, Context: control.TraceContext{Agent: role, Feature: feature}})
			}
		}
	}
	if _, err := s.AppendTraces(trs...); err != nil {
		t.Fatal(err)
	}
	for _, except := range []string{"F-002", "F-001", ""} {
		got, err := s.Mistakes(role, except)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b MistakeKind) int { return strings.Compare(a.Gate+"/"+a.Code, b.Gate+"/"+b.Code) })
		var want []MistakeKind
		for i, k := range kinds {
			m := MistakeKind{Gate: k.gate, Code: k.code}
			for j, feature := range []string{"F-001", ""} { // newest first
				if feature != except {
					m.Count++
					m.Features = append(m.Features, feature)
					m.NewestSeq = max(m.NewestSeq, uint64(2*i+2-j))
				}
			}
			m.Newest = TraceID(m.NewestSeq)
			want = append(want, m)
		}
		if !slices.EqualFunc(got, want, func(a, b MistakeKind) bool {
			return a.Gate == b.Gate && a.Code == b.Code && a.Count == b.Count && slices.Equal(a.Features, b.Features) && a.Newest == b.Newest
		}) {
			t.Errorf("Mistakes(%q, except %q) = %+v\nwant %+v", role, except, got, want)
		}
	}
}

// TestMistakesSkipADamagedIndex: an entry of the mistakes' index that is
// not what the store writes (a key cut short anywhere, or longer; a value
// of the wrong size) is skipped, never read as a mistake, and the sound
// entries beside it are counted.
func TestMistakesSkipADamagedIndex(t *testing.T) {
	s, _ := openTemp(t)
	const role = "coding-agent"
	_, err := s.AppendTraces(control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: "scope", Code: "outside_scope", Context: control.TraceContext{Agent: role, Feature: "F-001"}})
	if err != nil {
		t.Fatal(err)
	}
	sound := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), 1)
	key := tuple(role, "tests", "no_test_run", "F-002")
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTraceMistakes)
		for n := len(tuple(role)) + 1; n < len(key); n++ {
			if err := b.Put(key[:n], sound); err != nil {
				return err
			}
		}
		if err := b.Put(append(slices.Clone(key), 0), sound); err != nil {
			return err
		}
		return b.Put(tuple(role, "tests", "no_test_run", "F-003"), sound[:8])
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Mistakes(role, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Gate != "scope" || got[0].Code != "outside_scope" || got[0].Count != 1 || !slices.Equal(got[0].Features, []string{"F-001"}) {
		t.Errorf("Mistakes = %+v, want the one sound refusal alone", got)
	}
}

// TestPostingsRefuseADamagedIndex: a posting whose counts cannot be read
// (no bytes, or a term frequency without the violation's length) is an
// error that says the index is damaged, not a posting of zeros.
func TestPostingsRefuseADamagedIndex(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value []byte
		err   bool
	}{
		{"sound", binary.AppendUvarint(binary.AppendUvarint(nil, 2), 7), false},
		{"sound, with its feature", append(binary.AppendUvarint(binary.AppendUvarint(nil, 2), 7), "F-001"...), false},
		{"empty", nil, true},
		{"a term frequency alone", binary.AppendUvarint(nil, 2), true},
		{"a term frequency cut short", []byte{0x80}, true},
		{"a length cut short", append(binary.AppendUvarint(nil, 2), 0x80), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTemp(t)
			err := s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketTraceTerms).Put(binary.BigEndian.AppendUint64(postingPrefix("outside"), 1), tt.value)
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []Posting
			_, err = s.Postings([]string{"outside"}, func(_ string, p Posting) bool { got = append(got, p); return true })
			if tt.err {
				if err == nil || !strings.Contains(err.Error(), "damaged") {
					t.Errorf("Postings of %x = %+v, %v; want an error saying the index is damaged", tt.value, got, err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0].TF != 2 || got[0].Len != 7 {
				t.Errorf("Postings of %x = %+v, %v; want tf 2, length 7", tt.value, got, err)
			}
		})
	}
}
