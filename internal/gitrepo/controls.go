package gitrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Controls are the files of the repository's own directory that make git
// run a program for whoever next runs git there: each file of its hooks
// directory, and its configuration files (which can name another hooks
// directory, a filter, a pager, an editor, an alias). No snapshot holds
// them (they are no part of the work tree), so a run is held to them by
// Controls taken at its start and again at its end: agents' programs
// cannot write the repository's directory (the sandbox denies it), and
// what changes it while a run is in flight came by a route the gates did
// not see, or from a person. The keys are "hooks/NAME", "config" and
// "config.worktree"; the values their content's SHA-256 (a link's, its
// target's text).
type Controls map[string]string

// HeldSuffix ends the name a hook is given when it is held (HoldHook).
const HeldSuffix = ".ctxgraphd-held"

// Controls reads the repository's controls as they are now. Git's sample
// hooks, which never run, and hooks already held are left out.
func (r *Repo) Controls() (Controls, error) {
	c := Controls{}
	for i, p := range r.localConfigs {
		sum, err := fileSum(p)
		switch {
		case errors.Is(err, fs.ErrNotExist), sum == emptySum:
			// An empty configuration is none: Claude Code's sandbox makes
			// one where a path it denies does not exist yet.
		case err != nil:
			return nil, fmt.Errorf("gitrepo: reading %s: %w", p, err)
		default:
			c[[]string{"config", "config.worktree"}[i]] = sum
		}
	}
	ents, err := os.ReadDir(r.hooks)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gitrepo: reading the hooks directory %s: %w", r.hooks, err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, ".sample") || strings.HasSuffix(name, HeldSuffix) {
			continue
		}
		sum, err := fileSum(filepath.Join(r.hooks, name))
		if err != nil {
			return nil, fmt.Errorf("gitrepo: reading the hook %s: %w", name, err)
		}
		if sum != emptySum {
			c["hooks/"+name] = sum
		}
	}
	return c, nil
}

// emptySum is fileSum of an empty file.
var emptySum = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// fileSum is the SHA-256 of the file at p, or of a link's target text.
func fileSum(p string) (string, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	var data []byte
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		data = []byte("link:" + t)
	} else if data, err = os.ReadFile(p); err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Changed lists, sorted, the controls that now holds differently from c:
// changed, new, or gone.
func (c Controls) Changed(now Controls) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if c[k] != now[k] {
			out = append(out, k)
		}
	}
	for k := range c {
		if _, ok := now[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// HoldHook keeps git from running the hook name ("hooks/NAME", as
// Controls names it): it is renamed NAME+HeldSuffix and made not
// executable, so that a person can look at it and put it back. It returns
// the held file's path; a name that is not a hook, or no longer exists, is
// an error.
func (r *Repo) HoldHook(name string) (string, error) {
	base, ok := strings.CutPrefix(name, "hooks/")
	if !ok || base == "" || strings.ContainsAny(base, `/\`) || base == "." || base == ".." {
		return "", fmt.Errorf("gitrepo: %q is not a hook", name)
	}
	from := filepath.Join(r.hooks, base)
	to := from + HeldSuffix
	if err := os.Rename(from, to); err != nil {
		return "", fmt.Errorf("gitrepo: holding the hook %s: %w", base, err)
	}
	if fi, err := os.Lstat(to); err == nil && fi.Mode().IsRegular() {
		if err := os.Chmod(to, 0o600); err != nil {
			return to, fmt.Errorf("gitrepo: holding the hook %s: %w", base, err)
		}
	}
	return to, nil
}
