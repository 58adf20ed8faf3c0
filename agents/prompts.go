package agents

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

//go:embed prompts/*.md
var defaultPrompts embed.FS

// PromptOverrideDir is where a project keeps its own role prompts, one
// <role>.md per role, relative to the project directory.
const PromptOverrideDir = ".claude/ctxgraphd/prompts"

// maxPromptBytes bounds a project's override: role prompts are meant to be
// short, and a runaway file would be passed on every command line.
const maxPromptBytes = 64 << 10

// RolePrompt returns the role prompt for role: the project's override when
// it has one, or the embedded default. source says which ("embedded" or the
// override's path) so that `ctxgraphd config` and the logs can tell.
func RolePrompt(projectDir string, who role.Role) (text, source string, err error) {
	if !who.Valid() {
		return "", "", fmt.Errorf("no role prompt for %q: roles are %s, %s, %s", who, role.Initializer, role.Coder, role.Tester)
	}
	name := string(who) + ".md"
	if projectDir != "" {
		path := filepath.Join(projectDir, filepath.FromSlash(PromptOverrideDir), name)
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if len(b) > maxPromptBytes {
				return "", "", fmt.Errorf("%s is %d bytes; a role prompt may be at most %d: shorten it", path, len(b), maxPromptBytes)
			}
			if strings.TrimSpace(string(b)) == "" {
				return "", "", fmt.Errorf("%s is empty: write the role prompt in it, or delete it to use the default", path)
			}
			return string(b), path, nil
		case !paths.Absent(err):
			return "", "", fmt.Errorf("role prompt override: %w", err)
		}
	}
	b, err := defaultPrompts.ReadFile("prompts/" + name)
	if err != nil {
		return "", "", fmt.Errorf("embedded role prompt %s: %w", name, err)
	}
	return string(b), "embedded", nil
}
