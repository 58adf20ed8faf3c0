package main

import (
	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/internal/mcpserver"
)

func init() { subcommands = append(subcommands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "The context graph as MCP tools for agents, over stdio (Claude Code starts it)",
		Long: `mcp is started by Claude Code, not by people: an MCP server on stdin and stdout
with the tools query_traces, get_trace, store_trace, extract_patterns and
record_lesson. It asks the project's daemon (CTXGRAPH_SOCKET, or the project
around the current directory) and never opens its store. The daemon gives it to
every run it starts, with the run's token, so that what an agent stores is
attributed to its run; what agents store is marked source agent.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mcpserver.ServeStdio(cmd.Context(), versionLine())
		},
	}
}
