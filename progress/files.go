package progress

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/treefile"
)

// filePerm is the mode of the files the daemon writes: the project's owner
// edits them, anyone who can read the project may read them.
const filePerm = 0o644

// ReadFeatureList reads and parses progressDir/feature-list.json. The bytes
// read come back even when they do not parse, so that a caller can tell its
// own writes (and unchanged files) from new ones. A missing file gives the
// error that satisfies errors.Is(err, fs.ErrNotExist); an invalid one a
// *ParseError. Agents write the tree the list is in: a link in its place is
// an error (treefile), never followed.
func ReadFeatureList(progressDir string) (*List, []byte, error) {
	data, err := treefile.ReadFile(progressDir, FeatureListFile)
	if err != nil {
		return nil, nil, err
	}
	l, err := Parse(data)
	if err != nil {
		return nil, data, err
	}
	return l, data, nil
}

// WriteFeatureList validates l and replaces progressDir/feature-list.json
// with l.Marshal() atomically: a reader, or the daemon after a crash, sees
// the old list or the new, never half of one. It returns the bytes written,
// which the daemon keeps to recognise its own write when the watcher reports
// it. An invalid list is not written: the file on disk must always parse.
func WriteFeatureList(progressDir string, l *List) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("not writing an invalid feature list: %w", err)
	}
	data := l.Marshal()
	if err := treefile.WriteFile(progressDir, FeatureListFile, data, filePerm); err != nil {
		return nil, err
	}
	return data, nil
}

// sessionStateNote is what session-state.json says about itself, so that a
// person who opens it knows editing it does nothing.
const sessionStateNote = "written by ctxgraphd as a mirror of its state; edits are ignored and overwritten"

// SessionState is session-state.json: a human-readable mirror of the
// daemon's state of record, written by the daemon only and never read back
// as truth.
type SessionState struct {
	Version          int                     `json:"version"`
	Note             string                  `json:"_note"`
	Project          string                  `json:"project"`
	State            string                  `json:"state"`
	UpdatedAt        time.Time               `json:"updated_at"`
	Features         Counts                  `json:"features"`
	Current          *CurrentRun             `json:"current,omitempty"`
	BlockedInSession int                     `json:"blocked_in_session"`
	Message          string                  `json:"message,omitempty"`
	FeatureStates    map[string]FeatureState `json:"feature_states,omitempty"`
	// Lanes are the features worked at once (limits.parallel above 1),
	// each in a clone of its own; Current is then empty.
	Lanes []LaneState `json:"lanes,omitempty"`
}

// LaneState is a lane in SessionState: its feature, where its clone is,
// its branch, and its run in flight, if any.
type LaneState struct {
	FeatureID string      `json:"feature_id"`
	Dir       string      `json:"dir"`
	Branch    string      `json:"branch"`
	Run       *CurrentRun `json:"run,omitempty"`
}

// CurrentRun is the run in flight, in SessionState.
type CurrentRun struct {
	RunID     string    `json:"run_id"`
	Role      string    `json:"role"`
	FeatureID string    `json:"feature_id,omitempty"` // none for the initializer
	Attempt   int       `json:"attempt"`
	SessionID string    `json:"session_id"`
	StartedAt time.Time `json:"started_at"`
}

// FeatureState is the daemon's view of one feature, in SessionState.
type FeatureState struct {
	Attempts    int    `json:"attempts"`
	Retries     int    `json:"retries"`
	Status      string `json:"status"`
	Tested      bool   `json:"tested"`
	LastFailure string `json:"last_failure,omitempty"`
}

// WriteSessionState replaces progressDir/session-state.json atomically with
// s, indented for people to read. A zero Version is written as 1 and an
// empty Note as the standard one.
func WriteSessionState(progressDir string, s SessionState) error {
	if s.Version == 0 {
		s.Version = 1
	}
	if s.Note == "" {
		s.Note = sessionStateNote
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		// Only an out-of-range time (year beyond 9999) fails to encode.
		return fmt.Errorf("write %s: %w", SessionStateFile, err)
	}
	return treefile.WriteFile(progressDir, SessionStateFile, append(data, '\n'), filePerm)
}

// errEmptyGoal is the error for a goal with no text.
var errEmptyGoal = errors.New("the goal is empty: write what the project should become")

// WriteGoal replaces progressDir/goal.md atomically with text, ending it
// with a newline as text files do.
func WriteGoal(progressDir, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%s: %w", GoalFile, errEmptyGoal)
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return treefile.WriteFile(progressDir, GoalFile, []byte(text), filePerm)
}

// ReadGoal returns the text of progressDir/goal.md without its surrounding
// blank space. A missing file gives an error that satisfies errors.Is
// fs.ErrNotExist; a blank one an error too, since the initializer cannot
// work from nothing. A link in its place is an error, never followed.
func ReadGoal(progressDir string) (string, error) {
	data, err := treefile.ReadFile(progressDir, GoalFile)
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		return "", fmt.Errorf("%s: %w", filepath.Join(progressDir, GoalFile), errEmptyGoal)
	}
	return text, nil
}
