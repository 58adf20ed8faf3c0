//go:build openroutes

package fleet

// A route the red team found that is open still (docs/operations.md, "What
// a worker can still do"): run with `go test -tags openroutes ./fleet -run
// TestAttackHogging`; it fails until it is closed, and then moves to
// attack_test.go.

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestAttackHoggingEveryPullStarvesTheOtherWorkers: route: a keeps
// pullsMaxWaiting pulls waiting on the one shared consumer (each within
// the bounds: one Job, under a minute), renewing them as they expire. The
// bound is the consumer's, not a worker's: b's pulls are refused
// (409 Exceeded MaxWaiting) and every Job goes to a, which sits on it; a
// Job put back on the queue goes to a again. Promise: a can only delay
// the night ("an attempt no worker claims is put back on the queue"), not
// keep every run from the other workers without bound.
func TestAttackHoggingEveryPullStarvesTheOtherWorkers(t *testing.T) {
	s := start(t, Config{})
	pa, pb := addWorker(t, s, "a").Path, addWorker(t, s, "b").Path
	sub := s.Subjects()
	na, err := connect(t, s, pa, quiet())
	if err != nil {
		t.Fatal(err)
	}
	inbox := sub.Worker("a").Inbox + ".hog"
	got, err := na.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	next := jsAPI + "CONSUMER.MSG.NEXT." + sub.LanesStream() + "." + sub.LanesConsumer()
	for range pullsMaxWaiting {
		na.PublishRequest(next, inbox, []byte(`{"batch":1,"expires":55000000000}`))
	}
	na.Flush()
	time.Sleep(200 * time.Millisecond)

	nb, err := connect(t, s, pb)
	if err != nil {
		t.Fatal(err)
	}
	bjs, _ := jetstream.New(nb)
	cons, err := bjs.Consumer(context.Background(), sub.LanesStream(), sub.LanesConsumer())
	if err != nil {
		t.Fatal(err)
	}
	type pulled struct {
		n   int
		err error
	}
	bGot := make(chan pulled, 1)
	go func() {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			bGot <- pulled{err: err}
			return
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		bGot <- pulled{n: n, err: batch.Error()}
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := djsOf(t, s).Publish(context.Background(), sub.Lanes(), []byte(`{"run":"run-000001","attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	b := <-bGot
	aJobs := 0
	for {
		m, err := got.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		if len(m.Data) > 0 {
			aJobs++
		}
	}
	if b.n != 1 {
		t.Errorf("b, pulling while a held every waiting pull, got %d Jobs (%v); a got %d: one worker's pulls crowd every other worker out", b.n, b.err, aJobs)
	}
}
