// Package paths derives where a project's daemon keeps its state of record,
// its control socket and its logs.
//
// All of them live outside the project tree so that the daemon's watcher never
// sees the daemon's own writes. A project is identified by its
// real path: two checkouts of one repository are two projects, and a symlink
// to a checkout is the same project.
package paths

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// ProgressDir is the project-relative directory of the feature list and
// session state (contract).
const ProgressDir = ".claude/progress"

// EvidenceDir is the directory, in ProgressDir, of the features' evidence:
// one directory per feature id.
const EvidenceDir = "evidence"

// maxSocketPath is the portable limit of sun_path (104 on macOS and the BSDs,
// 108 on Linux) less the terminating NUL.
const maxSocketPath = 103

// Project holds every path the daemon and its clients need for one project.
type Project struct {
	Dir      string // real path of the project root
	ID       string // stable id derived from Dir
	StateDir string // bbolt database, spool and logs
	Socket   string // control socket
}

// ErrNoProject is returned by FindProject when no directory up from the
// starting point contains .claude/progress.
var ErrNoProject = errors.New("no ctxgraphd project here: no .claude/progress directory in this directory or any parent (run `ctxgraphd init` or pass --project)")

// ForProject resolves dir to its real path and derives the project's paths
// under the process's environment.
func ForProject(dir string) (Project, error) { return ForProjectEnv(dir, os.Getenv) }

// ForProjectEnv is ForProject under the environment getenv reads
// (XDG_STATE_HOME, XDG_RUNTIME_DIR, HOME, TMPDIR) instead of the
// process's: the paths of a daemon started with that environment. Tests
// that run side by side, each with a daemon of its own, derive them this
// way; changing the process's environment would change every test's.
func ForProjectEnv(dir string, getenv func(string) string) (Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Project{}, fmt.Errorf("project directory %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Project{}, fmt.Errorf("project directory %q: %w", dir, err)
	}
	id := projectID(real)
	state, err := StateHome(getenv)
	if err != nil {
		return Project{}, err
	}
	return Project{
		Dir:      real,
		ID:       id,
		StateDir: filepath.Join(state, "ctxgraphd", id),
		Socket:   socketPath(id, getenv),
	}, nil
}

// Former is the project that was at dir, which may no longer exist (the
// project moved): its paths from the directory as it was named, without
// resolving it.
func Former(dir string) (Project, error) {
	if !filepath.IsAbs(dir) {
		return Project{}, fmt.Errorf("former project directory %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	id := projectID(dir)
	state, err := StateHome(os.Getenv)
	if err != nil {
		return Project{}, err
	}
	return Project{Dir: dir, ID: id, StateDir: filepath.Join(state, "ctxgraphd", id), Socket: socketPath(id, os.Getenv)}, nil
}

// FindProject walks up from start to the first directory holding
// .claude/progress, the way git finds its repository.
func FindProject(start string) (Project, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return Project{}, err
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, ProgressDir)); err == nil && fi.IsDir() {
			return ForProject(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return Project{}, ErrNoProject
		}
		dir = parent
	}
}

// Progress returns the absolute path of a file under .claude/progress.
func (p Project) Progress(elem ...string) string {
	return filepath.Join(append([]string{p.Dir, ProgressDir}, elem...)...)
}

// projectID is the directory's base name, for people, plus a hash of the
// whole path, for uniqueness.
func projectID(real string) string {
	sum := sha256.Sum256([]byte(real))
	base := safeName(filepath.Base(real))
	base = strings.Trim(base, "-.")
	if len(base) > 24 {
		base = base[:24]
	}
	if base == "" {
		base = "root"
	}
	return base + "-" + hex.EncodeToString(sum[:6])
}

// safeName is name with each run of characters other than ASCII letters,
// digits, '.', '_' and '-' replaced by one '-'. (The bytes of a multi-byte
// character are all outside ASCII, so they make one run.) A loop rather
// than a regular expression: every hook call that looks for its project
// comes here.
func safeName(name string) string {
	var b strings.Builder
	inRun := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		safe := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		switch {
		case safe:
			b.WriteByte(c)
			inRun = false
		case !inRun:
			b.WriteByte('-')
			inRun = true
		}
	}
	return b.String()
}

func StateHome(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	// What os.UserHomeDir reads, from getenv.
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot place the state directory: set XDG_STATE_HOME or HOME: $HOME is not defined")
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support"), nil
	}
	return filepath.Join(home, ".local", "state"), nil
}

// socketPath prefers $XDG_RUNTIME_DIR (per-user, tmpfs, cleaned at logout)
// and falls back to a per-user directory under the temp dir. When the
// result would not fit in sun_path it drops the readable part of the id.
func socketPath(id string, getenv func(string) string) string {
	// What os.TempDir reads, from getenv.
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	var dir string
	if d := getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		dir = filepath.Join(d, "ctxgraphd")
	} else {
		dir = filepath.Join(tmp, fmt.Sprintf("ctxgraphd-%d", os.Getuid()))
	}
	p := filepath.Join(dir, id+".sock")
	if len(p) <= maxSocketPath {
		return p
	}
	short := id[strings.LastIndexByte(id, '-')+1:]
	p = filepath.Join(dir, short+".sock")
	if len(p) <= maxSocketPath {
		return p
	}
	return filepath.Join(tmp, short+".sock")
}

// LookPath finds an executable file in path, a list like $PATH, the way a
// shell would: file itself when it holds a slash. Empty and relative
// entries are skipped: they name the working directory of the moment, which
// is no place to find the tools of a daemon.
func LookPath(file, path string) (string, bool) {
	if strings.ContainsRune(file, '/') {
		return file, isExecutable(file)
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, file); isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Absent reports whether err says that a path is not there: it does not
// exist (fs.ErrNotExist), or a directory on the way to it is a file
// (ENOTDIR). The second is absent too, not a failure: Claude Code's
// sandbox denies a path that does not exist by mounting over an empty file
// it makes there, and where that path is a directory the daemon reads
// from (.claude/ctxgraphd), the file left behind stands where the
// directory would be. An optional file read through it is none.
func Absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
