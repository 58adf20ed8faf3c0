package rulefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/guards"
)

const example = `# reviewed in git
guards:
  - id: no-curl
    status: enforce
    tool: Bash
    match:
      command: '\bcurl\b'
    message: agents do not reach the network from Bash
    suggestion: vendor what you need
  - id: generated
    status: warn
    role: coding-agent
    match:
      path: "src/**/*.gen.go"
    message: generated files are written by go generate
`

func TestParse(t *testing.T) {
	rules, err := Parse("guards.yaml", []byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].ID != "no-curl" || rules[0].Match.Command != `\bcurl\b` || rules[1].Match.Path != "src/**/*.gen.go" || rules[1].Role != gates.Coder {
		t.Fatalf("Parse() = %+v", rules)
	}
	for _, r := range rules {
		if r.Source != Source {
			t.Errorf("guard %s has source %q, want %q", r.ID, r.Source, Source)
		}
	}
	if rules, err := Parse("guards.yaml", nil); err != nil || len(rules) != 0 {
		t.Errorf("Parse(empty) = %v, %v; want no guards", rules, err)
	}
}

func TestParseErrorsNameTheFileTheGuardAndTheFix(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"not yaml", "guards: [", []string{"g.yaml", "guards:"}},
		{"misspelt field", "guards:\n  - id: a\n    status: enforce\n    mach: {command: x}\n    message: m\n", []string{"g.yaml", "mach", "not found"}},
		{"proposed", "guards:\n  - id: a\n    status: proposed\n    match: {command: x}\n    message: m\n", []string{"g.yaml:2", `guard "a"`, `"proposed"`, "warn or enforce"}},
		{"bad regexp", "guards:\n  - id: a\n    status: enforce\n    match: {command: '(['}\n    message: m\n", []string{"g.yaml:2", `"a"`, "match.command", "regular expression"}},
		{"bad glob", "guards:\n  - id: a\n    status: warn\n    match: {path: 'src/[a'}\n    message: m\n", []string{"g.yaml:2", "match.path", "glob"}},
		{"twice", "guards:\n  - {id: a, status: warn, match: {command: x}, message: m}\n  - {id: a, status: warn, match: {command: y}, message: m}\n", []string{"g.yaml:3", `"a"`, "line 2", "unique"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("g.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse() = nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() = %q, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if rules, err := Load(dir); err != nil || rules != nil {
		t.Fatalf("Load(no file) = %v, %v; want nothing", rules, err)
	}
	os.MkdirAll(filepath.Join(dir, ".claude", "ctxgraphd"), 0o755)
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(Path)), []byte(example), 0o644)
	if rules, err := Load(dir); err != nil || len(rules) != 2 {
		t.Fatalf("Load() = %v, %v", rules, err)
	}

	// A file where the guards' directory would be (the empty file the
	// sandbox leaves where it denied .claude/ctxgraphd, which was not
	// there) is no file: no guards, not an error.
	under := t.TempDir()
	os.MkdirAll(filepath.Join(under, ".claude"), 0o755)
	os.WriteFile(filepath.Join(under, ".claude", "ctxgraphd"), nil, 0o644)
	if rules, err := Load(under); err != nil || rules != nil {
		t.Errorf("Load(a file where the directory would be) = %v, %v; want nothing", rules, err)
	}
	// A file that is there and cannot be read is an error.
	unreadable := t.TempDir()
	os.MkdirAll(filepath.Join(unreadable, filepath.FromSlash(Path)), 0o755)
	if rules, err := Load(unreadable); err == nil {
		t.Errorf("Load(a directory where the file would be) = %v, no error; want one", rules)
	}
}

// FuzzParse: whatever the file holds, Parse returns guards that validate,
// or an error; it never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte("guards:\n  - {id: a, status: warn, match: {command: x}, message: m}\n"))
	f.Add([]byte("guards: [{id: a, status: enforce, match: {field: url, value: '^http:'}, message: m}]"))
	f.Add([]byte("guards: 3"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := Parse("g.yaml", data)
		if err != nil {
			return
		}
		if err := guards.ValidateRules(rules); err != nil {
			t.Fatalf("Parse() returned rules that do not validate: %v", err)
		}
		for _, r := range rules {
			if !r.Active() {
				t.Fatalf("Parse() returned guard %s in %s", r.ID, r.Status)
			}
		}
	})
}
