// Package claudemd keeps ctxgraphd's section of a project's CLAUDE.md: the
// lessons a person promoted, between two markers, each once. Everything
// outside the markers is the person's and stays byte for byte as it was.
package claudemd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
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

// AddToFile adds lessons to the CLAUDE.md at path, creating it when there is
// none, and writing it (atomically, keeping its mode) only when it changes.
func AddToFile(path string, lessons []Lesson) (bool, error) {
	data, err := os.ReadFile(path)
	mode := os.FileMode(0o644)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return false, err
	default:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	out, changed, err := Add(string(data), lessons)
	if err != nil {
		return false, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if !changed {
		return false, nil
	}
	return true, atomicfile.Write(path, []byte(out), mode)
}
