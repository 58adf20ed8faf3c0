// Package lanecopy carries what a person keeps untracked so that their
// project runs (.env, local settings: lanes.copy) into the trees the
// daemon works in besides theirs: every lane's clone, and every checkout a
// test of the daemon's runs on.
//
// The files are read once, at the daemon's start, from the person's tree,
// and the daemon places its own copy wherever they go: an agent that
// changes one, in the person's tree or a lane, changes nothing a later
// lane or test run sees. They are regular files reached through no link,
// untracked, so that no commit, change set, trace or report holds them
// (the trees' snapshots exclude them), and every write goes through
// treefile, which follows no link an agent planted.
package lanecopy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
)

// ValidName accepts a name of lanes.copy: relative, clean, inside the
// project, and not the daemon's or git's (.claude, .git): what is copied
// is the person's, never what the gates hold. Whether it exists, is a
// file of its own and untracked is the project's to say (Capture), at
// start.
func ValidName(s string) bool {
	if s == "" || filepath.IsAbs(s) || path.Clean(s) != s || s == "." || s == ".." || strings.HasPrefix(s, "../") {
		return false
	}
	top, _, _ := strings.Cut(s, "/")
	return top != ".git" && top != ".claude"
}

// Files are the captured copies, by name (slash-separated, relative to the
// project's top), in the order lanes.copy gives them.
type Files struct {
	names []string
	data  map[string][]byte
	modes map[string]fs.FileMode
}

// Names are the files' names.
func (f Files) Names() []string { return f.names }

// Capture reads names from the person's tree at dir. Each must be a
// regular file there, reached through no link, that git does not track
// (tracked says whether it does); the error names every file that is not,
// and what to do.
func Capture(dir string, names []string, tracked func(name string) (bool, error)) (Files, error) {
	f := Files{data: map[string][]byte{}, modes: map[string]fs.FileMode{}}
	var problems []string
	for _, n := range names {
		fi, err := treefile.Lstat(dir, n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Sprintf("lanes.copy: %s does not exist in %s: create it, or remove it from lanes.copy", n, dir))
			continue
		case treefile.IsNotFile(err):
			problems = append(problems, fmt.Sprintf("lanes.copy: %s is reached through a symbolic link or is not a regular file (%v): name the file itself", n, err))
			continue
		case err != nil:
			problems = append(problems, fmt.Sprintf("lanes.copy: %s: %v", n, err))
			continue
		case fi.IsDir():
			problems = append(problems, fmt.Sprintf("lanes.copy: %s is a directory: name the files in it that lanes need, one by one", n))
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			problems = append(problems, fmt.Sprintf("lanes.copy: %s is a symbolic link: name the file itself (a link would reach whatever an agent points it at)", n))
			continue
		case !fi.Mode().IsRegular():
			problems = append(problems, fmt.Sprintf("lanes.copy: %s is not a regular file (%s): name a file", n, fi.Mode().Type()))
			continue
		}
		if t, err := tracked(n); err != nil {
			problems = append(problems, fmt.Sprintf("lanes.copy: could not tell whether git tracks %s: %v", n, err))
			continue
		} else if t {
			problems = append(problems, fmt.Sprintf("lanes.copy: %s is tracked by git, so every lane has it already and its commits would carry it: remove it from lanes.copy, or untrack it (git rm --cached %s)", n, n))
			continue
		}
		data, err := treefile.ReadFile(dir, n)
		if err != nil {
			problems = append(problems, fmt.Sprintf("lanes.copy: %s: %v", n, err))
			continue
		}
		f.names = append(f.names, n)
		f.data[n], f.modes[n] = data, fi.Mode().Perm()
	}
	if len(problems) > 0 {
		return Files{}, errors.New(strings.Join(problems, "\n"))
	}
	return f, nil
}

// Place writes every file into the tree at top, replacing what is there
// (a link included, never followed).
func (f Files) Place(top string) error {
	for _, n := range f.names {
		if err := treefile.WriteFile(top, filepath.ToSlash(n), f.data[n], f.modes[n]); err != nil {
			return fmt.Errorf("lanes.copy: %w", err)
		}
	}
	return nil
}

// file is one copy as it crosses to a worker (Files' JSON).
type file struct {
	Name string      `json:"name"`
	Data []byte      `json:"data"`
	Mode fs.FileMode `json:"mode"`
}

// MarshalJSON writes the copies as a list of names, contents and
// permissions, for a worker whose clones they go into.
func (f Files) MarshalJSON() ([]byte, error) {
	out := make([]file, 0, len(f.names))
	for _, n := range f.names {
		out = append(out, file{Name: n, Data: f.data[n], Mode: f.modes[n]})
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote; a name that is not one
// lanes.copy takes (ValidName), named twice, or a mode beyond permissions
// is refused.
func (f *Files) UnmarshalJSON(b []byte) error {
	var in []file
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	out := Files{data: map[string][]byte{}, modes: map[string]fs.FileMode{}}
	for _, c := range in {
		switch _, dup := out.data[c.Name]; {
		case !ValidName(c.Name):
			return fmt.Errorf("lanes.copy: %q is not a name in the project", c.Name)
		case dup:
			return fmt.Errorf("lanes.copy: %q is named twice", c.Name)
		case c.Mode&^fs.ModePerm != 0:
			return fmt.Errorf("lanes.copy: %q has mode %s; a copy is a regular file", c.Name, c.Mode)
		}
		out.names = append(out.names, c.Name)
		out.data[c.Name], out.modes[c.Name] = c.Data, c.Mode
	}
	*f = out
	return nil
}
