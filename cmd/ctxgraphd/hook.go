package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guard"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

func init() { subcommands = append(subcommands, newHookCmd) }

// hookDaemonTimeout bounds the question to the daemon. Past it the hook
// decides alone (and fails closed where it must), well inside the timeout
// Claude Code gives the hook.
const hookDaemonTimeout = 5 * time.Second

// maxHookPayload bounds stdin: a Write of a large file arrives whole.
const maxHookPayload = 64 << 20

func newHookCmd() *cobra.Command {
	var interactive bool
	cmd := &cobra.Command{
		Use:   "hook EVENT",
		Short: "The hook Claude Code runs (pre-tool-use, post-tool-use, stop, …): asks the daemon's gates",
		Long: `hook is called by Claude Code, not by people. It reads the hook payload on stdin,
asks the project's daemon (CTXGRAPH_SOCKET, or the project around CLAUDE_PROJECT_DIR)
and prints the decision in the form Claude Code honours. When the daemon does not
answer it decides alone from the files, refuses tested: true, and spools what it
saw for the daemon to take in later.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interactive && os.Getenv("CTXGRAPH_RUN") != "" {
				// A daemon's run: its own --settings hooks judge this
				// event; judging it twice would count it twice.
				return nil
			}
			code := runHook(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Getenv)
			if code != 0 {
				return withExitCode(code, errAlreadyReported)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&interactive, "interactive", false, "installed by `init --install-hooks`: stand aside in the daemon's own runs")
	return cmd
}

// errAlreadyReported ends a command whose message is already on stderr.
var errAlreadyReported = errors.New("")

// gating events are those where a hook that cannot judge must block: the
// action would otherwise go through unchecked.
var gatingEvents = map[string]bool{"pre-tool-use": true, "stop": true, "subagent-stop": true}

// runHook is the hook, returning its exit code: 0 with the decision as JSON
// on stdout, or 2 (block, message on stderr) when the payload cannot be
// judged on a gating event, 1 otherwise.
func runHook(ctx context.Context, event string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ctxgraphd hook %s: %v\n", event, err)
		if gatingEvents[event] {
			return 2
		}
		return 1
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookPayload+1))
	if err != nil {
		return fail(fmt.Errorf("reading stdin: %w", err))
	}
	if len(data) > maxHookPayload {
		return fail(fmt.Errorf("payload larger than %d bytes", maxHookPayload))
	}
	p, err := guard.ParsePayload(event, data)
	if err != nil {
		return fail(err)
	}
	actor := guard.Actor{Role: getenv("CTXGRAPH_AGENT"), Feature: getenv("CTXGRAPH_FEATURE"), Run: getenv("CTXGRAPH_RUN")}
	req := control.HookRequest{Event: event, Role: actor.Role, Feature: actor.Feature, Run: actor.Run, Payload: data}

	projectDir := getenv("CLAUDE_PROJECT_DIR")
	if projectDir == "" {
		projectDir = p.Cwd
	}
	proj, projErr := paths.FindProject(projectDir)
	socket := getenv("CTXGRAPH_SOCKET")
	if socket == "" && projErr == nil {
		socket = proj.Socket
	}

	if socket != "" {
		ctx, cancel := context.WithTimeout(ctx, hookDaemonTimeout)
		resp, err := control.NewClient(socket).Hook(ctx, req)
		cancel()
		if err == nil {
			stdout.Write(guard.Render(p.Event, wireDecision(resp.Decision)))
			return 0
		}
		var apiErr *control.APIError
		if errors.As(err, &apiErr) {
			return fail(errors.New(apiErr.Message))
		}
		// Anything else (no daemon, a timeout): decide alone.
	}
	if projErr != nil {
		return fail(fmt.Errorf("no daemon answered and the project could not be found from %q: %w", projectDir, projErr))
	}
	d := decideOffline(proj, actor, p)
	rec := spool.Record{Time: time.Now().UTC(), Event: event, Role: actor.Role, Feature: actor.Feature, Run: actor.Run, Payload: data}
	if d != nil {
		rec.Decision, _ = json.Marshal(d)
	}
	if err := spool.Append(proj.StateDir, rec); err != nil {
		fmt.Fprintf(stderr, "ctxgraphd hook %s: could not spool the record for the daemon: %v\n", event, err)
	}
	stdout.Write(guard.Render(p.Event, d))
	return 0
}

// decideOffline judges with what the files say: the feature list on disk
// and what this run's hooks spooled before. tested: true is refused.
func decideOffline(proj paths.Project, actor guard.Actor, p *guard.Payload) *guard.Decision {
	state := guard.State{ProjectDir: proj.Dir, Offline: true, Protected: []string{proj.StateDir}}
	if l, _, err := progress.ReadFeatureList(proj.Progress()); err == nil {
		state.List = l
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
		if rp, err := guard.ParsePayload(r.Event, r.Payload); err == nil {
			if c, ok := guard.RecordCommand(actor, featureTest, rp); ok {
				state.Commands = append(state.Commands, c)
			}
			if (rp.Event == "Stop" || rp.Event == "SubagentStop") && len(r.Decision) > 0 {
				state.StopBlocks++
			}
		}
	}
	modes := guard.Modes{} // the daemon's configuration is not read here: every gate enforces
	switch p.Event {
	case "PreToolUse":
		return guard.PreToolUse(modes, actor, state, p)
	case "Stop", "SubagentStop":
		return guard.Stop(modes, actor, state, p)
	}
	return nil
}

func wireDecision(d *control.HookDecision) *guard.Decision {
	if d == nil {
		return nil
	}
	return &guard.Decision{Gate: d.Gate, Code: d.Code, Message: d.Message, Suggestion: d.Suggestion, Mode: guard.Mode(d.Mode)}
}
