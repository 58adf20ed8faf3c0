// Package claudemd keeps ctxgraphd's section of a project's CLAUDE.md: the
// lessons a person promoted, between two markers, each once. Everything
// outside the markers is the person's and stays byte for byte as it was.
package claudemd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
)

// The markers around ctxgraphd's section. HTML comments: Markdown shows
// nothing of them.
const (
	Begin = "<!-- ctxgraphd:lessons:begin -->"
	End   = "<!-- ctxgraphd:lessons:end -->"
)

const heading = "## Lessons learned in this project (kept by ctxgraphd)"

// Lesson is one line of the section; ID keeps it once.
type Lesson struct {
	ID   string
	Text string
}

// Add returns text with lessons in ctxgraphd's section, each lesson whose
// id the section already holds left as it is, and whether it changed. A
// text without the section gets one at its end. A section whose markers
// are not one Begin followed by one End is an error that says where, and
// text is not touched.
func Add(text string, lessons []Lesson) (string, bool, error) {
	begins, ends := strings.Count(text, Begin), strings.Count(text, End)
	var before, section, after string
	switch {
	case begins == 0 && ends == 0:
		before = text
		if before != "" && !strings.HasSuffix(before, "\n") {
			before += "\n"
		}
		if before != "" {
			before += "\n"
		}
		section = heading + "\n\n"
	case begins == 1 && ends == 1 && strings.Index(text, Begin) < strings.Index(text, End):
		i, j := strings.Index(text, Begin), strings.Index(text, End)
		before, section, after = text[:i], strings.TrimPrefix(text[i+len(Begin):j], "\n"), text[j+len(End):]
	default:
		return text, false, fmt.Errorf("ctxgraphd's section is broken: %d %q and %d %q markers; keep exactly one of each, begin first, or remove both", begins, Begin, ends, End)
	}
	changed := false
	for _, l := range lessons {
		tag := "(" + l.ID + ")"
		if strings.Contains(section, tag) {
			continue
		}
		// One line, and never a marker: the section must stay readable.
		// Taken out until none is left: a marker nested in a marker
		// would come back when the inner one went.
		line := strings.Join(strings.Fields(l.Text), " ")
		for strings.Contains(line, Begin) || strings.Contains(line, End) {
			line = strings.NewReplacer(Begin, "", End, "").Replace(line)
		}
		section += "- " + line + " " + tag + "\n"
		changed = true
	}
	if !changed {
		return text, false, nil
	}
	if after == "" {
		after = "\n"
	}
	return before + Begin + "\n" + section + End + after, true, nil
}

// FileName is the file of a project that Claude Code reads as its memory.
const FileName = "CLAUDE.md"

// AddToFile adds lessons to the CLAUDE.md of the project at dir, creating
// it when there is none, and writing it (atomically, keeping its mode) only
// when it changes. The project is a tree that agents write, and the daemon
// writes unconfined: nothing is read or written through a link that leads
// out of the project, or into its .claude or .git. A CLAUDE.md that is a
// person's link to another file of the project (AGENTS.md) is followed
// there, and that file gets the lessons.
func AddToFile(dir string, lessons []Lesson) (bool, error) {
	name, err := target(dir)
	if err != nil {
		return false, err
	}
	data, err := treefile.ReadFile(dir, name)
	mode := os.FileMode(0o644)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return false, err
	default:
		if fi, err := treefile.Lstat(dir, name); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	out, changed, err := Add(string(data), lessons)
	if err != nil {
		return false, fmt.Errorf("%s: %w", FileName, err)
	}
	if !changed {
		return false, nil
	}
	return true, treefile.WriteFile(dir, name, []byte(out), mode)
}

// target is the project file (relative to dir, forward slashes) that
// holds the project's CLAUDE.md: itself, or where a link in its place
// leads, when that is a file of the project outside .claude and .git.
func target(dir string) (string, error) {
	fi, err := os.Lstat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return FileName, nil // a missing file is made; anything else is judged by treefile
	}
	top, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, FileName))
	if err != nil {
		return "", fmt.Errorf("%s is a link to what does not exist (%w): make it a file, or point it at one of the project's", FileName, err)
	}
	rel, err := filepath.Rel(top, real)
	rel = filepath.ToSlash(rel)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) ||
		rel == ".claude" || strings.HasPrefix(rel, ".claude/") || rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return "", fmt.Errorf("%s is a link to %s, which is not a file of the project that lessons may go in: ctxgraphd writes lessons only into the project's own files; make %s a file, or point it at one", FileName, real, FileName)
	}
	return rel, nil
}
