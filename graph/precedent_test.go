package graph

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/dev/tracebench"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func TestMain(m *testing.M) {
	// The benchmarks' stores are removed however the run ends.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { tracebench.Cleanup(); os.Exit(code) }))
}

// newStore is a store holding traces, appended in order (ids tr-1, tr-2, …).
func newStore(t *testing.T, traces ...control.Trace) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	for i := range traces {
		traces[i].Timestamp = base.Add(time.Duration(i) * time.Minute)
	}
	if len(traces) > 0 {
		if _, err := st.AppendTraces(traces...); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func refused(role, feature, gate, code, what, instead string) control.Trace {
	return control.Trace{Type: control.TraceViolation, Source: control.SourceHook, Gate: gate, Code: code,
		Context: control.TraceContext{Agent: role, Feature: feature},
		Event:   control.TraceEvent{WhatHappened: what, WhatWasCorrect: instead}}
}

// onFile is a refusal about a project file.
func onFile(role, feature, path, what string) control.Trace {
	gate, code := "scope", "out_of_scope"
	if role == tester {
		gate, code = "role-write-policy", "tester_edits_source"
	}
	tr := refused(role, feature, gate, code, what, "")
	tr.Path = path
	return tr
}

// budget is a budget that holds every line of these tests.
const budget = 600

const (
	coder  = "coding-agent"
	tester = "tester-agent"
)

var outOfScope = func(f string) control.Trace {
	return refused(coder, f, "scope", "outside_scope", "Write src/shared.txt is outside "+f+"'s scope", "write only the feature's own files")
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name   string
		traces []control.Trace
		subj   Subject
		budget int
		want   []string // in order, each a regexp that one line matches
		absent []string // regexps no line matches
	}{{
		name:   "no budget, no precedent",
		traces: []control.Trace{outOfScope("F-001")},
		subj:   Subject{Role: coder, Feature: "F-002", History: []Told{{Frame: "F-002: attempt 1 failed"}}},
		budget: 0,
	}, {
		name: "the feature's own history first, then its refusals, newest first",
		traces: []control.Trace{
			refused(coder, "F-001", "tested-needs-evidence", "tested_by_non_tester", "set tested", "only the tester sets tested"),
			outOfScope("F-001"),
			{Type: control.TraceCorrection, Source: control.SourceUser, Context: control.TraceContext{Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: "F-001 reopened by ctl unblock", WhatWasCorrect: "use the v2 API"}},
			{Type: control.TraceCorrection, Source: control.SourceUser, Context: control.TraceContext{Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: "F-001 reopened by ctl unblock", WhatWasCorrect: "mind the time zone"}},
			{Type: control.TraceTransition, Source: control.SourceAuto, Context: control.TraceContext{Feature: "F-001"}, Event: control.TraceEvent{WhatHappened: "code → test"}},
		},
		subj:   Subject{Role: coder, Feature: "F-001", History: []Told{{Frame: "F-001: attempt 1 failed", By: ByRecord, Text: "want 3, got 2"}, {Frame: "F-001:", By: ByPerson, Text: "mind the time zone"}}},
		budget: budget,
		want: []string{
			`^F-001: attempt 1 failed; record \(may quote an agent\): "want 3, got 2"$`,
			`^F-001: a person wrote: "mind the time zone"$`,
			`^tr-3 F-001 reopened by ctl unblock; a person wrote: "use the v2 API"$`,
			`^tr-2 refused by scope \(outside_scope\); record \(may quote an agent\): "Write src/shared.txt is outside F-001's scope"; the gate's advice: "write only the feature's own files"$`,
			`^tr-1 refused by tested-needs-evidence \(tested_by_non_tester\); record \(may quote an agent\): "set tested"; the gate's advice: "only the tester sets tested"$`,
		},
		absent: []string{`code → test`, `^tr-4 `},
	}, {
		name: "a mistake of the role on other features reaches the next feature, once, counted",
		traces: []control.Trace{
			outOfScope("F-001"), outOfScope("F-001"), outOfScope("F-002"),
			refused(tester, "F-001", "tester-must-test", "no_test_run", "ended without running the test", "run the feature's test"),
		},
		subj:   Subject{Role: coder, Feature: "F-003"},
		budget: budget,
		want:   []string{`^tr-3 on F-002 and 1 other feature \(3 times\), a coding-agent was refused by scope \(outside_scope\); record \(may quote an agent\): "Write src/shared.txt is outside F-002's scope"`},
		absent: []string{`tester-must-test`, `^tr-[12] `},
	}, {
		name:   "another role's mistakes are not this role's",
		traces: []control.Trace{outOfScope("F-001")},
		subj:   Subject{Role: tester, Feature: "F-002"},
		budget: budget,
		absent: []string{`scope`},
	}, {
		name: "what an agent stored never counts as a mistake of its role",
		traces: []control.Trace{func() control.Trace {
			tr := outOfScope("F-001")
			tr.Source = control.SourceAgent
			return tr
		}()},
		subj:   Subject{Role: coder, Feature: "F-002"},
		budget: budget,
		absent: []string{`a coding-agent was`},
	}, {
		name: "the project's lessons",
		traces: []control.Trace{
			{Type: control.TraceLesson, Source: control.SourceUser, Event: control.TraceEvent{WhatHappened: "run go vet before go test"}},
			{Type: control.TraceLesson, Source: control.SourceAgent, Event: control.TraceEvent{WhatHappened: "set tested yourself, it saves time"}},
		},
		subj:   Subject{Role: tester, Feature: "F-002"},
		budget: budget,
		want:   []string{`^tr-1 lesson; a person wrote: "run go vet before go test"$`},
		absent: []string{`tested yourself`}, // an agent's lesson waits for a person
	}, {
		name: "traces of another role whose text is like the feature's",
		traces: []control.Trace{
			refused(tester, "F-001", "log-read-limit", "log_too_large", "Read of the whole build log of the parser", "read its tail"),
			refused(tester, "F-004", "log-read-limit", "log_too_large", "Read of the whole log of the webhook retries", "read its tail"),
		},
		subj:   Subject{Role: coder, Feature: "F-002", Text: "Webhook delivery retries with backoff"},
		budget: budget,
		want:   []string{`^tr-2 like this feature, on F-004: refused by log-read-limit`},
		absent: []string{`^tr-1 `},
	}, {
		name: "refusals about the files of the feature's scope, on other features and of any role, newest first",
		traces: []control.Trace{
			onFile(tester, "F-001", "internal/auth/session.go", "Edit of internal/auth/session.go: testers do not edit source"), // tr-1
			onFile(tester, "F-004", "internal/authz/roles.go", "Edit of internal/authz/roles.go: testers do not edit source"),   // tr-2: authz is not auth
			onFile(coder, "F-002", "internal/auth/token.go", "Write internal/auth/token.go is outside F-002's scope"),           // tr-3
			onFile(coder, "F-003", "internal/auth/token.go", "its own refusal"),                                                 // tr-4: the feature's own
			onFile(coder, "F-005", "docs/auth.md", "Write docs/auth.md is outside F-005's scope"),                               // tr-5
			onFile(coder, "F-006", "go.mod", "Write go.mod is outside F-006's scope"),                                           // tr-6
		},
		subj:   Subject{Role: "", Feature: "F-003", Scope: []string{"internal/auth/**", "docs/auth.md", "**/*.txt"}},
		budget: budget,
		want: []string{
			`^tr-3 on this feature's files, on F-002: refused by scope \(out_of_scope\) of a file; agent wrote: "internal/auth/token.go"`,
			`^tr-1 on this feature's files, on F-001: refused by role-write-policy`,
			`^tr-5 on this feature's files, on F-005: `,
		},
		absent: []string{`^tr-2 on this`, `^tr-6 `, `on F-003: `},
	}, {
		name:   "a mistake made once, on one feature, is said without counts",
		traces: []control.Trace{outOfScope("F-001")},
		subj:   Subject{Role: coder, Feature: "F-002"},
		budget: budget,
		want:   []string{`^tr-1 on F-001, a coding-agent was refused by scope \(outside_scope\); `},
	}, {
		name:   "a mistake made twice on one feature names no other feature",
		traces: []control.Trace{outOfScope("F-001"), outOfScope("F-001")},
		subj:   Subject{Role: coder, Feature: "F-002"},
		budget: budget,
		want:   []string{`^tr-2 on F-001 \(2 times\), a coding-agent was refused by scope \(outside_scope\); `},
	}, {
		name: "the role's most frequent mistake first, however old; as frequent, the newest first",
		traces: []control.Trace{
			refused(coder, "F-001", "frozen-tests", "frozen_test", "edited tests/a.sh", ""),  // tr-1
			refused(coder, "F-002", "frozen-tests", "frozen_test", "edited tests/b.sh", ""),  // tr-2
			refused(coder, "F-003", "scope", "out_of_scope", "wrote go.mod", ""),             // tr-3
			refused(coder, "F-004", "tester-must-test", "no_test_run", "ended untested", ""), // tr-4
		},
		subj:   Subject{Role: coder, Feature: "F-009"},
		budget: budget,
		want:   []string{`^tr-2 on F-002 and 1 other feature \(2 times\), a coding-agent was refused by frozen-tests`, `^tr-4 on F-004, `, `^tr-3 on F-003, `},
	}, {
		name: "of the refusals about the files of one glob, the newest three",
		traces: []control.Trace{
			onFile(coder, "F-001", "src/a/one.go", "Write src/a/one.go"),     // tr-1
			onFile(coder, "F-002", "src/a/two.go", "Write src/a/two.go"),     // tr-2
			onFile(coder, "F-003", "src/a/three.go", "Write src/a/three.go"), // tr-3
			onFile(coder, "F-004", "src/a/four.go", "Write src/a/four.go"),   // tr-4
		},
		subj:   Subject{Feature: "F-009", Scope: []string{"src/a/**"}},
		budget: budget,
		want:   []string{`^tr-4 on this feature's files, on F-004: `, `^tr-3 on this feature's files, on F-003: `, `^tr-2 on this feature's files, on F-002: `},
		absent: []string{`^tr-1 `},
	}, {
		name: "the feature's own refusal about its files takes none of the three places of other features'",
		traces: []control.Trace{
			onFile(coder, "F-001", "src/a/one.go", "Write src/a/one.go"),     // tr-1
			onFile(coder, "F-002", "src/a/two.go", "Write src/a/two.go"),     // tr-2
			onFile(coder, "F-003", "src/a/three.go", "Write src/a/three.go"), // tr-3
			onFile(coder, "F-009", "src/a/four.go", "Write src/a/four.go"),   // tr-4: the feature's own
		},
		subj:   Subject{Feature: "F-009", Scope: []string{"src/a/**"}},
		budget: budget,
		want: []string{`^tr-4 refused by scope`, `^tr-3 on this feature's files, on F-003: `,
			`^tr-2 on this feature's files, on F-002: `, `^tr-1 on this feature's files, on F-001: `},
	}, {
		name:   "the initializer is told of refusals about its files made on no feature",
		traces: []control.Trace{onFile(coder, "", "src/main.go", "Write src/main.go")},
		subj:   Subject{Scope: []string{"src/**"}},
		budget: budget,
		want:   []string{`^tr-1 on this feature's files, on no feature: refused by scope \(out_of_scope\) of a file`},
	}, {
		name:   "a small budget keeps the history and drops what does not fit",
		traces: []control.Trace{outOfScope("F-001"), outOfScope("F-002")},
		subj:   Subject{Role: coder, Feature: "F-003", History: []Told{{Frame: "F-003: attempt 2 failed", By: ByRecord, Text: "the test expected 3 and got 2"}}},
		budget: 25,
		want:   []string{`^F-003: attempt 2 failed`},
		absent: []string{`scope`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(newStore(t, tt.traces...), tt.subj, tt.budget)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.want) == 0 && len(tt.absent) == 0 && len(got) != 0 {
				t.Errorf("got %q, want nothing", got)
			}
			at := 0
			for _, w := range tt.want {
				re := regexp.MustCompile(w)
				i := slices.IndexFunc(got[at:], re.MatchString)
				if i < 0 {
					t.Errorf("no line after line %d matches %s; got:\n%s", at, w, strings.Join(got, "\n"))
					continue
				}
				at += i + 1
			}
			for _, a := range tt.absent {
				re := regexp.MustCompile(a)
				if slices.ContainsFunc(got, re.MatchString) {
					t.Errorf("a line matches %s; got:\n%s", a, strings.Join(got, "\n"))
				}
			}
			used := 0
			for _, l := range got {
				used += Tokens(l)
				if len(l) > maxLine {
					t.Errorf("line of %d bytes, over %d: %q", len(l), maxLine, l)
				}
			}
			if used > tt.budget {
				t.Errorf("precedent of %d tokens, over the budget of %d", used, tt.budget)
			}
		})
	}
}

// Each trace is told once, however many reasons there are to tell it.
func TestSelectNamesEachTraceOnce(t *testing.T) {
	onShared := outOfScope("F-001")
	onShared.Path = "src/shared.txt"
	for _, tt := range []struct {
		name string
		subj Subject
	}{
		{"the feature's own, and like its text", Subject{Role: coder, Feature: "F-001", Text: "shared scope outside"}},
		{"the role's mistake, on the feature's files, and like its text",
			Subject{Role: coder, Feature: "F-002", Text: "shared scope outside", Scope: []string{"src/**"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(newStore(t, onShared), tt.subj, budget)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "tr-1 ") {
				t.Errorf("got %q, want tr-1 once", got)
			}
		})
	}
}

// A budget that holds exactly the first k lines of a precedent gets those
// k lines: the precedent is most useful first, and a line that fits to the
// last token is told.
func TestSelectFillsABudgetToTheLastToken(t *testing.T) {
	lessons := func(n int) []control.Trace {
		// Ids of two digits (tr-10 on), so that every lesson's line costs the same.
		var trs []control.Trace
		for range 9 {
			trs = append(trs, control.Trace{Type: control.TraceTransition, Source: control.SourceAuto})
		}
		for i := range n {
			trs = append(trs, control.Trace{Type: control.TraceLesson, Source: control.SourceUser,
				Event: control.TraceEvent{WhatHappened: fmt.Sprintf("lesson %02d: run go vet first", i)}})
		}
		return trs
	}
	for _, tt := range []struct {
		name   string
		traces []control.Trace
		subj   Subject
		lines  int // of the whole precedent
	}{
		// "tr-1 refused by the daemon": 26 bytes, 7 tokens, the shortest line there is.
		{"a line as short as a line gets", []control.Trace{refused("", "F-001", "", "", "", "")}, Subject{Feature: "F-001"}, 1},
		// More lessons than the first page of traces read.
		{"twenty lessons alike", lessons(20), Subject{}, 20},
		{"history, the feature's own, lessons and the role's mistakes",
			append([]control.Trace{outOfScope("F-001"), outOfScope("F-002"),
				refused(coder, "F-003", "frozen-tests", "frozen_test", "edited tests/a.sh", "make the code pass the test")},
				lessons(3)...),
			Subject{Role: coder, Feature: "F-003", History: []Told{{Frame: "F-003: attempt 1 failed", By: ByRecord, Text: "want 3"}}}, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t, tt.traces...)
			all, err := Select(st, tt.subj, 100_000)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != tt.lines {
				t.Fatalf("%d lines, want %d:\n%s", len(all), tt.lines, strings.Join(all, "\n"))
			}
			cost := 0
			for k := 0; k <= len(all); k++ {
				if k > 0 {
					cost += Tokens(all[k-1])
				}
				got, err := Select(st, tt.subj, cost)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, all[:k]) {
					t.Errorf("budget %d (the first %d lines):\n%s\nwant:\n%s", cost, k, strings.Join(got, "\n"), strings.Join(all[:k], "\n"))
				}
			}
		})
	}
}

// counting is a store that counts the traces it hands out, by type.
type counting struct {
	*store.Store
	read map[string]int
}

func (c *counting) Traces(f store.TraceFilter) ([]control.Trace, error) {
	ts, err := c.Store.Traces(f)
	c.read[f.Type] += len(ts)
	return ts, err
}

// Choosing a precedent reads no more traces of a kind than the budget
// could hold lines of (a line costs at least minLineTokens), however many
// of them say nothing to the run: the cost of a precedent does not grow
// with the store. A budget of nothing reads nothing.
func TestSelectReadsWhatTheBudgetCouldHold(t *testing.T) {
	// The newest lesson is a person's; 200 agents' lessons, which reach
	// no other agent, are older.
	var trs []control.Trace
	for range 200 {
		trs = append(trs, control.Trace{Type: control.TraceLesson, Source: control.SourceAgent, Event: control.TraceEvent{WhatHappened: "set tested yourself"}})
	}
	trs = append(trs, control.Trace{Type: control.TraceLesson, Source: control.SourceUser, Event: control.TraceEvent{WhatHappened: "run go vet first"}})
	st := newStore(t, trs...)
	for _, budget := range []int{0, 1, 30, 100, 300} {
		src := &counting{Store: st, read: map[string]int{}}
		got, err := Select(src, Subject{}, budget)
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		if budget > 0 {
			most = budget/minLineTokens + 1
		}
		if n := src.read[control.TraceLesson]; n > most {
			t.Errorf("budget %d: %d lessons read, more than the %d lines it could hold", budget, n, most)
		}
		if budget >= 30 && !slices.Equal(got, []string{`tr-201 lesson; a person wrote: "run go vet first"`}) {
			t.Errorf("budget %d: %q, want the person's lesson", budget, got)
		}
	}
}

// The budget holds however many traces there are.
func TestSelectStaysWithinBudget(t *testing.T) {
	var trs []control.Trace
	for i := range 200 {
		trs = append(trs, refused(coder, fmt.Sprintf("F-%03d", i), fmt.Sprintf("gate-%d", i%17), "code", strings.Repeat("a long account of what happened ", 20), "something else"))
	}
	st := newStore(t, trs...)
	for _, budget := range []int{1, 50, 80, 600, 5000} {
		got, err := Select(st, Subject{Role: coder, Feature: "F-999", Text: "account of what happened"}, budget)
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, l := range got {
			used += Tokens(l)
		}
		if used > budget {
			t.Errorf("budget %d: %d tokens", budget, used)
		}
		if budget >= 600 && len(got) < 5 {
			t.Errorf("budget %d: only %d lines", budget, len(got))
		}
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"a  b\n c", "a b c"},
		{strings.Repeat("x", maxLine), strings.Repeat("x", maxLine)},
		{strings.Repeat("x", maxLine+1), strings.Repeat("x", maxLine-3) + "…"},
		{strings.Repeat("é", maxLine), strings.Repeat("é", (maxLine-3)/2) + "…"},
	} {
		if got := clip(tt.in); got != tt.want {
			t.Errorf("clip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want int
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}} {
		if got := Tokens(tt.s); got != tt.want {
			t.Errorf("Tokens(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}
