package gates

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// resolve returns the absolute path a tool call would really touch: p made
// absolute against the project, cleaned of "." and "..", and with every
// symlink of its existing part followed. A link in the project (or in the
// temp directory) that leads to a test, or a path outside the project that
// leads back into it, is judged as what it leads to. The part that does not
// exist yet is kept as written: a file about to be created has no links.
// A link that leads to what does not exist yet (a dangling link) is
// followed too: writing through it creates what it leads to, so a link
// from the project to .claude/settings.local.json, made before that file
// exists, is judged as that file.
func (s State) resolve(p string) string {
	return s.resolveHops(p, 0)
}

// maxLinkHops bounds the dangling links resolve follows, as the kernel
// bounds a path's links (ELOOP).
const maxLinkHops = 40

func (s State) resolveHops(p string, hops int) string {
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.ProjectDir, p)
	}
	p = filepath.Clean(p)
	if s.Remote {
		return p // the links are on the run's machine, not here
	}
	// Walk up to the longest prefix that exists, resolve it, and put the
	// rest back. A loop of links, or a permission error, leaves the path
	// as written, which the rules then judge as it reads.
	rest := ""
	for cur := p; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return p
		}
		if fi, err := os.Lstat(cur); err == nil && fi.Mode()&fs.ModeSymlink != 0 && hops < maxLinkHops {
			if target, err := os.Readlink(cur); err == nil {
				if !filepath.IsAbs(target) {
					// Relative to the link's directory, which exists
					// (the link is in it), as the kernel reads it.
					dir, err := filepath.EvalSymlinks(filepath.Dir(cur))
					if err != nil {
						return p
					}
					target = filepath.Join(dir, target)
				}
				return s.resolveHops(filepath.Join(target, rest), hops+1)
			}
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within returns path relative to the project, with forward slashes, and
// whether it is inside the project (the project itself included).
func (s State) within(path string) (string, bool) {
	r, err := filepath.Rel(s.ProjectDir, path)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// ProjectPath is the project file p names, resolved as the gates resolve
// it (links followed), relative to the project with forward slashes; ok
// is false for a path outside the project.
func (s State) ProjectPath(p string) (rel string, ok bool) {
	if p == "" {
		return "", false
	}
	return s.within(s.resolve(p))
}

// FilePath is the file a file tool's call writes or reads, as it was
// given; "" for other tools.
func FilePath(p *Payload) string {
	switch p.ToolName {
	case "Write", "Edit", "MultiEdit", "NotebookEdit", "Read":
		return toolPath(p.ToolName, p.Input())
	}
	return ""
}

// rel is path as a person reads it: relative to the project when inside.
func (s State) rel(path string) string {
	if r, ok := s.within(path); ok {
		return r
	}
	return path
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	if dir == "" {
		return false
	}
	dir = filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// writableOutside reports whether path, outside the project, is in one of
// the directories agents may write: temp and tool caches.
func (s State) writableOutside(path string) bool {
	for _, d := range s.Writable {
		if under(path, d) {
			return true
		}
		// The directory itself may be reached through a link (/tmp on
		// macOS is /private/tmp).
		if real, err := filepath.EvalSymlinks(d); err == nil && under(path, real) {
			return true
		}
	}
	return false
}

// touchesDaemon refuses a path, or a command that names one, in the
// daemon's own directories: its state, its socket.
func (s State) touchesDaemon(m Modes, text string) *control.HookDecision {
	for _, dir := range s.Protected {
		if dir == "" {
			continue
		}
		if strings.Contains(text, dir) || (filepath.IsAbs(text) && under(s.resolve(text), s.resolve(dir))) {
			return decide(m, RoleWritePolicy, "daemon_files",
				fmt.Sprintf("%s belongs to the ctxgraphd daemon", dir), "leave the daemon's state alone; ask through your final report")
		}
	}
	return nil
}
