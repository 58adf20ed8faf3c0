package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Prepare creates the directories of p.AllowWrite that do not exist yet,
// before a run starts. Claude Code's sandbox binds a directory of allowWrite
// writable only if it exists when the run starts: one that does not stays
// read-only inside, so on a fresh home (no ~/.cache/go-build yet) every `go
// test` of the run fails with "failed to initialize build cache …:
// read-only file system" although the cache is allowed (verified with
// Claude Code 2.1.330). The same holds for any cache a toolchain creates
// lazily (npm's, pip's, uv's, Cargo's registry).
//
// Directories in the project are made 0o755 like the rest of a work tree,
// the others (caches in the home directory) 0o700, parents included. What
// exists is left as it is, and nothing is made at or below a path of
// DenyWrite or DenyRead. It goes on past a directory it cannot make and
// returns every such error joined: a missing cache fails only the tool that
// needs it, not the run.
func (p Policy) Prepare() error {
	var errs []error
	for _, d := range cleanPaths(p.AllowWrite) {
		if !filepath.IsAbs(d) || within(d, p.DenyWrite) || within(d, p.DenyRead) {
			continue
		}
		if _, err := os.Lstat(d); err == nil {
			continue // there, as a directory or not: the sandbox decides
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("checking %s, which the sandbox lets runs write: %w", d, err))
			continue
		}
		mode := os.FileMode(0o700)
		if p.ProjectDir != "" && within(d, []string{p.ProjectDir}) {
			mode = 0o755
		}
		if err := os.MkdirAll(d, mode); err != nil {
			errs = append(errs, fmt.Errorf("creating %s, which the sandbox lets runs write: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// within reports whether path is one of roots or below one, as written.
func within(path string, roots []string) bool {
	for _, r := range roots {
		if r == "" {
			continue
		}
		rel, err := filepath.Rel(filepath.Clean(r), path)
		if err == nil && rel != ".." && !filepath.IsAbs(rel) && !startsDotDot(rel) {
			return true
		}
	}
	return false
}

func startsDotDot(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}
