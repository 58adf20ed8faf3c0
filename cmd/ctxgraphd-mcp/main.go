// Command ctxgraphd-mcp is `ctxgraphd mcp` in a binary that links nothing
// else: Claude Code starts it at the start of every run of the daemon, and
// what the main binary links besides (the store, the loop, zap, cobra)
// would cost every run its start-up. `make build` puts it beside
// ctxgraphd, where the daemon looks for it.
//
// Usage: ctxgraphd-mcp (stdin and stdout are the MCP client's)
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/ctxgraphd/ctxgraphd/internal/mcpserver"
)

// version is set by make build (-X main.version), as ctxgraphd's is.
var version string

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "ctxgraphd-mcp: unexpected argument %q; usage: ctxgraphd-mcp (Claude Code starts it, with stdin and stdout)\n", os.Args[1])
		os.Exit(2)
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" {
		v = bi.Main.Version
	}
	if err := mcpserver.ServeStdio(context.Background(), "ctxgraphd "+v); err != nil {
		fmt.Fprintf(os.Stderr, "ctxgraphd-mcp: %v\n", err)
		os.Exit(1)
	}
}
