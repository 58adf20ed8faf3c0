package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// hook sends one hook event to the judge as `ctxgraphd hook EVENT` would.
func (f *fixture) hook(token, event string, payload map[string]any) (*control.HookDecision, error) {
	f.t.Helper()
	data, err := json.Marshal(payload)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := f.j.Hook(f.t.Context(), token, control.HookRequest{Event: event, Payload: data})
	return resp.Decision, err
}

// mustHook is hook for events that must be answered.
func (f *fixture) mustHook(token, event string, payload map[string]any) *control.HookDecision {
	f.t.Helper()
	d, err := f.hook(token, event, payload)
	if err != nil {
		f.t.Fatalf("hook %s: %v", event, err)
	}
	return d
}

// writePayload is a PreToolUse of the Write tool. What else the payload
// says about who sends it (agent_type, cwd) must not matter: the token says.
func writePayload(path string) map[string]any {
	return map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write", "session_id": "s-1",
		"agent_type": "person", "cwd": "/somewhere/else",
		"tool_input": map[string]any{"file_path": path, "content": "x\n"}}
}

func bashPayload(cmd string) map[string]any {
	return map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash",
		"tool_input": map[string]any{"command": cmd}, "tool_response": map[string]any{"stdout": "ok\n", "stderr": ""}}
}

func bashFailurePayload(cmd, errText string) map[string]any {
	return map[string]any{"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
		"tool_input": map[string]any{"command": cmd}, "error": errText}
}

var stopPayload = map[string]any{"hook_event_name": "Stop", "stop_hook_active": false}

func twoFeatures() *progress.List {
	return list(
		progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: "sh tests/a.sh"},
		progress.Feature{ID: "F-002", Scope: []string{"src/b/**"}, Test: "sh tests/b.sh"},
	)
}

// A run's hooks are its hooks because of its token: the registered actor
// (role, feature, and so the feature's scope) decides, whatever the
// payload says; no token is a person; a token the judge does not know, or
// no longer knows, opens nothing.
func TestHookTokenDecidesWhoActs(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	if err := f.j.SetFrozen(Frozen{Files: map[string]string{"tests/a.sh": "0123"}}); err != nil {
		t.Fatal(err)
	}
	coderA := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	coderB := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-002", Run: "run-2"})
	tester := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-3"})
	forgotten := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-4"})
	f.j.Forget("run-4")
	if coderA == "" || coderA == coderB || len(coderA) < 32 {
		t.Fatalf("tokens %q and %q: want distinct secrets", coderA, coderB)
	}
	in := func(rel string) string { return filepath.Join(f.dir, rel) }

	tests := []struct {
		name       string
		token      string
		payload    map[string]any
		gate, code string // "" when allowed
		actor      gates.Actor
		errCode    string // an APIError's code
		errStatus  int
	}{
		{name: "a coder writes outside its feature's scope", token: coderA, payload: writePayload(in("src/b/x.go")),
			gate: gates.Scope, code: "out_of_scope", actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}},
		{name: "a coder writes outside its scope, relative path", token: coderA, payload: writePayload("src/b/x.go"),
			gate: gates.Scope, code: "out_of_scope", actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}},
		{name: "a coder writes in its scope", token: coderA, payload: writePayload(in("src/a/x.go"))},
		{name: "the other feature's coder writes the same file", token: coderB, payload: writePayload(in("src/b/x.go"))},
		{name: "a person writes it", token: "", payload: writePayload(in("src/b/x.go"))},
		{name: "a tester edits source", token: tester, payload: writePayload(in("src/a/x.go")),
			gate: gates.RoleWritePolicy, code: "tester_edits_source", actor: gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-3"}},
		{name: "a coder changes a frozen test", token: coderA, payload: writePayload(in("tests/a.sh")),
			gate: gates.FrozenTests, code: "frozen_test", actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}},
		{name: "a person changes a frozen test", token: "", payload: writePayload(in("tests/a.sh"))},
		{name: "a coder changes Claude Code's local settings", token: coderA, payload: writePayload(in(".claude/settings.local.json")),
			gate: gates.RoleWritePolicy, code: "daemon_files", actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}},
		{name: "a coder writes the daemon's state", token: coderA, payload: writePayload(filepath.Join(f.proj.StateDir, "state.db")),
			gate: gates.RoleWritePolicy, actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"}},
		{name: "an unknown token", token: strings.Repeat("ab", 32), payload: writePayload(in("src/a/x.go")),
			errCode: "unknown_run", errStatus: http.StatusForbidden},
		{name: "a forgotten run's token", token: forgotten, payload: writePayload(in("src/a/x.go")),
			errCode: "unknown_run", errStatus: http.StatusForbidden},
		{name: "a payload that is not JSON", token: coderA, payload: nil, errCode: "bad_payload", errStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.rec.Traces())
			var d *control.HookDecision
			var err error
			if tt.payload == nil {
				var resp control.HookResponse
				resp, err = f.j.Hook(t.Context(), tt.token, control.HookRequest{Event: "pre-tool-use", Payload: json.RawMessage(`{"tool_name": `)})
				d = resp.Decision
			} else {
				d, err = f.hook(tt.token, "pre-tool-use", tt.payload)
			}
			if tt.errCode != "" {
				var api *control.APIError
				if !errors.As(err, &api) || api.Code != tt.errCode || api.HTTPStatus != tt.errStatus {
					t.Fatalf("err = %v, want an APIError %d %s", err, tt.errStatus, tt.errCode)
				}
				if d != nil {
					t.Errorf("a refused request got a decision: %+v", d)
				}
				if got := len(f.rec.Traces()); got != before {
					t.Errorf("%d traces for a refused request", got-before)
				}
				return
			}
			if err != nil {
				t.Fatalf("hook: %v", err)
			}
			if tt.gate == "" {
				if d != nil {
					t.Fatalf("decision %+v, want the write allowed", d)
				}
				if got := len(f.rec.Traces()); got != before {
					t.Errorf("%d traces for an allowed write", got-before)
				}
				return
			}
			if d == nil || d.Gate != tt.gate || (tt.code != "" && d.Code != tt.code) || d.Mode != string(gates.Enforce) || d.Message == "" {
				t.Fatalf("decision %+v, want %s/%s enforced with a message", d, tt.gate, tt.code)
			}
			// Every denial is a violation, traced with the run it is of.
			trs := f.rec.Traces()
			if len(trs) != before+1 {
				t.Fatalf("%d traces, want one violation", len(trs)-before)
			}
			tr := trs[len(trs)-1]
			want := control.TraceContext{Agent: tt.actor.Role, Feature: tt.actor.Feature, Run: tt.actor.Run}
			if tr.Type != control.TraceViolation || tr.Source != control.SourceHook || tr.Gate != d.Gate || tr.Code != d.Code ||
				tr.Context != want || tr.Project != "p-test" || tr.Timestamp.IsZero() || tr.Event.WhatHappened == "" {
				t.Errorf("trace %+v, want a hook violation %s/%s of %+v in project p-test", tr, d.Gate, d.Code, want)
			}
		})
	}
}

// Gates in warn mode let the action through, tell the model, and are
// traced all the same.
func TestHookWarnModeIsTraced(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Modes = gates.Modes{gates.Scope: gates.Warn} })
	f.j.SetList(twoFeatures())
	coder := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	d := f.mustHook(coder, "pre-tool-use", writePayload("src/b/x.go"))
	if d == nil || d.Gate != gates.Scope || d.Mode != string(gates.Warn) {
		t.Fatalf("decision %+v, want a scope warning", d)
	}
	trs := f.rec.Traces()
	if len(trs) != 1 || trs[0].Type != control.TraceViolation || trs[0].Gate != gates.Scope || !strings.Contains(trs[0].Event.WhatHappened, "warn mode") {
		t.Errorf("traces %+v, want one scope violation that says it was let through", trs)
	}
}

// The Bash commands a run ran are its own: PostToolUse and
// PostToolUseFailure are recorded for the run the token names, and kept
// in the records.
func TestHookRecordsBashCommandsOfItsRun(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	t1 := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-1"})
	t2 := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-002", Run: "run-2"})

	for _, h := range []struct {
		token, event string
		payload      map[string]any
	}{
		{t1, "post-tool-use", bashPayload("sh tests/a.sh")},
		{t1, "post-tool-use-failure", bashFailurePayload("sh tests/a.sh", "Exit code 3\nassertion failed")},
		{t1, "post-tool-use", map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": "x"}, "tool_response": map[string]any{}}},
		{"", "post-tool-use", bashPayload("sh tests/b.sh")}, // a person's: no run's record
		{t2, "post-tool-use", bashPayload("ls -la")},
	} {
		if d := f.mustHook(h.token, h.event, h.payload); d != nil {
			t.Errorf("%s: decision %+v, want none", h.event, d)
		}
	}

	type rec struct {
		Run, Feature, Command string
		ExitCode              int
		IsTest                bool
	}
	simplify := func(rs []control.CommandRecord) []rec {
		var out []rec
		for _, r := range rs {
			if r.OutputDigest == "" || r.Time.IsZero() {
				t.Errorf("record %+v has no digest or time", r)
			}
			out = append(out, rec{r.Run, r.Feature, r.Command, r.ExitCode, r.IsTest})
		}
		return out
	}
	run1 := []rec{{"run-1", "F-001", "sh tests/a.sh", 0, true}, {"run-1", "F-001", "sh tests/a.sh", 3, true}}
	run2 := []rec{{"run-2", "F-002", "ls -la", 0, false}}
	if got := simplify(f.j.Commands("run-1")); !slices.Equal(got, run1) {
		t.Errorf("Commands(run-1) = %+v, want %+v", got, run1)
	}
	if got := simplify(f.j.Commands("run-2")); !slices.Equal(got, run2) {
		t.Errorf("Commands(run-2) = %+v, want %+v", got, run2)
	}
	if got := f.j.Commands("run-9"); got != nil {
		t.Errorf("Commands of an unknown run = %+v", got)
	}
	var stored []rec
	for _, c := range f.rec.Commands() {
		stored = append(stored, rec{c.Run, c.Feature, c.Command, c.ExitCode, c.IsTest})
	}
	if want := append(slices.Clone(run1), run2...); !slices.Equal(stored, want) {
		t.Errorf("records = %+v, want %+v", stored, want)
	}
	// Commands returns a copy: the caller cannot change the run's record.
	c := f.j.Commands("run-1")
	c[0].ExitCode = 99
	if f.j.Commands("run-1")[0].ExitCode != 0 {
		t.Error("Commands shares its slice with the run's record")
	}
	// A forgotten run's record is gone with it.
	f.j.Forget("run-1")
	if got := f.j.Commands("run-1"); got != nil {
		t.Errorf("Commands after Forget = %+v", got)
	}
}

// tester-must-test blocks a tester's Stop until it ran a test, at most
// gates.MaxStopBlocks times per run; each run counts its own blocks.
func TestHookStopBlocksAreCountedPerRun(t *testing.T) {
	f := newFixture(t, nil)
	f.j.SetList(twoFeatures())
	t1 := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-1"})
	t2 := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-2"})
	coder := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-3"})

	for i := 1; i <= gates.MaxStopBlocks; i++ {
		d := f.mustHook(t1, "stop", stopPayload)
		if d == nil || d.Gate != gates.TesterMustTest || d.Code != "no_test_run" || d.Mode != string(gates.Enforce) {
			t.Fatalf("stop %d: decision %+v, want tester-must-test to block", i, d)
		}
		if want := fmt.Sprintf("block %d of %d", i, gates.MaxStopBlocks); !strings.Contains(d.Message, want) {
			t.Errorf("stop %d: message %q does not say %q", i, d.Message, want)
		}
	}
	if d := f.mustHook(t1, "stop", stopPayload); d != nil {
		t.Errorf("stop %d: decision %+v, want the run let go", gates.MaxStopBlocks+1, d)
	}
	// Another run of the same feature starts from zero.
	if d := f.mustHook(t2, "stop", stopPayload); d == nil || !strings.Contains(d.Message, fmt.Sprintf("block 1 of %d", gates.MaxStopBlocks)) {
		t.Errorf("the other run's first stop: %+v, want its first block", d)
	}
	// Once it ran the test, it may stop.
	f.mustHook(t2, "post-tool-use-failure", bashFailurePayload("sh tests/a.sh", "Exit code 1\n"))
	if d := f.mustHook(t2, "stop", stopPayload); d != nil {
		t.Errorf("stop after a test run: %+v, want none", d)
	}
	// A coder's stop is not the tester's gate.
	if d := f.mustHook(coder, "stop", stopPayload); d != nil {
		t.Errorf("a coder's stop: %+v", d)
	}
	n := 0
	for _, tr := range f.rec.Traces() {
		if tr.Gate == gates.TesterMustTest && tr.Code == "no_test_run" && tr.Type == control.TraceViolation {
			n++
		}
	}
	if n != gates.MaxStopBlocks+1 {
		t.Errorf("%d tester-must-test violations traced, want %d", n, gates.MaxStopBlocks+1)
	}
}

// Any hook of a run that reaches the daemon shows that the run's hooks
// run, whatever the event and whatever the gates decide of it: IsLive is
// true from then on. A run the judge does not know is over (nothing to
// kill).
func TestAnyHookMakesTheRunLive(t *testing.T) {
	f := newFixture(t, nil)
	runs := map[string]map[string]any{
		"post-tool-use": bashPayload("ls"),
		"pre-tool-use":  writePayload(f.proj.Progress(progress.SessionStateFile)), // denied: still live
		"stop":          stopPayload,
		"session-start": {"hook_event_name": "SessionStart", "source": "startup"}, // hooks installed by an older version
	}
	i := 0
	for event, payload := range runs {
		i++
		id := fmt.Sprintf("run-%d", i)
		tok := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: id})
		f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: id + "-other"})
		if f.j.IsLive(id) {
			t.Fatalf("%s: live before any hook", id)
		}
		f.mustHook(tok, event, payload)
		if !f.j.IsLive(id) {
			t.Errorf("%s: not live after its %s hook", id, event)
		}
		if f.j.IsLive(id + "-other") {
			t.Errorf("%s: another run's %s hook made it live", id+"-other", event)
		}
		// A person's hook makes no run live.
		f.mustHook("", event, payload)
		if f.j.IsLive(id + "-other") {
			t.Errorf("a person's %s hook made a run live", event)
		}
	}
	if !f.j.IsLive("run-404") {
		t.Error("an unknown run is not live: it would be killed for silence")
	}
}

// A turn that ended on an API error is kept as a decision trace of its run.
func TestHookStopFailureIsTraced(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	f.mustHook(tok, "stop-failure", map[string]any{"hook_event_name": "StopFailure", "error": "rate_limit"})
	trs := f.rec.Traces()
	if len(trs) != 1 || trs[0].Type != control.TraceDecision || trs[0].Context.Run != "run-1" || !strings.Contains(trs[0].Event.WhatHappened, "rate_limit") {
		t.Errorf("traces %+v, want a decision naming the error for run-1", trs)
	}
}

// What the sandbox refused a run's Bash command is kept as a violation of
// the rule the refused write would have broken, or of the network
// allowlist; a refusal no rule names, and anything refused in a person's
// session, leave no trace. The command is quoted on one line, clipped.
func TestHookRecordsWhatTheSandboxRefusedARun(t *testing.T) {
	long := strings.Repeat("x", 180) // with "echo " and " > tests/a.sh": 198 bytes
	roFS := func(path string) string { return "/bin/bash: line 1: " + path + ": Read-only file system" }
	tests := []struct {
		name    string
		person  bool
		payload map[string]any
		gate    string // no code: no trace
		code    string
		what    string // WhatHappened, or its start when prefix
		prefix  bool
		correct string
		why     string
	}{
		{name: "a write of a frozen test", payload: bashFailurePayload("echo x > tests/a.sh", roFS("tests/a.sh")),
			gate: gates.FrozenTests, code: "frozen_test", prefix: true,
			what: "the sandbox refused `echo x > tests/a.sh` a write of tests/a.sh: tests/a.sh is an acceptance test",
			why:  "gate frozen-tests, held by the sandbox whatever program writes"},
		{name: "a connection to a host not allowed",
			payload: map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "curl  -s\n https://evil.example"},
				"tool_response": map[string]any{"stdout": "", "stderr": "<sandbox_violations>\ndeny network-outbound evil.example:443\n</sandbox_violations>"}},
			gate: gates.Confinement, code: "network_denied",
			what:    "the sandbox refused a connection to evil.example by `curl -s https://evil.example`: not a host sandbox.allowed_domains lets through",
			correct: "reach only the hosts the project allows", why: "confinement"},
		{name: "a command quoted whole at the bound", payload: bashFailurePayload("echo "+long+"xx > tests/a.sh", roFS("tests/a.sh")),
			gate: gates.FrozenTests, code: "frozen_test", prefix: true,
			what: "the sandbox refused `echo " + long + "xx > tests/a.sh` a write of tests/a.sh: ",
			why:  "gate frozen-tests, held by the sandbox whatever program writes"},
		{name: "a command clipped past the bound", payload: bashFailurePayload("echo "+long+"xxx > tests/a.sh", roFS("tests/a.sh")),
			gate: gates.FrozenTests, code: "frozen_test", prefix: true,
			what: "the sandbox refused `echo " + long + "xxx > tests/…` a write of tests/a.sh: ",
			why:  "gate frozen-tests, held by the sandbox whatever program writes"},
		{name: "a write no rule forbids", payload: bashFailurePayload("echo x > src/a/x.go", roFS("src/a/x.go"))},
		{name: "a person's refused write", person: true, payload: bashFailurePayload("echo x > tests/a.sh", roFS("tests/a.sh"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.j.SetList(twoFeatures())
			if err := f.j.SetFrozen(Frozen{Files: map[string]string{"tests/a.sh": "0123"}}); err != nil {
				t.Fatal(err)
			}
			token := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
			ctx := TraceContext(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
			if tt.person {
				token, ctx = "", control.TraceContext{}
			}
			event := map[any]string{"PostToolUse": "post-tool-use", "PostToolUseFailure": "post-tool-use-failure"}[tt.payload["hook_event_name"]]
			if d := f.mustHook(token, event, tt.payload); d != nil {
				t.Errorf("decision %+v for a tool call that is done", d)
			}
			trs := f.rec.Traces()
			if tt.code == "" {
				if len(trs) != 0 {
					t.Errorf("traces %+v, want none", trs)
				}
				return
			}
			if len(trs) != 1 {
				t.Fatalf("traces %+v, want one violation", trs)
			}
			tr := trs[0]
			if tr.Type != control.TraceViolation || tr.Source != control.SourceHook || tr.Context != ctx || tr.Gate != tt.gate || tr.Code != tt.code {
				t.Errorf("trace %+v, want a hook violation %s/%s of %+v", tr, tt.gate, tt.code, ctx)
			}
			if got := tr.Event.WhatHappened; got != tt.what && (!tt.prefix || !strings.HasPrefix(got, tt.what)) {
				t.Errorf("what happened = %q, want %q", got, tt.what)
			}
			if tr.Event.Why != tt.why || (tt.correct != "" && tr.Event.WhatWasCorrect != tt.correct) || tr.Event.WhatWasCorrect == "" {
				t.Errorf("event %+v, want why %q and what was correct %q", tr.Event, tt.why, tt.correct)
			}
		})
	}
}

// The gates hold the list as it was published: a caller that changes its
// list afterwards changes nothing, and no list is no list.
func TestSetListKeepsItsOwnCopy(t *testing.T) {
	f := newFixture(t, nil)
	coder := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-1"})
	// ./check.sh is a test only because it is the feature's test command.
	l := list(progress.Feature{ID: "F-001", Scope: []string{"src/a/**"}, Test: "./check.sh"})
	f.j.SetList(l)
	l.Features[0].Scope = []string{"src/b/**"}
	l.Features[0].Test = "./other.sh"
	if d := f.mustHook(coder, "pre-tool-use", writePayload("src/b/x.go")); d == nil || d.Code != "out_of_scope" {
		t.Errorf("decision %+v, want the published scope to hold", d)
	}
	if d := f.mustHook(coder, "pre-tool-use", writePayload("src/a/x.go")); d != nil {
		t.Errorf("decision %+v, want the published scope to hold", d)
	}
	f.mustHook(coder, "post-tool-use", bashPayload("./check.sh"))
	f.mustHook(coder, "post-tool-use", bashPayload("./other.sh"))
	f.j.SetList(nil)
	f.mustHook(coder, "post-tool-use", bashPayload("./check.sh"))
	var got []string
	for _, c := range f.j.Commands("run-1") {
		got = append(got, fmt.Sprintf("%s %v", c.Command, c.IsTest))
	}
	if want := []string{"./check.sh true", "./other.sh false", "./check.sh false"}; !slices.Equal(got, want) {
		t.Errorf("commands %q, want %q: the published test, then none without a list", got, want)
	}
}

// brokenRecords fails to store anything, as a full disk would.
type brokenRecords struct{ silent bool } // silent: no error, nothing stored

func (brokenRecords) AppendCommand(control.CommandRecord) error { return errors.New("disk full") }

func (b brokenRecords) AppendTraces(...control.Trace) ([]control.Trace, error) {
	if b.silent {
		return nil, nil
	}
	return nil, errors.New("disk full")
}

func (b brokenRecords) QueueTraces(done func(error), _ ...control.Trace) {
	if b.silent {
		done(nil)
		return
	}
	done(errors.New("disk full"))
}

// observed is a logger that keeps its warnings for the test to read.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.WarnLevel)
	return zap.New(core), logs
}

// Trace stamps a trace with the project and, unless it has one, the time,
// and returns it as stored (with its id); a trace that cannot be stored is
// logged and returned as it would have been stored, without an id.
func TestTrace(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))
	given := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		records Records
		link    *RunLink // of run-1
		in      control.Trace
		want    control.Trace
		warned  bool
	}{
		{name: "stored, stamped now", records: &fakeRecords{}, in: control.Trace{Type: control.TraceDecision},
			want: control.Trace{ID: "tr-1", Project: "p-test", Type: control.TraceDecision, Timestamp: now.UTC()}},
		{name: "stored, its own time kept", records: &fakeRecords{}, in: control.Trace{Type: control.TraceDecision, Timestamp: given},
			want: control.Trace{ID: "tr-1", Project: "p-test", Type: control.TraceDecision, Timestamp: given}},
		{name: "the store fails", records: brokenRecords{}, in: control.Trace{Type: control.TraceDecision},
			want: control.Trace{Project: "p-test", Type: control.TraceDecision, Timestamp: now.UTC()}, warned: true},
		{name: "the store stores nothing", records: brokenRecords{silent: true}, in: control.Trace{Type: control.TraceDecision},
			want: control.Trace{Project: "p-test", Type: control.TraceDecision, Timestamp: now.UTC()}, warned: true},
		{name: "a run's trace hangs from the run's node, in its attempt", records: &fakeRecords{}, link: &RunLink{Trace: "tr-7", Attempt: 2},
			in:   control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Run: "run-1"}},
			want: control.Trace{ID: "tr-1", Project: "p-test", Type: control.TraceViolation, Parent: "tr-7", Context: control.TraceContext{Run: "run-1", Attempt: 2}, Timestamp: now.UTC()}},
		{name: "a run's trace keeps the parent and the attempt it names", records: &fakeRecords{}, link: &RunLink{Trace: "tr-7", Attempt: 2},
			in:   control.Trace{Type: control.TraceCorrection, Parent: "tr-3", Context: control.TraceContext{Run: "run-1", Attempt: 1}},
			want: control.Trace{ID: "tr-1", Project: "p-test", Type: control.TraceCorrection, Parent: "tr-3", Context: control.TraceContext{Run: "run-1", Attempt: 1}, Timestamp: now.UTC()}},
		{name: "another run's trace does not hang from this run's node", records: &fakeRecords{}, link: &RunLink{Trace: "tr-7", Attempt: 2},
			in:   control.Trace{Type: control.TraceViolation, Context: control.TraceContext{Run: "run-2"}},
			want: control.Trace{ID: "tr-1", Project: "p-test", Type: control.TraceViolation, Context: control.TraceContext{Run: "run-2"}, Timestamp: now.UTC()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := observed()
			f := newFixture(t, func(o *Options) { o.Records, o.Log, o.Now = tt.records, log, func() time.Time { return now } })
			if tt.link != nil {
				f.j.Link("run-1", *tt.link)
			}
			got := f.j.Trace(tt.in)
			if !reflect.DeepEqual(got, tt.want) || got.Timestamp.Location() != time.UTC {
				t.Errorf("Trace = %+v, want %+v", got, tt.want)
			}
			if warned := logs.FilterMessage("could not store a trace").Len() == 1; warned != tt.warned || logs.Len() != logs.FilterMessage("could not store a trace").Len() {
				t.Errorf("warnings %+v, want one about the trace: %v", logs.All(), tt.warned)
			}
		})
	}
}

// A trace keeps of a hook's tool call the tool and, on one line and
// bounded, the command or the path it was given; a payload of no tool
// call keeps none.
func TestToolCall(t *testing.T) {
	long := strings.Repeat("echo x; ", 100)
	for _, tt := range []struct {
		name    string
		payload map[string]any
		want    *control.TraceTool
	}{
		{"no tool call", stopPayload, nil},
		{"a command", bashPayload("go test\n  ./..."), &control.TraceTool{Name: "Bash", Input: "go test ./..."}},
		{"a long command", bashPayload(long), &control.TraceTool{Name: "Bash", Input: textcut.Line(long, maxToolInput)}},
		{"a path", map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": map[string]any{"file_path": "/p/src/a.go", "content": "x"}},
			&control.TraceTool{Name: "Write", Input: "/p/src/a.go"}},
		{"a tool of no input", map[string]any{"hook_event_name": "PreToolUse", "tool_name": "TodoWrite"}, &control.TraceTool{Name: "TodoWrite"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(tt.payload)
			if err != nil {
				t.Fatal(err)
			}
			var p gates.Payload
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if got := ToolCall(&p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ToolCall = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A command the store cannot keep is logged; the hook is answered all the
// same, and the run's own record holds the command.
func TestHookAnswersWhenTheStoreFails(t *testing.T) {
	for _, broken := range []bool{false, true} {
		log, logs := observed()
		f := newFixture(t, func(o *Options) {
			o.Log = log
			if broken {
				o.Records = brokenRecords{}
			}
		})
		f.j.SetList(twoFeatures())
		tester := f.j.Register(gates.Actor{Role: gates.Tester, Feature: "F-001", Run: "run-1"})
		if d, err := f.hook(tester, "post-tool-use", bashPayload("sh tests/a.sh")); d != nil || err != nil {
			t.Errorf("store broken %v: hook = %+v, %v; want it answered", broken, d, err)
		}
		if c := f.j.Commands("run-1"); len(c) != 1 {
			t.Errorf("store broken %v: the run's commands %+v, want the one", broken, c)
		}
		if got := logs.FilterMessage("could not record a command").Len(); got != map[bool]int{false: 0, true: 1}[broken] {
			t.Errorf("store broken %v: warnings %+v", broken, logs.All())
		}
	}
}

// A run's subagents work one at a time: the judge counts those its gates
// let through (PreToolUse) until each ends (PostToolUse, or
// PostToolUseFailure), and refuses another meanwhile; a refused call is
// not counted, and each run counts its own.
func TestSubagentsWorkOneAtATime(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-000001"})
	other := f.j.Register(gates.Actor{Role: gates.Coder, Feature: "F-002", Run: "run-000002"})
	call := func(event, hookEvent string, background any) map[string]any {
		in := map[string]any{"prompt": "look around", "description": "explore"}
		if background != nil {
			in["run_in_background"] = background
		}
		p := map[string]any{"hook_event_name": hookEvent, "tool_name": "Agent", "tool_input": in}
		if event != "pre-tool-use" {
			p["tool_response"] = map[string]any{"content": "found it"}
			p["error"] = "the subagent failed"
		}
		return p
	}
	refused := func(token string) bool {
		d := f.mustHook(token, "pre-tool-use", call("pre-tool-use", "PreToolUse", false))
		return d != nil && d.Mode == "enforce"
	}
	if d := f.mustHook(tok, "pre-tool-use", call("pre-tool-use", "PreToolUse", true)); d == nil || d.Code != "runs_beside" {
		t.Fatalf("a subagent asked for in the background: %+v, want refused", d)
	}
	if refused(tok) {
		t.Fatal("a first subagent in the foreground was refused (the refused background one was counted)")
	}
	if !refused(tok) {
		t.Fatal("a second subagent while the first works went through")
	}
	if refused(other) {
		t.Fatal("another run's subagent was held to this run's")
	}
	f.mustHook(tok, "post-tool-use", call("post-tool-use", "PostToolUse", false))
	if refused(tok) {
		t.Fatal("a subagent after the first ended was refused")
	}
	f.mustHook(tok, "post-tool-use-failure", call("post-tool-use-failure", "PostToolUseFailure", false))
	f.mustHook(tok, "post-tool-use", call("post-tool-use", "PostToolUse", false)) // one end too many is no credit
	if refused(tok) || !refused(tok) {
		t.Fatal("after a failed subagent's end: want the next let through and one more refused")
	}
}
