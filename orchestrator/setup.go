package orchestrator

// The project's setup step: run in a tree before the first check of a test
// there, and again where a manifest, a lock or the setup itself changed.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// setupStep is what the setup of one tree is to run: the script, where
// it comes from (the person's setup:, or the daemon's own fetches of what
// the manifests name), and the fingerprint of what decides what it makes.
type setupStep struct {
	script, from, print string
	ask                 []string // what the daemon would not fetch by itself
}

// Where a setup comes from: the person's setup:, or the one the
// initializer proposed in the feature list, which is the person's to
// change (and fixed for agents) once written.
const (
	fromPerson = "setup:"
	fromList   = "the feature list's setup"
)

// named reports whether the project names the step (setup:, or the
// feature list's), rather than the daemon's own fetches.
func (s setupStep) named() bool { return s.from == fromPerson || s.from == fromList }

// namedSetup is the setup the project names and where it comes from: the
// person's setup:, else the feature list's; "" when it names none.
func (o *Orchestrator) namedSetup() (script, from string) {
	if s := strings.TrimSpace(o.opts.Config.Setup); s != "" {
		return s, fromPerson
	}
	if o.canonical != nil {
		if s := strings.TrimSpace(o.canonical.Setup); s != "" {
			return s, fromList
		}
	}
	return "", ""
}

// setupIn is the step of the tree at dir, given the setup the project
// names (namedSetup): that one, or else the fetches that run no code
// (toolchain.SafeSetupOf). It reads the tree's manifests: off the loop.
func setupIn(dir, script, from string) setupStep {
	s := setupStep{script: script, from: from}
	if s.script == "" {
		safe := toolchain.SafeSetupOf(dir)
		s.script, s.from, s.ask = safe.Script, "the daemon's fetch of what the committed manifests name", safe.Ask
	}
	if s.script != "" {
		s.print = setupPrint(dir, s.script)
	}
	return s
}

// setupPrint is the fingerprint of a setup in the tree at dir: its script,
// the manifests and locks at the tree's top, and the scripts in the tree
// that the setup runs by path. Any change of one runs the setup again.
func setupPrint(dir, script string) string {
	h := sha256.New()
	fmt.Fprintf(h, "script %q\n", script)
	files := append([]string{}, toolchain.SetupInputs...)
	files = append(files, shellcmd.ParseTest(script).Scripts...)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			fmt.Fprintf(h, "%s absent\n", f)
			continue
		}
		fmt.Fprintf(h, "%s %d %x\n", f, len(data), sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// setupRun is the outcome of a setup step: the step (zero when none was
// due), why it failed ("" when it did not), and the tree's setup as it
// stands, run now or before (what a run in a clone of the tree runs
// there first: agents.Spec.Setup).
type setupRun struct {
	step   setupStep
	failed string
	script string
}

// runSetup runs step in the tree at dir off the loop, with pol (a coder's
// policy in that tree, taken on the loop: no more than the next agent
// there may do), unless the same fingerprint succeeded there already
// (done, the lane's record of it). With no runner (nil), nothing runs.
func runSetup(ctx context.Context, run *sandbox.Setup, log *zap.Logger, step setupStep, pol sandbox.Policy, dir, done string) setupRun {
	r := runSetupStep(ctx, run, log, step, pol, dir, done)
	r.script = step.script
	return r
}

func runSetupStep(ctx context.Context, run *sandbox.Setup, log *zap.Logger, step setupStep, pol sandbox.Policy, dir, done string) setupRun {
	if run == nil || step.script == "" || step.print == done {
		return setupRun{step: setupStep{ask: step.ask, print: done}}
	}
	var out bytes.Buffer
	began := time.Now()
	err := run.Run(ctx, pol, step.script, &out)
	log.Info("the setup step ran", zap.String("dir", dir), zap.String("setup", step.script), zap.Duration("took", time.Since(began)), zap.Error(err))
	switch {
	case err == nil:
		return setupRun{step: step}
	case ctx.Err() != nil:
		return setupRun{step: setupStep{print: done}}
	case errors.Is(err, sandbox.ErrNoRuntime) && !step.named():
		// The daemon's own fetches are a convenience: without the runtime
		// that confines them, the agents fetch as they would anyway. A
		// setup the project names is no convenience, and its failure stops.
		return setupRun{step: setupStep{print: done, ask: append(slices.Clone(step.ask), err.Error()+"; the daemon fetched nothing ahead ("+step.script+")")}}
	}
	fix := "fix it (setup: in .claude/ctxgraphd.yaml, or what it installs)"
	switch step.from {
	case fromList:
		fix = `fix it (the feature list's "setup", with the daemon paused, or a setup: in .claude/ctxgraphd.yaml, which comes first)`
	case fromPerson:
	default:
		fix = "give the project a setup: that prepares it (in .claude/ctxgraphd.yaml)"
	}
	return setupRun{step: step, failed: fmt.Sprintf("the project's setup (%s `%s`) failed in %s: %v; nothing was charged. Its output ends:\n%s\n%s, then `ctxgraphd ctl resume`",
		step.from, step.script, dir, err, sandbox.OutputEnd(out.Bytes()), fix)}
}

// setupTaken records the outcome of a setup of l's tree on the loop: the
// fingerprint that succeeded there, and once a session what the daemon
// would not fetch by itself, as a decision a person can read.
func (o *Orchestrator) setupTaken(l *lane, r setupRun) {
	if r.failed == "" && r.step.print != "" {
		l.setupDone = r.step.print
	}
	l.setupScript = r.script
	if len(r.step.ask) > 0 && !o.askedSetup {
		o.askedSetup = true
		why := strings.Join(r.step.ask, "; ")
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: "setup_needed",
			Event: control.TraceEvent{WhatHappened: "the daemon fetched nothing for some of the project's manifests: " + why,
				WhatWasCorrect: "a fetch that would run code, or that nothing verifies, is a person's to ask for, in setup:", Why: "the daemon does not guess how a project is prepared"}})
		o.opts.Log.Warn("the project needs a setup: the daemon does not fetch this by itself", zap.String("why", why))
	}
}
