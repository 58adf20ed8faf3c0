package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver is a webhook that answers with statuses in turn (200 once they
// run out) and keeps what it got.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []Event
	tries    int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		status = http.StatusBadRequest
	}
	if status == http.StatusOK {
		var e Event
		body, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(body, &e); err == nil {
			r.got = append(r.got, e)
		}
	}
	w.WriteHeader(status)
}

func (r *receiver) state() ([]Event, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.got...), r.tries
}

// deliverAll queues events, then shuts the notifier down, which delivers
// what is queued.
func deliverAll(t *testing.T, n *Notifier, events ...Event) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	for _, e := range events {
		n.Notify(e)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

var tested = Event{Event: FeatureTested, Project: "p-1", Dir: "/tmp", Feature: "F-001", Message: "F-001 tested", Time: time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)}

// A webhook gets each event as JSON; a failing receiver (5xx, 429) is tried
// again with backoff, one that refuses (4xx) is not.
func TestWebhook(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		delivered bool
		tries     int
	}{
		{"at once", nil, true, 1},
		{"after a server error and a rate limit", []int{500, 429}, true, 3},
		{"refused: not tried again", []int{400}, false, 1},
		{"given up after four tries", []int{503, 503, 503, 503, 503}, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &receiver{statuses: tt.statuses}
			srv := httptest.NewServer(r)
			defer srv.Close()
			n := New(Options{Webhook: srv.URL, Log: zaptest.NewLogger(t), Backoff: time.Millisecond})
			deliverAll(t, n, tested)
			got, tries := r.state()
			if tries != tt.tries {
				t.Errorf("%d tries, want %d", tries, tt.tries)
			}
			if tt.delivered != (len(got) == 1) {
				t.Fatalf("delivered %v, want %v", got, tt.delivered)
			}
			if tt.delivered && got[0] != tested {
				t.Errorf("got %+v, want %+v", got[0], tested)
			}
		})
	}
}

// A webhook that does not answer does not hold the notifier past its
// client's timeout, and the next event still goes out.
func TestWebhookThatHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	n := New(Options{Webhook: srv.URL, Client: &http.Client{Timeout: 50 * time.Millisecond}, Backoff: time.Millisecond})
	start := time.Now()
	deliverAll(t, n, tested, tested)
	if d := time.Since(start); d > drainTimeout {
		t.Errorf("delivery took %s", d)
	}
}

// A command runs with the event in its environment and on stdin, in the
// project's directory.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	e := tested
	e.Dir = dir
	e.Message = "F-001 tested: `sh tests/F-001.sh` passed; it's committed"
	n := New(Options{Command: `printf '%s|%s|%s|%s|%s|' "$CTXGRAPHD_EVENT" "$CTXGRAPHD_PROJECT" "$CTXGRAPHD_FEATURE" "$CTXGRAPHD_MESSAGE" "$PWD" > out; cat >> out`, Log: zaptest.NewLogger(t)})
	deliverAll(t, n, e)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(data), "|"+dir+"|")
	if head != "feature_tested|p-1|F-001|"+e.Message {
		t.Errorf("environment %q", head)
	}
	var got Event
	if err := json.Unmarshal([]byte(body), &got); err != nil || got != e {
		t.Errorf("stdin %q (%v), want the event", body, err)
	}
}

// Nowhere to deliver: no notifier, and a nil one takes events and runs
// until told to stop.
func TestNowhere(t *testing.T) {
	n := New(Options{})
	if n != nil {
		t.Fatalf("New without a webhook or command = %v, want nil", n)
	}
	deliverAll(t, n, tested)
}

// A full queue drops what does not fit rather than hold the loop.
func TestFullQueueDrops(t *testing.T) {
	n := New(Options{Command: "true"})
	for range queueSize + 10 {
		n.Notify(tested) // nothing empties the queue: Run is not running
	}
	if len(n.queue) != queueSize {
		t.Errorf("%d queued, want %d", len(n.queue), queueSize)
	}
}
