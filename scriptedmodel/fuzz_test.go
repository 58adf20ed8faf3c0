package scriptedmodel

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// FuzzFindCommand: any prompt text, no panic, and a found command has an
// agent and a usable attempt.
func FuzzFindCommand(f *testing.F) {
	f.Add("```json\n{\"command\": {\"agent\": \"coding-agent\", \"context\": {\"attempt\": 2}}}\n```")
	f.Add(`{"command": {"agent": "x", "context": {"attempt": "9999999999999999999999"}}}`)
	f.Add(`{ "command" : null} {"command": {"agent": "y"}}`)
	f.Fuzz(func(t *testing.T, text string) {
		c, ok := findCommand(text)
		if ok && (c.Agent == "" || c.attempt() < 1) {
			t.Fatalf("found %+v", c)
		}
	})
}

// FuzzStripLineNumbers: numbering any content the way the Read tool does
// and stripping it gives the content back.
func FuzzStripLineNumbers(f *testing.F) {
	f.Add("{\n  \"a\": 1\n}\n", false)
	f.Add("", true)
	f.Add("1\tlooks numbered\n", true)
	f.Fuzz(func(t *testing.T, content string, arrows bool) {
		lines := strings.Split(content, "\n")
		for i, l := range lines {
			if arrows {
				lines[i] = fmt.Sprintf("%6d→%s", i+1, l)
			} else {
				lines[i] = fmt.Sprintf("%d\t%s", i+1, l)
			}
		}
		got, ok := stripLineNumbers(strings.Join(lines, "\n"))
		if !ok || got != content {
			t.Fatalf("stripLineNumbers gave %q, %v; want %q", got, ok, content)
		}
	})
}

// FuzzMessages: any request body is answered, never a panic.
func FuzzMessages(f *testing.F) {
	f.Add(newConvo(codeCmd("F-001", 1)).read("src/F-001.txt", missing, true).body(true))
	f.Add(newConvo(testCmd("F-001", 1)).body(false))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Read","input":[1]}]}]}`))
	s := New(DefaultScenario(), nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(t, s, "/v1/messages", body)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d", rec.Code)
		}
	})
}
