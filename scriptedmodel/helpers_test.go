package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// convo builds Messages API requests the way the CLI does: a reminder and
// the prompt as user text blocks, the environment in a system turn, one tool
// call per assistant message and its result in the next user message.
type convo struct {
	system string
	msgs   []map[string]any
	n      int
}

const projectDir = "/home/dev/proj"

// newConvo starts a conversation in projectDir whose prompt holds cmd.
func newConvo(cmd map[string]any) *convo { return newConvoIn(projectDir, cmd) }

func newConvoIn(dir string, cmd map[string]any) *convo {
	c := &convo{}
	c.prompt(cmd)
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "# Environment\nYou have been invoked in the following environment: \n - Primary working directory: " + dir + "\n - Is a git repository: false\n"})
	return c
}

// prompt adds a user message holding cmd among the CLI's own text.
func (c *convo) prompt(cmd map[string]any) *convo {
	b, _ := json.Marshal(map[string]any{"command": cmd})
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "<system-reminder>\nAttribution for git commits...\n</system-reminder>\n"},
		map[string]any{"type": "text", "text": "Do this:\n```json\n" + string(b) + "\n```\nThanks."},
	}})
	return c
}

// call adds one tool call of the model and the CLI's result.
func (c *convo) call(name string, input map[string]any, result string, isError bool) *convo {
	c.n++
	id := fmt.Sprintf("toolu_h%d", c.n)
	c.msgs = append(c.msgs,
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": result, "is_error": isError}}},
	)
	return c
}

func (c *convo) read(rel, result string, isError bool) *convo {
	return c.call("Read", map[string]any{"file_path": projectDir + "/" + rel}, result, isError)
}

func (c *convo) write(rel, content, result string, isError bool) *convo {
	return c.call("Write", map[string]any{"file_path": projectDir + "/" + rel, "content": content}, result, isError)
}

func (c *convo) bash(command, result string, isError bool) *convo {
	return c.call("Bash", map[string]any{"command": command}, result, isError)
}

// say adds a final text of the model.
func (c *convo) say(text string) *convo {
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}})
	return c
}

func (c *convo) body(stream bool) []byte {
	req := map[string]any{"model": "claude-test", "max_tokens": 32000, "stream": stream, "messages": c.msgs}
	if c.system != "" {
		req["system"] = c.system
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// numbered renders content the way the Read tool of 2.1.330 returns it.
func numbered(content string) string {
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		lines[i] = fmt.Sprintf("%d\t%s", i+1, l)
	}
	return strings.Join(lines, "\n")
}

// answer is a decoded non-streaming response.
type answer struct {
	ID         string `json:"id"`
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type  string         `json:"type"`
		Text  string         `json:"text"`
		ID    string         `json:"id"`
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	} `json:"content"`
}

func (a answer) text() string {
	if len(a.Content) == 1 && a.Content[0].Type == "text" {
		return a.Content[0].Text
	}
	return ""
}

// tool returns the tool call of the answer, or fails.
func (a answer) tool(t *testing.T) (name string, input map[string]any) {
	t.Helper()
	if a.StopReason != "tool_use" || len(a.Content) != 1 || a.Content[0].Type != "tool_use" {
		t.Fatalf("want one tool call, got stop_reason %q and %+v", a.StopReason, a.Content)
	}
	return a.Content[0].Name, a.Content[0].Input
}

func (a answer) String() string {
	b, _ := json.Marshal(a)
	return string(b)
}

func post(t *testing.T, s *Server, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec
}

// ask sends the conversation without streaming and decodes the answer.
func ask(t *testing.T, s *Server, c *convo) answer {
	t.Helper()
	rec := post(t, s, "/v1/messages?beta=true", c.body(false))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, rec.Body)
	}
	return a
}
