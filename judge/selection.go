package judge

// Selection: which frozen tests a regression sweep runs. Every run of a
// test by the daemon that passes leaves a record of what it read of its
// tree, made from outside the test's processes by the view it ran
// through (internal/inputs), and a digest of what it was given from
// outside the tree (its setting). A sweep skips an earlier feature's test
// only when the change from the tree of its record to the candidate
// provably touches none of what it read, and its setting is the same;
// any doubt runs it. Every Options.FullSweepEvery sweeps, and whenever
// asked (FullSweep), a sweep runs every test: the backstop for what the
// record could not see.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/inputs"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
	"github.com/ctxgraphd/ctxgraphd/sandbox"
)

// seenRun is the record of a test's last run by the daemon, when it
// passed: the tree it ran on, what it read there, and its setting.
type seenRun struct {
	tree    gitrepo.Tree
	seen    inputs.Record
	setting string
}

// records reports whether a test run on this jail leaves a record of its
// inputs: only confined runs do (an unconfined run starts in its
// checkout, which a view cannot serve: inputs.View), and never a run as
// the person runs it, which nothing sweeps.
func (j *Judge) records(jail sandbox.TestJail) bool {
	return j.opts.FullSweepEvery != 1 && sandbox.Confines && !jail.Off && !j.opts.AsThePerson
}

// viewOf mounts the recording view of checkout at a directory of scratch
// for one run; nil, and the run unrecorded, when the system cannot mount
// it (no FUSE): the sweeps then run every test, and the daemon says so
// once.
func (j *Judge) viewOf(checkout, scratch string) *inputs.View {
	dir := filepath.Join(scratch, viewDir)
	err := os.Mkdir(dir, 0o700)
	var v *inputs.View
	if err == nil {
		v, err = inputs.Mount(checkout, dir)
	}
	if err != nil {
		j.mu.Lock()
		said := j.noView
		j.noView = true
		j.mu.Unlock()
		if !said {
			j.log.Warn("the daemon's test runs cannot record what they read, so every regression sweep runs every frozen test", zap.Error(err))
		}
		return nil
	}
	return v
}

// noteRun keeps the record of a run of test on tree when it passed with
// its inputs recorded (seen non-nil), and drops the test's record
// otherwise: a failing run, one cut short, or one whose view could not
// say what it read, leaves the test with no record, and it runs at the
// next sweep.
func (j *Judge) noteRun(test string, tree gitrepo.Tree, setting string, seen *inputs.Record, res TestResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seen != nil && res.Passed() {
		j.seen[test] = seenRun{tree: tree, seen: *seen, setting: setting}
		return
	}
	delete(j.seen, test)
}

// selection is what a sweep runs of the tests due: run (indexes into
// them), how many it skips, and whether it is a full sweep.
type selection struct {
	run     []int
	skipped int
	full    bool
	// passedHere is how many a full sweep does not run because the
	// daemon's run of them passed on this tree, in this setting.
	passedHere int
	// lastPass is, for each test, the tree of its record when the sweep
	// began ("" when none): where it last passed, for a bisection.
	lastPass []gitrepo.Tree
}

// selectTests decides which of tests, due at a sweep on tree of root, are
// to run: at a full sweep, all of them but those that passed on tree
// itself in the same setting; otherwise each whose record is
// missing, was made in another setting, or is affected by the change from
// its tree to this one, or when that change touches a manifest or a lock.
func (j *Judge) selectTests(ctx context.Context, root Root, tree gitrepo.Tree, tests []string) selection {
	j.mu.Lock()
	full := j.fullNext || !j.records(j.opts.Jail) || j.opts.FullSweepEvery > 0 && j.sinceFull+1 >= j.opts.FullSweepEvery
	if full {
		j.fullNext, j.sinceFull = false, 0
	} else {
		j.sinceFull++
	}
	seen := make([]*seenRun, len(tests))
	for i, t := range tests {
		if s, ok := j.seen[t]; ok {
			seen[i] = &s
		}
	}
	j.mu.Unlock()
	sel := selection{full: full, lastPass: make([]gitrepo.Tree, len(tests))}
	for i, s := range seen {
		if s != nil {
			sel.lastPass[i] = s.tree
		}
	}
	root = j.root(root)
	setting := "" // (only a record is compared with it: a setting costs a walk of the caches)
	if slices.ContainsFunc(seen, func(s *seenRun) bool { return s != nil }) {
		setting = j.setting(root)
	}
	if full {
		// A full sweep runs every test not yet passed on this very tree in
		// this setting. One that has (the last claim's own, which its
		// verdict ran on the tree that landed) is verified here by the
		// daemon's own run, and no record's reading of a change is in it.
		for i, s := range seen {
			if s != nil && s.tree == tree && s.setting == setting {
				sel.passedHere++
				continue
			}
			sel.run = append(sel.run, i)
		}
		return sel
	}
	// The change from each record's tree to this one, asked of git once
	// for every tree (a record a landing: one process a tree made the
	// sweeps' own cost grow with the square of a night's landings).
	var from []gitrepo.Tree
	for _, s := range seen {
		if s != nil && s.setting == setting {
			from = append(from, s.tree)
		}
	}
	changes, err := root.Repo.ExportedChangesFrom(ctx, from, tree)
	cgo := makesCgo(ctx, root, changes)
	for i, s := range seen {
		if s == nil || s.setting != setting {
			sel.run = append(sel.run, i)
			continue
		}
		// A change no record covers: git's answer missing, one that can
		// make the tree cgo's, or a manifest or a lock changed.
		bad := err != nil || cgo[s.tree]
		var ch []inputs.Change
		for _, c := range changes[s.tree] {
			bad = bad || toolchain.IsManifest(c.Path)
			ch = append(ch, inputs.Change{Path: c.Path, Entry: c.Entry()})
		}
		if bad || s.seen.Affects(ch) {
			sel.run = append(sel.run, i)
			continue
		}
		sel.skipped++
	}
	return sel
}

// makesCgo reports, for each tree, whether its changes can make the tree
// they lead to use cgo: a Go file among them that imports "C", or a link
// named as a Go file, whose target the blob does not hold. A run on such
// a tree is given the tree's own cgo flags (toolchain.CgoTreeEnv), which a
// record, made on a tree without cgo (RunTestIn records none there), did
// not have. The Go files' blobs are read by one git process for all the
// trees; blobs that cannot be read are taken to import "C".
func makesCgo(ctx context.Context, root Root, changes map[gitrepo.Tree][]gitrepo.Change) map[gitrepo.Tree]bool {
	cgo := map[gitrepo.Tree]bool{}
	type goFile struct{ id, path string }
	var files []goFile
	index := map[goFile]int{}
	of := map[gitrepo.Tree][]int{} // each tree's Go files, indexes into files
	for tree, cs := range changes {
		for _, c := range cs {
			if c.Kind == gitrepo.Deleted || !strings.HasSuffix(c.Path, ".go") {
				continue
			}
			switch c.ToMode {
			case gitrepo.ModeSymlink:
				if toolchain.CgoLink(c.Path) {
					cgo[tree] = true
				}
			case gitrepo.ModeFile, gitrepo.ModeExecutable:
				f := goFile{id: c.To, path: c.Path}
				i, ok := index[f]
				if !ok {
					i = len(files)
					index[f] = i
					files = append(files, f)
				}
				of[tree] = append(of[tree], i)
			}
		}
	}
	ids := make([]string, len(files))
	for i, f := range files {
		ids[i] = f.id
	}
	srcs, err := root.Repo.Blobs(ctx, ids)
	for tree, fs := range of {
		for _, i := range fs {
			if err != nil || toolchain.CgoFile(files[i].path, srcs[i]) {
				cgo[tree] = true
			}
		}
	}
	return cgo
}

// FullSweep makes the next regression sweep a full one, whatever the
// records say: before a session ends, so that the branch's tip is
// verified by every frozen test.
func (j *Judge) FullSweep() {
	j.mu.Lock()
	j.fullNext = true
	j.mu.Unlock()
}

// setting is the digest of what a test run of root is given from outside
// its tree, as far as a change of it can change the run's outcome: its
// environment, its bounds and timeout, the person's untracked files, the
// list's setup and the frozen record, the dependency directories lent to
// it and the directories outside the tree that it sees and agents can
// write (sandbox.allow_write's, the caches it reads dependencies from:
// every entry's name, type, size and times, within fingerprintBound), and
// the toolchains' programs on its PATH. Two runs with the same setting
// differ only by their trees.
func (j *Judge) setting(root Root) string {
	root = j.root(root)
	h := sha256.New()
	put := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	jail := j.opts.Jail
	put("env")
	put(slices.Sorted(slices.Values(jail.Env))...)
	j.mu.Lock()
	setup := ""
	if j.list != nil {
		setup = j.list.Setup
	}
	put("limits", jail.Limits.String(), j.opts.TestTimeout.String(), "setup", setup, "frozen", j.frozen.At.String())
	j.mu.Unlock()
	copies, _ := json.Marshal(j.opts.Copies)
	put("copies", string(copies))
	budget := fingerprintBound
	for _, d := range toolchain.DependencyDirs {
		for _, from := range []string{root.Dir, j.opts.Project.Dir} {
			dir := filepath.Join(from, d)
			if fi, err := os.Stat(dir); from != "" && err == nil && fi.IsDir() {
				put("deps", dir)
				fingerprint(h, dir, &budget)
				break
			}
		}
	}
	for _, dir := range slices.Concat(jail.Writable, jail.ReadOnly) {
		put("outside", dir)
		fingerprint(h, dir, &budget)
	}
	if budget < 0 {
		// Too much to stat at every run: a setting no other run has, so
		// that every sweep runs every test.
		j.mu.Lock()
		said := j.tooBig
		j.tooBig = true
		j.mu.Unlock()
		if !said {
			j.log.Warn("the directories the daemon's test runs see outside the tree hold too many files to fingerprint, so every regression sweep runs every frozen test",
				zap.Strings("dirs", slices.Concat(jail.Writable, jail.ReadOnly)), zap.Int("bound", fingerprintBound))
		}
		nonce := make([]byte, 16)
		rand.Read(nonce)
		put("unbounded", hex.EncodeToString(nonce))
	}
	pathVar := ""
	for _, e := range jail.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathVar = v
		}
	}
	for _, t := range toolchain.All {
		for _, prog := range t.Programs {
			at, ok := paths.LookPath(prog, pathVar)
			if !ok {
				continue
			}
			if real, err := filepath.EvalSymlinks(at); err == nil {
				at = real
			}
			put("program", prog, at)
			if fi, err := os.Stat(at); err == nil {
				put(stamp(fi))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprintBound is how many entries a setting stats at most, over
// every directory it fingerprints: about a tenth of a second, warm.
var fingerprintBound = 200_000

// fingerprint writes to h every entry below dir: its path, type, size and
// times (stamp), in the walk's order (lexical). A file changed in place,
// added, removed or replaced changes it; reading the files' contents
// would cost a test run far more (a node_modules is tens of thousands of
// files), and a change that keeps a file's size and its times (which only
// the clock's owner can set back) is no change a build or an install
// makes. Each entry takes one from budget; the walk stops when it goes
// below 0.
func fingerprint(h hash.Hash, dir string, budget *int) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if *budget--; *budget < 0 {
			return filepath.SkipAll
		}
		if err != nil {
			fmt.Fprintf(h, "%s\x00unreadable %v\x00", p, err)
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			fmt.Fprintf(h, "%s\x00gone\x00", p)
			return nil
		}
		fmt.Fprintf(h, "%s\x00%s\x00", p, stamp(fi))
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h, "walk %v\x00", err)
	}
}

// stamp is a file's type, size and modification and change times in a
// line (the change time where the system gives it: statChange).
func stamp(fi fs.FileInfo) string {
	return fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " +
		strconv.FormatInt(fi.ModTime().UnixNano(), 10) + " " + statChange(fi)
}
