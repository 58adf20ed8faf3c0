// Package notify tells a person what happened while nobody watched: a
// feature tested or blocked, the session done, stopped or waiting. It
// POSTs each event as JSON to a webhook (notify.webhook), runs a command
// with it (notify.command), or both.
//
// Delivery never holds the loop: events go into a bounded queue that one
// goroutine empties, a webhook gets a few tries with backoff, and a command
// a bounded time. An event that cannot be delivered is logged and dropped;
// the store, not the notification, is the record of the night.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The kinds of event.
const (
	FeatureTested  = "feature_tested"
	FeatureBlocked = "feature_blocked"
	SessionDone    = "session_done"
	SessionStopped = "session_stopped"
	SessionWaiting = "session_waiting"
	BudgetWarning  = "budget_warning"
)

// Event is what a person is told, and the JSON body a webhook gets.
type Event struct {
	Event   string    `json:"event"`
	Project string    `json:"project"`
	Dir     string    `json:"dir"`
	Feature string    `json:"feature,omitempty"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Options configure a Notifier.
type Options struct {
	Webhook string // a URL, "" for none
	Command string // run by sh -c, "" for none
	Log     *zap.Logger
	// Client posts to the webhook; nil: one with a 10 s timeout.
	Client *http.Client
	// Backoff is the wait before the second try of a webhook, doubled for
	// each next one; 0: one second.
	Backoff time.Duration
}

const (
	queueSize      = 64
	webhookTries   = 4
	commandTimeout = 30 * time.Second
	// drainTimeout bounds the delivery of what is queued at shutdown: the
	// last events of a night (done, stopped) are the ones that matter.
	drainTimeout = 10 * time.Second
)

// Notifier delivers events. The zero of *Notifier (nil) drops them all.
type Notifier struct {
	o     Options
	queue chan Event
}

// New returns a Notifier, or nil when there is nowhere to deliver to.
func New(o Options) *Notifier {
	if o.Webhook == "" && o.Command == "" {
		return nil
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	return &Notifier{o: o, queue: make(chan Event, queueSize)}
}

// Notify queues e for delivery without waiting. A full queue drops it.
func (n *Notifier) Notify(e Event) {
	if n == nil {
		return
	}
	select {
	case n.queue <- e:
	default:
		n.o.Log.Warn("notification dropped: too many waiting", zap.String("event", e.Event), zap.String("feature", e.Feature))
	}
}

// Run delivers events until ctx ends, then what is queued: all of it
// within drainTimeout of the end, the delivery in flight included.
func (n *Notifier) Run(ctx context.Context) error {
	if n == nil {
		<-ctx.Done()
		return nil
	}
	deliverCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(drainTimeout, cancel) })
	defer stop()
	for {
		select {
		case e := <-n.queue:
			n.deliver(deliverCtx, e)
		case <-ctx.Done():
			for {
				select {
				case e := <-n.queue:
					n.deliver(deliverCtx, e)
				default:
					return nil
				}
			}
		}
	}
}

func (n *Notifier) deliver(ctx context.Context, e Event) {
	body, err := json.Marshal(e)
	if err != nil {
		n.o.Log.Error("notification not encoded", zap.Error(err))
		return
	}
	if n.o.Webhook != "" {
		if err := n.post(ctx, body); err != nil {
			n.o.Log.Warn("webhook notification not delivered", zap.String("event", e.Event), zap.Error(err))
		}
	}
	if n.o.Command != "" {
		if err := n.run(ctx, e, body); err != nil {
			n.o.Log.Warn("notification command failed", zap.String("event", e.Event), zap.String("command", n.o.Command), zap.Error(err))
		}
	}
}

// post tries the webhook a few times: on a network error, a 5xx or a 429;
// another 4xx is the receiver saying no, and trying again would not help.
func (n *Notifier) post(ctx context.Context, body []byte) error {
	wait := n.o.Backoff
	var err error
	for try := 1; ; try++ {
		var retry bool
		retry, err = n.postOnce(ctx, body)
		if err == nil || !retry || try == webhookTries {
			return err
		}
		select {
		case <-time.After(wait):
			wait *= 2
		case <-ctx.Done():
			return fmt.Errorf("%w (and then: %v)", err, ctx.Err())
		}
	}
}

func (n *Notifier) postOnce(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.Webhook, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ctxgraphd")
	resp, err := n.o.Client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("%s answered %s", n.o.Webhook, resp.Status)
}

// run runs the command with the event in its environment and, as JSON, on
// its stdin, in a process group of its own that is killed with it.
func (n *Notifier) run(ctx context.Context, e Event, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", n.o.Command)
	cmd.Env = append(os.Environ(),
		"CTXGRAPHD_EVENT="+e.Event, "CTXGRAPHD_PROJECT="+e.Project, "CTXGRAPHD_DIR="+e.Dir,
		"CTXGRAPHD_FEATURE="+e.Feature, "CTXGRAPHD_MESSAGE="+e.Message)
	cmd.Dir = e.Dir
	cmd.Stdin = bytes.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("killed after %s", commandTimeout)
		}
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
