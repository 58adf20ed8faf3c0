package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/scriptedmodel"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// session loads the stored session record once the daemon is down.
func (p *project) session() store.State {
	p.t.Helper()
	st, err := store.Open(p.paths.StateDir, time.Second)
	if err != nil {
		p.t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Load()
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// A night with a rate limit, an overloaded API and a failing one, as the
// real CLI meets them: each run that hits one ends, the session waits the
// configured backoff and redoes it, and none of it is charged to anyone.
func TestAPIOutagesAreWaitedOut(t *testing.T) {
	night(t, core)
	sc := scenario("outages", feature("F-001", scriptedmodel.Pass), feature("F-002", scriptedmodel.Pass))
	sc.Outages = []scriptedmodel.Outage{{Status: 429, Count: 1, RetryAfter: 1}, {Status: 529, Count: 1}, {Status: 500, Count: 1}}
	p := newProject(t, sc)
	var (
		mu      sync.Mutex
		posted  []string
		told    = filepath.Join(t.TempDir(), "told")
		webhook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var e struct{ Event, Feature string }
			if json.NewDecoder(r.Body).Decode(&e) == nil {
				mu.Lock()
				posted = append(posted, strings.TrimSpace(e.Event+" "+e.Feature))
				mu.Unlock()
			}
		}))
	)
	defer webhook.Close()
	p.env = append(p.env, "CTXGRAPHD_LIMITS_BACKOFF=200ms", "CTXGRAPHD_LIMITS_BACKOFF_MAX=1s",
		"CTXGRAPHD_NOTIFY_WEBHOOK="+webhook.URL, `CTXGRAPHD_NOTIFY_COMMAND=echo "$CTXGRAPHD_EVENT $CTXGRAPHD_FEATURE" >> `+told)
	p.runToEnd()

	// A person was told, by the webhook and by the command, of each wait,
	// each tested feature and the end, in order.
	want := "session_waiting, session_waiting, session_waiting, feature_tested F-001, feature_tested F-002, session_done"
	mu.Lock()
	if got := strings.Join(posted, ", "); got != want {
		t.Errorf("the webhook got: %s\nwant: %s", got, want)
	}
	mu.Unlock()
	data, _ := os.ReadFile(told)
	if got := strings.Join(strings.Split(strings.TrimSpace(strings.ReplaceAll(string(data), " \n", "\n")), "\n"), ", "); got != want {
		t.Errorf("the command was told: %s\nwant: %s", got, want)
	}

	if got, want := states(p.featureList()), "F-001=tested F-002=tested"; got != want {
		t.Fatalf("final states %q, want %q", got, want)
	}
	var kinds []string
	for _, r := range p.runs() {
		if r.Outcome == "transient" {
			if r.Role != "initializer-agent" {
				t.Errorf("run %s (%s) hit an outage, want only the initializer's first runs to", r.ID, r.Role)
			}
			kinds = append(kinds, r.Failure)
		}
	}
	if got, want := strings.Join(kinds, " "), "rate_limit overloaded server_error"; got != want {
		t.Errorf("failures of the transient runs: %q, want %q", got, want)
	}
	var waits []string
	for _, tr := range p.transitions() {
		if tr.Event == string(statemachine.Wait) {
			waits = append(waits, tr.Reason)
		}
	}
	if len(waits) != 3 || !strings.HasPrefix(waits[0], "rate or usage limit reached (HTTP 429)") ||
		!strings.HasPrefix(waits[1], "the API is overloaded (HTTP 529)") || !strings.HasPrefix(waits[2], "the API failed (HTTP 500)") {
		t.Errorf("waits %q, want one for each outage, saying which", waits)
	}
	s := p.session()
	if s.Session.InitFailures != 0 || s.Session.Backoffs != 0 {
		t.Errorf("init_failures %d, backoffs %d: want 0 and 0", s.Session.InitFailures, s.Session.Backoffs)
	}
	if st := p.model.Stats(); st.Outages != 3 {
		t.Errorf("the model played %d outages, want 3", st.Outages)
	}
}

// A key the API refuses in the night stops the session at once, with what
// to do, charging no one; once a person has fixed it, the next start goes
// on where it stopped.
func TestRefusedKeyStopsTheSession(t *testing.T) {
	night(t, core)
	sc := scenario("refused-key", feature("F-001", scriptedmodel.Pass))
	sc.Outages = []scriptedmodel.Outage{{Status: 401, Count: 1}}
	p := newProject(t, sc)
	out, log, code := p.ctxgraphd("run", "--exit-when-done")
	if code == 0 {
		t.Fatalf("the daemon exited 0 on a refused key\nstdout:\n%s\nlog:\n%s", out, log)
	}
	if !strings.Contains(log, "Claude Code could not authenticate") || !strings.Contains(log, "claude auth status") {
		t.Errorf("the log does not say what happened and what to do:\n%s", log)
	}
	runs := p.runs()
	if len(runs) != 1 || runs[0].Failure != string(agents.FailAuth) {
		t.Fatalf("runs %+v, want the one initializer run, failed on auth", runs)
	}
	if s := p.session(); s.Session.InitFailures != 0 {
		t.Errorf("init_failures = %d, want 0: the initializer did nothing wrong", s.Session.InitFailures)
	}
	p.runToEnd()
	if got, want := states(p.featureList()), "F-001=tested"; got != want {
		t.Errorf("after a restart: %q, want %q", got, want)
	}
}

// A Claude Code that is not logged in is found before anything starts, by
// asking the real CLI, and said with what to do; no run is spent on it and
// no one is blamed.
func TestNotLoggedInIsSaidAtStart(t *testing.T) {
	night(t, core)
	p := newProject(t, scenario("not-logged-in", feature("F-001", scriptedmodel.Pass)))
	p.env = slices.DeleteFunc(p.env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
	out, log, code := p.ctxgraphd("run", "--exit-when-done")
	if code == 0 {
		t.Fatalf("the daemon exited 0 without a login\nstdout:\n%s\nlog:\n%s", out, log)
	}
	for _, want := range []string{"ctxgraphd cannot start on", "Claude Code could not authenticate: not logged in", "/login", "auth status"} {
		if !strings.Contains(log, want) {
			t.Errorf("the start check does not say %q:\n%s", want, log)
		}
	}
	if runs := p.runs(); len(runs) != 0 {
		t.Errorf("runs %+v, want none", runs)
	}
	if st := p.model.Stats(); st.Messages != 0 {
		t.Errorf("the model got %d requests, want none", st.Messages)
	}
}

// Features that depend on each other are said to, and the night does not
// end as a success.
func TestDependencyCycleEndsUnfinished(t *testing.T) {
	night(t, extended)
	p := newProject(t, scenario("cycle", feature("F-001", scriptedmodel.Pass, "F-002"), feature("F-002", scriptedmodel.Pass, "F-001"), feature("F-003", scriptedmodel.Pass)))
	_, log, code := p.ctxgraphd("run", "--exit-when-done")
	if code != 1 || !strings.Contains(log, "session stopped: dependency cycle in feature-list.json: F-001 -> F-002 -> F-001") {
		t.Errorf("exit %d, want 1 naming the cycle; log:\n%s", code, log)
	}
	if got := states(p.featureList()); got != "F-001=pending F-002=pending F-003=tested" {
		t.Errorf("states %q", got)
	}
}

// A run whose API never answers is killed at agent.idle_timeout with all
// of its processes, and counted against the initializer as a run that went
// nowhere; the next one completes the night.
func TestHungRunIsKilled(t *testing.T) {
	night(t, extended)
	sc := scenario("hung", feature("F-001", scriptedmodel.Pass))
	sc.Outages = []scriptedmodel.Outage{{Stall: true, Count: 1}}
	p := newProject(t, sc)
	// Long enough for a run that is not hung to start on a machine busy
	// with the tests running beside this one: the stalled run waits it out.
	p.env = append(p.env, "CTXGRAPHD_AGENT_IDLE_TIMEOUT=30s")
	p.runToEnd()
	runs := p.runs()
	if len(runs) == 0 || runs[0].Ended != "idle_timeout" || runs[0].Outcome != "failed" {
		t.Fatalf("first run %+v, want killed at the idle timeout", runs[0])
	}
	if got := states(p.featureList()); got != "F-001=tested" {
		t.Errorf("states %q", got)
	}
	p.checkNoLeftovers()
}
