package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// violations connects as a worker and collects the errors the server
// sends it asynchronously: permission violations among them.
func violations(t *testing.T, s *Server, path string) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 16)
	nc, err := connect(t, s, path, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return nc, errs
}

// baseBundle is the base bundle of fleetOf, several MiB.
var baseBundle = bytes.Repeat([]byte("base bundle "), 1<<19)

// fleetOf starts a server with workers a and b, a base bundle and a
// result bundle of b's.
func fleetOf(t *testing.T) *Server {
	t.Helper()
	s := start(t, Config{})
	addWorker(t, s, "a")
	addWorker(t, s, "b")
	serve(t, s)
	ctx := context.Background()
	js, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	base, err := js.ObjectStore(ctx, s.Subjects().BaseBucket())
	if err != nil {
		t.Fatal(err)
	}
	// Of many chunks, read one direct get at a time.
	if _, err := base.PutBytes(ctx, "c0ffee", baseBundle); err != nil {
		t.Fatal(err)
	}
	// b's result, put by the daemon for brevity: b's own writes are a's
	// in the table, mirrored.
	res, err := js.ObjectStore(ctx, s.Subjects().ResultsBucket("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.PutBytes(ctx, "lane-1", []byte("b's result")); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWorkerCan holds what a worker needs: each of its things works, with
// no permission violation on the way.
func TestWorkerCan(t *testing.T) {
	s := fleetOf(t)
	sub := s.Subjects()
	a := sub.Worker("a")
	daemon := s.Conn()
	djs, err := jetstream.New(daemon)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error
	}{
		{"pull a lane from the work queue, through the daemon, and acknowledge it", func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error {
			if _, err := djs.Publish(ctx, sub.Lanes(), []byte("lane 1")); err != nil {
				return err
			}
			if _, err := js.Consumer(ctx, sub.LanesStream(), sub.LanesConsumer()); err != nil {
				return err
			}
			q, err := pullJob(ctx, nc, a, 5*time.Second)
			if err != nil {
				return err
			}
			if q == nil || string(q.Data()) != "lane 1" {
				return fmt.Errorf("pulled %v, want lane 1", q)
			}
			q.InProgress()
			q.Ack()
			if err := nc.Flush(); err != nil {
				return err
			}
			// Work-queue retention: the acknowledged lane is gone.
			if !eventually.Within(5*time.Second, func() bool {
				st, err := djs.Stream(ctx, sub.LanesStream())
				return err == nil && st.CachedInfo().State.Msgs == 0
			}) {
				return errors.New("the work queue still holds the acknowledged lane")
			}
			return nil
		}},
		{"ask the daemon on its hook subject", func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			// The daemon's executor answers (serve): for a token of no run
			// of a's, that it knows no such run.
			call, _ := json.Marshal(HookCall{Token: "no run's"})
			reply, err := nc.RequestWithContext(ctx, a.Hook, call)
			if err != nil {
				return err
			}
			var ans HookAnswer
			if err := json.Unmarshal(reply.Data, &ans); err != nil {
				return fmt.Errorf("reply %q: %v", reply.Data, err)
			}
			if ans.Error == nil || ans.Error.Code != control.CodeUnknownRun {
				return fmt.Errorf("reply %q, want the daemon's %s", reply.Data, control.CodeUnknownRun)
			}
			return nil
		}},
		{"post its result, events and heartbeats", func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			for _, subj := range []string{a.Result, a.Events, a.Heartbeat} {
				in, err := daemon.SubscribeSync(subj)
				if err != nil {
					return err
				}
				if err := daemon.Flush(); err != nil {
					return err
				}
				if err := nc.Publish(subj, []byte("x")); err != nil {
					return err
				}
				if _, err := in.NextMsgWithContext(ctx); err != nil {
					return errors.New(subj + ": " + err.Error())
				}
				in.Unsubscribe()
			}
			return nil
		}},
		{"hear the daemon on its control subject", func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			in, err := nc.SubscribeSync(a.Control)
			if err != nil {
				return err
			}
			if err := nc.Flush(); err != nil {
				return err
			}
			if err := daemon.Publish(a.Control, []byte("stop")); err != nil {
				return err
			}
			_, err = in.NextMsgWithContext(ctx)
			return err
		}},
		{"read a base bundle", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			r, err := openObject(ctx, js, sub.BaseBucket(), "c0ffee", 1<<30, "")
			if err != nil {
				return err
			}
			got, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, baseBundle) {
				return errors.New("read " + strconv.Itoa(len(got)) + " bytes that are not the base bundle")
			}
			return nil
		}},
		{"write its result bundles, and replace one", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			res, err := js.ObjectStore(ctx, sub.ResultsBucket("a"))
			if err != nil {
				return err
			}
			big := bytes.Repeat([]byte("r"), 300<<10) // several chunks
			for _, data := range [][]byte{big, []byte("a's result")} {
				if _, err := res.PutBytes(ctx, "lane-1", data); err != nil {
					return err
				}
			}
			dres, err := djs.ObjectStore(ctx, sub.ResultsBucket("a"))
			if err != nil {
				return err
			}
			got, err := dres.GetBytes(ctx, "lane-1")
			if err != nil {
				return err
			}
			if string(got) != "a's result" {
				return errors.New("the daemon read " + string(got[:min(len(got), 20)]))
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, errs := violations(t, s, filepath.Join(s.dir, "workers", "a.creds"))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := tt.do(ctx, nc, js); err != nil {
				t.Errorf("worker a: %v", err)
			}
			if err := nc.Flush(); err != nil {
				t.Error(err)
			}
			select {
			case err := <-errs:
				t.Errorf("worker a was refused: %v", err)
			default:
			}
		})
	}
}

// TestWorkerCannot holds what a worker must not do: each is refused by the
// server with a permissions violation naming the subject (not left to
// time out).
func TestWorkerCannot(t *testing.T) {
	s := fleetOf(t)
	sub := s.Subjects()
	b := sub.Worker("b")
	noop := func(*nats.Msg) {}
	tests := []struct {
		name    string
		subject string // what the violation names
		do      func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error
	}{
		{"hear b's control", b.Control, func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(b.Control, noop)
			return err
		}},
		{"read b's hook requests", b.Hook, func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(b.Hook, noop)
			return err
		}},
		{"read b's replies", b.Inbox + ".>", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(b.Inbox+".>", noop)
			return err
		}},
		{"read every worker's hooks", sub.Workers("hook"), func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(sub.Workers("hook"), noop)
			return err
		}},
		{"ask the daemon as b", b.Hook, func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.RequestWithContext(ctx, b.Hook, []byte("PreToolUse"))
			return err
		}},
		{"post b's result", b.Result, func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish(b.Result, []byte("tested"))
		}},
		{"post b's events", b.Events, func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish(b.Events, []byte("{}"))
		}},
		{"post b's heartbeat", b.Heartbeat, func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish(b.Heartbeat, nil)
		}},
		{"read b's result bundles", "$JS.API.STREAM.INFO.OBJ_" + sub.ResultsBucket("b"), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.ObjectStore(ctx, sub.ResultsBucket("b"))
			return err
		}},
		{"read b's result chunks directly", "$JS.API.DIRECT.GET.OBJ_" + sub.ResultsBucket("b"), func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.OBJ_"+sub.ResultsBucket("b"), []byte(`{"seq":1}`))
			return err
		}},
		{"write b's result bundles", "$O." + sub.ResultsBucket("b") + ".C.x", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish("$O."+sub.ResultsBucket("b")+".C.x", []byte("forged"))
		}},
		{"write a base bundle", "$O." + sub.BaseBucket() + ".C.x", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish("$O."+sub.BaseBucket()+".C.x", []byte("forged"))
		}},
		{"purge the base bundles", "$JS.API.STREAM.PURGE.OBJ_" + sub.BaseBucket(), func(ctx context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE.OBJ_"+sub.BaseBucket(), nil)
			return err
		}},
		{"publish a lane", sub.Lanes(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.Publish(ctx, sub.Lanes(), []byte("a lane of its own"))
			return err
		}},
		{"delete the work queue", "$JS.API.STREAM.DELETE." + sub.LanesStream(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, sub.LanesStream())
		}},
		// Its pulls are the daemon's to make (Pull), within its share.
		{"pull from the work queue's consumer itself", "$JS.API.CONSUMER.MSG.NEXT." + sub.LanesStream() + "." + sub.LanesConsumer(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			cons, err := js.Consumer(ctx, sub.LanesStream(), sub.LanesConsumer())
			if err != nil {
				return err
			}
			_, err = cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
			return err
		}},
		// Its acknowledgements too (Ack): an ack subject takes a pull
		// (+NXT) and any Job's sequence.
		{"acknowledge on the work queue itself", "$JS.ACK." + sub.LanesStream() + "." + sub.LanesConsumer() + ".1.1.1.0.0", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish("$JS.ACK."+sub.LanesStream()+"."+sub.LanesConsumer()+".1.1.1.0.0", []byte(`+NXT {"batch":1}`))
		}},
		{"change the work queue's consumer (its bound on waiting pulls)", "$JS.API.CONSUMER.CREATE." + sub.LanesStream() + "." + sub.LanesConsumer(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.UpdateConsumer(ctx, sub.LanesStream(), jetstream.ConsumerConfig{Durable: sub.LanesConsumer(), AckPolicy: jetstream.AckExplicitPolicy, MaxWaiting: 100_000})
			return err
		}},
		{"pause the work queue's consumer", "$JS.API.CONSUMER.PAUSE." + sub.LanesStream() + "." + sub.LanesConsumer(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.PauseConsumer(ctx, sub.LanesStream(), sub.LanesConsumer(), time.Now().Add(time.Hour))
			return err
		}},
		{"delete the work queue's consumer", "$JS.API.CONSUMER.DELETE." + sub.LanesStream() + "." + sub.LanesConsumer(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			return js.DeleteConsumer(ctx, sub.LanesStream(), sub.LanesConsumer())
		}},
		{"make a consumer of its own on the work queue", "$JS.API.CONSUMER.CREATE." + sub.LanesStream() + ".mine", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.CreateConsumer(ctx, sub.LanesStream(), jetstream.ConsumerConfig{Durable: "mine"})
			return err
		}},
		// A consumer delivers wherever its creator says: into the work
		// queue's subject, another worker's, the daemon's.
		{"make a consumer on the base bundles delivering into the work queue", "$JS.API.CONSUMER.CREATE.OBJ_" + sub.BaseBucket(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.CreateConsumer(ctx, "OBJ_"+sub.BaseBucket(), jetstream.ConsumerConfig{Name: "relay", DeliverSubject: sub.Lanes()})
			return err
		}},
		{"make an ordered consumer on the base bundles", "$JS.API.CONSUMER.CREATE.OBJ_" + sub.BaseBucket(), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			base, err := js.ObjectStore(ctx, sub.BaseBucket())
			if err != nil {
				return err
			}
			_, err = base.GetBytes(ctx, "c0ffee")
			return err
		}},
		{"make a consumer on its own results delivering into b's control", "$JS.API.CONSUMER.CREATE.OBJ_" + sub.ResultsBucket("a"), func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.CreateConsumer(ctx, "OBJ_"+sub.ResultsBucket("a"), jetstream.ConsumerConfig{Name: "relay", DeliverSubject: b.Control})
			return err
		}},
		{"make a stream", "$JS.API.STREAM.CREATE.mine", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "mine", Subjects: []string{"mine"}})
			return err
		}},
		{"list the streams", "$JS.API.STREAM.NAMES", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
			names := js.StreamNames(ctx)
			for range names.Name() {
			}
			return names.Err()
		}},
		{"read the daemon's subjects", sub.Prefix() + ".daemon.>", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(sub.Prefix()+".daemon.>", noop)
			return err
		}},
		{"post on the daemon's subjects", sub.Prefix() + ".daemon.status", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish(sub.Prefix()+".daemon.status", nil)
		}},
		{"read another project's lanes", "ctxgraphd.other.lanes", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe("ctxgraphd.other.lanes", noop)
			return err
		}},
		{"read everything", ">", func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.Subscribe(">", noop)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, errs := violations(t, s, filepath.Join(s.dir, "workers", "a.creds"))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			// The action runs until the violation arrives: a refused
			// request has no reply, and must not be mistaken for one.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tt.do(ctx, nc, js) }()
			var got error
			select {
			case got = <-errs:
			case <-time.After(10 * time.Second):
			}
			cancel()
			doErr := <-done
			switch {
			case got == nil:
				t.Fatalf("worker a was not refused (the action returned %v)", doErr)
			case !errors.Is(got, nats.ErrPermissionViolation):
				t.Fatalf("worker a got %v, want a permissions violation", got)
			case !strings.Contains(got.Error(), `"`+tt.subject):
				t.Fatalf("worker a got %v, want it to name %s", got, tt.subject)
			}
		})
	}
}

func TestAddWorker(t *testing.T) {
	s := start(t, Config{})
	w := addWorker(t, s, "build-1")
	fi, err := os.Stat(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", w.Path, perm)
	}
	if dir := filepath.Dir(w.Path); dir != filepath.Join(s.dir, "workers") {
		t.Errorf("credentials in %s, want the state dir's workers/", dir)
	}
	c, err := LoadCredentials(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Project != testProject || c.Worker != "build-1" || c.PublicKey != w.PublicKey {
		t.Errorf("LoadCredentials = %+v, want project %s, worker build-1, key %s", c, testProject, w.PublicKey)
	}
	// nats.go loads the file as it is.
	if _, err := nats.NkeyOptionFromSeed(w.Path); err != nil {
		t.Errorf("nats.NkeyOptionFromSeed(%s): %v", w.Path, err)
	}
	if _, err := connect(t, s, w.Path); err != nil {
		t.Errorf("the new worker connects: %v", err)
	}

	if _, err := s.AddWorker(context.Background(), "build-1"); !errors.Is(err, ErrWorkerExists) || !strings.Contains(err.Error(), `worker "build-1" exists: revoke it first`) {
		t.Errorf("AddWorker of an existing name = %v, want it refused", err)
	}
	for _, name := range []string{"", "Build", "a.b", "a_b", "a*", "a>", "../x", "-a", "a b", strings.Repeat("x", 64)} {
		_, err := s.AddWorker(context.Background(), name)
		if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "worker name "+strconvQuote(name)+" is not allowed: want 1 to 63 lower-case letters") {
			t.Errorf("AddWorker(%q) = %v, want a refusal saying what a name may be", name, err)
		}
	}
	addWorker(t, s, "b")
	ws, err := s.Workers()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	if strings.Join(names, ",") != "b,build-1" {
		t.Errorf("Workers() = %v, want b, build-1", names)
	}
}

// TestAWorkerAddedToARunningServerCanWorkAtOnce: a worker added while the
// server runs is alone in a new account, and that account's imports work
// from the first message (the server sets up the imports of an account
// it makes on a reload only once it has the account): every JetStream
// call the worker makes gets the fleet's answer, never the server's "not
// enabled" of an account without JetStream, which would race it.
func TestAWorkerAddedToARunningServerCanWorkAtOnce(t *testing.T) {
	s := start(t, Config{})
	nc, err := connect(t, s, addWorker(t, s, "a").Path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	for i := range 20 {
		if _, err := js.Stream(ctx, objectStream(s.Subjects().BaseBucket())); err != nil {
			t.Fatalf("call %d: the base bucket's stream, as a worker just added: %v", i, err)
		}
		if _, err := js.Consumer(ctx, s.Subjects().LanesStream(), s.Subjects().LanesConsumer()); err != nil {
			t.Fatalf("call %d: the work queue's consumer, as a worker just added: %v", i, err)
		}
	}
}

func strconvQuote(s string) string { return `"` + s + `"` }

// TestWorkersOutliveARestart: the daemon's server finds its workers'
// credentials in its state dir again, and its queue.
func TestWorkersOutliveARestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Start(ctx, Config{Dir: dir, Project: testProject})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.AddWorker(ctx, "a")
	if err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	js, err := jetstream.New(s.Conn())
	if err == nil {
		_, err = js.Publish(ctx, s.Subjects().Lanes(), []byte("lane 1"))
	}
	s.Shutdown()
	if err != nil {
		t.Fatal(err)
	}

	s = start(t, Config{Dir: dir})
	if _, err := connect(t, s, w.Path); err != nil {
		t.Fatalf("a worker's credentials after a restart: %v", err)
	}
	dcons, err := djsOf(t, s).Consumer(ctx, s.Subjects().LanesStream(), s.Subjects().LanesConsumer())
	if err != nil {
		t.Fatal(err)
	}
	m, err := dcons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("the lane queued before the restart: %v", err)
	}
	if string(m.Data()) != "lane 1" {
		t.Errorf("pulled %q, want lane 1", m.Data())
	}
}

func TestRevokeWorker(t *testing.T) {
	s := start(t, Config{})
	a := addWorker(t, s, "a")
	b := addWorker(t, s, "b")
	// a connects from a copy of its credentials, as a worker on another
	// machine would: its reconnects present a valid key.
	copyPath := filepath.Join(t.TempDir(), "a.creds")
	data, err := os.ReadFile(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	var refusals []string // the server's words to a, in order
	ncA, err := connect(t, s, copyPath,
		nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(3),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refusals = append(refusals, err.Error()) }),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	ncB, err := connect(t, s, b.Path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.RevokeWorker("a"); err != nil {
		t.Fatalf("RevokeWorker: %v", err)
	}
	// At once: the server closes a's connection, and its reconnects are
	// refused until nats.go gives up.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("worker a's connection is still open 10s after its revocation")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a's connection closed %s after its revocation, want at once", d)
	}
	if len(refusals) == 0 || !strings.Contains(strings.ToLower(refusals[0]), "authorization violation") {
		t.Errorf("the server told a %q, want an authorization violation", refusals)
	}
	if err := ncA.LastError(); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a's last reconnect: %v, want %v", err, nats.ErrAuthorization)
	}
	if _, err := os.Stat(a.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a's credentials are still in the state dir: %v", err)
	}
	// A copy of the credentials kept elsewhere does not connect either.
	if _, err := connect(t, s, copyPath); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a's credentials after its revocation: Connect = %v, want %v", err, nats.ErrAuthorization)
	}

	// b goes on.
	if !ncB.IsConnected() {
		t.Error("revoking a disconnected b")
	}
	if err := ncB.Publish(s.Subjects().Worker("b").Heartbeat, nil); err != nil {
		t.Fatal(err)
	}
	if err := ncB.Flush(); err != nil {
		t.Errorf("b after a's revocation: %v", err)
	}
	ws, err := s.Workers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Name != "b" {
		t.Errorf("Workers() after revoking a = %+v, want b alone", ws)
	}

	if err := s.RevokeWorker("a"); !errors.Is(err, ErrUnknownWorker) || !strings.Contains(err.Error(), `no worker "a"`) {
		t.Errorf("revoking a again = %v, want no worker", err)
	}
	if err := s.RevokeWorker("../b"); !errors.Is(err, ErrBadName) || errors.Is(err, ErrUnknownWorker) || !strings.Contains(err.Error(), `worker name "../b" is not allowed`) {
		t.Errorf("RevokeWorker(../b) = %v, want the name refused", err)
	}
}

func TestLoadCredentials(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userSeed, _ := user.Seed()
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountSeed, _ := account.Seed()
	tests := []struct {
		name string
		file string
		want string // "" = loads
	}{
		{"as the daemon writes it", string(credentialsFile("proj", "a", userSeed)), ""},
		{"no seed", projectLine + "proj\n" + workerLine + "a\n", "no NKey user seed"},
		{"an account's seed, not a user's", string(credentialsFile("proj", "a", accountSeed)), "no NKey user seed"},
		{"no project", workerLine + "a\n" + string(userSeed) + "\n", `want a line "# project: NAME" with a name of lower-case letters, digits and '-', found ""`},
		{"a worker name that is not one", projectLine + "proj\n" + workerLine + "A/b\n" + string(userSeed) + "\n", `want a line "# worker: NAME" with a name of lower-case letters, digits and '-', found "A/b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.creds")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := LoadCredentials(path)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LoadCredentials: %v", err)
			case tt.want == "":
				if pub, _ := user.PublicKey(); c.PublicKey != pub || c.Project != "proj" || c.Worker != "a" {
					t.Errorf("LoadCredentials = %+v, want proj, a, %s", c, pub)
				}
			case err == nil || !strings.Contains(err.Error(), tt.want):
				t.Errorf("LoadCredentials = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestMovedCredentialsAreRefused: a file renamed in the state dir would
// give its key another worker's permissions; the daemon refuses it.
func TestMovedCredentialsAreRefused(t *testing.T) {
	s := start(t, Config{})
	a := addWorker(t, s, "a")
	if err := os.Rename(a.Path, filepath.Join(filepath.Dir(a.Path), "b.creds")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Workers(); err == nil || !strings.Contains(err.Error(), "are worker a's of project proj, not b's of proj: the file was moved") {
		t.Errorf("Workers() with a's file as b's = %v, want it refused", err)
	}
	if _, err := s.AddWorker(context.Background(), "c"); err == nil {
		t.Error("AddWorker reloaded the server with a moved file's key as another worker")
	}
}
