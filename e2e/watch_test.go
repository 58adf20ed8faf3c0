package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// terminal is a tmux server of the test's own, with one window of a given
// size: what a person at a terminal would see.
type terminal struct {
	t      *testing.T
	socket string
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is required in CI to test the live view as a person sees it (make test installs it)")
		}
		t.Skip("skipping: tmux is not installed (make test installs it)")
	}
	term := &terminal{t: t, socket: filepath.Join(shortTemp(t), "tmux")}
	t.Cleanup(func() { exec.Command("tmux", "-S", term.socket, "kill-server").Run() })
	return term
}

// shortTemp is a directory with a short path: tmux's socket is a Unix
// socket, whose path has a length limit.
func shortTemp(t *testing.T) string {
	dir, err := os.MkdirTemp("", "cgtm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (term *terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", term.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// run starts argv in the environment env in a 110x30 window; when it ends
// the window stays, with how it ended on its last line.
func (term *terminal) run(env []string, argv ...string) {
	term.t.Helper()
	var script strings.Builder
	script.WriteString("#!/bin/sh\nexec env -i")
	for _, kv := range append(env, "TERM=xterm-256color") {
		script.WriteString(" " + shellQuote(kv))
	}
	// The shell around the command catches Ctrl-C, as a person's
	// interactive shell does, so that it lives to say how the command
	// ended: a pane whose shell died is only seen as dead once tmux reaps
	// it, which a loaded tmux server was seen not to do for many seconds.
	script.WriteString(" sh -c 'trap : INT; \"$@\"; echo \"[exit $?]\"; sleep 600' sh")
	for _, a := range argv {
		script.WriteString(" " + shellQuote(a))
	}
	path := filepath.Join(shortTemp(term.t), "run.sh")
	if err := os.WriteFile(path, []byte(script.String()+"\n"), 0o755); err != nil {
		term.t.Fatal(err)
	}
	term.tmux("new-session", "-d", "-s", "view", "-x", "110", "-y", "30", path, ";", "set-option", "-t", "view", "remain-on-exit", "on")
}

// screen is what the window shows now.
func (term *terminal) screen() string { return term.tmux("capture-pane", "-p", "-t", "view") }

// waitFor waits until the screen matches re, and returns it.
func (term *terminal) waitFor(re *regexp.Regexp, within time.Duration) string {
	term.t.Helper()
	var s string
	if !eventually.Within(within, func() bool { s = term.screen(); return re.MatchString(s) }) {
		term.t.Fatalf("the terminal never showed %s; it shows:\n%s\n%s", re, s, term.processes())
	}
	return s
}

// processes says what runs in the window, for a failure's message: the
// pane's state and its processes with their groups and terminal state.
func (term *terminal) processes() string {
	pane, _ := exec.Command("tmux", "-S", term.socket, "display-message", "-p", "-t", "view", "#{pane_pid} #{pane_dead}").Output()
	pid, dead, _ := strings.Cut(strings.TrimSpace(string(pane)), " ")
	ps, _ := exec.Command("ps", "-s", pid, "-o", "pid,ppid,pgid,tpgid,stat,wchan:20,args").CombinedOutput()
	return "the window's process " + pid + " (dead: " + dead + "), and its session:\n" + string(ps)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// watchTheNight is a person following the morning night (F-001 passes,
// F-002 passes on its retry, F-003 never does) in a terminal: the view
// shows the session's state, a progress bar, the run in flight with its
// role, feature, attempt, time and latest tool, and ends with the features
// done; Ctrl-C leaves it and the daemon goes on. Then they ask why F-002
// is tested, and follow its verdict in the graph.
func watchTheNight(t *testing.T, term *terminal, p *project, log fmt.Stringer) {
	t.Helper()
	p.waitFor("the daemon to answer", startWait, func() bool { _, ok := p.status(); return ok })
	term.run(p.env, binary, "ctl", "watch", "--project", p.dir)

	term.waitFor(regexp.MustCompile(`ctxgraphd  `+regexp.QuoteMeta(p.dir)), startWait)
	running := term.waitFor(regexp.MustCompile(`(?m)^run\s+run-\d{6}  coding-agent F-00\d attempt \d  \d+s  \d+ tool calls?$`), agentsWait)
	if !regexp.MustCompile(`(?m)^state\s+code$`).MatchString(running) || !regexp.MustCompile(`(?m)^features\s+\[[#x.]{30}\]`).MatchString(running) {
		t.Errorf("while coding, the view shows:\n%s", running)
	}
	term.waitFor(regexp.MustCompile(`(?m)^last tool\s+\S+`), agentsWait)
	done := term.waitFor(regexp.MustCompile(`(?m)^state\s+done$`), agentsWait)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^features\s+\[#{20}x{10}\]  2 tested, 1 blocked of 3$`),
		regexp.MustCompile(`(?m)^run\s+none$`),
		regexp.MustCompile(`(?m)^cost\s+\$\d+\.\d\d over \d+ runs$`),
	} {
		if !want.MatchString(done) {
			t.Errorf("at the end, the view does not match %s:\n%s\ndaemon log:\n%s", want, done, log.String())
		}
	}
	// Ctrl-C interrupts the window's whole foreground group, as in any
	// terminal: the view ends at once, and cleanly.
	term.tmux("send-keys", "-t", "view", "C-c")
	term.waitFor(regexp.MustCompile(`\[exit 0\]`), 10*time.Second)
	if _, ok := p.status(); !ok {
		t.Error("the daemon did not go on after the view was left")
	}

	// Why F-002 (which failed once) is tested: both attempts with their
	// runs, the commit, and the daemon's own output of the failing test.
	out := p.mustRun("ctl", "why", "F-002", "--project", p.dir, "--json")
	var why struct {
		Outcome  string
		Commit   string
		Attempts []struct {
			Attempt int
			Runs    []struct{ Role, Outcome string }
		}
		Evidence []string
	}
	if err := json.Unmarshal([]byte(out), &why); err != nil {
		t.Fatalf("ctl why --json: %v\n%s", err, out)
	}
	if why.Outcome != "tested" || why.Commit == "" || len(why.Attempts) != 2 || len(why.Attempts[0].Runs) != 2 ||
		!slices.Contains(why.Evidence, ".claude/progress/evidence/F-002/daemon-diagnosis-attempt-1.log") {
		t.Errorf("ctl why F-002:\n%s", out)
	}

	// The accepted verdict in the graph: the path from the feature down to
	// the tester's run of its second attempt, and the commit after it.
	var approvals []struct{ ID string }
	out = p.mustRun("ctl", "traces", "--type", "approval", "--feature", "F-002", "--project", p.dir, "--json")
	if err := json.Unmarshal([]byte(out), &approvals); err != nil || len(approvals) != 1 {
		t.Fatalf("F-002's approvals: %v\n%s", err, out)
	}
	out = p.mustRun("ctl", "trace", approvals[0].ID, "--project", p.dir)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^led here:\n  tr-\d+ transition \(F-002\): F-002 taken up: .+\n    tr-\d+ transition \(F-002\): F-002 attempt 2 begins\n` +
			`      tr-\d+ handoff \(tester-agent F-002 run-\d{6}\): run-\d{6} started as tester-agent: validate_feature F-002, attempt 2\n        > ` + approvals[0].ID + `$`),
		regexp.MustCompile(`(?m)^followed from it:\n  tr-\d+ decision \(tester-agent F-002 run-\d{6}\): F-002 committed as [0-9a-f]{40}`),
	} {
		if !want.MatchString(out) {
			t.Errorf("ctl trace %s does not match %s:\n%s", approvals[0].ID, want, out)
		}
	}
}
