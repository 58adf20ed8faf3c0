package judge

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Frozen is the record of the acceptance tests (gate frozen-tests): the
// files the features' test commands run, and every file where the
// project's tests live (gates.protected), each with its git blob id as it
// was when the record was made: when the feature list was accepted, or
// when a person changed a test and the record followed.
type Frozen struct {
	Files map[string]string `json:"files"` // project-relative, forward slashes → blob id
	At    time.Time         `json:"at"`
}

// paths returns the frozen paths as the rules take them.
func (f Frozen) paths() map[string]bool {
	out := make(map[string]bool, len(f.Files))
	for p := range f.Files {
		out[p] = true
	}
	return out
}

// Sorted returns the frozen paths in order.
func (f Frozen) Sorted() []string {
	return slices.Sorted(maps.Keys(f.Files))
}

// Frozen returns the current record.
func (j *Judge) Frozen() Frozen {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.frozen
}

// SetFrozen makes f the record the gates hold agents to (after a restart,
// from the store), and leaves it where a hook deciding alone finds it.
func (j *Judge) SetFrozen(f Frozen) error {
	j.mu.Lock()
	j.frozen = f
	j.mu.Unlock()
	return j.saveOffline()
}

// Freeze records the acceptance tests of list l as they are in tree (a
// snapshot of the work tree): the files each feature's test command and the
// list's setup name, and the files gates.protected matches.
func (j *Judge) Freeze(ctx context.Context, l *progress.List, tree gitrepo.Tree) (Frozen, error) {
	entries, err := j.opts.Repo.Files(ctx, tree)
	if err != nil {
		return Frozen{}, err
	}
	named := map[string]bool{}
	if l != nil {
		// The files the list's setup runs are frozen with it: a coder's
		// change of them would be a change of the setup.
		for _, p := range TestFiles(l.Setup) {
			named[p] = true
		}
		for _, f := range l.Features {
			for _, p := range TestFiles(f.Test) {
				named[p] = true
			}
		}
	}
	fz := Frozen{Files: map[string]string{}, At: j.opts.Now().UTC()}
	for _, e := range entries {
		if e.Mode == gitrepo.ModeGitlink {
			continue
		}
		if named[e.Path] || gates.MatchAny(j.opts.ProtectedGlobs, e.Path) {
			fz.Files[e.Path] = e.ID
		}
	}
	return fz, nil
}

// Adopt takes paths' content in tree into the record (a person changed
// them): a path tree lacks leaves the record. It returns the new record,
// which the caller persists.
func (j *Judge) Adopt(ctx context.Context, tree gitrepo.Tree, paths []string) (Frozen, error) {
	entries, err := j.opts.Repo.Files(ctx, tree)
	if err != nil {
		return Frozen{}, err
	}
	now := make(map[string]string, len(entries))
	for _, e := range entries {
		now[e.Path] = e.ID
	}
	old := j.Frozen()
	fz := Frozen{Files: make(map[string]string, len(old.Files)), At: j.opts.Now().UTC()}
	for p, id := range old.Files {
		fz.Files[p] = id
	}
	for _, p := range paths {
		if id, ok := now[p]; ok {
			fz.Files[p] = id
		} else {
			delete(fz.Files, p)
		}
	}
	return fz, j.SetFrozen(fz)
}

// Drift compares the frozen files in tree with the record: the paths whose
// content differs (or that are gone).
func (j *Judge) Drift(ctx context.Context, tree gitrepo.Tree) ([]string, error) {
	fz := j.Frozen()
	if len(fz.Files) == 0 {
		return nil, nil
	}
	entries, err := j.opts.Repo.Files(ctx, tree)
	if err != nil {
		return nil, err
	}
	now := make(map[string]string, len(entries))
	for _, e := range entries {
		now[e.Path] = e.ID
	}
	var out []string
	for _, p := range fz.Sorted() {
		if now[p] != fz.Files[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// TestFiles returns what a test command names that may be a file of the
// project (see shellcmd.Test.Files). Which of them exist is the tree's to
// say. Directories and package patterns (./pkg/...) are not files: the tests
// inside them are gates.protected's.
func TestFiles(test string) []string { return shellcmd.ParseTest(test).Files }
