package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// The tests of this file hold a worker with credentials of its own, and
// nothing else, to what docs/operations.md says a worker can do: each
// message it sends about a run is refused unless worker, run, attempt and
// token agree, and no answer to a worker lands outside its own account.

// TestAWorkerCannotEndAnotherWorkersRunThroughTheDaemonsAnswer: a worker
// that asks about b's run, naming b's control subject (or b's inbox) as
// where the answer goes, gets nothing sent there: the request is not acted
// on, b's run goes on to its end, and nothing is held against b.
func TestAWorkerCannotEndAnotherWorkersRunThroughTheDaemonsAnswer(t *testing.T) {
	for _, target := range []string{"control", "inbox"} {
		t.Run(target, func(t *testing.T) {
			dir, repo := lane(t)
			rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
			rig.worker(t, "b", fakeClaude(t))
			tok := rig.g.register("run-0001")
			done := make(chan agents.Result, 1)
			go func() {
				done <- rig.e.Run(context.Background(), spec("run-0001", dir, `sleep 3; echo mine > b.txt`, tok), nil, func(agents.Event) {})
			}()
			na, err := connect(t, rig.s, rig.creds["a"])
			if err != nil {
				t.Fatal(err)
			}
			// Once b runs it: every way a could ask about it, each naming b's
			// subject for the answer.
			if !eventually.Within(20*time.Second, func() bool { return len(rig.e.Activity("b").Runs) == 1 }) {
				t.Fatal("b took no run")
			}
			to := rig.s.Subjects().Worker("b").Control
			if target == "inbox" {
				to = rig.s.Subjects().Worker("b").Inbox + ".x"
			}
			wa := rig.s.Subjects().Worker("a")
			for _, m := range []struct {
				subject string
				v       any
			}{
				{wa.Heartbeat, Heartbeat{Run: "run-0001", Attempt: 1}},
				{wa.Result, Outcome{Run: "run-0001", Attempt: 1}},
				{wa.Claim, Claim{Run: "run-0001", Attempt: 1, Dir: "/x"}},
				{wa.Hook, HookCall{Token: tok}},
			} {
				data, _ := json.Marshal(m.v)
				if err := na.PublishRequest(m.subject, to, data); err != nil {
					t.Fatal(err)
				}
			}
			na.Flush()
			res := <-done
			if !res.OK() || res.Ended != agents.EndExited {
				t.Fatalf("b's run ended %+v; want it to run to its end", res)
			}
			if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
				t.Errorf("b's work did not land: %v", err)
			}
			// Not held against b: anyone's message can come on b's
			// subjects by way of the server's answers.
			if f := rig.e.FindingsOf("b"); f.Count != 0 {
				t.Errorf("findings against b, which did nothing wrong: %+v", f)
			}
		})
	}
}

// TestAWorkersMessagesWithoutTheRunsTokenAreRefused: a worker that holds a
// run, but speaks of it without the token it was given (or with another),
// has its heartbeats answered with a cancel, its outcome refused, its
// events dropped; with the token, its outcome is taken, once.
func TestAWorkersMessagesWithoutTheRunsTokenAreRefused(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	var events []agents.Event
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `true`, tok), nil, func(ev agents.Event) { events = append(events, ev) })
	}()
	job, a, nc := rig.silentWorker(t, "a")
	wa := rig.s.Subjects().Worker("a")
	ask := func(subject string, v any, into any) {
		t.Helper()
		data, _ := json.Marshal(v)
		m, err := nc.Request(subject, data, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(m.Data, into)
	}
	for _, token := range []string{"", "not-" + a.Token} {
		var c Control
		ask(wa.Heartbeat, Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: token}, &c)
		if c.Cancel == "" {
			t.Errorf("a heartbeat with token %q was taken", token)
		}
		var oa OutcomeAnswer
		ask(wa.Result, Outcome{Run: job.Run, Attempt: job.Attempt, Token: token, Result: agents.Result{Ended: agents.EndExited, SawResult: true, Subtype: "success"}}, &oa)
		if oa.Refused == "" {
			t.Errorf("an outcome with token %q was taken", token)
		}
		ev, _ := json.Marshal(Event{Run: job.Run, Attempt: job.Attempt, Token: token, Event: &agents.Event{Kind: "tool_use", Tool: "Forged"}})
		nc.Publish(wa.Events, ev)
	}
	nc.Flush()
	var c Control
	ask(wa.Heartbeat, Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: a.Token}, &c)
	if c.Cancel != "" {
		t.Errorf("the heartbeat with the run's token was answered %+v", c)
	}
	var oa OutcomeAnswer
	ask(wa.Result, Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}}, &oa)
	if oa.Refused != "" {
		t.Fatalf("the outcome with the run's token was refused: %s", oa.Refused)
	}
	ask(wa.Result, Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token}, &oa)
	if oa.Refused == "" {
		t.Error("a second outcome of the attempt was taken")
	}
	<-done
	for _, ev := range events {
		if ev.Tool == "Forged" {
			t.Errorf("an event without the run's token reached the run: %+v", ev)
		}
	}
}

// TestOneWorkersFloodDelaysNoOtherWorker: worker a holds a run whose hooks
// the daemon is slow to answer, and floods the daemon with more hooks,
// heartbeats and events than it keeps waiting; worker b's run meanwhile
// runs to its end, its hooks answered. a's flood waits in a's own mailbox,
// with no more than hooksInFlight of its hooks in flight, and what
// overflows is dropped, a finding against a and none against b.
func TestOneWorkersFloodDelaysNoOtherWorker(t *testing.T) {
	dirA, repoA := lane(t)
	dirB, repoB := lane(t)
	// a's own heartbeats are part of its flood, and dropped with what
	// overflows: a heartbeat of a minute keeps a from being lost, and its
	// run given to b, however slowly the machine serves b's run.
	rig := newRigWith(t, Config{}, ExecutorOptions{Heartbeat: time.Minute}, func(dir string) *gitrepo.Repo {
		if dir == dirA {
			return repoA
		}
		return repoB
	}, "a", "b")
	tokA := rig.g.register("run-a")
	stall := make(chan struct{})
	rig.g.stall = map[string]chan struct{}{"run-a": stall}
	defer close(stall)
	ctx, cancel := context.WithCancel(context.Background())
	ranA := make(chan struct{})
	go func() {
		defer close(ranA)
		rig.e.Run(ctx, spec("run-a", dirA, `true`, tokA), nil, func(agents.Event) {})
	}()
	defer func() { cancel(); <-ranA }()
	job, a, nc := rig.silentWorker(t, "a")
	wa := rig.s.Subjects().Worker("a")
	hook, _ := json.Marshal(HookCall{Token: a.Token})
	beat, _ := json.Marshal(Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: a.Token})
	ev, _ := json.Marshal(Event{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Event: &agents.Event{Kind: "tool_use"}})
	inbox := wa.Inbox + ".flood"
	for i := range 4 * mailboxDepth {
		subject, data := wa.Hook, hook
		switch i % 3 {
		case 1:
			subject, data = wa.Heartbeat, beat
		case 2:
			subject, data = wa.Events, ev
		}
		if err := nc.PublishRequest(subject, inbox, data); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()

	// b's run, with a hook on its way, while a's flood waits.
	rig.worker(t, "b", fakeClaude(t))
	tokB := rig.g.register("run-b")
	res := rig.e.Run(context.Background(), spec("run-b", dirB, `echo b > b.txt`, tokB), nil, func(agents.Event) {})
	if !res.OK() {
		t.Fatalf("b's run, during a's flood: %+v", res)
	}
	if f := rig.e.FindingsOf("a"); f.Count == 0 || !strings.Contains(strings.Join(f.Last, "\n"), "dropped") {
		t.Errorf("findings against a after its flood: %+v; want its overflow dropped", f)
	}
	if f := rig.e.FindingsOf("b"); f.Count != 0 {
		t.Errorf("findings against b: %+v", f)
	}
	// hooksInFlight of a's hooks were let through at once, no more, and
	// no fewer: the bound is the number, not a ceiling never reached.
	if now, most := rig.g.stalledNow(); now != hooksInFlight || most != hooksInFlight {
		t.Errorf("a's hooks held at once: %d now, %d at most; want %d", now, most, hooksInFlight)
	}
	rig.g.mu.Lock()
	answered := 0
	for _, r := range rig.g.hooks {
		if r == "run-a" {
			answered++
		}
	}
	rig.g.mu.Unlock()
	if answered != 0 {
		t.Errorf("%d of a's stalled hooks were answered", answered)
	}
}

// TestRevokingAWorkerIsTotal: revoking worker a while it runs an attempt
// gives the attempt to b at once (not after a's heartbeats are missed),
// uncharged, with a new token; a's results bucket, and what it put there,
// is gone; a's late outcome is refused; and after a restart of the server
// on the same state a's credentials still connect to nothing and its
// bucket is not made again.
func TestRevokingAWorkerIsTotal(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	// Heartbeats so far apart that a lost worker would be noticed only
	// after the test gave up: what gives the run to b is the revocation.
	rig.e.opts.Heartbeat = 30 * time.Second
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `echo done > done.txt`, tok), nil, func(agents.Event) {})
	}()
	kept := filepath.Join(t.TempDir(), "a.creds")
	if data, err := os.ReadFile(rig.creds["a"]); err != nil || os.WriteFile(kept, data, 0o600) != nil {
		t.Fatal(err)
	}
	job, a, nc := rig.silentWorker(t, "a")
	ctx := context.Background()
	ajs, _ := jetstream.New(nc)
	res, err := ajs.ObjectStore(ctx, rig.s.Subjects().ResultsBucket("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.PutBytes(ctx, ResultKey(job.Run, job.Attempt), []byte("a's forged result")); err != nil {
		t.Fatal(err)
	}
	rig.worker(t, "b", fakeClaude(t))
	if err := rig.s.RevokeWorker("a"); err != nil {
		t.Fatal(err)
	}
	var got agents.Result
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not go on on b after a's revocation")
	}
	if !got.OK() {
		t.Fatalf("the run after a's revocation: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "done.txt")); err != nil {
		t.Errorf("b's work is not in the lane: %v", err)
	}
	if !strings.Contains(rig.g.traceTexts(), "worker a was lost (it was revoked)") {
		t.Errorf("no trace says the run left a for its revocation:\n%s", rig.g.traceTexts())
	}
	rig.g.mu.Lock()
	_, known := rig.g.tokens[a.Token]
	rig.g.mu.Unlock()
	if known {
		t.Error("a's token is still known after its revocation")
	}
	djs, _ := jetstream.New(rig.s.Conn())
	if _, err := djs.ObjectStore(ctx, rig.s.Subjects().ResultsBucket("a")); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("a's results bucket after its revocation: %v, want it gone", err)
	}

	// The same state, a new server: a's copy of its credentials, kept
	// from before, still connects to nothing.
	dirState := rig.s.dir
	rig.e.Close()
	rig.s.Shutdown()
	s := start(t, Config{Dir: dirState})
	if _, err := djsOf(t, s).ObjectStore(ctx, s.Subjects().ResultsBucket("a")); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("a's results bucket after a restart: %v, want it still gone", err)
	}
	if ws, _ := s.Workers(); len(ws) != 1 || ws[0].Name != "b" {
		t.Errorf("workers after a restart: %+v, want b alone", ws)
	}
	if _, err := connect(t, s, kept); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a's kept credentials after a restart: %v, want %v", err, nats.ErrAuthorization)
	}
}

func djsOf(t *testing.T, s *Server) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestAWorkerFillsNoMoreThanItsBound: the one store a worker fills, its
// results bucket, is bounded in size and age: a worker that puts more
// than the bound is refused by the server, whatever it does, and what it
// put and nobody read is dropped in a day.
func TestAWorkerFillsNoMoreThanItsBound(t *testing.T) {
	s := start(t, Config{ResultsMaxBytes: 1 << 20})
	path := addWorker(t, s, "a").Path
	nc, err := connect(t, s, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	res, err := js.ObjectStore(ctx, s.Subjects().ResultsBucket("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.PutBytes(ctx, "small", make([]byte, 100<<10)); err != nil {
		t.Fatalf("a result within the bound: %v", err)
	}
	for i := range 3 {
		if _, err := res.PutBytes(ctx, fmt.Sprintf("flood-%d", i), make([]byte, 600<<10)); err != nil {
			break // refused: the bound holds
		}
		if i == 2 {
			t.Fatal("a worker put 1.8 MiB and more in a bucket bounded at 1 MiB")
		}
	}
	st, err := djsOf(t, s).Stream(ctx, "OBJ_"+s.Subjects().ResultsBucket("a"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxBytes != 1<<20 || info.Config.MaxAge != resultsMaxAge || info.State.Bytes > 1<<20 {
		t.Errorf("a's results bucket: max bytes %d, max age %s, holding %d bytes; want 1 MiB, %s, no more", info.Config.MaxBytes, info.Config.MaxAge, info.State.Bytes, resultsMaxAge)
	}
}

// TestAWorkerThatFillsItsBucketIsAFinding: a worker that fills its results
// bucket to its bound (the server refuses the rest) and then names a result
// that could not be put there has the result refused and a finding against
// it, which says the bucket is full.
func TestAWorkerThatFillsItsBucketIsAFinding(t *testing.T) {
	for _, fill := range []bool{false, true} {
		t.Run(fmt.Sprint("full=", fill), func(t *testing.T) {
			dir, repo := lane(t)
			rig := newRigWith(t, Config{ResultsMaxBytes: 2 << 20}, ExecutorOptions{MaxBundleBytes: 512 << 10, Heartbeat: steadyBeat}, func(string) *gitrepo.Repo { return repo }, "a")
			tok := rig.g.register("run-0001")
			done := make(chan agents.Result, 1)
			// Cancelled at the end whatever happens, before the rig closes:
			// a run left waiting must not hold the test's cleanup.
			runCtx, stop := context.WithCancel(context.Background())
			t.Cleanup(stop)
			go func() {
				done <- rig.e.Run(runCtx, spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
			}()
			job, a, nc := rig.silentWorker(t, "a")
			// Alive while it fills its bucket, which under load outlasts
			// the heartbeats' bound: else the attempt is given up as lost
			// and the outcome below is of no open attempt.
			rig.keepAlive(t, nc, "a", job, a.Token)
			ctx := context.Background()
			if fill {
				js, _ := jetstream.New(nc)
				bucket, err := js.ObjectStore(ctx, rig.s.Subjects().ResultsBucket("a"))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 8 {
					if _, err := bucket.PutBytes(ctx, fmt.Sprintf("junk-%d", i), make([]byte, 400<<10)); err != nil {
						break // the bound
					}
				}
			}
			rig.ended(t, nc, "a", job, a, Outcome{Tip: strings.Repeat("1", 40), Result: succeeded})
			var res agents.Result
			select {
			case res = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the run did not end a minute after its outcome")
			}
			if !strings.Contains(res.Text, "the worker's result was refused") {
				t.Errorf("an outcome naming a bundle that is not there: %+v", res)
			}
			f := rig.e.FindingsOf("a")
			if full := slices.ContainsFunc(f.Last, func(s string) bool { return strings.Contains(s, "results bucket is full") }); full != fill {
				t.Errorf("findings %+v; want one saying the bucket is full: %v", f, fill)
			}
		})
	}
}

// TestCtlWorkersSaysWhatEachWorkerDoes: the control API's list of workers
// says, of each, whether it is connected, the runs it holds, when it was
// last heard from, and the findings against it.
func TestCtlWorkersSaysWhatEachWorkerDoes(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	tok := rig.g.register("run-0001")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rig.e.Run(ctx, spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	defer func() { cancel(); <-done }()
	job, as, nc := rig.silentWorker(t, "a")
	l, err := rig.s.Control().Workers(context.Background())
	if err != nil || len(l.Workers) != 2 {
		t.Fatalf("workers: %+v, %v", l, err)
	}
	a, b := l.Workers[0], l.Workers[1]
	if a.Name != "a" || !a.Connected || strings.Join(a.Runs, " ") != "run-0001" || a.LastHeard == nil || time.Since(*a.LastHeard) > time.Minute || a.Findings != 0 {
		t.Errorf("worker a: %+v", a)
	}
	if b.Name != "b" || b.Connected || len(b.Runs) != 0 || b.Runs == nil || b.LastHeard != nil || b.Findings != 0 {
		t.Errorf("worker b: %+v", b)
	}
	// a's figures do not add up: a finding, said in the list.
	res := succeeded
	res.CostUSD = -1
	rig.ended(t, nc, "a", job, as, Outcome{Result: res})
	if !eventually.Within(10*time.Second, func() bool {
		l, err = rig.s.Control().Workers(context.Background())
		// The finding is noted as the outcome is read, the run let go
		// of once it is applied: both, before the list is read.
		return err == nil && l.Workers[0].Findings > 0 && len(l.Workers[0].Runs) == 0
	}) {
		t.Fatalf("workers: %+v", l)
	}
	if a := l.Workers[0]; a.Findings != 1 || len(a.LastFindings) != 1 || !strings.Contains(a.LastFindings[0], "cost was said to be -1") || len(a.Runs) != 0 {
		t.Errorf("worker a after its run: %+v", a)
	}
}

// TestAWorkersCostIsHeldToTheRunsCap: a worker's run whose cost is said
// to be less than nothing counts as its whole cap toward the budgets, and
// one said to be far past the cap is counted as said; both are findings
// against the worker.
func TestAWorkersCostIsHeldToTheRunsCap(t *testing.T) {
	for _, tc := range []struct {
		shown, said, counted float64 // shown: the stream's result event's, 0: none
		finding              bool
	}{
		{said: -5, counted: 2, finding: true},
		{said: 9, counted: 4, finding: true},
		{said: 4, counted: 4},
		{said: 0.5, counted: 0.5},
		// The stream showed more than the outcome says.
		{shown: 0.8, said: 0.01, counted: 0.8, finding: true},
		{shown: 0.8, said: 0, counted: 0.8, finding: true},
		// An earlier result (a subagent's) showed less: the total grew.
		{shown: 0.3, said: 0.5, counted: 0.5},
		{shown: 0.5, said: 0.5, counted: 0.5},
	} {
		t.Run(fmt.Sprint(tc.shown, "/", tc.said), func(t *testing.T) {
			dir, repo := lane(t)
			rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
			tok := rig.g.register("run-0001")
			s := spec("run-0001", dir, `true`, tok)
			s.MaxBudgetUSD = 2
			done := make(chan agents.Result, 1)
			results := make(chan agents.Event, 1)
			go func() {
				done <- rig.e.Run(context.Background(), s, nil, func(ev agents.Event) {
					if ev.Kind == "result" {
						results <- ev
					}
				})
			}()
			job, a, nc := rig.silentWorker(t, "a")
			if tc.shown > 0 {
				ev, _ := json.Marshal(Event{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Event: &agents.Event{Kind: "result", CostUSD: tc.shown}})
				if err := nc.Publish(rig.s.Subjects().Worker("a").Events, ev); err != nil {
					t.Fatal(err)
				}
				select {
				case <-results:
				case <-time.After(10 * time.Second):
					t.Fatal("the stream's result event did not reach the run")
				}
			}
			said := succeeded
			said.CostUSD = tc.said
			rig.ended(t, nc, "a", job, a, Outcome{Result: said})
			res := <-done
			if res.CostUSD != tc.counted {
				t.Errorf("a cost said to be %v counted as %v, want %v", tc.said, res.CostUSD, tc.counted)
			}
			if f := rig.e.FindingsOf("a"); (f.Count > 0) != tc.finding {
				t.Errorf("findings against a: %+v", f)
			}
		})
	}
}

// TestARunAWorkersMachineFailsGoesToAnotherWorker: a worker that cannot
// run Claude Code at all fails a run for its own machine's reason: the run
// goes to another worker, uncharged, and that worker is not given it again;
// when every worker connected has failed it so, the run ends as that
// failure, naming them, and its advice is about their machines.
func TestARunAWorkersMachineFailsGoesToAnotherWorker(t *testing.T) {
	t.Run("another worker runs it", func(t *testing.T) {
		dirB, repoB := lane(t)
		dir, repo := lane(t)
		rig := newRig(t, func(d string) *gitrepo.Repo {
			if d == dirB {
				return repoB
			}
			return repo
		}, "a", "b")
		// b is busy with a run of its own when the run comes: only a,
		// whose Claude Code is missing, can take it first.
		rig.worker(t, "b", fakeClaude(t))
		tokB := rig.g.register("run-b")
		busy := make(chan agents.Result, 1)
		go func() {
			busy <- rig.e.Run(context.Background(), spec("run-b", dirB, `sleep 3`, tokB), nil, func(agents.Event) {})
		}()
		if !eventually.Within(20*time.Second, func() bool { return len(rig.e.Activity("b").Runs) == 1 }) {
			t.Fatal("b did not take its run")
		}
		rig.worker(t, "a", "/nonexistent/claude")
		tok := rig.g.register("run-0001")
		res := rig.e.Run(context.Background(), spec("run-0001", dir, `echo b > b.txt`, tok), nil, func(agents.Event) {})
		if !res.OK() || len(res.Workers) != 0 {
			t.Fatalf("the run after a's machine failed it: %+v", res)
		}
		if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
			t.Errorf("b's work is not in the lane: %v", err)
		}
		if !strings.Contains(rig.g.traceTexts(), "worker a was lost (its machine could not run it (cli_missing") {
			t.Errorf("no trace says the run left a for its machine:\n%s", rig.g.traceTexts())
		}
		<-busy
	})
	t.Run("no worker can", func(t *testing.T) {
		dir, repo := lane(t)
		rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
		rig.worker(t, "a", "/nonexistent/claude")
		tok := rig.g.register("run-0001")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan agents.Result, 1)
		go func() { done <- rig.e.Run(ctx, spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {}) }()
		var res agents.Result
		select {
		case res = <-done:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
			t.Fatal("the run went on waiting for a worker when every worker connected had failed it")
		}
		f, ok := res.Failure("")
		if !ok || f.Kind != agents.FailCLIMissing || strings.Join(res.Workers, ",") != "a" {
			t.Fatalf("the run no worker could run ended %+v (failure %+v)", res, f)
		}
		why := f.Explain("claude")
		for _, want := range []string{"no worker could run it", "(a)", "restart `ctxgraphd worker`"} {
			if !strings.Contains(why, want) {
				t.Errorf("the advice does not say %q: %s", want, why)
			}
		}
		if strings.Contains(why, "agent.command") {
			t.Errorf("the advice names the daemon's agent.command, which is not where a worker's CLI is set: %s", why)
		}
	})
}

// TestWhatTheServerDeliversOnAWorkersBehalfIsNotTheDaemonsWord: a
// worker can have the server publish a message of its making on any
// subject (a JetStream answer goes where the asker says), so what comes
// on a worker's control subject or the work queue is not the daemon's by
// its subject: a cancel without the attempt's token is ignored, and a Job
// whose base is not the daemon's is cloned from the daemon's record.
func TestWhatTheServerDeliversOnAWorkersBehalfIsNotTheDaemonsWord(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "b")
	// A Job of someone else's making is first in the queue, naming the
	// run's first attempt and a base that is no base of the daemon's.
	forged, _ := json.Marshal(Job{Run: "run-0001", Attempt: 1, Base: strings.Repeat("e", 40), Bundle: "run-0001"})
	djs := djsOf(t, rig.s)
	if _, err := djs.Publish(context.Background(), rig.s.Subjects().Lanes(), forged); err != nil {
		t.Fatal(err)
	}
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `sleep 2; echo b > b.txt`, tok), nil, func(agents.Event) {})
	}()
	// The daemon's own Job comes after it: b pulls the forged one first.
	st, err := djs.Stream(context.Background(), rig.s.Subjects().LanesStream())
	if err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(20*time.Second, func() bool {
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 2
	}) {
		t.Fatal("the daemon's Job did not come")
	}
	rig.worker(t, "b", fakeClaude(t))
	if !eventually.Within(20*time.Second, func() bool { return len(rig.e.Activity("b").Runs) == 1 }) {
		t.Fatal("b took no run")
	}
	// The cancel a worker could have the server deliver: the run and
	// attempt are easy to guess, the token is not.
	for _, token := range []string{"", "guessed"} {
		c, _ := json.Marshal(Control{Run: "run-0001", Attempt: 1, Token: token, Cancel: "stop"})
		rig.s.Conn().Publish(rig.s.Subjects().Worker("b").Control, c)
	}
	rig.s.Conn().Flush()
	res := <-done
	if !res.OK() || res.Ended != agents.EndExited {
		t.Fatalf("b's run, after a forged Job and forged cancels: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
		t.Errorf("b's work did not land: %v", err)
	}
}

// TestNoAnswerToAWorkerLandsOutsideItsAccount: the server sends an answer
// where its asker says, the daemon's and JetStream's alike. Worker a asks
// every question it may (each of its subjects, each JetStream call), each
// naming for its answer a subject of someone else's: b's control and
// inbox and requests, the daemon's, the work queue's, a base object's
// metadata, and JetStream calls that would delete or purge what the night
// depends on. None of it reaches the fleet's account or b: the answers go
// to a's own account, where nothing of anyone else's is. The base objects,
// the work queue and its consumer are still there, and nothing is held
// against b.
func TestNoAnswerToAWorkerLandsOutsideItsAccount(t *testing.T) {
	rig := newRig(t, func(string) *gitrepo.Repo { return nil }, "a", "b")
	ctx := context.Background()
	djs := djsOf(t, rig.s)
	base, err := djs.ObjectStore(ctx, rig.s.Subjects().BaseBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.PutBytes(ctx, "c0ffee", []byte("the daemon's base")); err != nil {
		t.Fatal(err)
	}
	sub := rig.s.Subjects()
	wa, wb := sub.Worker("a"), sub.Worker("b")
	baseStream, lanes := objectStream(sub.BaseBucket()), sub.LanesStream()
	targets := []string{
		wb.Control, wb.Inbox + ".x", wb.Hook, wb.Result, wb.Heartbeat, wb.Claim, wb.Events,
		sub.Prefix() + ".daemon.x", sub.Lanes(),
		"$O." + sub.BaseBucket() + ".M." + "YzBmZmVl",
		jsAPI + "STREAM.DELETE." + baseStream,
		jsAPI + "STREAM.PURGE." + baseStream,
		jsAPI + "STREAM.DELETE." + lanes,
		jsAPI + "CONSUMER.DELETE." + lanes + "." + sub.LanesConsumer(),
	}
	// Whatever comes on a target, in the fleet's account or to b.
	landed := make(chan string, 1024)
	for _, subject := range targets {
		s, err := rig.s.Conn().Subscribe(subject, func(m *nats.Msg) { landed <- "fleet: " + m.Subject })
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unsubscribe()
	}
	rig.s.Conn().Flush()
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{wb.Control, wb.Inbox + ".>"} {
		if _, err := nb.Subscribe(subject, func(m *nats.Msg) { landed <- "b: " + m.Subject }); err != nil {
			t.Fatal(err)
		}
	}
	nb.Flush()

	na, err := connect(t, rig.s, rig.creds["a"])
	if err != nil {
		t.Fatal(err)
	}
	pull, _ := json.Marshal(Pull{Wait: time.Second})
	asks := []struct {
		subject string
		data    []byte
	}{
		{wa.Hook, []byte(`{}`)}, {wa.Claim, []byte(`{}`)}, {wa.Result, []byte(`{}`)}, {wa.Heartbeat, []byte(`{}`)},
		{jsAPI + "STREAM.INFO." + baseStream, nil},
		{jsAPI + "DIRECT.GET." + baseStream + ".$O." + sub.BaseBucket() + ".M.YzBmZmVl", nil},
		{jsAPI + "CONSUMER.INFO." + lanes + "." + sub.LanesConsumer(), nil},
		{wa.Pull, pull},
		{"$O." + sub.ResultsBucket("a") + ".C.x", []byte("chunk")},
	}
	for _, ask := range asks {
		for _, to := range targets {
			if err := na.PublishRequest(ask.subject, to, ask.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := na.Flush(); err != nil {
		t.Fatal(err)
	}
	// The answers were sent by now (the pull's after its second).
	time.Sleep(2 * time.Second)
	close(landed)
	for l := range landed {
		t.Errorf("an answer to a landed on %s", l)
	}
	if _, err := base.GetInfo(ctx, "c0ffee"); err != nil {
		t.Errorf("the daemon's base object, after a's questions: %v", err)
	}
	if got, err := base.GetBytes(ctx, "c0ffee"); err != nil || string(got) != "the daemon's base" {
		t.Errorf("the daemon's base object reads %q (%v)", got, err)
	}
	if _, err := djs.Consumer(ctx, lanes, sub.LanesConsumer()); err != nil {
		t.Errorf("the work queue's consumer, after a's questions: %v", err)
	}
	if f := rig.e.FindingsOf("b"); f.Count != 0 {
		t.Errorf("findings against b, which asked nothing: %+v", f)
	}
}

// TestARequestWithoutAnAnswerIsTheSendersFinding: on a worker's subjects
// nothing comes but the worker's own (its account alone imports them), so
// a request that asks for no answer is a finding against that worker and
// is not acted on; a flood of its events drops events only, and its
// heartbeat, sent after them, is taken.
func TestARequestWithoutAnAnswerIsTheSendersFinding(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "b")
	tok := rig.g.register("run-0001")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		rig.e.Run(ctx, spec("run-0001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	defer func() { cancel(); <-ran }()
	job, a, nc := rig.silentWorker(t, "b")
	wb := rig.s.Subjects().Worker("b")
	beat, _ := json.Marshal(Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: a.Token})
	if err := nc.Publish(wb.Heartbeat, beat); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 1<<10)
	for range 4 * mailboxDepth {
		nc.Publish(wb.Events, junk)
	}
	nc.Flush()
	if !eventually.Within(10*time.Second, func() bool { return rig.e.FindingsOf("b").Count == 1 }) {
		t.Fatalf("a heartbeat asking no answer: findings %+v, want the one", rig.e.FindingsOf("b"))
	}
	if f := rig.e.FindingsOf("b"); !strings.Contains(f.Last[0], "asked for no answer") {
		t.Errorf("finding %q", f.Last[0])
	}
	if _, err := nc.Request(wb.Heartbeat, beat, 10*time.Second); err != nil {
		t.Errorf("b's heartbeat after a flood of its events: %v", err)
	}
	if f := rig.e.FindingsOf("b"); f.Count != 1 {
		t.Errorf("findings %+v: a flood of events is no finding, nor is a heartbeat asking its answer", f)
	}
}

// TestANameThatIsNoWorkersGetsNoMailbox: no worker's account imports the
// subjects of a name that is no worker's, so only something in the
// fleet's own account could publish there; should it, each name would
// make a mailbox and its goroutine. None is made.
func TestANameThatIsNoWorkersGetsNoMailbox(t *testing.T) {
	rig := newRig(t, func(string) *gitrepo.Repo { return nil }, "b")
	nc := rig.s.Conn()
	for i := range 64 {
		nc.Publish(rig.s.Subjects().Prefix()+fmt.Sprintf(".worker.ghost-%d.events", i), []byte(`{}`))
		nc.PublishRequest(rig.s.Subjects().Prefix()+fmt.Sprintf(".worker.ghost-%d.hook", i), "x", []byte(`{}`))
	}
	// b's message after them: once b is heard, theirs were handled.
	sent := time.Now()
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if _, err := nb.Request(rig.s.Subjects().Worker("b").Heartbeat, []byte(`{}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(10*time.Second, func() bool { return rig.e.Activity("b").LastHeard.After(sent) }) {
		t.Fatal("b was not heard")
	}
	rig.e.mu.Lock()
	n := len(rig.e.mailboxes)
	rig.e.mu.Unlock()
	if n != 1 {
		t.Errorf("%d mailboxes, want b's alone: names that are no worker's made their own", n)
	}
}

// TestAWorkersPullsOnTheQueueAreBoundedAndEndWithIt: a pull on the work
// queue asks for one Job, for a minute at most (more is refused by the
// server); and the pulls a worker left waiting end with its revocation, so
// that the next Job goes to a worker that is still there.
func TestAWorkersPullsOnTheQueueAreBoundedAndEndWithIt(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	s := rig.s
	na, err := connect(t, s, rig.creds["a"])
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subjects()
	// The pulls that may wait are bounded, whoever makes them (the daemon).
	info, err := djsOf(t, s).Consumer(context.Background(), sub.LanesStream(), sub.LanesConsumer())
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().Config; c.MaxWaiting != pullsMaxWaiting || c.MaxRequestBatch != 1 || c.MaxRequestExpires != pullMaxExpires {
		t.Errorf("the work queue's consumer: max waiting %d, batch %d, expires %s; want %d, 1, %s", c.MaxWaiting, c.MaxRequestBatch, c.MaxRequestExpires, pullsMaxWaiting, pullMaxExpires)
	}
	// A pull takes one Job, however many wait.
	djs := djsOf(t, s)
	for i := range 2 {
		if _, err := djs.Publish(context.Background(), sub.Lanes(), fmt.Appendf(nil, `{"run":"run-000%d","attempt":1}`, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	inbox := sub.Worker("a").Inbox + ".pull"
	answers, err := na.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := json.Marshal(Pull{Wait: time.Second})
	if err := na.PublishRequest(sub.Worker("a").Pull, inbox, one); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		m, err := answers.NextMsg(3 * time.Second)
		if err != nil {
			if i != 1 {
				t.Errorf("one pull of a took %d answers, want one Job", i)
			}
			break
		}
		done, _ := json.Marshal(Ack{Job: m.Header.Get(AckHeader), Kind: AckDone})
		na.Publish(sub.Worker("a").Ack, done)
	}
	// The other Job is taken and acknowledged too, and a holds nothing
	// before its share of pulls is sent: a Job left on the queue would go
	// to the first of them at once, and the share would count it as
	// pulled and not claimed, refusing the last (a race the test lost on
	// a loaded machine).
	if err := na.PublishRequest(sub.Worker("a").Pull, inbox, one); err != nil {
		t.Fatal(err)
	}
	m, err := answers.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("a's second pull took no Job: %v", err)
	}
	done, _ := json.Marshal(Ack{Job: m.Header.Get(AckHeader), Kind: AckDone})
	na.Publish(sub.Worker("a").Ack, done)
	if !eventually.Within(10*time.Second, func() bool {
		rig.e.mu.Lock()
		defer rig.e.mu.Unlock()
		mb := rig.e.mailboxes["a"]
		return mb != nil && mb.pulls == 0 && len(mb.leases) == 0
	}) {
		t.Fatal("a still holds a pull or a Job 10 s after both Jobs were acknowledged")
	}
	// Pulls of a left waiting (its whole share), and a revoked: none of
	// them takes the next Job, which goes to b, still there.
	long, _ := json.Marshal(Pull{Wait: 55 * time.Second})
	for range pullsPerWorker {
		if err := na.PublishRequest(sub.Worker("a").Pull, inbox, long); err != nil {
			t.Fatal(err)
		}
	}
	na.Flush()
	rig.pullsWaiting(t, "a", pullsPerWorker)
	if err := s.RevokeWorker("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := djs.Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-0003","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	nb, err := connect(t, s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for {
		q, err := pullJob(context.Background(), nb, sub.Worker("b"), 3*time.Second)
		if err != nil || q == nil {
			break
		}
		var job Job
		json.Unmarshal(q.Data(), &job)
		got[job.Run] = true
		q.Ack()
	}
	if !got["run-0003"] {
		t.Errorf("b pulled %v after a's revocation, want run-0003 among them: a pull a left took it", got)
	}
}

// TestAJobDroppedWithoutAClaimIsPutBack: a worker that pulls a run's Job
// and drops it (Term) without claiming it takes it off the queue; the
// daemon, seeing no worker hold the attempt, puts it there again, and the
// next worker runs it.
func TestAJobDroppedWithoutAClaimIsPutBack(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	rig.e.opts.WaitingNotice = 100 * time.Millisecond
	tok := rig.g.register("run-0001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-0001", dir, `echo b > b.txt`, tok), nil, func(agents.Event) {})
	}()
	nc, err := connect(t, rig.s, rig.creds["a"])
	if err != nil {
		t.Fatal(err)
	}
	rig.pull(t, nc, "a", 15*time.Second).Term()
	rig.worker(t, "b", fakeClaude(t))
	select {
	case res := <-done:
		if !res.OK() {
			t.Fatalf("the run after its Job was dropped: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run's Job, dropped without a claim, was not put back")
	}
}

// TestFindingsKeepTheLastFewAndCountAll: a worker's findings past the bound
// kept are all counted, and the last maxFindingsKept of them kept, newest
// last, whatever their number.
func TestFindingsKeepTheLastFewAndCountAll(t *testing.T) {
	for _, n := range []int{0, 1, maxFindingsKept - 1, maxFindingsKept, maxFindingsKept + 1, 3 * maxFindingsKept} {
		e := &Executor{findings: map[string]*Findings{}, log: zap.NewNop()}
		for i := range n {
			e.finding("a", fmt.Sprint(i))
		}
		f := e.FindingsOf("a")
		var want []string
		for i := max(0, n-maxFindingsKept); i < n; i++ {
			want = append(want, fmt.Sprint(i))
		}
		if f.Count != n || !slices.Equal(f.Last, want) {
			t.Errorf("%d findings: %+v, want count %d and the last %q", n, f, n, want)
		}
	}
}

// TestOneOutcomeAnAttempt: a worker's second outcome of the attempt it
// holds, with its token and while the run is still the daemon's, is
// refused and a finding: the run gets one, and the handler, which every
// worker's results pass through, is never left waiting on a run's channel.
func TestOneOutcomeAnAttempt(t *testing.T) {
	sub, _ := NewSubjects("proj")
	r := &remote{spec: RemoteRun{RunID: "run-0001"}, attempt: 1, token: "tok", worker: "a", msgs: make(chan any, 1)}
	e := &Executor{subjects: sub, log: zap.NewNop(), runs: map[string]*remote{"run-0001": r}, tokens: map[string]*remote{"tok": r},
		findings: map[string]*Findings{}}
	out, _ := json.Marshal(Outcome{Run: "run-0001", Attempt: 1, Token: "tok"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			e.onOutcome(&nats.Msg{Subject: sub.Worker("a").Result, Reply: sub.Worker("a").Inbox + ".x", Data: out})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a second outcome left the handler waiting on the run's channel")
	}
	if len(r.msgs) != 1 {
		t.Errorf("the run got %d outcomes of its attempt, want one", len(r.msgs))
	}
	if f := e.FindingsOf("a"); f.Count != 2 {
		t.Errorf("findings against a: %+v, want one for each outcome past the first", f)
	}
}

// TestAJobPulledForAWorkerGoneGoesBackAtOnce: a worker's pull waits at the
// daemon, and the worker is gone (killed) before a Job comes: the Job the
// daemon's pull takes for it goes back on the queue at once, to a worker
// still there, not after the queue's AckWait.
func TestAJobPulledForAWorkerGoneGoesBackAtOnce(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"])
	if err != nil {
		t.Fatal(err)
	}
	long, _ := json.Marshal(Pull{Wait: 30 * time.Second})
	if err := na.PublishRequest(sub.Worker("a").Pull, sub.Worker("a").Inbox+".gone", long); err != nil {
		t.Fatal(err)
	}
	na.Flush()
	rig.pullsWaiting(t, "a", 1)
	na.Close()
	if !eventually.Within(5*time.Second, func() bool { return !slices.Contains(rig.s.ConnectedWorkers(), "a") }) {
		t.Fatal("a is still connected after its connection closed")
	}
	if _, err := djsOf(t, rig.s).Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-0001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	if q, err := pullJob(context.Background(), nb, sub.Worker("b"), 10*time.Second); q == nil {
		t.Errorf("b got no Job in 10 s (%v): the one a's pull took, a gone, waits for the queue's AckWait (%s)", err, laneAckWait)
	}
}

// TestAClaimsAnswerThatCannotBeReadIsNoGrant: a worker whose claim is
// answered with what is no Assignment (a daemon's bug, a message of
// someone else's) does not run the Job as granted with no token: it drops
// the Job (Term), as for a refusal.
func TestAClaimsAnswerThatCannotBeReadIsNoGrant(t *testing.T) {
	s := start(t, Config{})
	c, err := LoadCredentials(addWorker(t, s, "a").Path)
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subjects()
	daemon := s.Conn()
	claims, err := daemon.Subscribe(sub.Worker("a").Claim, func(m *nats.Msg) { m.Respond([]byte("not an assignment")) })
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Unsubscribe()
	acks, err := daemon.SubscribeSync(sub.Worker("a").Ack)
	if err != nil {
		t.Fatal(err)
	}
	daemon.Flush()
	nc, err := connect(t, s, filepath.Join(s.dir, "workers", "a.creds"))
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{opts: WorkerOptions{Credentials: c, Dir: t.TempDir()}, fleet: sub, subjects: sub.Worker("a"), nc: nc, log: zap.NewNop()}
	job := &queued{nc: nc, data: []byte(`{"run":"run-0001","attempt":1}`), job: "the job", to: sub.Worker("a").Ack}
	if a, _, ok := w.claim(context.Background(), job); ok {
		t.Fatalf("a claim answered with no Assignment was taken as granted: %+v", a)
	}
	nc.Flush()
	m, err := acks.NextMsg(5 * time.Second)
	var got Ack
	if err == nil {
		err = json.Unmarshal(m.Data, &got)
	}
	if err != nil || got != (Ack{Job: "the job", Kind: AckDrop}) {
		t.Errorf("the Job was acknowledged %+v (%v); want it dropped", got, err)
	}
}

// TestARevokedWorkersJobsGoBackAtOnce: a Job the daemon pulled for a,
// which a holds and has not ended, goes back on the queue when a is
// revoked, to b, not after the queue's AckWait.
func TestARevokedWorkersJobsGoBackAtOnce(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djsOf(t, rig.s).Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-0001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	rig.pull(t, na, "a", 5*time.Second)
	if err := rig.s.RevokeWorker("a"); err != nil {
		t.Fatal(err)
	}
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	if q, err := pullJob(context.Background(), nb, sub.Worker("b"), 10*time.Second); q == nil {
		t.Errorf("b got no Job in 10 s (%v): the one revoked a held waits for the queue's AckWait (%s)", err, laneAckWait)
	}
}
