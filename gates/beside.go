package gates

import (
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// A daemon's run does one thing at a time. The gates judge a write against
// the work tree as it is when its hook runs, and Claude Code's file tools
// write, outside the sandbox, a moment later: a process of the agent's
// running beside them (a Bash command left running in the background, or
// a subagent working while the agent writes) can swap a link in the path
// between the two, so that a write the hook approved inside the project
// lands in .git/hooks, the daemon's state or a person's dotfiles. A
// background process started within a command dies with it (the sandbox's
// pid namespace); a daemon's run has Claude Code's background tasks off
// (agents.Runner: a command ends at its timeout, a subagent works in the
// foreground, and neither tool takes run_in_background). What is refused
// here is what would still run beside the next call: a call that asks for
// the background all the same, and a second subagent while one works
// (subagents asked for in one message run at once). A person's own
// session (no role) is not held to it.

// DeniedTools are the tools of Claude Code that a daemon's run is not
// given (its settings' permissions.deny, which holds under
// bypassPermissions and in subagents): each runs something beside the
// agent's next calls, later, or elsewhere, where no gate judges it.
// Monitor runs a shell command in the background (and reaches a hook
// that names Bash as a plain Bash call, which no gate can tell from a
// foreground one); Workflow runs subagents in the background; the Cron
// tools and ScheduleWakeup run prompts later; EnterWorktree and
// ExitWorktree make and leave git worktrees with Claude Code's own git,
// outside the sandbox; SendMessage and ListAgents reach other Claude
// sessions of the machine (a person's, another lane's); TaskStop stops
// tasks a run may not start. A run needs none of them to do its work.
var DeniedTools = []string{"Monitor", "Workflow", "CronCreate", "CronDelete", "CronList", "ScheduleWakeup",
	"EnterWorktree", "ExitWorktree", "SendMessage", "ListAgents", "TaskStop"}

// besideTools are the DeniedTools that run a command or subagents in the
// background: refused by the hook too, should a run be given them.
var besideTools = map[string]bool{"Monitor": true, "Workflow": true}

// subagentTools are the names Claude Code's subagent tool has had.
var subagentTools = map[string]bool{"Agent": true, "Task": true}

// IsSubagentCall reports whether tool starts a subagent: the daemon counts
// those in flight by their PreToolUse and PostToolUse.
func IsSubagentCall(tool string) bool { return subagentTools[tool] }

// judgeBeside refuses a call that would leave something of the agent's
// running beside its next calls, or elsewhere: a subagent in a worktree
// of its own (isolation "worktree", made by Claude Code's own git outside
// the sandbox, as EnterWorktree's are) or on a remote machine.
func judgeBeside(m Modes, a Actor, s State, p *Payload) *control.HookDecision {
	if a.Role == "" {
		return nil
	}
	in := p.Input()
	switch {
	case besideTools[p.ToolName]:
		return decide(m, RoleWritePolicy, "runs_beside",
			fmt.Sprintf("a daemon's run may not use %s: it runs beside the agent's next calls, where no gate judges it", p.ToolName),
			"run the command with Bash in the foreground, or do the work yourself, one step at a time")
	case p.ToolName == "Bash" && in.RunInBackground != nil && *in.RunInBackground:
		return decide(m, RoleWritePolicy, "runs_beside",
			"a daemon's run may not leave a command running after its tool call: nothing of the agent's may run beside the gates' judgement of its next call",
			"run it in the foreground; a server a test needs is started and stopped within one command (`./server & pid=$!; …; kill $pid`)")
	case subagentTools[p.ToolName] && in.RunInBackground != nil && *in.RunInBackground:
		return decide(m, RoleWritePolicy, "runs_beside",
			"in a daemon's run a subagent works in the foreground, so that nothing of the agent's runs beside its own calls",
			fmt.Sprintf("call %s again without run_in_background", p.ToolName))
	case subagentTools[p.ToolName] && in.TeamName != "":
		// Claude Code 2.1.330 runs such a call in the foreground, as any
		// other; a teammate of an agent team is meant to work beside its
		// lead, and a version that honours the key would run it so.
		return decide(m, RoleWritePolicy, "runs_beside",
			fmt.Sprintf("in a daemon's run a subagent works in the foreground, one at a time: a teammate of team %q would work beside the agent", in.TeamName),
			fmt.Sprintf("call %s again without team_name", p.ToolName))
	case subagentTools[p.ToolName] && in.Isolation != "":
		return decide(m, RoleWritePolicy, "runs_elsewhere",
			fmt.Sprintf("in a daemon's run a subagent works in the run's own tree: isolation %q has Claude Code's own git, outside the sandbox, add a worktree and a branch to the project's repository (or send the work to a remote machine)", in.Isolation),
			fmt.Sprintf("call %s again without isolation", p.ToolName))
	case subagentTools[p.ToolName] && s.Subagents > 0:
		return decide(m, RoleWritePolicy, "runs_beside",
			"in a daemon's run one subagent works at a time, so that nothing of the agent's runs beside another's calls",
			fmt.Sprintf("wait for the subagent at work to end, then call %s again", p.ToolName))
	}
	return nil
}
