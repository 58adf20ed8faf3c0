package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/guards/rulefile"
	"github.com/ctxgraphd/ctxgraphd/store"
)

func bashCall(cmd string) control.HookRequest {
	return control.HookRequest{Event: "pre-tool-use", Payload: []byte(fmt.Sprintf(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":%q}}`, cmd))}
}

func apiCode(err error) string {
	var e *control.APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprint(err)
}

// A command that failed graph.guard_threshold times yields one proposed
// guard, which does nothing; a person promotes it to warn (the action goes
// through, a would-be denial is recorded), then to enforce (denied), then
// retires it (nothing again). Every step is a person's decision trace, and
// the list counts what the guard did.
func TestGuardLifecycle(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		if err := h.st.AppendCommand(control.CommandRecord{Run: store.RunID(uint64(90 + i)), Command: "make deploy", ExitCode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	o := h.orchestrator(false)
	ctx := running(t, o)
	token := o.opts.Judge.Register(gates.Actor{Role: gates.Coder, Feature: "F-001", Run: "run-000099"})
	decide := func() *control.HookDecision {
		t.Helper()
		resp, err := o.opts.Judge.Hook(ctx, token, bashCall("make deploy"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decision
	}

	l, err := o.Guards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Guards) != 1 || l.Guards[0].Status != guards.Proposed || l.Guards[0].Source != "pattern failing_command" || !strings.Contains(l.Guards[0].Message, "failed 3 times") {
		t.Fatalf("Guards() = %+v, want one proposal from the failing command", l.Guards)
	}
	id := l.Guards[0].ID
	if again, err := o.Guards(ctx); err != nil || len(again.Guards) != 1 || again.Guards[0].ID != id {
		t.Fatalf("Guards() again = %+v, %v; want the same single proposal", again.Guards, err)
	}
	if d := decide(); d != nil {
		t.Fatalf("a proposed guard decided %+v", d)
	}

	steps := []struct {
		status string
		code   string // of the decision on the command; "" none
		mode   string
	}{{guards.Warn, guards.CodeWouldDeny, string(gates.Warn)}, {guards.Enforce, guards.CodeDenied, string(gates.Enforce)}}
	for _, s := range steps {
		g, err := o.PromoteGuard(ctx, id)
		if err != nil || g.Status != s.status {
			t.Fatalf("PromoteGuard() = %+v, %v; want %s", g, err, s.status)
		}
		if d := decide(); d == nil || d.Gate != guards.Prefix+id || d.Code != s.code || d.Mode != s.mode {
			t.Fatalf("in %s the guard decided %+v, want %s (%s)", s.status, d, s.code, s.mode)
		}
	}
	if _, err := o.PromoteGuard(ctx, id); apiCode(err) != "guard_status" {
		t.Errorf("promoting an enforced guard: %v, want guard_status", err)
	}
	if g, err := o.RetireGuard(ctx, id); err != nil || g.Status != guards.Retired || g.Denials != 1 || g.WouldBe != 1 {
		t.Fatalf("RetireGuard() = %+v, %v; want it retired, with one denial and one would-be", g, err)
	}
	if d := decide(); d != nil {
		t.Fatalf("a retired guard decided %+v", d)
	}
	if _, err := o.PromoteGuard(ctx, id); apiCode(err) != "guard_status" {
		t.Errorf("promoting a retired guard: %v, want guard_status", err)
	}
	if _, err := o.PromoteGuard(ctx, "g-nothere"); apiCode(err) != "unknown_guard" {
		t.Errorf("promoting an unknown guard: %v, want unknown_guard", err)
	}
	if l, err := o.Guards(ctx); err != nil || len(l.Guards) != 1 {
		t.Errorf("after retiring, Guards() = %+v, %v; want the retired guard and no new proposal", l.Guards, err)
	}

	trs, err := h.st.Traces(store.TraceFilter{Type: control.TraceDecision, Gate: guards.Prefix + id})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, tr := range trs {
		sources = append(sources, tr.Source)
	}
	if want := []string{control.SourceAuto, control.SourceUser, control.SourceUser, control.SourceUser}; strings.Join(sources, " ") != strings.Join(want, " ") {
		t.Errorf("decision traces of the guard from %v, want %v", sources, want)
	}
}

// guards.yaml is read at start: its guards hold at once, are listed with
// their source, and cannot be promoted or retired (the file is where they
// change). A broken file keeps the guards last read, and says what is
// wrong; a fixed one is taken.
func TestGuardsFile(t *testing.T) {
	h := newHarness(t)
	file := filepath.Join(h.proj.Dir, filepath.FromSlash(rulefile.Path))
	put := func(content string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(file), 0o755)
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("guards:\n  - {id: no-curl, status: enforce, tool: Bash, match: {command: '\\bcurl\\b'}, message: no network}\n")
	o := h.orchestrator(false)
	if gs := o.opts.Judge.Guards(); len(gs) != 1 || gs[0].ID != "no-curl" {
		t.Fatalf("the judge holds %+v after start, want no-curl", gs)
	}
	ctx := running(t, o)
	l, err := o.Guards(ctx)
	if err != nil || len(l.Guards) != 1 || l.Guards[0].Source != rulefile.Source || l.File != file || l.Problem != "" {
		t.Fatalf("Guards() = %+v, %v", l, err)
	}
	if _, err := o.PromoteGuard(ctx, "no-curl"); apiCode(err) != "guard_in_file" || !strings.Contains(err.Error(), rulefile.Path) {
		t.Errorf("promoting a guard of the file: %v, want guard_in_file naming the file", err)
	}
	if _, err := o.RetireGuard(ctx, "no-curl"); apiCode(err) != "guard_in_file" {
		t.Errorf("retiring a guard of the file: %v, want guard_in_file", err)
	}

	put("guards:\n  - {id: no-curl, status: enforce, tool: Bash, match: {command: '(['}, message: no network}\n")
	l, err = o.Guards(ctx)
	if err != nil || !strings.Contains(l.Problem, file) || !strings.Contains(l.Problem, `"no-curl"`) || !strings.Contains(l.Problem, "match.command") {
		t.Fatalf("with a broken file, Guards() = %+v, %v; want the problem naming the file, the guard and the field", l, err)
	}
	if gs := o.opts.Judge.Guards(); len(gs) != 1 || gs[0].Match.Command != `\bcurl\b` {
		t.Errorf("with a broken file the judge holds %+v, want the guards last read", gs)
	}

	put("guards:\n  - {id: no-wget, status: warn, tool: Bash, match: {command: wget}, message: no network}\n")
	if l, err = o.Guards(ctx); err != nil || l.Problem != "" || len(l.Guards) != 1 || l.Guards[0].ID != "no-wget" {
		t.Fatalf("with the file fixed, Guards() = %+v, %v", l, err)
	}
	if gs := o.opts.Judge.Guards(); len(gs) != 1 || gs[0].ID != "no-wget" {
		t.Errorf("with the file fixed the judge holds %+v, want no-wget", gs)
	}
}

// A file where guards.yaml's directory would be (the empty file Claude
// Code's sandbox leaves where it denied .claude/ctxgraphd, which was not
// there) is no guards file, not a broken one.
func TestGuardsFileUnderAFileIsNone(t *testing.T) {
	h := newHarness(t)
	dir := filepath.Dir(filepath.Join(h.proj.Dir, filepath.FromSlash(rulefile.Path)))
	os.MkdirAll(filepath.Dir(dir), 0o755)
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := h.orchestrator(false)
	o.loadGuardFile()
	if !o.guards.read || o.guards.problem != "" || len(o.guards.file) != 0 {
		t.Errorf("guards read %v, problem %q, rules %+v; want no file, no problem", o.guards.read, o.guards.problem, o.guards.file)
	}
}

// TestRunPolicyHoldsTheGuardsOfAFile: the sandbox of a run denies what the
// project's enforced deny guards on a file name for its role, read
// against the tree as the run starts: a glob of one path, the directory
// of DIR/**, the files another glob matches now. A guard of another role,
// in warn, or with a command to match adds nothing.
func TestRunPolicyHoldsTheGuardsOfAFile(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(2)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	in := func(rel string) string { return filepath.Join(h.proj.Dir, filepath.FromSlash(rel)) }
	for _, rel := range []string{"gen/a.go", "pkg/x/a.pb.go", "pkg/y/b.pb.go", "pkg/y/b.go", "docs/a.md"} {
		if err := os.MkdirAll(filepath.Dir(in(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(in(rel), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := h.orchestrator(false)
	if err := o.opts.Judge.SetGuards([]guards.Rule{
		{ID: "lit", Status: guards.Enforce, Match: guards.Match{Path: `CHANGELOG\[1\].md`}, Message: "m"},
		{ID: "lit-nodir", Status: guards.Enforce, Match: guards.Match{Path: "newdir/x.go"}, Message: "m"},
		{ID: "dir", Status: guards.Enforce, Role: gates.Coder, Match: guards.Match{Path: "gen/**"}, Message: "m"},
		{ID: "pb", Status: guards.Enforce, Match: guards.Match{Path: "pkg/**/*.pb.go"}, Message: "m"},
		{ID: "warn", Status: guards.Warn, Match: guards.Match{Path: "docs/**"}, Message: "m"},
		{ID: "cmd", Status: guards.Enforce, Match: guards.Match{Path: "pkg/y/b.go", Command: "x"}, Message: "m"},
	}); err != nil {
		t.Fatal(err)
	}
	coder := o.policy(o.lanes.home, role.Coder, "F-001").DenyWrite
	for _, p := range []string{in("CHANGELOG[1].md"), in("gen"), in("pkg/x/a.pb.go"), in("pkg/y/b.pb.go")} {
		if !slices.Contains(coder, p) {
			t.Errorf("a coder's sandbox may write %s, which an enforced guard holds", p)
		}
	}
	for _, p := range []string{in("docs"), in("docs/a.md"), in("pkg/y/b.go"), in("newdir/x.go"), in("newdir")} {
		if slices.Contains(coder, p) {
			t.Errorf("a coder's sandbox denies %s, which no enforced deny guard on a file holds", p)
		}
	}
	tester := o.policy(o.lanes.home, role.Tester, "F-001").DenyWrite
	if slices.Contains(tester, in("gen")) || !slices.Contains(tester, in("pkg/x/a.pb.go")) {
		t.Errorf("a tester's sandbox: %v, want the coder's guard out and every agent's in", tester)
	}
}

// A file refused or put back again and again is proposed as a path guard
// for the role, except a file some feature of the list owns (in its
// scope): a role's guard would refuse that feature's own agent its work,
// and an agent that keeps writing another feature's file on purpose must
// not get the daemon to propose that. The scope gate holds such a file,
// feature by feature, already.
func TestNoGuardIsProposedAgainstAFeaturesOwnFile(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(2)
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	var trs []control.Trace
	for i := range 3 {
		for _, p := range []string{"src/F-002.txt", "vendor/lib.go"} {
			trs = append(trs, control.Trace{Type: control.TraceViolation, Source: control.SourceAuto, Gate: gates.Scope, Code: "out_of_scope", Path: p,
				Context: control.TraceContext{Agent: gates.Coder, Feature: "F-001", Run: store.RunID(uint64(80 + i))},
				Event:   control.TraceEvent{WhatHappened: "coding-agent modified " + p + ", found in the project's tree after the run: out of scope; put back as it was before the run"}})
		}
	}
	if _, err := h.st.AppendTraces(trs...); err != nil {
		t.Fatal(err)
	}
	o := h.orchestrator(false)
	ctx := running(t, o)
	l, err := o.Guards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, g := range l.Guards {
		paths = append(paths, g.Match.Path)
	}
	if !slices.Contains(paths, "vendor/lib.go") || slices.Contains(paths, "src/F-002.txt") {
		t.Errorf("proposals on paths %q, want vendor/lib.go's and not src/F-002.txt's (F-002's own file)", paths)
	}
}

// The hooks of a run know what its sandbox denies it: a refusal a command
// prints of a file the sandbox lets the run write is not taken for one,
// while the sandbox's refusal of a frozen test is recorded.
func TestRunSandboxIsWhatItsHooksBelieve(t *testing.T) {
	h := newHarness(t)
	h.runner.script[role.Initializer] = initializerWrites(1)
	h.runner.script[role.Coder] = func(ctx context.Context, spec agents.Spec, h *harness) agents.Result {
		for _, path := range []string{"README.md", "tests/F-001.sh"} {
			h.hook("post-tool-use-failure", spec, map[string]any{"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
				"tool_input": map[string]any{"command": "echo x > " + path}, "error": "/bin/bash: line 1: " + path + ": Read-only file system"})
		}
		return coderCompletes(ctx, spec, h)
	}
	if err := h.runToEnd(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range h.violations() {
		if v.Source == control.SourceHook {
			got = append(got, v.Path+" "+v.Gate)
		}
	}
	if strings.Join(got, "; ") != "tests/F-001.sh frozen-tests" {
		t.Errorf("the hooks' violations %q, want the frozen test's alone", got)
	}
}
