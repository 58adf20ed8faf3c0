package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// TestScripts runs the command-line scripts in testdata/script: what a
// person types and what they see, including the errors for bad input.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			// Sockets have a path limit of about 104 bytes; $WORK can be
			// longer, so the runtime directory gets a short one.
			rt, err := os.MkdirTemp("", "cgs")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(rt) })
			env.Setenv("XDG_RUNTIME_DIR", rt)
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("CI", "")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"waitdaemon": waitDaemon},
	})
}

// daemonStartWait bounds how long a script's daemon may take to answer:
// its start checks run the agents' CLI and git.
const daemonStartWait = time.Minute

// waitDaemon is the scripts' `waitdaemon DIR`: it waits until the daemon
// of the project DIR answers on its socket, as the script's environment
// places it.
func waitDaemon(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitdaemon DIR")
	}
	p, err := paths.ForProjectEnv(ts.MkAbs(args[0]), ts.Getenv)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), daemonStartWait)
	defer cancel()
	c := control.NewClient(p.Socket)
	for {
		_, err := c.Status(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			ts.Fatalf("no daemon answered on %s within %s: %v", p.Socket, daemonStartWait, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
