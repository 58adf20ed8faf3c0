package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
	"github.com/ctxgraphd/ctxgraphd/hook"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// TestMain serves two masters: testscript re-executes this test binary as
// the ctxgraphd command of the scripts in testdata/script, and the tests of
// the package run under goleak.
func TestMain(m *testing.M) {
	os.Exit(testscript.RunMain(leakChecked{m}, map[string]func() int{
		"ctxgraphd": func() int { return execute(os.Args[1:]) },
		// The lean hook binary: the same hook, without the CLI around it.
		"ctxgraphd-hook": func() int {
			return hook.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
		},
	}))
}

// leakChecked fails a passing test run that leaves goroutines behind.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	code := l.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// shortTempDir is a fresh directory with a short path, for sockets: sun_path
// holds about 104 bytes, and t.TempDir's names grow with the test's.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// ctlProject makes a project whose socket lives under a private
// XDG_RUNTIME_DIR.
func ctlProject(t *testing.T) paths.Project {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", shortTempDir(t))
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, paths.ProgressDir), 0o755); err != nil {
		t.Fatal(err)
	}
	proj, err := paths.ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	return proj
}

// ctl runs `ctxgraphd args…` in-process, as run does, and returns what it
// printed and its exit code.
func ctl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	if err == nil {
		return out.String(), errOut.String(), 0
	}
	// What run does with the error, minus os.Stderr.
	fmt.Fprintln(&errOut, "ctxgraphd:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.code
	}
	return out.String(), errOut.String(), exitFailure
}

func sampleBackend() *controltest.Backend {
	started := time.Now().Add(-2 * time.Hour)
	return &controltest.Backend{
		StatusValue: control.Status{
			State:     "code",
			Features:  control.FeatureCounts{Total: 6, Pending: 2, InProgress: 1, Tested: 2, Blocked: 1},
			Project:   "/src/app",
			ProjectID: "app-0123456789ab",
			PID:       4242,
			StartedAt: started,
			Current: &control.RunInfo{ID: "r-7", Role: "coding-agent", Feature: "F-003", Attempt: 2,
				SessionID: "6c1f", PID: 4343, StartedAt: time.Now().Add(-3 * time.Minute)},
			BlockedInSession: 1,
			Message:          "F-004 blocked: go test ./auth failed 3 times",
			CostUSD:          1.25,
			Runs:             7,
			Confined:         true,
		},
		FeatureList: []control.Feature{
			{ID: "F-001", Title: "Sign in", Status: "completed", Tested: true, Attempts: 1, CostUSD: 0.5},
			{ID: "F-002", Title: "Sign out\teverywhere", Status: "blocked", Attempts: 3, Retries: 2, CostUSD: 0.75,
				LastFailure: "`sh tests/F-002.sh` failed (exit 1):\n  expected 200, got 401"},
			{ID: "F-010", Title: "Password reset", Status: "pending"},
		},
	}
}

func TestCtlStatusJSON(t *testing.T) {
	proj := ctlProject(t)
	b := sampleBackend()
	controltest.Serve(t, proj.Socket, b)

	for _, args := range [][]string{
		{"ctl", "--project", proj.Dir, "status", "--json"},
		{"ctl", "status", "--json", "--project", proj.Dir},
	} {
		out, errOut, code := ctl(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		// The contract: state and the feature counts, under these keys.
		var got struct {
			State    *string         `json:"state"`
			Features map[string]*int `json:"features"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
		}
		if got.State == nil || *got.State != "code" {
			t.Errorf("%v: state = %v, want \"code\"\n%s", args, got.State, out)
		}
		want := map[string]int{"total": 6, "pending": 2, "in_progress": 1, "tested": 2, "blocked": 1}
		for k, v := range want {
			if n := got.Features[k]; n == nil || *n != v {
				t.Errorf("%v: features.%s = %v, want %d", args, k, n, v)
			}
		}
	}
}

func TestCtlStatusHuman(t *testing.T) {
	proj := ctlProject(t)
	controltest.Serve(t, proj.Socket, sampleBackend())
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"state:    code\n",
		"features: 2 tested, 1 blocked, 1 in progress, 2 pending of 6\n",
		"current:  coding-agent on F-003, attempt 2 (run r-7, pid 4343, for 3m",
		"message:  F-004 blocked: go test ./auth failed 3 times\n",
		"cost:     $1.25 over 7 runs\n",
		"daemon:   pid 4242, up 2h0m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}

// TestCtlStatusSaysWhatAPersonMustKnow: confinement turned off, a pause
// that waits for the run in flight, and the daemon's own work are said
// plainly, not left for the person to guess.
func TestCtlStatusSaysWhatAPersonMustKnow(t *testing.T) {
	proj := ctlProject(t)
	b := sampleBackend()
	b.StatusValue.Confined = false
	b.StatusValue.PauseRequested = true
	b.StatusValue.Current = nil
	b.StatusValue.Working = "re-running the test of F-003 to judge its tester's claim"
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"state:       code (pause requested: takes effect when the run in flight ends)\n",
		"current:     the daemon is re-running the test of F-003 to judge its tester's claim\n",
		"confinement: OFF (sandbox.enabled: false): agents' commands run unconfined\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	// Confined, nothing is said about it.
	b.StatusValue.Confined = true
	out, _, _ = ctl(t, "ctl", "--project", proj.Dir, "status")
	if strings.Contains(out, "confinement") {
		t.Errorf("a confined daemon's status mentions confinement:\n%s", out)
	}
}

func TestCtlFeatures(t *testing.T) {
	proj := ctlProject(t)
	b := sampleBackend()
	controltest.Serve(t, proj.Socket, b)

	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "features")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "" +
		"ID     STATUS     TESTED  ATTEMPTS  COST   TITLE                LAST FAILURE\n" +
		"F-001  completed  yes     1         $0.50  Sign in\n" +
		"F-002  blocked    no      3         $0.75  Sign out everywhere  `sh tests/F-002.sh` failed (exit 1): expected 200, got 401\n" +
		"F-010  pending    no      0         $0.00  Password reset\n"
	if out != want {
		t.Errorf("features table:\n%s\nwant:\n%s", out, want)
	}

	out, errOut, code = ctl(t, "ctl", "--project", proj.Dir, "features", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json: not a JSON array: %v\n%s", err, out)
	}
	if len(got) != 3 || got[0]["id"] != "F-001" || got[0]["tested"] != true || got[1]["status"] != "blocked" {
		t.Errorf("--json = %v", got)
	}
}

func TestCtlFeaturesBeforeTheList(t *testing.T) {
	proj := ctlProject(t)
	controltest.Serve(t, proj.Socket, &controltest.Backend{})
	out, _, code := ctl(t, "ctl", "--project", proj.Dir, "features", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("features --json with no list = %d %q, want 0 []", code, out)
	}
	out, _, _ = ctl(t, "ctl", "--project", proj.Dir, "features")
	if !strings.Contains(out, "no features yet") {
		t.Errorf("features with no list = %q", out)
	}
}

func TestCtlActions(t *testing.T) {
	tests := []struct {
		args  []string
		call  controltest.Call
		human string
	}{
		{[]string{"pause"}, controltest.Call{Method: "Pause"}, "paused: no new run starts (a run in flight finishes first)\n"},
		{[]string{"resume"}, controltest.Call{Method: "Resume"}, "resumed\n"},
		{[]string{"approve"}, controltest.Call{Method: "Approve"}, "approved: the features of the plan are worked from now on\n"},
		{[]string{"stop"}, controltest.Call{Method: "Stop"}, "stopped: the session waits for `ctxgraphd ctl resume`\n"},
		{[]string{"retry", "F-002"}, controltest.Call{Method: "Retry", ID: "F-002"}, "F-002: its attempts start over\n"},
		{[]string{"unblock", "F-002"}, controltest.Call{Method: "Unblock", ID: "F-002"}, "F-002: unblocked\n"},
		{[]string{"unblock", "F-002", "--note", "use the v2 API"}, controltest.Call{Method: "Unblock", ID: "F-002", Note: "use the v2 API"},
			"F-002: unblocked, with a note for its next coding agent\n"},
		{[]string{"skip", "F-010"}, controltest.Call{Method: "Skip", ID: "F-010"}, "F-010: skipped (set aside as blocked)\n"},
	}
	proj := ctlProject(t)
	b := &controltest.Backend{}
	controltest.Serve(t, proj.Socket, b)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				args := append([]string{"ctl", "--project", proj.Dir}, tt.args...)
				want := tt.human
				if asJSON {
					args = append(args, "--json")
					want = "{\n  \"ok\": true\n}\n"
				}
				before := len(b.Calls())
				out, errOut, code := ctl(t, args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errOut)
				}
				if out != want {
					t.Errorf("%v printed %q, want %q", args, out, want)
				}
				if calls := b.Calls()[before:]; len(calls) != 1 || calls[0] != tt.call {
					t.Errorf("%v: backend calls %+v, want [%+v]", args, calls, tt.call)
				}
			}
		})
	}
}

func TestCtlRefusal(t *testing.T) {
	proj := ctlProject(t)
	b := &controltest.Backend{}
	b.Fail("Unblock", &control.APIError{HTTPStatus: http.StatusConflict, Code: "not_blocked", Message: "F-010 is pending, not blocked"})
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "unblock", "F-010", "--json")
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	if errOut != "ctxgraphd: F-010 is pending, not blocked\n" {
		t.Errorf("stderr = %q, want the daemon's message", errOut)
	}
}

func TestCtlWithoutDaemon(t *testing.T) {
	proj := ctlProject(t)
	want := fmt.Sprintf("no ctxgraphd daemon runs for %s (socket %s); `ctxgraphd report` shows what happened without one, `ctxgraphd run` starts it", proj.Dir, proj.Socket)
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"features"}, {"pause"}, {"retry", "F-001"}, {"watch"}, {"watch", "--json"}, {"cost"}} {
		out, errOut, code := ctl(t, append([]string{"ctl", "--project", proj.Dir}, args...)...)
		if code != exitNoDaemon {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitNoDaemon, errOut)
		}
		if out != "" || !strings.Contains(errOut, want) {
			t.Errorf("%v: stdout %q, stderr %q; want only %q", args, out, errOut, want)
		}
	}
	// The same through run, the way main calls it.
	if code := execute([]string{"ctl", "--project", proj.Dir, "status", "--json"}); code != exitNoDaemon {
		t.Errorf("execute(ctl status) = %d, want %d", code, exitNoDaemon)
	}
}

func TestCtlFindsTheProjectFromTheCurrentDirectory(t *testing.T) {
	proj := ctlProject(t)
	controltest.Serve(t, proj.Socket, sampleBackend())
	sub := filepath.Join(proj.Dir, "internal", "auth")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	out, errOut, code := ctl(t, "ctl", "status", "--json")
	if code != 0 || !strings.Contains(out, `"state": "code"`) {
		t.Errorf("ctl status from a subdirectory = %d %q %q", code, out, errOut)
	}
}

func TestCtlUsage(t *testing.T) {
	proj := ctlProject(t)
	for _, args := range [][]string{
		{"retry"},
		{"unblock", "F-1", "F-2"},
		{"status", "extra"},
		{"status", "--bogus"},
		{"bogus"},
		{"traces", "--type", "violations"},
		{"traces", "--level", "everything"},
	} {
		_, errOut, code := ctl(t, append([]string{"ctl", "--project", proj.Dir}, args...)...)
		if code != exitUsage {
			t.Errorf("ctl %v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
}

func TestCountsLine(t *testing.T) {
	tests := []struct {
		c    control.FeatureCounts
		want string
	}{
		{control.FeatureCounts{}, "none yet"},
		{control.FeatureCounts{Total: 6, Tested: 3, Blocked: 1, Pending: 2}, "3 tested, 1 blocked, 2 pending of 6"},
		{control.FeatureCounts{Total: 2, Completed: 1, InProgress: 1}, "1 awaiting test, 1 in progress of 2"},
		{control.FeatureCounts{Total: 1, Tested: 1}, "1 tested of 1"},
	}
	for _, tt := range tests {
		if got := countsLine(tt.c); got != tt.want {
			t.Errorf("countsLine(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestUsageErrorsExitTwo: every usage mistake, of any command, exits 2, so
// that a script can tell it from a refusal (1) or no daemon (3).
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"statsu"},
		{"status"},
		{"ctl", "statsu"},
		{"ctl", "retry"},
		{"ctl", "retry", "F-1", "F-2"},
		{"ctl", "traces", "--level", "everything"},
		{"run", "--frob"},
		{"run", "extra"},
		{"init", "--goal"},
		{"version", "extra"},
		{"demo", "--dir"},
		{"config", "--frob"},
	} {
		if code := execute(args); code != exitUsage {
			t.Errorf("ctxgraphd %s exited %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"--help"}, {"ctl", "--help"}} {
		if code := execute(args); code != 0 {
			t.Errorf("ctxgraphd %s exited %d, want 0", strings.Join(args, " "), code)
		}
	}
}

// Flag help reads as written: pflag takes a back-quoted word in a flag's
// description for the name of its value ("--set run --set"), so none
// quotes that way.
func TestFlagHelpHasNoStrayPlaceholders(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: %q quotes with back quotes, which the help shows as the value's name", c.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// watchBackend is a daemon whose status can be followed, and never
// changes.
type watchBackend struct{ *controltest.Backend }

func (watchBackend) Changes() <-chan struct{} { return nil }

// lineWriter passes each write on to a channel, so that a test sees the
// view's output as it comes.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

// Ctrl-C is how a person leaves `ctl watch`: it ends the view with exit 0,
// whatever the terminal's shell does with the signal.
func TestCtlWatchEndsOnInterrupt(t *testing.T) {
	proj := ctlProject(t)
	controltest.Serve(t, proj.Socket, watchBackend{sampleBackend()})
	for _, args := range [][]string{{"watch"}, {"watch", "--json"}} {
		out := make(lineWriter, 16)
		root := newRootCmd()
		root.SetArgs(append([]string{"ctl", "--project", proj.Dir}, args...))
		root.SetOut(out)
		root.SetErr(io.Discard)
		done := make(chan error, 1)
		go func() { done <- root.Execute() }()
		select {
		case <-out: // the view is up, and its signal handler with it
		case err := <-done:
			t.Fatalf("%v ended before showing anything: %v", args, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%v showed nothing in 10s", args)
		}
		// Without the view's handler this kills the test binary, which
		// fails the test as surely.
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v after Ctrl-C: %v, want a clean end", args, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not end within 10s of Ctrl-C", args)
		}
	}
}

// An unknown trace type is a usage error that lists the types, not an
// empty answer that looks like "nothing happened".
func TestCtlTracesUnknownType(t *testing.T) {
	proj := ctlProject(t)
	controltest.Serve(t, proj.Socket, sampleBackend())
	_, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "traces", "--type", "violations")
	want := `--type: unknown trace type "violations"; the types are decision, violation, correction, approval, handoff, transition, lesson`
	if code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, exitUsage, want)
	}
}

func TestCtlLessons(t *testing.T) {
	proj := ctlProject(t)
	b := &controltest.Backend{}
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "lessons", "add", "run", "go vet first")
	if code != 0 || out != "tr-1: lesson recorded; `ctxgraphd ctl lessons promote tr-1` writes it into CLAUDE.md\n" {
		t.Errorf("lessons add = %d %q %q", code, out, errOut)
	}
	out, errOut, code = ctl(t, "ctl", "--project", proj.Dir, "lessons", "promote", "tr-3")
	if code != 0 || !strings.HasPrefix(out, "tr-3: in CLAUDE.md") {
		t.Errorf("lessons promote = %d %q %q", code, out, errOut)
	}
	want := []controltest.Call{{Method: "AddLesson", Note: "run go vet first"}, {Method: "PromoteLesson", ID: "tr-3"}}
	if got := b.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %+v, want %+v", got, want)
	}
	if _, _, code := ctl(t, "ctl", "--project", proj.Dir, "lessons", "add"); code != exitUsage {
		t.Errorf("lessons add without text: exit %d, want %d", code, exitUsage)
	}
}

func TestCtlPatterns(t *testing.T) {
	proj := ctlProject(t)
	b := &controltest.Backend{PatternList: []control.Pattern{
		{Kind: control.PatternRefusal, What: "coding-agent refused by scope (out_of_scope)", Count: 3, Features: []string{"F-001", "F-002"}, Examples: []string{"tr-3", "tr-2", "tr-1"}},
		{Kind: control.PatternFailingCommand, What: "go test ./...", Count: 2, Features: []string{}, Examples: []string{"run-000003"}},
	}}
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "patterns", "--min", "3")
	want := "COUNT  KIND             WHAT                                          FEATURES     EXAMPLES\n" +
		"3      refusal          coding-agent refused by scope (out_of_scope)  F-001,F-002  tr-3 tr-2 tr-1\n" +
		"2      failing_command  go test ./...                                 -            run-000003\n"
	if code != 0 || out != want {
		t.Errorf("ctl patterns = %d %q\n%s\nwant:\n%s", code, errOut, out, want)
	}
	if calls := b.Calls(); len(calls) != 1 || calls[0] != (controltest.Call{Method: "Patterns", Note: "3"}) {
		t.Errorf("calls %+v", calls)
	}
	if _, _, code := ctl(t, "ctl", "--project", proj.Dir, "patterns", "--min", "0"); code != exitUsage {
		t.Errorf("--min 0: exit %d, want %d", code, exitUsage)
	}
}

func TestCtlGuards(t *testing.T) {
	proj := ctlProject(t)
	b := &controltest.Backend{GuardList: control.GuardList{File: "/p/.claude/ctxgraphd/guards.yaml", Guards: []control.Guard{
		{ID: "no-curl", Status: "enforce", Source: "guards.yaml", Rule: `agents, Bash: command ~ /\bcurl\b/ → deny`, Denials: 2},
		{ID: "g-1a2b3c4d", Status: "warn", Source: "pattern failing_command", Rule: `agents, Bash: command ~ /^\s*make\s+deploy\s*$/ → deny`, WouldBe: 1},
	}}}
	controltest.Serve(t, proj.Socket, b)
	out, errOut, code := ctl(t, "ctl", "--project", proj.Dir, "guards")
	want := "ID          STATUS   SOURCE                   DENIED  WOULD-BE  RULE\n" +
		"no-curl     enforce  guards.yaml              2       0         agents, Bash: command ~ /\\bcurl\\b/ → deny\n" +
		"g-1a2b3c4d  warn     pattern failing_command  0       1         agents, Bash: command ~ /^\\s*make\\s+deploy\\s*$/ → deny\n"
	if code != 0 || out != want {
		t.Errorf("ctl guards = %d %q\n%s\nwant:\n%s", code, errOut, out, want)
	}
	out, _, code = ctl(t, "ctl", "--project", proj.Dir, "guards", "promote", "g-1a2b3c4d")
	if code != 0 || !strings.HasPrefix(out, "guard g-1a2b3c4d: warn: actions go through") {
		t.Errorf("guards promote = %d %q", code, out)
	}
	out, _, code = ctl(t, "ctl", "--project", proj.Dir, "--json", "guards", "retire", "g-1a2b3c4d")
	var g control.Guard
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil || g.Status != "retired" {
		t.Errorf("guards retire --json = %d %q", code, out)
	}
	want2 := []controltest.Call{{Method: "Guards"}, {Method: "PromoteGuard", ID: "g-1a2b3c4d"}, {Method: "RetireGuard", ID: "g-1a2b3c4d"}}
	if got := b.Calls(); !slices.Equal(got, want2) {
		t.Errorf("calls %+v, want %+v", got, want2)
	}
	if _, _, code := ctl(t, "ctl", "--project", proj.Dir, "guards", "promote"); code != exitUsage {
		t.Errorf("guards promote without an id: exit %d, want %d", code, exitUsage)
	}

	b.GuardList = control.GuardList{File: "/p/.claude/ctxgraphd/guards.yaml", Problem: "/p/.claude/ctxgraphd/guards.yaml:2: guards[0]: guard \"a\": status \"on\": …"}
	out, _, code = ctl(t, "ctl", "--project", proj.Dir, "guards")
	if code != 0 || !strings.Contains(out, "guards file not taken") || !strings.Contains(out, `guard "a"`) || !strings.Contains(out, "no guards") {
		t.Errorf("ctl guards with a broken file = %d %q", code, out)
	}
}
