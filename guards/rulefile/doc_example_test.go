package rulefile

import (
	"os"
	"regexp"
	"testing"
)

// The example of docs/gates.md is a file the daemon takes.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/gates.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(# \\.claude/ctxgraphd/guards\\.yaml.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/gates.md has no guards.yaml example")
	}
	rules, err := Parse("docs/gates.md", m[1])
	if err != nil || len(rules) != 3 {
		t.Fatalf("Parse(the example) = %d guards, %v", len(rules), err)
	}
}
