package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestForProjectIsStableAndResolvesSymlinks(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	a, err := ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ForProject(link)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("symlink is another project:\n%+v\n%+v", a, b)
	}
	other, _ := ForProject(t.TempDir())
	if other.ID == a.ID {
		t.Fatalf("two directories share id %s", a.ID)
	}
	if !strings.HasPrefix(a.StateDir, os.Getenv("XDG_STATE_HOME")) {
		t.Fatalf("state dir %s not under XDG_STATE_HOME", a.StateDir)
	}
}

func TestSocketPathFitsSunPath(t *testing.T) {
	long := "/" + strings.Repeat("deep/", 30)
	t.Setenv("XDG_RUNTIME_DIR", long)
	p := socketPath(projectID("/some/project-with-a-rather-long-name-indeed"), os.Getenv)
	if len(p) > maxSocketPath {
		t.Fatalf("socket path is %d bytes, limit %d: %s", len(p), maxSocketPath, p)
	}
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	p = socketPath(projectID("/home/dev/app"), os.Getenv)
	if !strings.HasPrefix(p, "/run/user/1000/ctxgraphd/app-") {
		t.Fatalf("socket path %s ignores XDG_RUNTIME_DIR", p)
	}
}

// ForProjectEnv derives the paths from the environment it is given, as a
// daemon started with that environment would, and never from the
// process's own; ForProject is it under the process's environment.
func TestForProjectEnvReadsTheGivenEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", "/process/state")
	t.Setenv("XDG_RUNTIME_DIR", "/process/run")
	t.Setenv("HOME", "/process/home")
	t.Setenv("TMPDIR", "/process/tmp")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := projectID(real)
	home := ".local/state"
	if runtime.GOOS == "darwin" {
		home = "Library/Application Support"
	}
	long := "/" + strings.Repeat("deep/", 30)
	tests := []struct {
		name          string
		env           map[string]string
		state, socket string // "" for an error
	}{
		{"XDG directories", map[string]string{"XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/r", "HOME": "/h", "TMPDIR": "/t"},
			"/s/ctxgraphd/" + id, "/r/ctxgraphd/" + id + ".sock"},
		{"relative XDG directories are ignored", map[string]string{"XDG_STATE_HOME": "s", "XDG_RUNTIME_DIR": "r", "HOME": "/h", "TMPDIR": "/t"},
			"/h/" + home + "/ctxgraphd/" + id, fmt.Sprintf("/t/ctxgraphd-%d/%s.sock", os.Getuid(), id)},
		{"no TMPDIR", map[string]string{"HOME": "/h"},
			"/h/" + home + "/ctxgraphd/" + id, fmt.Sprintf("/tmp/ctxgraphd-%d/%s.sock", os.Getuid(), id)},
		{"a runtime directory too deep for the socket's name", map[string]string{"XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": long, "TMPDIR": "/t"},
			"/s/ctxgraphd/" + id, "/t/" + id[strings.LastIndexByte(id, '-')+1:] + ".sock"},
		{"no HOME and no XDG_STATE_HOME", map[string]string{"XDG_RUNTIME_DIR": "/r"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ForProjectEnv(dir, func(k string) string { return tt.env[k] })
			if tt.state == "" {
				if err == nil || !strings.Contains(err.Error(), "set XDG_STATE_HOME or HOME") {
					t.Fatalf("got %+v, %v; want an error that says what to set", p, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Project{Dir: real, ID: id, StateDir: filepath.FromSlash(tt.state), Socket: filepath.FromSlash(tt.socket)}
			if p != want {
				t.Errorf("got  %+v\nwant %+v", p, want)
			}
		})
	}
	got, err := ForProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ForProjectEnv(dir, os.Getenv); got != want || got.StateDir != "/process/state/ctxgraphd/"+id {
		t.Errorf("ForProject = %+v; want the process's environment's %+v", got, want)
	}
}

func TestFindProjectWalksUp(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ProgressDir), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := FindProject(sub)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(root)
	if p.Dir != want {
		t.Fatalf("found %s, want %s", p.Dir, want)
	}
	if _, err := FindProject(t.TempDir()); err != ErrNoProject {
		t.Fatalf("outside a project: got %v, want ErrNoProject", err)
	}
}

// LookPath finds an executable file as a shell would, skipping what names
// the working directory of the moment and what is not an executable file.
func TestLookPath(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "plain"), 0o644) // not executable
	write(filepath.Join(b, "plain"), 0o755)
	write(filepath.Join(b, "tool"), 0o755)
	if err := os.Mkdir(filepath.Join(a, "tool"), 0o755); err != nil { // a directory, executable bit and all
		t.Fatal(err)
	}
	tests := []struct {
		file, path string
		want       string
		ok         bool
	}{
		{"tool", a + ":" + b, filepath.Join(b, "tool"), true},
		{"plain", a + ":" + b, filepath.Join(b, "plain"), true},
		{"tool", "relative:" + a, "", false},
		{"tool", "::" + b, filepath.Join(b, "tool"), true},
		{"tool", "", "", false},
		{"missing", b, "", false},
		{filepath.Join(b, "tool"), "", filepath.Join(b, "tool"), true},
		{filepath.Join(a, "plain"), b, filepath.Join(a, "plain"), false},
	}
	for _, tt := range tests {
		got, ok := LookPath(tt.file, tt.path)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("LookPath(%q, %q) = %q, %v; want %q, %v", tt.file, tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

// A project id's readable part replaces each run of characters other than
// ASCII letters, digits, '.', '_' and '-' with one '-', as the regular
// expression it was first written with did; ids already written name
// state directories and sockets, so none may change.
func TestSafeNameIsTheRegexpItReplaced(t *testing.T) {
	was := regexp.MustCompile(`[^a-zA-Z0-9._-]+`)
	for _, name := range []string{
		"", "app", "my app", "my  app", "a/b\\c", "proj-2026.v1_x", " lead and trail ",
		"café", "日本語のプロジェクト", "naïve  résumé", "\xff\xfe broken", "tab\there", "ok\x00nul", "--..__",
	} {
		if got, want := safeName(name), was.ReplaceAllString(name, "-"); got != want {
			t.Errorf("safeName(%q) = %q, want %q", name, got, want)
		}
	}
}

// A path is absent when it does not exist, and when a file stands where a
// directory on the way to it would be (the empty file the sandbox leaves
// where it denied a path that was not there); any other failure to read
// it is a failure.
func TestAbsent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, missing := os.ReadFile(filepath.Join(dir, "missing", "guards.yaml"))
	_, underAFile := os.ReadFile(filepath.Join(dir, "file", "guards.yaml"))
	_, aDirectory := os.ReadFile(dir)
	tests := []struct {
		name   string
		err    error
		absent bool
	}{
		{"no error", nil, false},
		{"a missing file", missing, true},
		{"a file where a directory on the way would be", underAFile, true},
		{"ENOTDIR, wrapped", fmt.Errorf("reading: %w", syscall.ENOTDIR), true},
		{"fs.ErrNotExist, wrapped", fmt.Errorf("reading: %w", fs.ErrNotExist), true},
		{"a directory read as a file", aDirectory, false},
		{"no permission", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false},
		{"another error", errors.New("disk on fire"), false},
	}
	for _, tt := range tests {
		if got := Absent(tt.err); got != tt.absent {
			t.Errorf("%s: Absent(%v) = %v, want %v", tt.name, tt.err, got, tt.absent)
		}
	}
	if !errors.Is(underAFile, syscall.ENOTDIR) {
		t.Fatalf("reading below a file gave %v, not ENOTDIR: the case above tests nothing", underAFile)
	}
}
