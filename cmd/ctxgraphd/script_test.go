package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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
	})
}
