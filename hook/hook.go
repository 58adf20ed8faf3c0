// Package hook is the command Claude Code runs on every hook event of an
// agent's run (`ctxgraphd hook EVENT`, or the lean `ctxgraphd-hook EVENT`
// that the daemon's settings call): it reads the payload, asks the daemon's
// gates over the control socket, and prints the decision in the form Claude
// Code honours. When the daemon does not answer it decides alone from the
// files, refuses tested: true, and spools what it saw for the daemon to take
// in later: no gate fails open.
//
// It starts on every tool call of every agent, so it stays lean: it links
// the gate rules, the control client and the file formats, and never the
// store, the watcher, the loop, a logging library or a CLI framework (a
// test holds it to that).
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// DaemonTimeout bounds the question to the daemon. Past it the hook decides
// alone (and fails closed where it must), well inside the timeout Claude
// Code gives the hook.
const DaemonTimeout = 5 * time.Second

// MaxPayload bounds stdin: a Write of a large file arrives whole.
const MaxPayload = 64 << 20

// Main is the whole hook command: args are what follows the command name
// (EVENT, optionally gates.InteractiveFlag); it returns the exit code. 0 comes
// with the decision as JSON on stdout; 2 blocks (message on stderr) when
// the payload cannot be judged on a gating event; 1 is any other failure.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	var event string
	interactive := false
	for _, a := range args {
		switch {
		case a == gates.InteractiveFlag:
			interactive = true
		case event == "" && len(a) > 0 && a[0] != '-':
			event = a
		default:
			fmt.Fprintf(stderr, "ctxgraphd hook: unexpected argument %q; usage: ctxgraphd hook EVENT [%s]\n", a, gates.InteractiveFlag)
			return 2
		}
	}
	if event == "" {
		fmt.Fprintf(stderr, "ctxgraphd hook: missing EVENT; usage: ctxgraphd hook EVENT [%s] (EVENT: pre-tool-use, post-tool-use, stop, …)\n", gates.InteractiveFlag)
		return 2
	}
	if interactive && getenv("CTXGRAPH_RUN") != "" {
		// A daemon's run: its own --settings hooks judge this event;
		// judging it twice would count it twice.
		return 0
	}
	return Run(ctx, event, stdin, stdout, stderr, getenv)
}

// Run judges one event: the payload on stdin, the decision on stdout. It
// returns the exit code (see Main).
func Run(ctx context.Context, event string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ctxgraphd hook %s: %v\n", event, err)
		if gates.Gating(event) {
			return 2
		}
		return 1
	}
	data, err := io.ReadAll(io.LimitReader(stdin, MaxPayload+1))
	if err != nil {
		return fail(fmt.Errorf("reading stdin: %w", err))
	}
	if len(data) > MaxPayload {
		return fail(fmt.Errorf("payload larger than %d bytes", MaxPayload))
	}
	token := getenv(control.RunTokenEnv)
	// Who acts, as the run's environment says. The daemon does not take
	// this from the hook (it knows the run by its token); the hook uses it
	// only when it has to decide alone.
	actor := gates.Actor{Role: getenv("CTXGRAPH_AGENT"), Feature: getenv("CTXGRAPH_FEATURE"), Run: getenv("CTXGRAPH_RUN")}

	// The payload is parsed once, where the event is judged: by the daemon
	// when it answers (it takes nothing a hook read for granted), here only
	// when the hook decides alone, or needs the payload's cwd to find the
	// project.
	var p *gates.Payload
	parse := func() (err error) {
		if p == nil {
			p, err = gates.ParsePayload(event, data)
		}
		return err
	}
	projectDir := func() (string, error) {
		if dir := getenv("CLAUDE_PROJECT_DIR"); dir != "" {
			return dir, nil
		}
		if err := parse(); err != nil {
			return "", err
		}
		return p.Cwd, nil
	}

	socket := getenv("CTXGRAPH_SOCKET")
	if socket == "" {
		dir, err := projectDir()
		if err != nil {
			return fail(err)
		}
		if proj, err := paths.FindProject(dir); err == nil {
			socket = proj.Socket
		}
	}
	if socket != "" {
		ctx, cancel := context.WithTimeout(ctx, DaemonTimeout)
		c := control.NewClient(socket)
		c.RunToken = token
		resp, err := c.Hook(ctx, control.HookRequest{Event: event, Payload: data})
		cancel()
		if err == nil {
			// The daemon took the payload as an event of this name.
			stdout.Write(gates.Render(gates.Events[event], resp.Decision))
			return 0
		}
		var apiErr *control.APIError
		if errors.As(err, &apiErr) {
			return fail(errors.New(apiErr.Message))
		}
		// Anything else (no daemon, a timeout): decide alone.
	}

	if err := parse(); err != nil {
		return fail(err)
	}
	dir, _ := projectDir() // the payload is parsed: no error
	proj, err := paths.FindProject(dir)
	if err != nil {
		return fail(fmt.Errorf("no daemon answered and the project could not be found from %q: %w", dir, err))
	}
	d := decideOffline(proj, actor, p)
	rec := spool.Record{Time: time.Now().UTC(), Event: event, Role: actor.Role, Feature: actor.Feature, Run: actor.Run, TokenHash: control.TokenHash(token), Payload: data}
	if d != nil {
		rec.Decision, _ = json.Marshal(d)
	}
	if err := spool.Append(proj.StateDir, rec); err != nil {
		fmt.Fprintf(stderr, "ctxgraphd hook %s: could not spool the record for the daemon: %v\n", event, err)
	}
	stdout.Write(gates.Render(p.Event, d))
	return 0
}

// decideOffline judges with what the files say: the feature list on disk
// and what this run's hooks spooled before. tested: true is refused.
func decideOffline(proj paths.Project, actor gates.Actor, p *gates.Payload) *control.HookDecision {
	state := gates.State{ProjectDir: proj.Dir, Offline: true, Protected: []string{proj.StateDir, proj.Socket}}
	if l, _, err := progress.ReadFeatureList(proj.Progress()); err == nil {
		state.List = l
	}
	// What only the daemon knows (the frozen tests, the writable
	// directories), as it left it. Unreadable, it is empty: nothing frozen
	// is then known, but nothing outside the project is writable either,
	// and the sandbox holds the frozen tests whatever the hook knows.
	var guards []guards.Rule
	if o, err := gates.LoadOffline(proj.StateDir); err == nil {
		o.Apply(&state)
		guards = o.Guards
	}
	featureTest := ""
	if state.List != nil {
		if f := state.List.Feature(actor.Feature); f != nil {
			featureTest = f.Test
		}
	}
	recs, _ := spool.Read(proj.StateDir)
	for _, r := range recs {
		if r.Run != actor.Run || actor.Run == "" {
			continue
		}
		if rp, err := gates.ParsePayload(r.Event, r.Payload); err == nil {
			if c, ok := gates.RecordCommand(actor, featureTest, proj.Dir, rp); ok {
				state.Commands = append(state.Commands, c)
			}
			if (rp.Event == "Stop" || rp.Event == "SubagentStop") && len(r.Decision) > 0 {
				state.StopBlocks++
			}
		}
	}
	modes := gates.Modes{} // the daemon's configuration is not read here: every gate enforces
	switch p.Event {
	case "PreToolUse":
		d := gates.PreToolUse(modes, actor, state, p)
		if d != nil {
			return d
		}
		// The guards the daemon left, as it would judge them: built-in
		// gates first, then the project's own.
		if hits := gates.Guards(guards, actor, state, p); len(hits) > 0 {
			return hits[0]
		}
		return nil
	case "Stop", "SubagentStop":
		return gates.Stop(modes, actor, state, p)
	}
	return nil
}
