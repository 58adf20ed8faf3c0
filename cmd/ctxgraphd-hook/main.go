// Command ctxgraphd-hook is the hook Claude Code runs on every hook event of
// a ctxgraphd run: the same as `ctxgraphd hook EVENT`, in a binary that
// links nothing else, so that the many hook processes of a run start fast.
// `make build` puts it beside ctxgraphd, where the daemon looks for it.
//
// Usage: ctxgraphd-hook EVENT [--interactive]
package main

import (
	"context"
	"os"

	"github.com/ctxgraphd/ctxgraphd/hook"
)

func main() {
	os.Exit(hook.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
