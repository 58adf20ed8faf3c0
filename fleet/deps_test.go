package fleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
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
			err := unpackDeps(lane, bytes.NewReader(archive(t, tt.entries...)), tt.names, 1<<20)
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
	names, err := packDeps(&buf, 1<<20, from)
	if err != nil || strings.Join(names, " ") != "node_modules .venv" {
		t.Fatalf("packDeps: %v %v", names, err)
	}
	if err := unpackDeps(to, &buf, names, 1<<20); err != nil {
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
	if _, err := packDeps(&bytes.Buffer{}, 1, from); err == nil {
		t.Error("packDeps past its bound")
	}
}

// TestAWorkersProgressFilesStayInTheirPlace: of the files of
// .claude/progress an outcome carries, only the feature list and evidence
// are written, and nothing outside the directory or through a link.
func TestAWorkersProgressFilesStayInTheirPlace(t *testing.T) {
	tests := []struct {
		rel   string
		lands bool // mayReturn lets it through and writeProgress writes it
	}{
		{"feature-list.json", true},
		{"evidence/F-001/test.log", true},
		{"goal.md", false},
		{"session-state.json", false},
		{"feature-list.json.bak", false},
		{"evidence", false},
		{"evidence/../../../src/x.go", false},
		{"evidence/F-001/../../goal.md", false},
		{"/etc/passwd", false},
		{"evidence\\..\\goal.md", false},
		{"evidence/F-002/through-link/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			lane := t.TempDir()
			progress := filepath.Join(lane, ".claude/progress")
			os.MkdirAll(filepath.Join(progress, "evidence"), 0o755)
			os.MkdirAll(filepath.Join(lane, "src"), 0o755)
			os.Symlink(filepath.Join(lane, "src"), filepath.Join(progress, "evidence/F-002"))
			lands := mayReturn(tt.rel) && writeProgress(lane, map[string][]byte{tt.rel: []byte("x")}) == nil
			if lands != tt.lands {
				t.Errorf("%q landed: %v, want %v", tt.rel, lands, tt.lands)
			}
			if entries, _ := os.ReadDir(filepath.Join(lane, "src")); len(entries) > 0 {
				t.Errorf("%q wrote into src: %v", tt.rel, entries)
			}
		})
	}
}
