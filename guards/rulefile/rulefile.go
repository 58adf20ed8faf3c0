// Package rulefile reads a project's reviewed guards from
// .claude/ctxgraphd/guards.yaml, where a team keeps them in git.
//
// It is the daemon's: the hook must not link a YAML parser (it starts on
// every tool call), so the daemon reads this file and leaves the active
// guards as JSON in the record a hook deciding alone reads (gates.Offline).
package rulefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"gopkg.in/yaml.v3"
)

// Path is the file, relative to the project.
const Path = ".claude/ctxgraphd/guards.yaml"

// Source is the Source of every guard read from the file.
const Source = "guards.yaml"

// MaxSize bounds the file: a list of rules, not a data set.
const MaxSize = 1 << 20

// file is the document: a list under guards:, so that the format can grow.
type file struct {
	Guards []guards.Rule `yaml:"guards"`
}

// Load reads the project's guards file. A missing file is no guards
// (paths.Absent: a file where its directory would be too).
func Load(projectDir string) ([]guards.Rule, error) {
	name := filepath.Join(projectDir, filepath.FromSlash(Path))
	data, err := os.ReadFile(name)
	if paths.Absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(name, data)
}

// Parse reads the guards in data (the file name, for messages). Each is a
// team's reviewed rule: its status is warn or enforce, its source the
// file. Every problem names the file, the line, the guard, the field and
// the fix.
func Parse(name string, data []byte) ([]guards.Rule, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: %d bytes is more than the %d a list of guards needs", name, len(data), MaxSize)
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt field would silently widen a rule
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %v; the file is a list of rules under guards: (see docs/gates.md, Guards)", name, err)
	}
	// The lines of the rules, for messages.
	var lines struct {
		Guards []yaml.Node `yaml:"guards"`
	}
	yaml.Unmarshal(data, &lines)
	line := func(i int) int {
		if i < len(lines.Guards) {
			return lines.Guards[i].Line
		}
		return 0
	}
	seen := map[string]int{}
	for i := range f.Guards {
		r := &f.Guards[i]
		where := fmt.Sprintf("%s:%d: guards[%d]", name, line(i), i)
		if r.Status != guards.Warn && r.Status != guards.Enforce {
			return nil, fmt.Errorf("%s: guard %q: status %q: a reviewed guard is warn or enforce (remove the rule to retire it)", where, r.ID, r.Status)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if j, ok := seen[r.ID]; ok {
			return nil, fmt.Errorf("%s: guard %q: id used already at line %d; ids must be unique", where, r.ID, line(j))
		}
		seen[r.ID] = i
		r.Source = Source
	}
	return f.Guards, nil
}
