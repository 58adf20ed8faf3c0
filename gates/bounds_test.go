package gates

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shq quotes s for the shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// How deep and how long a command the guards read as the shell does, and
// how they read its words: the bounds are exact, and what is past them is
// left to the line as written.
func TestSimpleCommandsBounds(t *testing.T) {
	nest := func(wrap string, n int) string {
		cmd := "rm -rf x"
		for range n {
			cmd = wrap + " " + shq(cmd)
		}
		return cmd
	}
	pad := func(cmd string, n int) string { return cmd + " #" + strings.Repeat("p", n-len(cmd)-2) }
	for _, tt := range []struct {
		name string
		cmd  string
		want bool // "rm -rf x" is among its simple commands
	}{
		{"sh -c, maxShellDepth deep", nest("sh -c", maxShellDepth), true},
		{"sh -c, one deeper", nest("sh -c", maxShellDepth+1), false},
		{"eval, maxShellDepth deep", nest("eval", maxShellDepth), true},
		{"eval, one deeper", nest("eval", maxShellDepth+1), false},
		{"a flag before -c", "sh -x -c 'rm -rf x'", true},
		{"a command of 64 KiB", pad("rm -rf x; true", 64<<10), true},
		{"a command of 64 KiB and a byte", pad("rm -rf x; true", 64<<10+1), false},
	} {
		if got := slices.Contains(simpleCommands(tt.cmd, 0, nil), "rm -rf x"); got != tt.want {
			t.Errorf("%s: read %v, want %v", tt.name, got, tt.want)
		}
	}
	// -c with nothing after it is read as it is, and nothing more.
	if got := simpleCommands("sh -c", 0, nil); !slices.Equal(got, []string{"sh -c"}) {
		t.Errorf(`simpleCommands("sh -c") = %q`, got)
	}
	// A backslash that ends the command is kept: there is nothing after it
	// to escape.
	if got := simpleCommands(`echo a\`, 0, nil); !slices.Equal(got, []string{`echo a\`}) {
		t.Errorf(`simpleCommands(echo a\) = %q`, got)
	}
	// A word with an expansion keeps it, as written.
	if got := simpleCommands(`rm -rf "$HOME"`, 0, nil); !slices.Contains(got, "rm -rf $HOME") {
		t.Errorf(`simpleCommands(rm -rf "$HOME") = %q, want the expansion kept`, got)
	}
}

// The word a refusal names for a test: its script's name, else its
// longest word that is no flag.
func TestTestWord(t *testing.T) {
	for test, want := range map[string]string{
		"sh tests/F-001.sh":           "F-001.sh",
		"bash ./tests/e2e/run.sh -v":  "run.sh",
		"go test -count=1 ./pkg/...":  "./pkg/...",
		"pytest -xvs tests/test_a.py": "tests/test_a.py",
		"go test ./ab/ ./cd/":         "./ab/", // the first of the longest
		"":                            "",
	} {
		if got := testWord(test); got != want {
			t.Errorf("testWord(%q) = %q, want %q", test, got, want)
		}
	}
}

// Dangling links are followed as the kernel would, at most maxLinkHops of
// them, and a cycle of links ends.
func TestResolveFollowsBoundedLinks(t *testing.T) {
	dir := t.TempDir()
	s := State{ProjectDir: dir}
	// A chain of maxLinkHops+1 dangling links: l0 → l1 → … → l41 → (none).
	for i := 0; i <= maxLinkHops; i++ {
		if err := os.Symlink("l"+strconv.Itoa(i+1), filepath.Join(dir, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.resolve(filepath.Join(dir, "l0", "f")), filepath.Join(dir, "l"+strconv.Itoa(maxLinkHops), "f"); got != want {
		t.Errorf("resolve through %d links = %s, want %s (the last link not followed)", maxLinkHops+1, got, want)
	}
	if err := os.Symlink("c2", filepath.Join(dir, "c1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("c1", filepath.Join(dir, "c2")); err != nil {
		t.Fatal(err)
	}
	if got := s.resolve(filepath.Join(dir, "c1", "f")); got == "" {
		t.Error("resolve through a cycle of links gave nothing")
	}
}

// Without a size bound (sandbox.max_file_mb 0), no file is too large.
func TestNoSizeBoundNoFinding(t *testing.T) {
	e := newEnv(t)
	e.state.MaxFileSize = 0
	if got := JudgeChanges(Modes{}, Actor{Role: Coder, Feature: "F-001"}, e.state, []Change{{Path: "src/F-001.txt", Kind: "added", Size: 1 << 40}}); len(got) != 0 {
		t.Errorf("findings %+v for a big file with no size bound", got)
	}
}
