package toolchain

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// archive is a gzipped tar of entries, as a worker (honest or not) sends.
func archive(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "evil"
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestUnpackDepsRefusesWhatLeavesItsDirectories(t *testing.T) {
	dir := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }
	file := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg} }
	link := func(name, to string) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: to}
	}
	tests := []struct {
		name    string
		names   []string
		entries []tar.Header
	}{
		{"a path up and out", []string{"node_modules"}, []tar.Header{dir("node_modules"), file("node_modules/../src/x.go")}},
		{"an absolute path", []string{"node_modules"}, []tar.Header{file("/etc/x")}},
		{"a file of the project", []string{"node_modules"}, []tar.Header{file("src/x.go")}},
		{"a directory not a dependency one", []string{"src"}, []tar.Header{dir("src"), file("src/x.go")}},
		{"a near miss of a dependency directory", []string{"node_modules"}, []tar.Header{dir("node_modules2"), file("node_modules2/x")}},
		{"through a link into the project", []string{"node_modules"}, []tar.Header{dir("node_modules"), link("node_modules/a", "../src"), file("node_modules/a/evil.go")}},
		{"through a link out of the tree", []string{"node_modules"}, []tar.Header{dir("node_modules"), link("node_modules/a", "/tmp"), file("node_modules/a/x.go")}},
		{"over a link of its own name", []string{"node_modules"}, []tar.Header{dir("node_modules"), link("node_modules/x.js", "../src/x.go"), file("node_modules/x.js")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lane := t.TempDir()
			os.MkdirAll(filepath.Join(lane, "src"), 0o755)
			os.WriteFile(filepath.Join(lane, "src/x.go"), []byte("package x\n"), 0o644)
			err := UnpackDeps(lane, bytes.NewReader(archive(t, tt.entries...)), tt.names, 1<<20)
			if err == nil {
				t.Error("unpacked")
			}
			if got, _ := os.ReadFile(filepath.Join(lane, "src/x.go")); string(got) != "package x\n" {
				t.Errorf("src/x.go is now %q", got)
			}
			if _, err := os.Stat(filepath.Join(lane, "src/evil.go")); err == nil {
				t.Error("src/evil.go was written")
			}
			if _, err := os.Stat(filepath.Join(os.TempDir(), "x.go")); err == nil && tt.name == "through a link out of the tree" {
				t.Error("a file was written outside the lane")
			}
		})
	}
}

func TestPackDepsRoundTrips(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	for p, body := range map[string]string{"node_modules/a/index.js": "a", ".venv/lib/site.py": "s", "src/x.go": "not a dependency"} {
		os.MkdirAll(filepath.Dir(filepath.Join(from, p)), 0o755)
		os.WriteFile(filepath.Join(from, p), []byte(body), 0o644)
	}
	os.Symlink("../a/index.js", filepath.Join(from, "node_modules/a/link.js"))
	os.MkdirAll(filepath.Join(to, "node_modules/old"), 0o755) // replaced whole
	var buf bytes.Buffer
	names, err := PackDeps(&buf, 1<<20, from)
	if err != nil || strings.Join(names, " ") != "node_modules .venv" {
		t.Fatalf("PackDeps: %v %v", names, err)
	}
	if err := UnpackDeps(to, &buf, names, 1<<20); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"node_modules/a/index.js": "a", ".venv/lib/site.py": "s", "node_modules/a/link.js": "a"} {
		if got, err := os.ReadFile(filepath.Join(to, p)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"node_modules/old", "src/x.go"} {
		if _, err := os.Lstat(filepath.Join(to, p)); err == nil {
			t.Errorf("%s is there", p)
		}
	}
	// A bound smaller than the files refuses.
	if _, err := PackDeps(&bytes.Buffer{}, 1, from); err == nil {
		t.Error("PackDeps past its bound")
	}
}

// TestLandDepsMovesTheLanesIntoTheProject: a lane's dependency
// directories (real directories, never a link, never a near-miss name)
// replace the project's whole, on one file system (renamed) and across
// two (copied); a kind the lane has none of is left as the project has it;
// a link the project had in its place is replaced, its target untouched.
func TestLandDepsMovesTheLanesIntoTheProject(t *testing.T) {
	write := func(t *testing.T, dir string, files map[string]string) {
		t.Helper()
		for p, body := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name         string
		lane, person map[string]string
		setup        func(t *testing.T, lane, person, outside string)
		landed       string
		has, hasNot  []string // in the project, after
	}{
		{name: "the lane's replaces the project's",
			lane:   map[string]string{"node_modules/is-number/index.js": "lane", "node_modules/.package-lock.json": "{}"},
			person: map[string]string{"node_modules/old/index.js": "person"},
			setup: func(t *testing.T, lane, _, _ string) {
				os.Symlink("is-number/index.js", filepath.Join(lane, "node_modules/.bin-is-number"))
			},
			landed: "node_modules", has: []string{"node_modules/is-number/index.js", "node_modules/.package-lock.json", "node_modules/.bin-is-number"}, hasNot: []string{"node_modules/old"}},
		{name: "into a project that has none",
			lane:   map[string]string{".venv/lib/python3/site-packages/greeting.py": "lane", ".venv/pyvenv.cfg": "home = /usr/bin"},
			landed: ".venv", has: []string{".venv/lib/python3/site-packages/greeting.py", ".venv/pyvenv.cfg"}},
		{name: "every kind the lane has",
			lane:   map[string]string{"node_modules/a/index.js": "lane", ".venv/pyvenv.cfg": "lane", "venv/pyvenv.cfg": "lane"},
			landed: "node_modules .venv venv", has: []string{"node_modules/a/index.js", ".venv/pyvenv.cfg", "venv/pyvenv.cfg"}},
		{name: "a kind the lane has none of stays the project's",
			lane:   map[string]string{"src/x.go": "not a dependency", "node_modules2/a.js": "near miss", ".venv2/x": "near miss"},
			person: map[string]string{"node_modules/old/index.js": "person", ".venv/pyvenv.cfg": "person"},
			landed: "", has: []string{"node_modules/old/index.js", ".venv/pyvenv.cfg"}, hasNot: []string{"src/x.go", "node_modules2", ".venv2"}},
		{name: "a link in the lane's place moves nothing",
			person: map[string]string{"node_modules/old/index.js": "person"},
			setup: func(t *testing.T, lane, _, outside string) {
				write(t, outside, map[string]string{"secret/index.js": "outside"})
				os.Symlink(filepath.Join(outside, "secret"), filepath.Join(lane, "node_modules"))
			},
			landed: "", has: []string{"node_modules/old/index.js"}, hasNot: []string{"node_modules/index.js"}},
		{name: "a link in the project's place is replaced, not written through",
			lane: map[string]string{"node_modules/a/index.js": "lane"},
			setup: func(t *testing.T, _, person, outside string) {
				write(t, outside, map[string]string{"shared/keep.js": "outside"})
				os.Symlink(filepath.Join(outside, "shared"), filepath.Join(person, "node_modules"))
			},
			landed: "node_modules", has: []string{"node_modules/a/index.js"}, hasNot: []string{"node_modules/keep.js"}},
	}
	for _, fsys := range []string{"one file system", "two file systems"} {
		for _, tt := range tests {
			t.Run(fsys+"/"+tt.name, func(t *testing.T) {
				if fsys == "two file systems" {
					rename = func(string, string) error { return &os.LinkError{Op: "rename", Err: syscall.EXDEV} }
					t.Cleanup(func() { rename = os.Rename })
				}
				lane, person, outside := t.TempDir(), t.TempDir(), t.TempDir()
				write(t, lane, tt.lane)
				write(t, person, tt.person)
				if tt.setup != nil {
					tt.setup(t, lane, person, outside)
				}
				before := listing(t, outside)
				landed, err := LandDeps(lane, person)
				if err != nil || strings.Join(landed, " ") != tt.landed {
					t.Fatalf("LandDeps = %q, %v; want %q", landed, err, tt.landed)
				}
				for _, p := range tt.has {
					want := tt.lane[p]
					if want == "" {
						want = tt.person[p]
					}
					got, err := os.ReadFile(filepath.Join(person, p))
					if err != nil || (want != "" && string(got) != want) {
						t.Errorf("the project's %s = %q, %v; want %q", p, got, err, want)
					}
				}
				for _, p := range tt.hasNot {
					if _, err := os.Lstat(filepath.Join(person, p)); err == nil {
						t.Errorf("the project has %s", p)
					}
				}
				// Nothing outside the two trees changed.
				if got := listing(t, outside); got != before {
					t.Errorf("outside the trees, before:\n%s\nafter:\n%s", before, got)
				}
				if fi, err := os.Lstat(filepath.Join(person, "node_modules")); err == nil && fi.Mode()&fs.ModeSymlink != 0 && tt.landed != "" {
					t.Error("the project's node_modules is still a link")
				}
			})
		}
	}
}

// TestLandDepsPutsTheProjectsBackWhenTheMoveFails: a lane's directory that
// cannot be moved in leaves the project with the one it had.
func TestLandDepsPutsTheProjectsBackWhenTheMoveFails(t *testing.T) {
	lane, person := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(lane, "node_modules/a"), 0o755)
	os.MkdirAll(filepath.Join(person, "node_modules/old"), 0o755)
	rename = func(from, to string) error {
		if strings.HasPrefix(from, lane) && !strings.HasSuffix(from, ".replaced") {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EACCES}
		}
		return os.Rename(from, to)
	}
	t.Cleanup(func() { rename = os.Rename })
	if _, err := LandDeps(lane, person); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("LandDeps = %v, want the move's error", err)
	}
	if _, err := os.Stat(filepath.Join(person, "node_modules/old")); err != nil {
		t.Errorf("the project's node_modules was not put back: %v", err)
	}
}

// listing is every path under dir with its file's content, one a line.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		body, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %s\n", strings.TrimPrefix(p, dir), body)
		return nil
	})
	return b.String()
}

// TestALandedVirtualenvRunsWhereItLands: a virtualenv made in a lane (its
// console scripts start with the lane's path) runs its scripts from the
// project once landed and the lane is gone, on one file system and
// across two; a hard link in its bin to a file elsewhere is not written
// through, and a link named as the relocation's new file is not followed.
func TestALandedVirtualenvRunsWhereItLands(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	for _, fsys := range []string{"one file system", "two file systems"} {
		t.Run(fsys, func(t *testing.T) {
			if fsys == "two file systems" {
				rename = func(string, string) error { return &os.LinkError{Op: "rename", Err: syscall.EXDEV} }
				t.Cleanup(func() { rename = os.Rename })
			}
			lane, person, outside := t.TempDir(), t.TempDir(), t.TempDir()
			venv := filepath.Join(lane, ".venv")
			if out, err := exec.Command(python, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
				t.Skipf("python3 -m venv: %v\n%s", err, out)
			}
			// A console script as pip writes one, and two an agent left.
			script := "#!" + venv + "/bin/python\nimport sys\nprint(sys.prefix)\n"
			if err := os.WriteFile(filepath.Join(venv, "bin/hello"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			elsewhere := filepath.Join(outside, "keep.txt")
			os.WriteFile(elsewhere, []byte("names "+venv+"\n"), 0o644)
			if err := os.Link(elsewhere, filepath.Join(venv, "bin/linked")); err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(person, "src.txt")
			os.WriteFile(src, []byte("the project's\n"), 0o644)
			os.Symlink("../../src.txt", filepath.Join(venv, "bin/hello.relocating"))

			if _, err := LandDeps(lane, person); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(lane)
			out, err := exec.Command(filepath.Join(person, ".venv/bin/hello")).CombinedOutput()
			if want := filepath.Join(person, ".venv"); err != nil || strings.TrimSpace(string(out)) != want {
				t.Errorf(".venv/bin/hello in the project: %v, %q; want it to run with prefix %s", err, out, want)
			}
			if act, _ := os.ReadFile(filepath.Join(person, ".venv/bin/activate")); !strings.Contains(string(act), filepath.Join(person, ".venv")) || strings.Contains(string(act), lane) {
				t.Errorf("activate still names the lane:\n%s", act)
			}
			if got, _ := os.ReadFile(elsewhere); string(got) != "names "+venv+"\n" {
				t.Errorf("a file hard-linked into the venv was written: %q", got)
			}
			if got, _ := os.ReadFile(src); string(got) != "the project's\n" {
				t.Errorf("a link named as the relocation's file was written through: %q", got)
			}
		})
	}
}
