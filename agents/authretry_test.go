package agents

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/procgroup"
)

// stream-401-retry.jsonl is what `claude -p` prints when the API starts
// refusing its key (401): the CLI does not exit but retries, up to 10 times
// over minutes, one api_retry line each (NOTES.md, "Authentication failures
// mid-run"). Modelled on stream-401.jsonl's init line and the api_retry
// line seen with 2.1.330; the CLI would go on after the third.

// The runner ends the run at the first such line, and the whole group with
// it, instead of waiting minutes for the CLI to give up; the failure is an
// authentication failure, which stops the session for a person and charges
// no attempt.
func TestRunEndsAtTheFirstAuthRetry(t *testing.T) {
	start := time.Now()
	res, dir := runFake(t, Options{}, `sleep 1000 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid
cat "`+absTestdata(t, "stream-401-retry.jsonl")+`"
sleep 1000`)
	if res.Ended != EndAuthRefused {
		t.Fatalf("ended %s, want %s: %+v", res.Ended, EndAuthRefused, res)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the run took %v to end", took)
	}
	if pid := childPID(t, dir); alive(pid) {
		t.Errorf("child %d outlived its run", pid)
	}
	if procgroup.Alive(res.PID) {
		t.Errorf("process group %d still has members", res.PID)
	}
	f, ok := res.Failure("")
	if !ok || f.Kind != FailAuth || f.Status != 401 || f.Code != "authentication_failed" || f.Waits() {
		t.Fatalf("Failure() = %+v, %v; want an authentication failure with status 401", f, ok)
	}
	why := f.Explain("claude")
	for _, w := range []string{"could not authenticate", "401", "/login", "ANTHROPIC_API_KEY", "then `ctxgraphd ctl resume`"} {
		if !strings.Contains(why, w) {
			t.Errorf("Explain: %q does not say %q", why, w)
		}
	}
	if !strings.Contains(res.Summary, "refused the credentials") {
		t.Errorf("Summary = %q", res.Summary)
	}
}

// Only a refusal of the credentials ends a run: a rate limit's or an
// overload's retries are waited out by the CLI, and a run that got over
// them is not a failed one.
func TestRetriesThatHealDoNotEndTheRun(t *testing.T) {
	data, err := os.ReadFile("testdata/stream-429-retries.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(Options{}, nil)
	var res Result
	var last string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m, err := NewDecoder(strings.NewReader(line + "\n")).Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, refused := r.absorb(&res, &last, m, newStuckWatch(0), func(Event) {}); refused {
			t.Errorf("a 429 retry ended the run: %s", line)
		}
	}
	for _, tc := range []struct {
		line    string
		refused bool
	}{
		{`{"type":"system","subtype":"api_retry","attempt":1,"error_status":401,"error":"authentication_failed"}`, true},
		{`{"type":"system","subtype":"api_retry","attempt":1,"error_status":401}`, true},
		{`{"type":"system","subtype":"api_retry","attempt":1,"error_status":403,"error":"oauth_org_not_allowed"}`, true},
		{`{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded"}`, false},
		{`{"type":"system","subtype":"api_retry","attempt":1,"error_status":500,"error":"server_error"}`, false},
		{`{"type":"system","subtype":"api_retry","attempt":1,"error":"server_error"}`, false},
	} {
		m, err := NewDecoder(strings.NewReader(tc.line + "\n")).Next()
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		if _, refused := r.absorb(&res, &last, m, newStuckWatch(0), func(Event) {}); refused != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.line, refused, tc.refused)
		}
		if !tc.refused && (res.APIError != "" || res.APIErrorStatus != 0) {
			t.Errorf("%s: a retry that heals was kept as the run's error: %+v", tc.line, res)
		}
	}
	// The fixture read whole: the first line is enough, and what it says
	// is kept for the failure.
	data, err = os.ReadFile("testdata/stream-401-retry.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res, _, _ = decodeAll(t, data)
	res.Ended = EndAuthRefused
	if f, ok := res.Failure(""); !ok || f.Kind != FailAuth || f.Status != 401 || f.Code != "authentication_failed" {
		t.Errorf("Failure() = %+v, %v", f, ok)
	}
}

// The last step of the login advice fits where it is given: the running
// daemon's session is resumed; at the start-up check no daemon runs yet, so
// it is started.
func TestLoginAdviceEndsWithTheStepThatFits(t *testing.T) {
	for _, k := range []FailureKind{FailAuth, FailBilling, FailModel} {
		f := Failure{Kind: k, Detail: "x"}
		if got := f.Explain("claude"); !strings.HasSuffix(got, "then `ctxgraphd ctl resume`") {
			t.Errorf("%s: Explain = %q, want it to end with ctl resume", k, got)
		}
		got := f.ExplainAtStart("claude")
		if !strings.HasSuffix(got, "then `ctxgraphd run`") || strings.Contains(got, "ctl resume") {
			t.Errorf("%s: ExplainAtStart = %q, want it to end with `ctxgraphd run` and no ctl resume", k, got)
		}
		if strings.TrimSuffix(got, "`ctxgraphd run`") != strings.TrimSuffix(f.Explain("claude"), "`ctxgraphd ctl resume`") {
			t.Errorf("%s: the two differ in more than the last step", k)
		}
	}
}

func absTestdata(t *testing.T, name string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/testdata/" + name
}
