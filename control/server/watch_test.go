package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// watched is a backend whose status a test changes, as the loop does.
type watched struct {
	*controltest.Backend
	mu      sync.Mutex
	st      control.Status
	changed chan struct{}
}

func newWatched(state string) *watched {
	return &watched{Backend: &controltest.Backend{}, st: control.Status{State: state}, changed: make(chan struct{})}
}

func (w *watched) Status(context.Context) (control.Status, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st, nil
}

func (w *watched) Changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *watched) set(state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.State = state
	close(w.changed)
	w.changed = make(chan struct{})
}

// A watcher gets the status at once and then each change as it happens,
// in order; when the daemon shuts down, it is told the daemon went away.
func TestWatchFollowsChanges(t *testing.T) {
	sock := socketIn(t)
	b := newWatched("coding")
	srv := serve(t, sock, b, nil)
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		done <- control.NewClient(sock).Watch(context.Background(), func(st control.Status) error {
			got <- st.State
			return nil
		})
	}()
	want := func(state string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case s := <-got:
				if s == state {
					return
				}
			case <-deadline:
				t.Fatalf("the watcher never saw %q", state)
			}
		}
	}
	want("coding")
	b.set("testing")
	want("testing")
	b.set("done")
	want("done")
	srv.Shutdown(context.Background())
	select {
	case err := <-done:
		if !errors.Is(err, control.ErrDaemonGone) {
			t.Errorf("Watch after shutdown: %v, want ErrDaemonGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not end when the daemon shut down")
	}
}

// A watcher that stops (its ctx, or fn failing) ends Watch at once.
func TestWatchEndsWithTheWatcher(t *testing.T) {
	sock := socketIn(t)
	serve(t, sock, newWatched("coding"), nil)
	stop := errors.New("enough")
	if err := control.NewClient(sock).Watch(context.Background(), func(control.Status) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Watch = %v, want fn's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := control.NewClient(sock).Watch(ctx, func(control.Status) error {
		if n++; n == 2 { // the second comes with the one-second tick
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Errorf("Watch after its ctx ended = %v, want nil", err)
	}
}

// Without a daemon, Watch says so as every other call does.
func TestWatchWithoutDaemon(t *testing.T) {
	err := control.NewClient(socketIn(t)).Watch(context.Background(), func(control.Status) error { return nil })
	if !errors.Is(err, control.ErrNoDaemon) {
		t.Errorf("Watch = %v, want ErrNoDaemon", err)
	}
}
