package fleet

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/branch"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
)

// Red-team tests: each holds worker a's credentials and nothing else, and
// tries one route against the promise of docs/operations.md ("one
// worker's credentials reach only that worker's own work"). A test that
// fails is a route found open; one that passes, a route tried and closed.
// Each comment says how its route worked when the review found it (the
// daemon's behaviour then); every route here is closed now, and its test
// holds it closed. A route found and still open would have its test in
// attack_open_test.go (-tags openroutes); none is today.

// quiet is a connection option that swallows the server's asynchronous
// errors (permissions violations), which a's attacks provoke on purpose.
func quiet() nats.Option {
	return nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
}

// TestAttackPermissionViolationsFloodTheDaemonsLog: route: a publishes, as
// fast as it likes, on a subject it may not (the daemon's own); the
// server refuses each with a permissions violation, but does not cut a
// off, and logs an error line for every one into the daemon's log (the
// server runs in the daemon, its log is the daemon's, stderr without
// sampling). Promise: a cannot grow the daemon's memory or disk without
// bound (the executor bounds its own findings' log for this reason).
func TestAttackPermissionViolationsFloodTheDaemonsLog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := start(t, Config{Log: zap.New(core)})
	na, err := connect(t, s, addWorker(t, s, "a").Path, quiet())
	if err != nil {
		t.Fatal(err)
	}
	const sent = 5000
	for i := range sent {
		na.Publish(s.Subjects().Prefix()+".daemon.x"+fmt.Sprint(i%7), []byte("x"))
	}
	na.Flush()
	// Waiting until the server has read them all.
	var n int
	eventually.Within(5*time.Second, func() bool {
		n = logs.FilterMessageSnippet("Violation").Len()
		return n >= sent
	})
	if !na.IsConnected() {
		t.Logf("a was cut off (good)")
	}
	if n > 100 {
		t.Errorf("%d forbidden publishes of a made %d lines in the daemon's log, and a is still connected (%v): a log a worker fills at will", sent, n, na.IsConnected())
	}
}

// ackSubject is an ack subject of the work queue's consumer for stream
// sequence sseq and delivery sequence dseq (the rest the server does not
// check).
func ackSubject(sub Subjects, sseq, dseq int) string {
	return fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.0.0", sub.LanesStream(), sub.LanesConsumer(), sseq, dseq)
}

// TestAttackAcksPastTheQueueFloodTheDaemonsLog: route: a acknowledged, on
// the ack subjects it could publish on then ($JS.ACK.<lanes>.workers.>),
// stream sequences past the queue's last; the server ignored each but
// warned of it in the daemon's log. Now acks go through the daemon (Ack):
// a sends them straight to the queue (refused) and to the daemon, for
// Jobs it was never given (findings). Promise: as above, no unbounded
// growth of the daemon's log at a's will.
func TestAttackAcksPastTheQueueFloodTheDaemonsLog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	rig := newRigWith(t, Config{Log: zap.New(core)}, ExecutorOptions{}, nil, "a")
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	sub := rig.s.Subjects()
	const sent = 3000
	for i := range sent {
		na.Publish(ackSubject(sub, 1_000_000+i, 1), []byte("+ACK"))
		forged, _ := json.Marshal(Ack{Job: ackSubject(sub, 1_000_000+i, 1), Kind: AckDone})
		na.Publish(sub.Worker("a").Ack, forged)
	}
	na.Flush()
	// Each a finding, but those its mailbox dropped.
	if !eventually.Within(10*time.Second, func() bool { return rig.e.FindingsOf("a").Count >= sent/2 }) {
		t.Errorf("a's %d acks of Jobs it was never given made %d findings", sent, rig.e.FindingsOf("a").Count)
	}
	if n := logs.Len(); n > 200 {
		t.Errorf("%d acks of a, past the queue's end, made %d lines in the daemon's log", 2*sent, n)
	}
}

// TestAttackAckOfAJobNotYetDelivered: route: a terms (or acks) a Job no
// worker was delivered yet, guessing its ack subject (the stream and
// delivery sequences are small integers), so as to wipe the queue before
// b can pull; straight to the queue, and through the daemon. Promise: a
// cannot end another worker's run nor keep work from the other workers.
func TestAttackAckOfAJobNotYetDelivered(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	s, pa := rig.s, rig.creds["a"]
	sub := s.Subjects()
	djs := djsOf(t, s)
	if _, err := djs.Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-000001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	na, err := connect(t, s, pa, quiet())
	if err != nil {
		t.Fatal(err)
	}
	forge(na, sub)
	time.Sleep(300 * time.Millisecond)
	nb, err := connect(t, s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	if q, err := pullJob(context.Background(), nb, sub.Worker("b"), 3*time.Second); q == nil {
		t.Errorf("b could not pull the Job after a's acks of it before its delivery: %v", err)
	}
}

// forge sends, as a, every acknowledgement of the first few Jobs of the
// queue there is: straight to the queue and through the daemon.
func forge(na *nats.Conn, sub Subjects) {
	for sseq := 0; sseq <= 3; sseq++ {
		for dseq := 0; dseq <= 3; dseq++ {
			for _, body := range []string{"+TERM", "+ACK", "-NAK", "+WPI", `+NXT {"batch":1}`} {
				na.Publish(ackSubject(sub, sseq, dseq), []byte(body))
			}
			for _, kind := range []string{AckDrop, AckDone, AckGiveBack, AckWorking} {
				data, _ := json.Marshal(Ack{Job: ackSubject(sub, sseq, dseq), Kind: kind})
				na.Publish(sub.Worker("a").Ack, data)
			}
		}
	}
	na.Flush()
}

// TestAttackAcksOfAnotherWorkersJob: route: b pulled a Job and has not
// claimed it yet; a, guessing its ack subject (CONSUMER.INFO, which a may
// call, tells the sequences), naks it so that its own waiting pull takes
// it, or terms it so that b's giving it back brings it to nobody. And a
// pull of the consumer itself by +NXT on an ack subject, past the
// daemon's share. Promise: a acknowledges only the Jobs it was given, and
// pulls only through the daemon.
func TestAttackAcksOfAnotherWorkersJob(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	js := djsOf(t, rig.s)
	if _, err := js.Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-000001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	qb := rig.pull(t, nb, "b", 3*time.Second)
	aGot := make(chan *queued, 1)
	go func() {
		q, _ := pullJob(context.Background(), na, sub.Worker("a"), 3*time.Second)
		aGot <- q
	}()
	rig.pullsWaiting(t, "a", 1)
	forge(na, sub)
	if stolen := <-aGot; stolen != nil {
		t.Errorf("a forged acks of b's Job and was given it: %q", stolen.Data())
	}
	// b gives it back, as a stopping worker does: it comes again.
	qb.Nak()
	nb.Flush()
	if q, _ := pullJob(context.Background(), nb, sub.Worker("b"), 5*time.Second); q == nil {
		t.Errorf("b gave its Job %q back after a's forged acks of it, and it never came again", qb.Data())
	}
}

// TestAttackHoardingPulledJobs: route: a pulls through the daemon, one
// pull at a time (within its share of waiting pulls), never claims, and
// keeps each Job alive (in progress): the share bounded waiting pulls
// only, so a took the whole queue. Promise: a can only delay the night:
// it holds no more Jobs unclaimed than its share, and b gets the rest.
func TestAttackHoardingPulledJobs(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 20
	for i := range jobs {
		djsOf(t, rig.s).Publish(context.Background(), sub.Lanes(), fmt.Appendf(nil, `{"run":"run-%06d","attempt":1}`, i+1))
	}
	var held []*queued
	for range jobs {
		q, err := pullJob(context.Background(), na, sub.Worker("a"), time.Second)
		if err != nil || q == nil {
			continue
		}
		held = append(held, q)
		q.InProgress()
	}
	na.Flush()
	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	q, _ := pullJob(context.Background(), nb, sub.Worker("b"), 2*time.Second)
	if len(held) > pullsPerWorker || q == nil {
		t.Errorf("a holds %d Jobs pulled and not claimed (its share: %d), and b got one: %v", len(held), pullsPerWorker, q != nil)
	}
	if rig.e.FindingsOf("a").Count == 0 {
		t.Error("a's pulls past its share of unclaimed Jobs are no finding")
	}
}

// TestAttackHeartbeatsForeverHoldTheRunPastItsTimeout: route: a claims a
// run and sends its heartbeats, with the run's token, for ever, never an
// outcome (nor a stream event). A local run is killed at agent.timeout
// (and agent.idle_timeout) by the daemon's runner; a worker's run is held
// to it by the worker alone. Promise: a cannot make the daemon wait
// unboundedly (nor hold a lane) on its word.
func TestAttackHeartbeatsForeverHoldTheRunPastItsTimeout(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	rig.e.opts.Run.Timeout = time.Second
	rig.e.opts.Run.IdleTimeout = time.Second
	rig.e.opts.CancelGrace = time.Second
	tok := rig.g.register("run-000001")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan agents.Result, 1)
	start := time.Now()
	go func() { done <- rig.e.Run(ctx, spec("run-000001", dir, `true`, tok), nil, func(agents.Event) {}) }()
	job, a, nc := rig.silentWorker(t, "a")
	beat, _ := json.Marshal(Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: a.Token})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if ctx.Err() != nil {
				t.Errorf("the run, with agent.timeout 1s, was held by a's heartbeats for %s, until the test's own deadline (ended %s)", time.Since(start).Round(time.Second), res.Ended)
			} else if res.Ended != agents.EndWallTimeout {
				t.Errorf("the run held past agent.timeout ended %s, want %s", res.Ended, agents.EndWallTimeout)
			}
			return
		case <-tick.C:
			nc.Request(rig.s.Subjects().Worker("a").Heartbeat, beat, time.Second)
		}
	}
}

// TestAttackCostFarPastTheCapIsCharged: route: a's outcome for a run it
// holds says the run cost $1e12 against a cap of $2. The daemon makes it
// a finding but counts it as said, toward the run's feature and the
// session's budget, which stops the whole night (every worker's runs) at
// once. Promise: a cannot make the daemon take its word for cost, nor
// charge a feature (or the night) for its doing.
func TestAttackCostFarPastTheCapIsCharged(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-000001")
	sp := spec("run-000001", dir, `true`, tok)
	sp.MaxBudgetUSD = 2
	done := make(chan agents.Result, 1)
	go func() { done <- rig.e.Run(context.Background(), sp, nil, func(agents.Event) {}) }()
	job, a, nc := rig.silentWorker(t, "a")
	out, _ := json.Marshal(Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token,
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success", CostUSD: 1e12}})
	if _, err := nc.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.CostUSD > 2*sp.MaxBudgetUSD {
		t.Errorf("a's word of $%g for a run capped at $%g was counted as $%g", 1e12, sp.MaxBudgetUSD, res.CostUSD)
	}
}

// TestAttackItsOwnUsageLimitStallsTheSession: route: a claims a run and
// says its Claude Code login hit a usage limit that resets in six days.
// That is a's login, not the daemon's nor b's, yet the run ends as a
// rate-limit failure with that reset, which the loop waits for (up to a
// week) for the whole session, while b, idle, could run it. Promise: a
// cannot make the daemon take its word for what the daemon decides (its
// waits), nor delay the other workers' work beyond recovery.
func TestAttackItsOwnUsageLimitStallsTheSession(t *testing.T) {
	dir, repo := lane(t)
	rig := newRig(t, func(string) *gitrepo.Repo { return repo }, "a", "b")
	tok := rig.g.register("run-000001")
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Second)
	defer cancel()
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(ctx, spec("run-000001", dir, `echo b > b.txt`, tok), nil, func(agents.Event) {})
	}()
	job, a, nc := rig.silentWorker(t, "a")
	rig.worker(t, "b", fakeClaude(t))
	if !eventually.Within(10*time.Second, func() bool { return len(rig.s.ConnectedWorkers()) == 2 }) {
		t.Fatal("b did not connect")
	}
	reset := time.Now().Add(6 * 24 * time.Hour)
	out, _ := json.Marshal(Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token,
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, IsError: true, Subtype: "error_during_execution",
			APIError: "rate_limit", APIErrorStatus: 429, RateLimitResetsAt: reset, Text: "usage limit reached"}})
	if _, err := nc.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if f, ok := res.Failure(""); ok && f.Waits() {
		t.Errorf("a's own usage limit ended the run as %s with a reset %s away, for the session to wait for, while b was idle", f.Kind, time.Until(f.ResetsAt).Round(time.Hour))
	}
}

// TestAttackSpooledRecordsOfAnotherRun: route: a's outcome carries
// "spooled" hook records (what its hooks decided while the daemon was
// away). Each names its run by a token hash, which the daemon's
// ingestSpool believes; a gives one the hash of a token it held for
// another run (here run-1's first token, which it held and gave back:
// the store keeps that hash as run-1's, whichever worker runs run-1 now),
// and one with no hash at all (taken in as a person's). Promise: nothing
// a sends about a run not its own is believed; the daemon takes a
// message about a run only when worker, run, attempt and token agree.
func TestAttackSpooledRecordsOfAnotherRun(t *testing.T) {
	dir1, repo1 := lane(t)
	dir2, repo2 := lane(t)
	rig := newRig(t, func(d string) *gitrepo.Repo {
		if d == dir1 {
			return repo1
		}
		return repo2
	}, "a")
	var mu sync.Mutex
	var spooled []spool.Record
	rig.e.opts.Spool = func(recs []spool.Record) {
		mu.Lock()
		spooled = append(spooled, recs...)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tok1 := rig.g.register("run-000001")
	ran1 := make(chan struct{})
	go func() {
		defer close(ran1)
		rig.e.Run(ctx, spec("run-000001", dir1, `true`, tok1), nil, func(agents.Event) {})
	}()
	defer func() { cancel(); <-ran1 }()
	job1, a1, nc1 := rig.silentWorker(t, "a")
	// a gives run-1 back: it goes on waiting for the next worker.
	back, _ := json.Marshal(Outcome{Run: job1.Run, Attempt: job1.Attempt, Token: a1.Token, GivenBack: "stopping"})
	if _, err := nc1.Request(rig.s.Subjects().Worker("a").Result, back, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Drain run-1's next attempt from the queue so that a's next pull is run-2's.
	tok2 := rig.g.register("run-000002")
	done2 := make(chan agents.Result, 1)
	go func() {
		done2 <- rig.e.Run(context.Background(), spec("run-000002", dir2, `true`, tok2), nil, func(agents.Event) {})
	}()
	var job2 Job
	var a2 Assignment
	var nc2 *nats.Conn
	for range 3 {
		job2, a2, nc2 = rig.silentWorkerOr(t, "a", "run-000002")
		if job2.Run == "run-000002" {
			break
		}
	}
	if job2.Run != "run-000002" {
		t.Fatal("a never pulled run-2")
	}
	recs := []spool.Record{
		{Event: "PreToolUse", Run: "run-000001", TokenHash: control.TokenHash(a1.Token), Payload: json.RawMessage(`{"tool_name":"Bash","tool_input":{"command":"go test ./..."}}`),
			Decision: json.RawMessage(`{"gate":"forged","message":"planted by worker a in run-1's name"}`)},
		{Event: "PreToolUse", Payload: json.RawMessage(`{"tool_name":"Write"}`), Decision: json.RawMessage(`{"gate":"forged","message":"planted as the person's"}`)},
	}
	out, _ := json.Marshal(Outcome{Run: job2.Run, Attempt: job2.Attempt, Token: a2.Token, Spooled: recs,
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}})
	if _, err := nc2.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-done2
	mu.Lock()
	defer mu.Unlock()
	own := control.TokenHash(a2.Token)
	for _, r := range spooled {
		if r.TokenHash != own && r.TokenHash != control.TokenHash(tok2) {
			t.Errorf("a record a sent with run-2's outcome reached the daemon's spool bound to another run or to none (token hash %q, run %q): %s", r.TokenHash, r.Run, r.Decision)
		}
		if bytes.Contains(r.Decision, []byte("forged")) {
			t.Errorf("a's forged record reached the daemon's spool, as run-2's: %s", r.Decision)
		}
	}
	if f := rig.e.FindingsOf("a"); f.Count < len(recs) {
		t.Errorf("findings against a %+v: want one for each record it forged", f)
	}
}

// silentWorkerOr is silentWorker that, when the Job it pulls is not
// want's, terms it and returns it unclaimed.
func (r *fleetRig) silentWorkerOr(t *testing.T, name, want string) (Job, Assignment, *nats.Conn) {
	t.Helper()
	nc, err := connect(t, r.s, r.creds[name])
	if err != nil {
		t.Fatal(err)
	}
	msg := r.pull(t, nc, name, 15*time.Second)
	var job Job
	json.Unmarshal(msg.Data(), &job)
	if job.Run != want {
		msg.Term()
		return job, Assignment{}, nc
	}
	data, _ := json.Marshal(Claim{Run: job.Run, Attempt: job.Attempt, Dir: "/worker/" + name})
	m, err := nc.Request(r.s.Subjects().Worker(name).Claim, data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var a Assignment
	json.Unmarshal(m.Data, &a)
	if a.Refused != "" {
		t.Fatalf("claim refused: %s", a.Refused)
	}
	msg.Ack()
	return job, a, nc
}

// steadyBeat is the heartbeat of a rig whose test keeps its attempt
// alive (keepAlive).
const steadyBeat = 2 * time.Second

// keepAlive sends the attempt's heartbeats, as a live worker does, until
// the test ends: a's outcome is then the attempt's, however long a
// takes to make it. Its rig beats at steadyBeat: the attempt's first
// beat comes after the claim, and under load the rig's usual 100 ms
// (lost after 400) can pass first.
func (r *fleetRig) keepAlive(t *testing.T, nc *nats.Conn, name string, job Job, token string) {
	beat, _ := json.Marshal(Heartbeat{Run: job.Run, Attempt: job.Attempt, Token: token})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				nc.Request(r.s.Subjects().Worker(name).Heartbeat, beat, time.Second)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// resultBundle makes, in the lane's repository, a commit on base adding
// file, and returns base..tip's bundle and the tip.
func resultBundle(t *testing.T, dir string, repo *gitrepo.Repo, base, file string) ([]byte, string) {
	t.Helper()
	git := func(env []string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	index := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	git(index, "read-tree", base)
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("from another bucket\n"), 0o644)
	blob := git(nil, "hash-object", "-w", f)
	git(index, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+file)
	tree := git(index, "write-tree")
	tip := git([]string{"GIT_AUTHOR_NAME=w", "GIT_AUTHOR_EMAIL=w@w", "GIT_COMMITTER_NAME=w", "GIT_COMMITTER_EMAIL=w@w"}, "commit-tree", tree, "-p", base, "-m", "r")
	var bundle bytes.Buffer
	if err := branch.WriteResult(context.Background(), repo, &bundle, base, tip); err != nil {
		t.Fatal(err)
	}
	return bundle.Bytes(), tip
}

// TestAttackResultLinkedToAnotherWorkersBucket: route: a's result
// object is no bundle but an object-store link (its metadata, which a
// writes as it likes on $O.<its bucket>.M.>) naming an object in b's
// results bucket, which a may not read. The daemon's Get follows links
// into any bucket of the fleet's account, so it reads b's object as a's
// result and lands it. Promise: a reads and writes only its own result
// bundles; what the daemon lands for a's run is what a put in a's bucket.
func TestAttackResultLinkedToAnotherWorkersBucket(t *testing.T) {
	dir, repo := lane(t)
	rig := newRigWith(t, Config{}, ExecutorOptions{Heartbeat: steadyBeat}, func(string) *gitrepo.Repo { return repo }, "a", "b")
	tok := rig.g.register("run-000001")
	done := make(chan agents.Result, 1)
	go func() {
		done <- rig.e.Run(context.Background(), spec("run-000001", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	job, a, nc := rig.silentWorker(t, "a")
	rig.keepAlive(t, nc, "a", job, a.Token)
	ctx := context.Background()
	// An object of b's (put here by the daemon's connection, as b would).
	bundle, tip := resultBundle(t, dir, repo, job.Base, "bs.txt")
	bBucket, err := djsOf(t, rig.s).ObjectStore(ctx, rig.s.Subjects().ResultsBucket("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bBucket.PutBytes(ctx, "run-000009.1", bundle); err != nil {
		t.Fatal(err)
	}
	// a cannot read it itself.
	ajs, _ := jetstream.New(nc)
	if _, err := ajs.ObjectStore(ctx, rig.s.Subjects().ResultsBucket("b")); err == nil {
		t.Fatal("a opened b's results bucket")
	}
	aBucket, err := ajs.ObjectStore(ctx, rig.s.Subjects().ResultsBucket("a"))
	if err != nil {
		t.Fatal(err)
	}
	key := ResultKey(job.Run, job.Attempt)
	if _, err := aBucket.AddLink(ctx, key, &jetstream.ObjectInfo{Bucket: rig.s.Subjects().ResultsBucket("b"), ObjectMeta: jetstream.ObjectMeta{Name: "run-000009.1"}}); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Tip: tip,
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}})
	if _, err := nc.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if _, err := os.Stat(filepath.Join(dir, "bs.txt")); err == nil {
		t.Errorf("the daemon followed a's link into b's bucket and landed b's object as a's result (%+v)", res.Summary)
	}
}

// TestAttackResultLinkedToItself: route: a's result object is a link to
// itself (same bucket, same name). nats.go's Get follows a same-bucket
// link by calling itself, without a bound: the daemon's land recurses,
// one JetStream request a frame, until the run's context ends (for a run
// of the loop: never) or the goroutine's stack passes Go's 1 GB limit,
// a fatal error that kills the daemon and every run of every worker.
// Promise: a cannot make the daemon wait unboundedly, nor grow its memory
// without bound (nor end another worker's run).
func TestAttackResultLinkedToItself(t *testing.T) {
	dir, repo := lane(t)
	rig := newRigWith(t, Config{}, ExecutorOptions{Heartbeat: steadyBeat}, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-000001")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	done := make(chan agents.Result, 1)
	go func() { done <- rig.e.Run(ctx, spec("run-000001", dir, `true`, tok), nil, func(agents.Event) {}) }()
	job, a, nc := rig.silentWorker(t, "a")
	rig.keepAlive(t, nc, "a", job, a.Token)
	ajs, _ := jetstream.New(nc)
	bctx := context.Background()
	aBucket, err := ajs.ObjectStore(bctx, rig.s.Subjects().ResultsBucket("a"))
	if err != nil {
		t.Fatal(err)
	}
	key := ResultKey(job.Run, job.Attempt)
	if _, err := aBucket.AddLink(bctx, key, &jetstream.ObjectInfo{Bucket: rig.s.Subjects().ResultsBucket("a"), ObjectMeta: jetstream.ObjectMeta{Name: key}}); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Tip: strings.Repeat("a", 40),
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}})
	sent := time.Now()
	if _, err := nc.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res := <-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if ctx.Err() != nil {
		t.Errorf("the daemon was still following a's self-link %s after its outcome, until the test's deadline ended it (stack in use %d MiB -> %d MiB; %s)",
			time.Since(sent).Round(time.Second), before.StackInuse>>20, after.StackInuse>>20, res.Text)
	}
}

// TestAttackResultWhoseChunksNeverCome: route: a's result object's
// metadata (written by a) says the object has a chunk, under a NUID with
// no chunk at all. The daemon's read of it waits for the chunk: nats.go's
// reader gives (0, nil) every 5 s until the context ends, and land's
// context is the run's, with no deadline. The run (and its lane) waits
// for ever, past its heartbeats (stopped before land). Promise: a cannot
// make the daemon wait unboundedly.
func TestAttackResultWhoseChunksNeverCome(t *testing.T) {
	dir, repo := lane(t)
	rig := newRigWith(t, Config{}, ExecutorOptions{Heartbeat: steadyBeat}, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-000001")
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	done := make(chan agents.Result, 1)
	go func() { done <- rig.e.Run(ctx, spec("run-000001", dir, `true`, tok), nil, func(agents.Event) {}) }()
	job, a, nc := rig.silentWorker(t, "a")
	rig.keepAlive(t, nc, "a", job, a.Token)
	bucket := rig.s.Subjects().ResultsBucket("a")
	key := ResultKey(job.Run, job.Attempt)
	meta, _ := json.Marshal(map[string]any{"name": key, "bucket": bucket, "nuid": "NOCHUNKSEVERCOMEHERE00", "size": 100, "chunks": 1,
		"digest": "SHA-256=" + base64.URLEncoding.EncodeToString(make([]byte, 32))})
	m := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(key)))
	m.Header.Set("Nats-Rollup", "sub")
	m.Data = meta
	ajs, _ := jetstream.New(nc)
	if _, err := ajs.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(Outcome{Run: job.Run, Attempt: job.Attempt, Token: a.Token, Tip: strings.Repeat("a", 40),
		Result: agents.Result{Ended: agents.EndExited, SawInit: true, SawResult: true, Subtype: "success"}})
	sent := time.Now()
	if _, err := nc.Request(rig.s.Subjects().Worker("a").Result, out, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-done
	if ctx.Err() != nil {
		t.Errorf("the daemon waited %s for a result's chunk that a never sent, until the test's deadline ended it", time.Since(sent).Round(time.Second))
	}
}

// TestAttackManyConnectionsWithOneWorkersCredentials: route: a opens
// connection after connection with its one credentials file (each costs
// the server, which lives in the daemon's process, buffers and a
// goroutine or two). Promise: a cannot grow the daemon's memory without
// bound. Nothing limits a worker's account's connections.
func TestAttackManyConnectionsWithOneWorkersCredentials(t *testing.T) {
	s := start(t, Config{})
	path := addWorker(t, s, "a").Path
	const tries = 300
	var refused int
	var conns []*nats.Conn
	for range tries {
		nc, err := connect(t, s, path, quiet(), nats.NoReconnect())
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, nc)
	}
	for _, nc := range conns {
		nc.Close()
	}
	if refused == 0 {
		t.Errorf("a opened %d connections at once with one worker's credentials, none refused", tries)
	}
}

// TestAttackManySubscriptions: route: a subscribes, on its own inbox
// (which it may), to subject after subject: each a subscription in the
// server's interest graph, in the daemon's memory. Promise: as above.
func TestAttackManySubscriptions(t *testing.T) {
	s := start(t, Config{})
	var refused atomic.Int64
	na, err := connect(t, s, addWorker(t, s, "a").Path, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "maximum subscriptions") {
			refused.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	inbox := s.Subjects().Worker("a").Inbox
	const subs = 100_000
	for i := range subs {
		if _, err := na.Subscribe(fmt.Sprintf("%s.%d", inbox, i), func(*nats.Msg) {}); err != nil {
			refused.Add(1)
			break
		}
	}
	na.Flush()
	time.Sleep(200 * time.Millisecond)
	n := 0
	if acc, err := s.ns.LookupAccount(workerAccount("a")); err == nil {
		n = int(acc.TotalSubs())
	}
	if refused.Load() == 0 {
		t.Errorf("a made %d subscriptions (its account holds %d), none refused", subs, n)
	}
}

// stalledRun is a run of worker a's, claimed by the test as a, whose hooks
// wait in the daemon's gates until unstall (or the test's end): what a
// sends about it meanwhile waits in a's mailbox.
func stalledRun(t *testing.T) (rig *fleetRig, a Assignment, nc *nats.Conn, unstall func()) {
	t.Helper()
	dir, repo := lane(t)
	rig = newRig(t, func(string) *gitrepo.Repo { return repo }, "a")
	tok := rig.g.register("run-a")
	stall := make(chan struct{})
	rig.g.stall = map[string]chan struct{}{"run-a": stall}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		rig.e.Run(ctx, spec("run-a", dir, `true`, tok), nil, func(agents.Event) {})
	}()
	var once sync.Once
	unstall = func() { once.Do(func() { close(stall) }) }
	t.Cleanup(func() { unstall(); cancel(); <-ran })
	_, a, nc = rig.silentWorker(t, "a")
	return rig, a, nc, unstall
}

// TestAttackLargeHooksHeldInTheDaemon: route: a holds a run whose hooks
// the daemon is slow to answer (or that a stalls itself: a hook waits on
// the gates), and sends hooks of the largest payload the server takes
// (8 MiB): mailboxDepth of them wait in a's mailbox, each whole, besides
// hooksInFlight in flight: 2 GiB of the daemon's memory per worker (as
// much again in its events mailbox). The bound is in messages, not bytes.
// Promise: a cannot grow the daemon's memory without (reasonable) bound.
// (Only 32 hooks are sent here, 256 MiB, to keep the test light.)
func TestAttackLargeHooksHeldInTheDaemon(t *testing.T) {
	rig, a, nc, _ := stalledRun(t)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	wa := rig.s.Subjects().Worker("a")
	small, _ := json.Marshal(HookCall{Token: a.Token})
	for range hooksInFlight {
		nc.PublishRequest(wa.Hook, wa.Inbox+".x", small)
	}
	big, _ := json.Marshal(HookCall{Token: a.Token, Request: control.HookRequest{Event: "PreToolUse", Payload: json.RawMessage(`"` + strings.Repeat("x", maxPayload-4096) + `"`)}})
	const sent = 32
	for range sent {
		if err := nc.PublishRequest(wa.Hook, wa.Inbox+".x", big); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	// Measured once the daemon has taken every one of them (queued or
	// dropped), so that none is still held by the server or the client on
	// the way: what is measured is the mailbox's, however loaded the machine.
	var hooks *nats.Subscription
	for _, s := range rig.e.subs {
		if s.Subject == rig.s.Subjects().Workers("hook") {
			hooks = s
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := hooks.Delivered(); n >= hooksInFlight+sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon took not every one of a's hooks in a minute")
		}
	}
	runtime.GC() // what is held, not what was dropped and waits to be collected
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := int64(after.HeapInuse) - int64(before.HeapInuse)
	if held > 160<<20 {
		t.Errorf("a's %d hooks of 8 MiB hold %d MiB of the daemon's heap (the mailbox takes %d of them: %d MiB)", sent, held>>20, mailboxDepth, mailboxDepth*maxPayload>>20)
	}
}

// TestAttackRevokedWorkersConnectionsAllEnd: route: a opens several
// connections with its credentials (and subscriptions, and a pull waiting
// on each), then is revoked: every one must end, none reconnect, and its
// pulls take no Job. Promise: a cannot survive revocation.
func TestAttackRevokedWorkersConnectionsAllEnd(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	s, pa := rig.s, rig.creds["a"]
	sub := s.Subjects()
	long, _ := json.Marshal(Pull{Wait: 55 * time.Second})
	var conns []*nats.Conn
	for i := range workerMaxConnections {
		nc, err := connect(t, s, pa, quiet(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		nc.PublishRequest(sub.Worker("a").Pull, sub.Worker("a").Inbox+fmt.Sprintf(".p%d", i), long)
		nc.Flush()
		conns = append(conns, nc)
	}
	if err := s.RevokeWorker("a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	for i, nc := range conns {
		if nc.IsConnected() {
			t.Errorf("a's connection %d is still connected after its revocation", i)
		}
	}
	if _, err := djsOf(t, s).Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-000001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	nb, err := connect(t, s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	if q, err := pullJob(context.Background(), nb, sub.Worker("b"), 3*time.Second); q == nil {
		t.Errorf("b could not pull the Job after a's revocation: %v", err)
	}
	for _, nc := range conns {
		nc.Close()
	}
}

// TestAttackHoggingEveryPullStarvesTheOtherWorkers: route: a keeps
// pullsMaxWaiting pulls waiting on the one shared consumer (each within
// the consumer's bounds: one Job, under a minute). The consumer's bound
// was every worker's, not a's: b's pulls were refused (409 Exceeded
// MaxWaiting) and every Job went to a, which could sit on it; a Job put
// back on the queue went to a again. Promise: a can only delay the night
// ("an attempt no worker claims is put back on the queue"), never keep
// every Job from the other workers: of more Jobs than a's share of pulls,
// b gets one, and a's flood is a finding.
func TestAttackHoggingEveryPullStarvesTheOtherWorkers(t *testing.T) {
	rig := newRig(t, nil, "a", "b")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	inbox := sub.Worker("a").Inbox + ".hog"
	got, err := na.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	got.SetPendingLimits(-1, -1)
	// Straight at the consumer, as before; and through the daemon.
	direct := jsAPI + "CONSUMER.MSG.NEXT." + sub.LanesStream() + "." + sub.LanesConsumer()
	long, _ := json.Marshal(Pull{Wait: 55 * time.Second})
	for range pullsMaxWaiting {
		na.PublishRequest(direct, inbox, []byte(`{"batch":1,"expires":55000000000}`))
		na.PublishRequest(sub.Worker("a").Pull, inbox, long)
	}
	na.Flush()
	if !eventually.Within(10*time.Second, func() bool { return rig.e.FindingsOf("a").Count >= pullsMaxWaiting-pullsPerWorker }) {
		t.Errorf("a's %d pulls at once are %d findings; want one for each past its share (%d)", pullsMaxWaiting, rig.e.FindingsOf("a").Count, pullsPerWorker)
	}

	nb, err := connect(t, rig.s, rig.creds["b"])
	if err != nil {
		t.Fatal(err)
	}
	bGot := make(chan int, 1)
	go func() {
		n := 0
		for deadline := time.Now().Add(10 * time.Second); n == 0 && time.Now().Before(deadline); {
			if q, err := pullJob(context.Background(), nb, sub.Worker("b"), time.Second); err == nil && q != nil {
				n++
			}
		}
		bGot <- n
	}()
	rig.pullsWaiting(t, "b", 1)
	js := djsOf(t, rig.s)
	for i := range pullsPerWorker + 1 {
		if _, err := js.Publish(context.Background(), sub.Lanes(), fmt.Appendf(nil, `{"run":"run-%06d","attempt":1}`, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	b := <-bGot
	aJobs := 0
	for {
		m, err := got.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Header.Get(AckHeader) != "" || (len(m.Data) > 0 && m.Header.Get("Status") == "") {
			aJobs++
		}
	}
	if b != 1 || aJobs > pullsPerWorker {
		t.Errorf("of %d Jobs, b (pulling while a held %d pulls) got %d, a got %d: one worker's pulls crowd the others out", pullsPerWorker+1, pullsMaxWaiting, b, aJobs)
	}
}

// TestAttackDroppedRequestsLeaveTheirBytesHeld: route: a fills its mailbox
// (hooks the daemon is slow to answer), then sends more, large, which are
// dropped for the mailbox's depth: were their bytes still counted as held,
// a's later requests, honest ones among them, would all be dropped for
// the mailbox's bytes once the dropped ones added up to its bound.
// Promise: a flood costs a the requests it floods with, and no more.
func TestAttackDroppedRequestsLeaveTheirBytesHeld(t *testing.T) {
	rig, a, nc, unstall := stalledRun(t)
	wa := rig.s.Subjects().Worker("a")
	small, _ := json.Marshal(HookCall{Token: a.Token})
	for range hooksInFlight + mailboxDepth {
		nc.PublishRequest(wa.Hook, wa.Inbox+".x", small)
	}
	big, _ := json.Marshal(HookCall{Token: a.Token, Request: control.HookRequest{Event: "PreToolUse", Payload: json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)}})
	const dropped = 48 // 48 MiB, past mailboxBytes
	for range dropped {
		nc.PublishRequest(wa.Hook, wa.Inbox+".x", big)
	}
	nc.Flush()
	if !eventually.Within(20*time.Second, func() bool { return rig.e.FindingsOf("a").Count >= dropped-2 }) {
		t.Fatalf("a's %d requests past its mailbox's depth made %d findings", dropped, rig.e.FindingsOf("a").Count)
	}
	unstall()
	mb := rig.e.mailboxOf("a")
	if !eventually.Within(20*time.Second, func() bool { return mb.held.Load() == 0 }) {
		t.Errorf("a's mailbox, drained, still counts %d MiB held: the requests dropped for its depth", mb.held.Load()>>20)
	}
}

// TestAttackUnansweredRequestsHeldByTheServer: route: a sends requests,
// each with a reply subject, on subjects of the fleet's account that did
// not answer them: +ACK of stream sequence 0 (the server skipped the
// reply), Pulls that are not JSON, events and acks (the daemon dropped
// them). Each request through a service import makes the server keep a
// response mapping in the fleet's account until answered or its response
// threshold (2 min by default): 200 000 held 87 MiB, and 50 000, sent
// here, some 22 (answered, under 2). Promise: a cannot grow the daemon's
// memory without bound.
func TestAttackUnansweredRequestsHeldByTheServer(t *testing.T) {
	rig := newRig(t, nil, "a")
	sub := rig.s.Subjects()
	na, err := connect(t, rig.s, rig.creds["a"], quiet())
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const sent = 50_000
	w := sub.Worker("a")
	for i := range sent {
		to := fmt.Sprintf("%s.r%d", w.Inbox, i)
		switch i % 4 {
		case 0:
			na.PublishRequest(ackSubject(sub, 0, 0), to, []byte("+ACK"))
		case 1:
			na.PublishRequest(w.Pull, to, []byte("not json"))
		case 2:
			na.PublishRequest(w.Events, to, []byte("{}"))
		case 3:
			na.PublishRequest(w.Ack, to, []byte("{}"))
		}
		if i%10000 == 0 {
			na.Flush()
		}
	}
	na.Flush()
	na.Request(w.Pull, []byte(`{"wait":1}`), 5*time.Second) // a round trip: the server has read them all
	// The daemon answers each, as its mailbox takes it.
	fleetAcc, _ := rig.s.ns.LookupAccount(fleetAccount)
	eventually.Within(20*time.Second, func() bool { return fleetAcc.NumPendingAllResponses() < 1000 })
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := int64(after.HeapInuse) - int64(before.HeapInuse)
	if n := fleetAcc.NumPendingAllResponses(); n >= 1000 || held > 16<<20 {
		t.Errorf("%d requests of a the daemon does not answer: the server holds %d answers for a, and the daemon's heap grew by %d MiB", sent, n, held>>20)
	}
}
