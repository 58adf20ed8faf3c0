package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

var t0 = time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)

// night is a store as a night leaves it: F-001 tested on its second
// attempt (a refusal on the first), F-002 blocked, F-003 never started, a
// run that waited out a rate limit.
func night(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	list := &progress.List{Version: 1, Features: []progress.Feature{
		{ID: "F-001", Title: "Greeting", Test: "sh tests/F-001.sh", Status: progress.Completed, Tested: true},
		{ID: "F-002", Title: "Farewell | bye", Test: "sh tests/F-002.sh", Status: progress.Blocked},
		{ID: "F-003", Title: "Counter", Test: "sh tests/F-003.sh", Status: progress.Pending},
	}}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	run := func(seq uint64, role, feature string, attempt, from, to int, outcome string, cost float64) store.Run {
		return store.Run{Seq: seq, ID: store.RunID(seq), Role: role, Feature: feature, Attempt: attempt, StartedAt: at(from), EndedAt: at(to), Outcome: outcome, CostUSD: cost, Summary: "summary of " + store.RunID(seq)}
	}
	rl := run(1, "initializer-agent", "", 0, 0, 1, "transient", 0)
	rl.Failure = "rate_limit"
	tested := run(5, "tester-agent", "F-001", 2, 12, 14, "ok", 0.25)
	tested.Commit = "0123456789abcdef0123"
	c := store.Batch{
		Session:     &store.Session{State: "done", Message: "every feature is tested or blocked"},
		FeatureList: list.Marshal(),
		Counters: map[string]store.FeatureCounters{
			"F-001": {CostUSD: 1.75, Commit: "0123456789abcdef0123", OffBranch: "HEAD is detached", LastFailure: "an old failure"},
			"F-002": {CostUSD: 1, Failures: 3, LastFailure: "3 of 3 attempts failed"},
		},
		Runs: []store.Run{rl, run(2, "initializer-agent", "", 0, 2, 4, "ok", 0.5),
			run(3, "coding-agent", "F-001", 1, 4, 8, "ok", 0.75), run(4, "tester-agent", "F-001", 1, 8, 10, "failed", 0.25),
			run(6, "coding-agent", "F-001", 2, 10, 12, "ok", 0.5), tested, run(7, "coding-agent", "F-002", 3, 14, 20, "failed", 1)},
		Transitions: []store.Transition{{Seq: 1, Time: at(0), Event: "start", From: "init", To: "init"}, {Seq: 2, Time: at(21), Event: "finish", From: "next", To: "done"}},
	}
	if err := st.Apply(c); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendTraces(
		control.Trace{Timestamp: at(9), Type: control.TraceViolation, Gate: "tested-needs-evidence", Code: "no_test_run", Context: control.TraceContext{Agent: "tester-agent", Feature: "F-001", Run: "run-000004"}, Event: control.TraceEvent{WhatHappened: "claimed tested without a run"}},
		control.Trace{Timestamp: at(20), Type: control.TraceDecision, Context: control.TraceContext{Feature: "F-002"}, Event: control.TraceEvent{WhatHappened: "F-002 blocked: 3 of 3 attempts failed: `sh tests/F-002.sh` failed (exit 1)"}},
	); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBuild(t *testing.T) {
	r, err := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "done" || !r.Started.Equal(t0) || !r.Last.Equal(t0.Add(21*time.Minute)) {
		t.Errorf("state %q from %s to %s", r.State, r.Started, r.Last)
	}
	want := control.ReportTotals{Features: 3, Tested: 1, Blocked: 1, Open: 1, Runs: 7, Refusals: 1, AgentTime: 19 * time.Minute}
	if r.Totals != want {
		t.Errorf("totals %+v\nwant   %+v", r.Totals, want)
	}
	if r.Cost.SessionUSD != 3.25 || r.Cost.PerTestedFeatureUSD != 3.25 || r.Cost.ByRole["coding-agent"] != 2.25 || r.Cost.ByRole["tester-agent"] != 0.5 {
		t.Errorf("cost %+v", r.Cost)
	}
	f1, f2, f3 := r.Features[0], r.Features[1], r.Features[2]
	if f1.Outcome != "tested" || f1.Attempts != 2 || f1.Runs != 4 || f1.Time != 10*time.Minute || f1.CostUSD != 1.75 || f1.Commit == "" || f1.Branch != "" || f1.OffBranch != "HEAD is detached" || f1.Why != "" || f1.Refusals != 1 {
		t.Errorf("F-001 %+v", f1)
	}
	if f2.Outcome != "blocked" || f2.Why != "3 of 3 attempts failed: `sh tests/F-002.sh` failed (exit 1)" || f2.Attempts != 3 {
		t.Errorf("F-002 %+v", f2)
	}
	if f3.Outcome != "pending" || f3.Runs != 0 {
		t.Errorf("F-003 %+v", f3)
	}
	if r.Runs[0].Failure != "rate_limit" || r.Runs[5].Commit == "" {
		t.Errorf("runs %+v", r.Runs)
	}
}

// A project no initializer has worked yet still reports: its state and
// nothing else.
func TestBuildEmpty(t *testing.T) {
	st, err := store.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := Build(st, "p", "/x", t0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range Formats {
		if err := Render(&b, r, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if r.Totals != (control.ReportTotals{}) || len(r.Features) != 0 {
		t.Errorf("report %+v", r)
	}
}

func TestMarkdown(t *testing.T) {
	r, _ := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	var b bytes.Buffer
	if err := Render(&b, r, "md"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# ctxgraphd report: /home/me/todo",
		"**done**: every feature is tested or blocked",
		"3 features: 1 tested, 1 blocked, 1 open. 7 runs, 19m00s of agent time, $3.25 ($3.25 per tested feature). 1 refusals.",
		"| F-001 Greeting | tested | 2 | 4 | $1.75 | 10m00s | 0123456789ab (ref only) | not on the branch: HEAD is detached |",
		`| F-002 Farewell \| bye | blocked | 3 | 1 | $1.00 | 6m00s |  | 3 of 3 attempts failed: \` + "`sh tests/F-002.sh\\`" + ` failed (exit 1) |`,
		"- coding-agent: $2.25",
		"F-001 tester-agent tested-needs-evidence/no_test_run: claimed tested without a run",
		"run-000001 initializer-agent : transient (rate_limit), $0.00, 1m00s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestJSON(t *testing.T) {
	r, _ := Build(night(t), "p-1", "/home/me/todo", t0.Add(time.Hour))
	var b bytes.Buffer
	if err := Render(&b, r, "json"); err != nil {
		t.Fatal(err)
	}
	var back control.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Totals != r.Totals || len(back.Features) != 3 || back.Features[1].Why != r.Features[1].Why || back.Cost.SessionUSD != 3.25 {
		t.Errorf("round trip: %+v", back)
	}
}

// The page stands alone (no script, nothing fetched) and draws a bar for
// each run, in the colour of its outcome (the timeline's own tests are in
// timeline_test.go).
func TestHTML(t *testing.T) {
	r, _ := Build(night(t), "p-1", "/home/me/<todo>", t0.Add(time.Hour))
	var b bytes.Buffer
	if err := Render(&b, r, "html"); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var rects, rows []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "link", "img", "iframe":
				t.Errorf("the page has a <%s>", n.Data)
			case "rect":
				rects = append(rects, attr(n, "class"))
			case "tr":
				if id := attr(n, "data-feature"); id != "" {
					rows = append(rows, id)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if got := strings.Join(rects, ", "); got != "run transient, run ok, run ok, run failed, run ok, run ok, run failed" {
		t.Errorf("bars %q", got)
	}
	if got := strings.Join(rows, " "); got != "F-001 F-002 F-003" {
		t.Errorf("feature rows %q", got)
	}
	if strings.Contains(b.String(), "<todo>") {
		t.Error("the directory was not escaped")
	}
	if !strings.Contains(b.String(), "(ref only)</td><td>not on the branch: HEAD is detached</td>") {
		t.Error("F-001's row does not say why its commit is not on the branch")
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func TestUnknownFormat(t *testing.T) {
	err := Render(&bytes.Buffer{}, control.Report{}, "pdf")
	if err == nil || err.Error() != `unknown report format "pdf": use one of md, html, json` {
		t.Errorf("Render pdf: %v", err)
	}
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", -time.Second: "0s", 1400 * time.Millisecond: "1s", 65 * time.Second: "1m05s", 3*time.Hour + 12*time.Minute + 31*time.Second: "3h13m"} {
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestTurnsLostToRefusals: a refusal of a tester's claim or stop in a run
// whose claim the verdict then accepted is a turn lost to a refusal of
// honest work, counted by run and for the night; a refusal the run never
// got past, or one after the approval, or of another gate, is not.
func TestTurnsLostToRefusals(t *testing.T) {
	st := night(t)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	tester := control.TraceContext{Agent: "tester-agent", Feature: "F-001", Run: "run-000005"}
	if _, err := st.AppendTraces(
		control.Trace{Timestamp: at(12), Type: control.TraceViolation, Gate: "tested-needs-evidence", Code: "no_test_run", Context: tester, Event: control.TraceEvent{WhatHappened: "refused"}},
		control.Trace{Timestamp: at(13), Type: control.TraceViolation, Gate: "tester-must-test", Code: "no_test_run", Context: tester, Event: control.TraceEvent{WhatHappened: "refused"}},
		control.Trace{Timestamp: at(13), Type: control.TraceViolation, Gate: "scope", Code: "out_of_scope", Context: tester, Event: control.TraceEvent{WhatHappened: "another gate"}},
		control.Trace{Timestamp: at(14), Type: control.TraceApproval, Context: tester, Event: control.TraceEvent{WhatHappened: "F-001 tested"}},
		control.Trace{Timestamp: at(15), Type: control.TraceViolation, Gate: "tested-needs-evidence", Code: "no_evidence", Context: tester, Event: control.TraceEvent{WhatHappened: "after"}},
	); err != nil {
		t.Fatal(err)
	}
	r, err := Build(st, "p-1", "/home/me/todo", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, run := range r.Runs {
		by[run.ID] = run.LostToRefusals
	}
	// run-000004's refusal was never followed by an accepted claim.
	if by["run-000005"] != 2 || by["run-000004"] != 0 || r.Totals.LostToRefusals != 2 {
		t.Fatalf("lost %v, total %d", by, r.Totals.LostToRefusals)
	}
	var md, page bytes.Buffer
	if err := Render(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	if err := Render(&page, r, "html"); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{md.String(), page.String()} {
		if !strings.Contains(out, "2 turns lost to refusals of work the verdict then accepted") || !strings.Contains(out, "2 turns lost to refusals") {
			t.Errorf("the count is not shown:\n%s", out)
		}
	}
	data, _ := json.Marshal(r)
	if !strings.Contains(string(data), `"lost_to_refusals":2`) {
		t.Errorf("JSON: %s", data)
	}
}

// What agents or a feature list wrote reaches the Markdown report as the
// text it is: an agent's image (which would phone home when the report is
// viewed), link, HTML, bold "tested" or terminal escape is written out,
// not rendered or obeyed, wherever it lands (a run's summary, a title, a
// reason, a refusal).
func TestMarkdownShowsAgentsTextAsText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"![](https://x.example/p.png)", `\!\[\](https://x.example/p.png)`},
		{"[see the verdict](https://x.example/v)", `\[see the verdict\](https://x.example/v)`},
		{"**F-001 tested** _yes_ ~~no~~", `\*\*F-001 tested\*\* \_yes\_ \~\~no\~\~`},
		{"<img src=x onerror=alert(1)> &amp;", `\<img src=x onerror=alert(1)\> \&amp;`},
		{"# heading | cell `code` \\", "\\# heading \\| cell \\`code\\` \\\\"},
		{"done\x1b[2K\rforged", `done\\x1b\[2K forged`},
		{"plain words, a path src/a.go and F-001 (attempt 2).", "plain words, a path src/a.go and F-001 (attempt 2)."},
	} {
		if got := text(tt.in); got != tt.want {
			t.Errorf("text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}

	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	forged := "\x1b[2K**F-001 tested** ![](https://x.example/p.png)"
	r := control.Report{Dir: "/p", State: "stopped", Message: "stopped: " + forged,
		Features: []control.ReportFeature{{ID: "F-001", Title: "Parse " + forged, Outcome: "blocked", Why: "failed: " + forged}},
		Refusals: []control.Refusal{{Time: at, Feature: "F-001", Role: "tester-agent", Gate: "scope", Code: "out_of_scope", What: "wrote " + forged}},
		Runs:     []control.ReportRun{{ID: "run-000003", Role: "tester-agent", Feature: "F-001", Attempt: 1, Start: at, End: at, Outcome: "failed", Summary: "done " + forged}}}
	var b strings.Builder
	if err := Markdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, `\*\*F-001 tested\*\* \!\[\](https://x.example/p.png)`); n != 5 {
		t.Errorf("the agent's text is shown escaped %d times, want 5 (message, title, why, refusal, summary):\n%s", n, out)
	}
	if strings.ContainsAny(out, "\x1b\r") || strings.Contains(out, "![") || strings.Contains(out, " **F-001") {
		t.Errorf("the Markdown report carries an agent's escapes or markup:\n%s", out)
	}
}
