package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadFeatureList(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := ReadFeatureList(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFeatureList of a missing file: %v; want fs.ErrNotExist", err)
	}

	bad := []byte(`{"version": 1, "features": [`)
	if err := os.WriteFile(filepath.Join(dir, FeatureListFile), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	l, data, err := ReadFeatureList(dir)
	var pe *ParseError
	if !errors.As(err, &pe) || l != nil || !bytes.Equal(data, bad) {
		t.Errorf("ReadFeatureList of an invalid file = %v, %q, %v; want nil, the bytes read, a *ParseError", l, data, err)
	}

	good := []byte(v1(`{"id": "F-1", "title": "One"}`))
	if err := os.WriteFile(filepath.Join(dir, FeatureListFile), good, 0o644); err != nil {
		t.Fatal(err)
	}
	l, data, err = ReadFeatureList(dir)
	if err != nil || !bytes.Equal(data, good) || l.Feature("F-1") == nil {
		t.Errorf("ReadFeatureList = %+v, %q, %v; want F-1 and the bytes read", l, data, err)
	}
}

func TestWriteFeatureList(t *testing.T) {
	dir := t.TempDir()
	l := &List{Features: []Feature{{ID: "F-1", Title: "One", Test: "a && b"}}}
	data, err := WriteFeatureList(dir, l)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, l.Marshal()) {
		t.Errorf("WriteFeatureList returned %q; want l.Marshal()", data)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, FeatureListFile))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("file holds %q (%v); want the bytes returned, %q", onDisk, err, data)
	}
	fi, err := os.Stat(filepath.Join(dir, FeatureListFile))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v (%v); want 0644", fi.Mode(), err)
	}
	back, _, err := ReadFeatureList(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Features[0].Status = Pending // written as pending, read back as such
	l.Version = 1
	if !reflect.DeepEqual(back, l) {
		t.Errorf("read back %+v; want %+v", back, l)
	}

	// An invalid list is refused and the file left as it was.
	invalid := &List{Features: []Feature{{ID: "F-1", Title: "One"}, {ID: "F-1", Title: "Again"}}}
	_, err = WriteFeatureList(dir, invalid)
	want := `not writing an invalid feature list: feature-list.json: features[1].id "F-1" is used twice (first at features[0]); ids must be unique`
	if err == nil || err.Error() != want {
		t.Errorf("WriteFeatureList of an invalid list: %v; want %s", err, want)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Errorf("error %T does not wrap a *ParseError", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, FeatureListFile)); !bytes.Equal(after, data) {
		t.Errorf("a refused write changed the file to %q", after)
	}
	assertOnly(t, dir, FeatureListFile)
}

// A reader of feature-list.json sees a whole list, the old or the new,
// however the writes and reads interleave.
func TestWriteFeatureListAtomic(t *testing.T) {
	dir := t.TempDir()
	lists := []*List{
		{Features: []Feature{{ID: "F-1", Title: "One"}}},
		{Features: []Feature{{ID: "F-1", Title: "One", Status: Completed, Description: strings.Repeat("long ", 20000)}}},
	}
	var want [][]byte
	for _, l := range lists {
		want = append(want, l.Marshal())
	}
	if _, err := WriteFeatureList(dir, lists[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range 50 {
			if _, err := WriteFeatureList(dir, lists[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	})
	// The reader stops at the first bad read but always waits for the
	// writer, which must not outlive the test.
	for reads := 0; ; reads++ {
		select {
		case <-done:
			wg.Wait()
			assertOnly(t, dir, FeatureListFile)
			return
		default:
		}
		_, data, err := ReadFeatureList(dir)
		if err == nil && !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, data) }) {
			err = errors.New("the bytes are neither list")
		}
		if err != nil {
			t.Errorf("read %d (%d bytes): %v", reads, len(data), err)
			wg.Wait()
			return
		}
	}
}

func TestWriteFeatureListNoDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if _, err := WriteFeatureList(dir, &List{}); err == nil {
		t.Error("WriteFeatureList into a missing directory succeeded")
	}
}

func TestWriteSessionState(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := SessionState{
		Project:          "/p",
		State:            "code",
		UpdatedAt:        started.Add(time.Minute),
		Features:         Counts{Total: 6, Pending: 1, InProgress: 1, Completed: 1, Tested: 2, Blocked: 1},
		Current:          &CurrentRun{RunID: "r1", Role: "coding-agent", FeatureID: "F-1", Attempt: 2, SessionID: "s1", StartedAt: started},
		BlockedInSession: 1,
		Message:          "m",
		FeatureStates:    map[string]FeatureState{"F-1": {Attempts: 2, Retries: 1, Status: "in_progress", LastFailure: "test failed"}},
	}
	if err := WriteSessionState(dir, s); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, SessionStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte("\n  \"version\": 1,\n")) {
		t.Errorf("session-state.json is not indented JSON ending in a newline:\n%s", data)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version":    1.0,
		"_note":      "written by ctxgraphd as a mirror of its state; edits are ignored and overwritten",
		"project":    "/p",
		"state":      "code",
		"updated_at": "2026-01-02T03:05:05Z",
		"features": map[string]any{
			"total": 6.0, "pending": 1.0, "in_progress": 1.0, "completed": 1.0, "tested": 2.0, "blocked": 1.0,
		},
		"current": map[string]any{
			"run_id": "r1", "role": "coding-agent", "feature_id": "F-1", "attempt": 2.0, "session_id": "s1", "started_at": "2026-01-02T03:04:05Z",
		},
		"blocked_in_session": 1.0,
		"message":            "m",
		"feature_states": map[string]any{
			"F-1": map[string]any{"attempts": 2.0, "retries": 1.0, "status": "in_progress", "tested": false, "last_failure": "test failed"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("session-state.json:\n got %v\nwant %v", got, want)
	}

	// The optional parts disappear; the counts are always there.
	if err := WriteSessionState(dir, SessionState{Version: 1, Note: "n", State: "idle"}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(dir, SessionStateFile))
	got = nil
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"_note", "blocked_in_session", "features", "project", "state", "updated_at", "version"}; !slices.Equal(keys, want) {
		t.Errorf("keys of a minimal session state: %q, want %q", keys, want)
	}
	if got["_note"] != "n" {
		t.Errorf("_note = %v; want the caller's note kept", got["_note"])
	}
	assertOnly(t, dir, SessionStateFile)
}

func TestGoal(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadGoal(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadGoal of a missing file: %v; want fs.ErrNotExist", err)
	}
	tests := []struct {
		write, file, read string
	}{
		{"A todo app", "A todo app\n", "A todo app"},
		{"# Goal\n\nA todo app.\n", "# Goal\n\nA todo app.\n", "# Goal\n\nA todo app."},
		{"\n  indented\n\n", "\n  indented\n\n", "indented"},
	}
	for _, tt := range tests {
		if err := WriteGoal(dir, tt.write); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, GoalFile)); string(data) != tt.file {
			t.Errorf("WriteGoal(%q) wrote %q; want %q", tt.write, data, tt.file)
		}
		if got, err := ReadGoal(dir); err != nil || got != tt.read {
			t.Errorf("ReadGoal after WriteGoal(%q) = %q, %v; want %q", tt.write, got, err, tt.read)
		}
	}
	if err := WriteGoal(dir, " \n"); err == nil || err.Error() != "goal.md: the goal is empty: write what the project should become" {
		t.Errorf("WriteGoal of a blank goal: %v", err)
	}
	if got, _ := ReadGoal(dir); got != "indented" {
		t.Errorf("a refused WriteGoal changed the goal to %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, GoalFile), []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadGoal(dir); err == nil || !strings.HasSuffix(err.Error(), "goal.md: the goal is empty: write what the project should become") {
		t.Errorf("ReadGoal of a blank file: %v", err)
	}
	assertOnly(t, dir, GoalFile)
}

// assertOnly fails unless dir holds exactly the named file: an atomic write
// leaves no temporary file behind.
func assertOnly(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{name}) {
		t.Errorf("%s holds %q; want only %s", dir, names, name)
	}
}

// The daemon reads and writes the progress files unconfined, in trees that
// agents write: a link in a file's place is never read through, and a
// write replaces it with the file instead of writing where it leads.
func TestProgressFilesFollowNoLink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "home", ".bashrc")
	os.MkdirAll(filepath.Dir(outside), 0o755)
	valid := `{"version":1,"features":[{"id":"F-001","title":"t","description":"d","steps":["s"],"status":"pending","tested":false}]}`
	writes := []struct {
		file  string
		write func(dir string) error
	}{
		{FeatureListFile, func(dir string) error {
			l, err := Parse([]byte(valid))
			if err != nil {
				return err
			}
			_, err = WriteFeatureList(dir, l)
			return err
		}},
		{SessionStateFile, func(dir string) error { return WriteSessionState(dir, SessionState{State: "idle"}) }},
		{GoalFile, func(dir string) error { return WriteGoal(dir, "a goal") }},
	}
	for _, w := range writes {
		t.Run(w.file, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(outside, []byte(valid), 0o644)
			if err := os.Symlink(outside, filepath.Join(dir, w.file)); err != nil {
				t.Fatal(err)
			}
			switch w.file {
			case FeatureListFile:
				if l, _, err := ReadFeatureList(dir); err == nil || l != nil {
					t.Errorf("ReadFeatureList read through a link: %v", err)
				}
			case GoalFile:
				if g, err := ReadGoal(dir); err == nil {
					t.Errorf("ReadGoal read through a link: %q", g)
				}
			}
			if err := w.write(dir); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(outside); string(b) != valid {
				t.Errorf("the write went through the link: %q", b)
			}
			if fi, err := os.Lstat(filepath.Join(dir, w.file)); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s is not a regular file after the write: %v, %v", w.file, fi, err)
			}
		})
	}
}
