package lanecopy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func untracked(string) (bool, error) { return false, nil }

// TestCaptureRefusesWhatIsNotThePersonsOwnFile: every name that is
// missing, a link (at the file, or at any directory on the way), a
// directory, a special file, or tracked by git is refused, each named with
// its fix, all at once; the regular untracked files beside them are not
// the error's.
func TestCaptureRefusesWhatIsNotThePersonsOwnFile(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".env", "TOKEN=local\n")
	write("config/local.yaml", "port: 1\n")
	write("tracked.env", "x")
	os.WriteFile(filepath.Join(elsewhere, "secret"), []byte("not the project's"), 0o600)
	os.Symlink(filepath.Join(elsewhere, "secret"), filepath.Join(dir, "linked.env"))
	os.Symlink(elsewhere, filepath.Join(dir, "linkdir"))
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink(elsewhere, filepath.Join(dir, "a", "b", "c"))
	os.MkdirAll(filepath.Join(dir, "adir"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600)
	tracked := func(n string) (bool, error) { return n == "tracked.env", nil }

	f, err := Capture(dir, []string{".env", "config/local.yaml"}, tracked)
	if err != nil || strings.Join(f.Names(), " ") != ".env config/local.yaml" {
		t.Fatalf("the person's own files: %v, %v", f.Names(), err)
	}
	for name, want := range map[string]string{
		"missing.env":    "does not exist",
		"linked.env":     "symbolic link",
		"linkdir/secret": "symbolic link",
		"a/b/c/secret":   "symbolic link",
		"adir":           "is a directory",
		"pipe":           "not a regular file",
		"tracked.env":    "git rm --cached tracked.env",
	} {
		_, err := Capture(dir, []string{".env", name}, tracked)
		if err == nil || !strings.Contains(err.Error(), "lanes.copy: "+name) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "lanes.copy: .env ") {
			t.Errorf("%s: %v, want an error naming it with %q", name, err, want)
		}
	}
	_, err = Capture(dir, []string{"missing.env", "adir", ".env", "linked.env"}, tracked)
	if err == nil || strings.Count(err.Error(), "lanes.copy:") != 3 {
		t.Errorf("every problem at once: %v", err)
	}
}

// TestPlaceWritesTheCaptureNotWhatALinkPointsAt: a lane whose agent put a
// link, or a file of its own, where a copy goes gets the captured bytes in
// a file of its own there; the link's target is untouched, and a change
// of the person's file after the capture is not what lanes get.
func TestPlaceWritesTheCaptureNotWhatALinkPointsAt(t *testing.T) {
	person, lane, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(person, "config"), 0o755)
	os.WriteFile(filepath.Join(person, ".env"), []byte("TOKEN=person\n"), 0o640)
	os.WriteFile(filepath.Join(person, "config", "local.yaml"), []byte("port: 1\n"), 0o600)
	f, err := Capture(person, []string{".env", "config/local.yaml"}, untracked)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(person, ".env"), []byte("TOKEN=agent\n"), 0o640)
	target := filepath.Join(elsewhere, "target")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Symlink(target, filepath.Join(lane, ".env"))
	if err := f.Place(lane); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the write followed the link: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(lane, ".env"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf(".env in the lane: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(lane, ".env")); string(b) != "TOKEN=person\n" {
		t.Errorf(".env in the lane holds %q, want the capture", b)
	}
	if b, _ := os.ReadFile(filepath.Join(lane, "config", "local.yaml")); string(b) != "port: 1\n" {
		t.Errorf("config/local.yaml in the lane holds %q", b)
	}
	// A link on the way is an error, and nothing is written through it.
	lane2 := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(lane2, "config"))
	if err := f.Place(lane2); err == nil {
		t.Errorf("placed through a linked directory")
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "local.yaml")); err == nil {
		t.Errorf("a copy was written through the link")
	}
}

// TestValidName: lanes.copy takes the person's own files, named from
// the project's top, and never a path that leaves it or that the daemon
// and git hold (whatever their place in the path).
func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{".env", true},
		{"config/local.yaml", true},
		{".envrc", true},
		{".claude-notes", true}, // a near miss of .claude
		{".github/x", true},     // a near miss of .git
		{"sub/.git", true},      // not the project's own .git
		{"", false},
		{".", false},
		{"..", false},
		{"../secrets/.env", false},
		{"/etc/passwd", false},
		{"./.env", false},
		{"a//b", false},
		{"a/../b", false},
		{".git", false},
		{".git/config", false},
		{".claude", false},
		{".claude/ctxgraphd.yaml", false},
	} {
		if got := ValidName(tc.path); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.path, got, tc.ok)
		}
	}
}

// TestCopiesCrossToAWorkerAsTheyWereCaptured: the JSON a worker is sent
// gives back the same names, contents and permissions, and a name that is
// not one lanes.copy takes, a name twice, or a mode beyond permissions is
// refused rather than placed.
func TestCopiesCrossToAWorkerAsTheyWereCaptured(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "config"), 0o755)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("TOKEN=local\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "config", "local.yaml"), []byte("port: 1\n"), 0o640)
	f, err := Capture(dir, []string{"config/local.yaml", ".env"}, untracked)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Files
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	clone := t.TempDir()
	if err := back.Place(clone); err != nil {
		t.Fatal(err)
	}
	if strings.Join(back.Names(), " ") != "config/local.yaml .env" {
		t.Errorf("names after crossing: %q", back.Names())
	}
	for name, want := range map[string]string{".env": "TOKEN=local\n", "config/local.yaml": "port: 1\n"} {
		got, err := os.ReadFile(filepath.Join(clone, name))
		fi, _ := os.Stat(filepath.Join(clone, name))
		orig, _ := os.Stat(filepath.Join(dir, name))
		if err != nil || string(got) != want || fi.Mode().Perm() != orig.Mode().Perm() {
			t.Errorf("%s placed as %q (%v, %v), want %q with mode %v", name, got, err, fi.Mode(), want, orig.Mode())
		}
	}
	for _, bad := range []string{
		`[{"name": "../escape", "data": "eA==", "mode": 384}]`,
		`[{"name": "/etc/passwd", "data": "eA==", "mode": 384}]`,
		`[{"name": ".git/config", "data": "eA==", "mode": 384}]`,
		`[{"name": ".claude/ctxgraphd.yaml", "data": "eA==", "mode": 384}]`,
		`[{"name": ".env", "data": "eA==", "mode": 384}, {"name": ".env", "data": "eQ==", "mode": 384}]`,
		`[{"name": ".env", "data": "eA==", "mode": 2147484032}]`,
	} {
		var f Files
		if err := json.Unmarshal([]byte(bad), &f); err == nil || !strings.Contains(err.Error(), "lanes.copy") {
			t.Errorf("%s: %v, want it refused", bad, err)
		}
	}
}
