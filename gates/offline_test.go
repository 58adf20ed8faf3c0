package gates

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOfflineRecordRoundTrips: what the daemon leaves for a hook that has
// to decide alone is what the hook reads back, private to the user, and
// it becomes the state the gates judge by.
func TestOfflineRecordRoundTrips(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "p") // not there yet
	o := Offline{Frozen: []string{"tests/a.sh", "tests/b.sh"}, ProtectedGlobs: []string{"tests/**"}, Writable: []string{"/tmp/x"},
		Network: Network{Hosts: []string{"proxy.golang.org", "*.example.com"}}}
	if err := SaveOffline(dir, o); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, OfflineFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", OfflineFile, fi.Mode().Perm())
	}
	got, err := LoadOffline(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Fatalf("LoadOffline = %+v, want %+v", got, o)
	}
	var s State
	got.Apply(&s)
	if !reflect.DeepEqual(s.Frozen, map[string]bool{"tests/a.sh": true, "tests/b.sh": true}) ||
		!reflect.DeepEqual(s.ProtectedGlobs, o.ProtectedGlobs) || !reflect.DeepEqual(s.Writable, o.Writable) ||
		!reflect.DeepEqual(s.Network, o.Network) {
		t.Fatalf("Apply: %+v", s)
	}
	// The state holds copies: the record can change without changing it.
	got.ProtectedGlobs[0], got.Writable[0], got.Network.Hosts[0] = "changed", "changed", "changed"
	if s.ProtectedGlobs[0] != "tests/**" || s.Writable[0] != "/tmp/x" || s.Network.Hosts[0] != "proxy.golang.org" {
		t.Errorf("Apply shares the record's slices: %+v", s)
	}
}

// TestLoadOfflineFailures: a daemon that never ran left nothing and froze
// nothing; a record that cannot be read or parsed is an error naming it,
// never an empty record.
func TestLoadOfflineFailures(t *testing.T) {
	if o, err := LoadOffline(filepath.Join(t.TempDir(), "never")); err != nil || !reflect.DeepEqual(o, Offline{}) {
		t.Errorf("no record: %+v, %v", o, err)
	}
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, OfflineFile), []byte(`{"frozen": [`), 0o600)
	if _, err := LoadOffline(corrupt); err == nil || !strings.Contains(err.Error(), filepath.Join(corrupt, OfflineFile)) {
		t.Errorf("a corrupt record: %v", err)
	}
	unreadable := t.TempDir()
	os.Mkdir(filepath.Join(unreadable, OfflineFile), 0o700) // a directory where the file should be
	if _, err := LoadOffline(unreadable); err == nil {
		t.Error("an unreadable record read as empty")
	}
	// Nowhere to save it: a file where the directory should be.
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o600)
	if err := SaveOffline(filepath.Join(blocked, "state"), Offline{}); err == nil {
		t.Error("SaveOffline under a file succeeded")
	}
}
