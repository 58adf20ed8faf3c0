package agents

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// The fixtures are transcripts of the real CLI (2.1.330) against a server
// that answered every request with the error named, with
// CLAUDE_CODE_MAX_RETRIES=0 (stream-429-retries: 2, with retry-after: 3).
func TestFailureOfRealTranscripts(t *testing.T) {
	for _, tc := range []struct {
		file   string
		kind   FailureKind
		status int
		code   string
	}{
		{"stream-not-logged-in.jsonl", FailAuth, 0, "authentication_failed"},
		{"stream-401.jsonl", FailAuth, 401, "authentication_failed"},
		{"stream-403.jsonl", FailAuth, 403, "authentication_failed"},
		{"stream-429.jsonl", FailRateLimit, 429, "rate_limit"},
		{"stream-429-retries.jsonl", FailRateLimit, 429, "rate_limit"},
		{"stream-529.jsonl", FailOverloaded, 529, "server_error"},
		{"stream-500.jsonl", FailServer, 500, "server_error"},
		{"stream-connection-refused.jsonl", FailNetwork, 0, "server_error"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			res, _, _ := decodeAll(t, data)
			res.Ended, res.ExitCode = EndExited, 1
			f, ok := res.Failure("")
			if !ok || f.Kind != tc.kind || f.Status != tc.status || f.Code != tc.code {
				t.Fatalf("Failure() = %+v, %v; want kind %s, status %d, code %s", f, ok, tc.kind, tc.status, tc.code)
			}
			if f.Detail == "" {
				t.Error("no detail: the person is not told what the CLI said")
			}
		})
	}
	data, _ := os.ReadFile("testdata/stream-429-retries.jsonl")
	res, _, _ := decodeAll(t, data)
	if res.RetryDelay < 3*time.Second || res.RetryDelay > 4*time.Second {
		t.Errorf("RetryDelay = %v; want the CLI's retry-after based wait, 3s and a jitter", res.RetryDelay)
	}
}

// An overloaded API is its own kind, however the CLI names it: the wait is
// the same, and the status says which it was.
func TestFailureByStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   FailureKind
	}{
		{401, FailAuth}, {403, FailAuth}, {429, FailRateLimit}, {529, FailOverloaded},
		{500, FailServer}, {502, FailServer}, {599, FailServer}, {400, ""}, {404, ""}, {600, ""}, {499, ""},
	} {
		res := Result{Ended: EndExited, SawInit: true, SawResult: true, IsError: true, TerminalReason: "api_error", APIErrorStatus: tc.status, ExitCode: 1}
		f, ok := res.Failure("")
		if ok != (tc.want != "") || f.Kind != tc.want {
			t.Errorf("status %d: Failure() = %q, %v; want %q", tc.status, f.Kind, ok, tc.want)
		}
	}
	// The CLI's own name wins over the status: 529 is "server_error"
	// by name, overloaded by status.
	res := Result{Ended: EndExited, SawInit: true, SawResult: true, IsError: true, APIError: "overloaded", APIErrorStatus: 529}
	if f, _ := res.Failure(""); f.Kind != FailOverloaded {
		t.Errorf("overloaded by name = %q", f.Kind)
	}
}

func TestFailureOfTheAgentsOwnEnd(t *testing.T) {
	for name, res := range map[string]Result{
		"success":        {Ended: EndExited, SawInit: true, SawResult: true},
		"max turns":      {Ended: EndExited, SawInit: true, SawResult: true, IsError: true, Subtype: "error_max_turns", ExitCode: 1},
		"budget":         {Ended: EndExited, SawInit: true, SawResult: true, IsError: true, Subtype: "error_max_budget_usd", ExitCode: 1},
		"invalid req":    {Ended: EndExited, SawInit: true, SawResult: true, IsError: true, APIError: "invalid_request", APIErrorStatus: 400, TerminalReason: "api_error"},
		"unknown error":  {Ended: EndExited, SawInit: true, SawResult: true, IsError: true, APIError: "unknown"},
		"crash mid-run":  {Ended: EndExited, SawInit: true, ExitCode: 137},
		"idle timeout":   {Ended: EndIdleTimeout, SawInit: true, APIError: "rate_limit"},
		"wall timeout":   {Ended: EndWallTimeout, SawInit: true},
		"cancelled":      {Ended: EndCancelled},
		"clean no-start": {Ended: EndExited, ExitCode: 0},
	} {
		if f, ok := res.Failure(""); ok {
			t.Errorf("%s: Failure() = %+v; want the run's own end", name, f)
		}
	}
}

func TestFailureOfTheCLI(t *testing.T) {
	res := Result{Ended: EndStartFailed, Err: errors.New(`exec: "claude": executable file not found in $PATH`)}
	if f, ok := res.Failure(""); !ok || f.Kind != FailCLIMissing || f.Detail == "" {
		t.Errorf("start failed: %+v, %v", f, ok)
	}
	res = Result{Ended: EndExited, ExitCode: 127, StderrTail: "/usr/bin/env: 'node': No such file or directory\n"}
	if f, ok := res.Failure(""); !ok || f.Kind != FailCLICrashed || f.Detail != "/usr/bin/env: 'node': No such file or directory" {
		t.Errorf("crash before a session: %+v, %v", f, ok)
	}
	res = Result{Ended: EndExited, ExitCode: 1}
	if f, ok := res.Failure(""); !ok || f.Kind != FailCLICrashed || f.Detail != "exit status 1, no output" {
		t.Errorf("silent crash: %+v, %v", f, ok)
	}
	// Killed by a signal from outside (exit status -1) before a session:
	// not a broken install, and waiting cures it.
	res = Result{Ended: EndExited, ExitCode: -1}
	if f, ok := res.Failure(""); !ok || f.Kind != FailCLIKilled || !f.Waits() {
		t.Errorf("killed before a session: %+v, %v", f, ok)
	}
	// Killed once a session began is the run's end, judged as such.
	res = Result{Ended: EndExited, ExitCode: -1, SawInit: true}
	if f, ok := res.Failure(""); ok {
		t.Errorf("killed during a session: %+v; want the run's own end", f)
	}
	res = Result{Ended: EndExited, ExitCode: 1, StderrTail: "Error: ENOSPC: no space left on device, write"}
	if f, ok := res.Failure(""); !ok || f.Kind != FailNoSpace {
		t.Errorf("full disk: %+v, %v", f, ok)
	}
	res = Result{Ended: EndExited, ExitCode: 1, SawInit: true, SawResult: true, IsError: true, StartupFailure: "sandbox_required_unavailable", StderrTail: "bwrap: missing\n"}
	if f, ok := res.Failure(""); !ok || f.Kind != FailStartup || f.Code != "sandbox_required_unavailable" || f.Detail != "bwrap: missing" {
		t.Errorf("startup failure: %+v, %v", f, ok)
	}
}

// The StopFailure hook names the error when the stream did not (a run whose
// output was cut short): it is classified all the same.
func TestFailureFromStopFailureHook(t *testing.T) {
	res := Result{Ended: EndExited, SawInit: true, ExitCode: 1}
	if f, ok := res.Failure("authentication_failed"); !ok || f.Kind != FailAuth {
		t.Errorf("Failure(authentication_failed) = %+v, %v", f, ok)
	}
	if f, ok := res.Failure("max_output_tokens"); ok {
		t.Errorf("Failure(max_output_tokens) = %+v; want the run's own", f)
	}
}

func TestWaits(t *testing.T) {
	for k, want := range map[FailureKind]bool{
		FailRateLimit: true, FailOverloaded: true, FailServer: true, FailNetwork: true, FailNoSpace: true, FailCLIKilled: true,
		FailAuth: false, FailBilling: false, FailModel: false, FailStartup: false, FailCLIMissing: false, FailCLICrashed: false,
	} {
		if got := (Failure{Kind: k}).Waits(); got != want {
			t.Errorf("%s.Waits() = %v; want %v", k, got, want)
		}
	}
}

func TestRateLimitReset(t *testing.T) {
	reset := time.Unix(1900000000, 0)
	for _, tc := range []struct {
		line string
		want time.Time
	}{
		{`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1900000000}}`, reset},
		{`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1900000000}}`, time.Time{}},
		{`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1900000000}}`, time.Time{}},
		{`{"type":"assistant","error":"rate_limit","api_error_status":429,"api_error_params":{"rate_limit_info":{"status":"rejected","resetsAt":1900000000}},"message":{"content":[{"type":"text","text":"limit"}]}}`, reset},
		{`{"type":"assistant","error":{"odd":"shape"},"message":{"content":[]}}`, time.Time{}},
	} {
		res, _, bad := decodeAll(t, []byte(tc.line+"\n"))
		if bad != 0 || !res.RateLimitResetsAt.Equal(tc.want) {
			t.Errorf("%s: resets at %v (%d bad lines); want %v", tc.line, res.RateLimitResetsAt, bad, tc.want)
		}
	}
}

func TestExplainSaysWhatToDo(t *testing.T) {
	for k, want := range map[FailureKind]string{
		FailAuth:       "claude auth status",
		FailBilling:    "ctl resume",
		FailModel:      "agent.model",
		FailNetwork:    "check the network",
		FailCLIMissing: "agent.command",
		FailCLICrashed: "claude --version",
		FailNoSpace:    "free some space",
		FailCLIKilled:  "killed by a signal",
	} {
		if got := (Failure{Kind: k, Detail: "x"}).Explain("claude"); !strings.Contains(got, want) {
			t.Errorf("%s: %q does not say %q", k, got, want)
		}
	}
}

// What waiting cures says what it was, with the API's HTTP status when
// there was one (and nothing of a status when there was none), and what
// the run said; a failure with nothing said adds nothing after its kind.
func TestExplainSaysWhatItWas(t *testing.T) {
	for _, tc := range []struct {
		f    Failure
		want string
	}{
		{Failure{Kind: FailRateLimit, Status: 429, Detail: "slow down"}, "rate or usage limit reached (HTTP 429): slow down"},
		{Failure{Kind: FailRateLimit}, "rate or usage limit reached"},
		{Failure{Kind: FailOverloaded, Status: 529}, "the API is overloaded (HTTP 529)"},
		{Failure{Kind: FailServer, Status: 502, Detail: "bad gateway"}, "the API failed (HTTP 502): bad gateway"},
		{Failure{Kind: FailServer}, "the API failed"},
		{Failure{Kind: FailStartup, Code: "sandbox_required_unavailable", Detail: "bwrap: missing"},
			"Claude Code could not start a session (sandbox_required_unavailable): bwrap: missing"},
		{Failure{Kind: FailNoSpace}, "the disk is full; free some space"},
		{Failure{Kind: FailCLIKilled}, `"claude" was killed by a signal before it started a session (out of memory?)`},
		{Failure{Kind: "something new", Detail: "odd"}, ": odd"},
	} {
		if got := tc.f.Explain("claude"); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

// The detail of a failure is one line of at most 300 bytes (the cut mark
// included), however much
// the run said and however it was spaced.
func TestFailureDetailIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"  limit\n\treached  ", "limit reached"},
		{strings.Repeat("x", 300), strings.Repeat("x", 300)},
		{strings.Repeat("x", 301), strings.Repeat("x", 297) + "…"},
	} {
		res := Result{Ended: EndExited, SawInit: true, SawResult: true, IsError: true, APIError: "rate_limit", Text: tc.text}
		if f, ok := res.Failure(""); !ok || f.Detail != tc.want {
			t.Errorf("detail of %q: %q, %v; want %q", tc.text, f.Detail, ok, tc.want)
		}
	}
}

// TestOnWorkerIsEveryKindOfTheMachinesOwn: the failures a worker's own
// machine makes (its CLI, login, account and its limits, sandbox, disk) send a run to
// another worker; every other kind is the API's, the model's or the
// project's, the same on any machine.
func TestOnWorkerIsEveryKindOfTheMachinesOwn(t *testing.T) {
	machines := map[FailureKind]bool{FailAuth: true, FailBilling: true, FailCLIMissing: true, FailCLICrashed: true, FailStartup: true, FailNoSpace: true, FailRateLimit: true}
	for _, k := range []FailureKind{FailAuth, FailBilling, FailModel, FailRateLimit, FailOverloaded, FailServer, FailNetwork,
		FailNoSpace, FailStartup, FailCLIMissing, FailCLICrashed, FailCLIKilled, FailSetup, ""} {
		if got := (Failure{Kind: k}).OnWorker(); got != machines[k] {
			t.Errorf("%q: OnWorker %v, want %v", k, got, machines[k])
		}
	}
}
