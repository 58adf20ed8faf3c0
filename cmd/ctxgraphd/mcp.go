package main

import (
	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/internal/mcpserver"
)

func init() { subcommands = append(subcommands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "The context graph as MCP tools, over stdio, for your own Claude Code sessions",
		Long: `mcp is started by Claude Code: an MCP server on stdin and stdout with the
tools query_traces, get_trace, store_trace, extract_patterns and record_lesson,
for a person's own sessions (claude mcp add ctxgraphd -- ctxgraphd mcp). It asks
the project's daemon (CTXGRAPH_SOCKET, or the project around the current
directory) and never opens its store; what it stores is marked source agent.
The daemon's own runs get the same tools from the daemon, over HTTP on
loopback, each with its run's token.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mcpserver.ServeStdio(cmd.Context(), versionLine())
		},
	}
}
