package orchestrator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/guards/propose"

	"github.com/ctxgraphd/ctxgraphd/guards"

	"github.com/bmatcuk/doublestar/v4"
	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/graph"
	"github.com/ctxgraphd/ctxgraphd/guards/rulefile"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// guardState is what the loop knows of the guards besides the store: the
// rules last read from guards.yaml, which hold while a broken file is
// being fixed.
type guardState struct {
	file    []guards.Rule
	data    []byte // the file as last read: an unchanged file is not read again
	read    bool   // the file was read once (a missing file reads as nil)
	problem string // what is wrong with the file, "" when nothing
}

// guardsFile is the project's guards file.
func (o *Orchestrator) guardsFile() string {
	return filepath.Join(o.opts.Project.Dir, filepath.FromSlash(rulefile.Path))
}

// loadGuardFile reads guards.yaml when it changed since it was last read,
// and publishes the guards. The daemon reads it at start, at the start of
// every run and whenever a person lists the guards (the watcher watches
// .claude/progress only). A broken file never stops the daemon: the rules
// last read from it hold, and the problem is logged and shown by
// `ctl guards`, naming the file, the guard and the fix.
func (o *Orchestrator) loadGuardFile() {
	name := o.guardsFile()
	data, err := os.ReadFile(name)
	if paths.Absent(err) {
		data, err = nil, nil
	}
	if err == nil && o.guards.read && bytes.Equal(data, o.guards.data) {
		return
	}
	var rules []guards.Rule
	if err == nil {
		rules, err = rulefile.Parse(name, data)
	}
	if err != nil {
		if problem := err.Error(); problem != o.guards.problem {
			o.guards.problem = problem
			o.opts.Log.Warn("guards file not taken; the guards last read from it hold", zap.String("file", name), zap.Error(err))
		}
		o.guards.data, o.guards.read = data, true
		return
	}
	o.guards = guardState{file: rules, data: data, read: true}
	if data != nil {
		o.opts.Log.Info("guards file read", zap.String("file", name), zap.Int("guards", len(rules)))
	}
	o.publishGuards()
}

// allGuards is every guard: guards.yaml's first, then the stored ones (a
// stored guard with the id of one in the file gives way to the file's).
func (o *Orchestrator) allGuards() ([]guards.Rule, error) {
	stored, err := o.opts.Store.Guards()
	if err != nil {
		return nil, err
	}
	out := slices.Clone(o.guards.file)
	for _, r := range stored {
		if o.fileGuard(r.ID) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// fileGuard is the guard of guards.yaml with that id, if there is one.
func (o *Orchestrator) fileGuard(id string) *guards.Rule {
	for i := range o.guards.file {
		if o.guards.file[i].ID == id {
			return &o.guards.file[i]
		}
	}
	return nil
}

// publishGuards hands the active guards to the judge, which holds the
// hooks to them and leaves them for a hook deciding alone.
func (o *Orchestrator) publishGuards() {
	rules, err := o.allGuards()
	if err == nil {
		err = o.opts.Judge.SetGuards(rules)
	}
	if err != nil {
		o.opts.Log.Warn("could not publish the guards", zap.Error(err))
	}
}

// proposeGuards stores a proposed guard for every pattern over
// graph.guard_threshold that yields one and has none yet: a guard a person
// retired is not proposed again, since a proposal's id is that of its
// pattern.
func (o *Orchestrator) proposeGuards() error {
	trs, err := o.opts.Store.Traces(store.TraceFilter{Type: control.TraceViolation, Limit: graph.Window})
	if err != nil {
		return err
	}
	cmds, err := o.opts.Store.Commands("")
	if err != nil {
		return err
	}
	stored, err := o.opts.Store.Guards()
	if err != nil {
		return err
	}
	threshold := cmp.Or(o.opts.Config.Graph.GuardThreshold, propose.DefaultThreshold)
	patterns := graph.Patterns(trs, cmds, threshold)
	for _, r := range propose.Propose(patterns, threshold, o.opts.Now()) {
		if o.fileGuard(r.ID) != nil || slices.ContainsFunc(stored, func(s guards.Rule) bool { return s.ID == r.ID }) {
			continue
		}
		if f := o.owner(r.Match.Path); f != "" {
			// A role's guard would refuse the owner's agent its own
			// work; the scope gate holds the file, feature by feature.
			o.opts.Log.Debug("no guard proposed against a feature's own file", zap.String("path", r.Match.Path), zap.String("feature", f))
			continue
		}
		if err := o.opts.Store.PutGuards(r); err != nil {
			return err
		}
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Gate: r.Gate(),
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("guard %s proposed: %s", r.ID, r.Summary()), WhatWasCorrect: r.Message,
				Why: fmt.Sprintf("from a %s; it does nothing until a person promotes it (ctxgraphd ctl guards promote %s)", r.Source, r.ID)}})
		o.opts.Log.Info("guard proposed", zap.String("guard", r.ID), zap.String("rule", r.Summary()))
	}
	return nil
}

// Guards implements control.Loop: every guard, with how often it
// acted, proposals refreshed and guards.yaml read first.
func (o *Orchestrator) Guards(ctx context.Context) (control.GuardList, error) {
	var l control.GuardList
	err := o.do(ctx, func() error {
		o.loadGuardFile()
		if err := o.proposeGuards(); err != nil {
			return err
		}
		rules, err := o.allGuards()
		if err != nil {
			return err
		}
		counts, err := o.guardCounts()
		if err != nil {
			return err
		}
		l = control.GuardList{File: o.guardsFile(), Problem: o.guards.problem, Guards: []control.Guard{}}
		for _, r := range rules {
			l.Guards = append(l.Guards, guardWire(r, counts[r.Gate()]))
		}
		return nil
	})
	return l, err
}

// guardCount is how often a guard acted.
type guardCount struct{ denials, wouldBe int }

// guardCounts counts the violations of each guard by its gate.
func (o *Orchestrator) guardCounts() (map[string]guardCount, error) {
	trs, err := o.opts.Store.Traces(store.TraceFilter{Type: control.TraceViolation})
	if err != nil {
		return nil, err
	}
	out := map[string]guardCount{}
	for _, t := range trs {
		if !strings.HasPrefix(t.Gate, guards.Prefix) {
			continue
		}
		c := out[t.Gate]
		if t.Code == guards.CodeDenied {
			c.denials++
		} else {
			c.wouldBe++
		}
		out[t.Gate] = c
	}
	return out, nil
}

// PromoteGuard implements control.Loop: a person moves a guard one
// step, proposed → warn → enforce.
func (o *Orchestrator) PromoteGuard(ctx context.Context, id string) (control.Guard, error) {
	return o.changeGuard(ctx, id, "promote", func(r *guards.Rule) error {
		switch r.Status {
		case guards.Proposed:
			r.Status = guards.Warn
		case guards.Warn:
			r.Status = guards.Enforce
		case guards.Enforce:
			return guardConflict(fmt.Sprintf("guard %s is enforced already; `ctxgraphd ctl guards retire %s` ends it", id, id))
		default:
			return guardConflict(fmt.Sprintf("guard %s is retired, and stays so; to hold agents to its rule again, write it in %s", id, rulefile.Path))
		}
		return nil
	})
}

// RetireGuard implements control.Loop: a person ends a guard.
func (o *Orchestrator) RetireGuard(ctx context.Context, id string) (control.Guard, error) {
	return o.changeGuard(ctx, id, "retire", func(r *guards.Rule) error {
		if r.Status == guards.Retired {
			return guardConflict(fmt.Sprintf("guard %s is retired already", id))
		}
		r.Status = guards.Retired
		return nil
	})
}

func guardConflict(msg string) error {
	return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeGuardStatus, Message: msg}
}

// changeGuard applies a person's change to a stored guard, records it as
// a decision of theirs, and publishes the guards.
func (o *Orchestrator) changeGuard(ctx context.Context, id, verb string, change func(*guards.Rule) error) (control.Guard, error) {
	var out control.Guard
	err := o.do(ctx, func() error {
		o.loadGuardFile()
		if r := o.fileGuard(id); r != nil {
			return &control.APIError{HTTPStatus: http.StatusConflict, Code: control.CodeGuardInFile,
				Message: fmt.Sprintf("guard %s is %s's (%s, status %s): change or remove it there, where the team reviews it", id, rulefile.Path, o.guardsFile(), r.Status)}
		}
		stored, err := o.opts.Store.Guards()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(stored, func(r guards.Rule) bool { return r.ID == id })
		if i < 0 {
			return &control.APIError{HTTPStatus: http.StatusNotFound, Code: control.CodeUnknownGuard,
				Message: fmt.Sprintf("no guard %q; `ctxgraphd ctl guards` lists them", id)}
		}
		r := stored[i]
		from := r.Status
		if err := change(&r); err != nil {
			return err
		}
		if err := o.opts.Store.PutGuards(r); err != nil {
			return err
		}
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceUser, Gate: r.Gate(),
			Event: control.TraceEvent{WhatHappened: fmt.Sprintf("guard %s moved from %s to %s by a person (%s): %s", id, from, r.Status, verb, r.Summary()),
				Why: "a person's " + verb}})
		o.opts.Log.Info("guard "+verb+"d", zap.String("guard", id), zap.String("from", from), zap.String("to", r.Status))
		o.publishGuards()
		counts, err := o.guardCounts()
		if err != nil {
			return err
		}
		out = guardWire(r, counts[r.Gate()])
		return nil
	})
	return out, err
}

// guardWire is a guard as the control API shows it.
func guardWire(r guards.Rule, c guardCount) control.Guard {
	return control.Guard{ID: r.ID, Status: r.Status, Source: r.Source, Rule: r.Summary(), Event: r.Event, Tool: r.Tool, Role: r.Role,
		Match: control.GuardMatch(r.Match), Action: r.Action, Message: r.Message, Suggestion: r.Suggestion, Created: r.Created,
		Denials: c.denials, WouldBe: c.wouldBe}
}

// maxGuardDenies bounds the paths a run's sandbox denies for the guards:
// each is a mount of the sandbox. What a glob matches beyond it is held by
// the verdict, which finds every change of a guarded file after the run.
const maxGuardDenies = 256

// errEnough stops a glob's walk at maxGuardDenies.
var errEnough = errors.New("enough")

// guardDenies are the paths the sandbox of a run of role denies for the
// project's enforced deny guards on a file (gates.SandboxGlobs): the
// sandbox takes paths, not globs, so each glob is read against the tree
// as the run starts. A glob that names one path (a proposal's always
// does) denies it whether or not it exists, when its directory does;
// DIR/** denies DIR, new files too, when DIR is there; any other glob denies the files it matches now.
// A file the glob would match that the run creates is held by the verdict
// (gates.GuardChanges), which puts it back.
func (o *Orchestrator) guardDenies(role string) []string {
	dir := o.opts.Project.Dir
	in := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	var out []string
	for _, g := range gates.SandboxGlobs(o.opts.Judge.Guards(), role) {
		if len(out) >= maxGuardDenies {
			break
		}
		if lit, ok := literalGlob(g); ok {
			// Denied, a file that does not exist cannot be created; a
			// directory that does not exist is left to the verdict, so
			// that the sandbox never stands in the way of more than the
			// guard names.
			if fi, err := os.Stat(filepath.Dir(in(lit))); err == nil && fi.IsDir() {
				out = append(out, in(lit))
			}
			continue
		}
		if d, ok := strings.CutSuffix(g, "/**"); ok {
			if lit, ok := literalGlob(d); ok {
				if fi, err := os.Stat(in(lit)); err == nil && fi.IsDir() {
					out = append(out, in(lit))
					continue
				}
			}
		}
		err := doublestar.GlobWalk(os.DirFS(dir), g, func(rel string, d fs.DirEntry) error {
			if rel == ".git" || strings.HasPrefix(rel, ".git/") {
				return doublestar.SkipDir
			}
			out = append(out, in(rel))
			if len(out) >= maxGuardDenies {
				return errEnough
			}
			return nil
		}, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
		if err != nil && !errors.Is(err, errEnough) {
			o.opts.Log.Warn("could not read a guard's glob against the project", zap.String("glob", g), zap.Error(err))
		}
	}
	return out
}

// literalGlob is the one path a glob without wildcards names, its escapes
// taken.
func literalGlob(g string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		switch c := g[i]; {
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteByte(g[i])
		case strings.IndexByte("*?[]{}", c) >= 0:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), b.Len() > 0
}

// owner is the feature of the list whose scope holds the one path glob
// names, "" when none does (or glob is no single path).
func (o *Orchestrator) owner(glob string) string {
	p, ok := literalGlob(glob)
	if !ok || o.canonical == nil {
		return ""
	}
	for _, f := range o.canonical.Features {
		if gates.InScope(f.Scope, p) {
			return f.ID
		}
	}
	return ""
}
