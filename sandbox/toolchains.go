package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/toolchain"
)

// CheckToolchains says, for each toolchain the project uses (a go.mod,
// package.json, pyproject.toml or requirements.txt, Cargo.toml at its
// top), what would keep its tests from running, confined, before anything
// is spent: its program missing from the PATH of env (the agents'
// environment), or present only in a directory agents can write, which
// the daemon's own test runs leave off PATH; and, when confined, a cache
// the sandbox cannot let runs write: one Policy.Prepare cannot make, one
// the daemon's user cannot write, or one the toolchain keeps elsewhere
// than env says (Go's `go env -w`), outside writable (Policy.AllowWrite).
// Each problem names the toolchain and the fix, one a line; none is nil.
func CheckToolchains(ctx context.Context, projectDir string, env, writable []string, confined bool) error {
	return checkToolchains(ctx, projectDir, env, writable, confined, runtime.GOOS)
}

func checkToolchains(ctx context.Context, projectDir string, env, writable []string, confined bool, goos string) error {
	used := toolchain.Used(projectDir)
	if len(used) == 0 {
		return nil
	}
	path := lookup(env)("PATH")
	testPath := lookup(VerdictEnv(env, projectDir, writable))("PATH")
	all := caches(env, goos)
	var problems []string
	for _, t := range used {
		name := fmt.Sprintf("%s (the project has %s)", t.Name, marker(projectDir, t))
		prog, found := "", ""
		for _, p := range t.Programs {
			if at, ok := paths.LookPath(p, path); ok {
				prog, found = p, at
				break
			}
		}
		switch {
		case found == "":
			problems = append(problems, fmt.Sprintf("%s: `%s` is not on the PATH the agents and the daemon's test runs get (%s): install it, or start the daemon with a PATH that has it",
				name, strings.Join(t.Programs, "` or `"), path))
			continue
		case !onPath(prog, found, testPath):
			problems = append(problems, fmt.Sprintf("%s: `%s` is %s, in a directory agents can write, which the daemon's test runs leave off PATH (an agent's own `%s` must not judge its work): install it elsewhere on the daemon's PATH",
				name, prog, found, prog))
		}
		if !confined {
			continue
		}
		dirs := map[string]bool{}
		for _, c := range all {
			if c.Toolchain == t.Name && c.Essential && filepath.IsAbs(c.Dir) {
				dirs[filepath.Clean(c.Dir)] = true
				if p := cacheProblem(c); p != "" {
					problems = append(problems, name+": "+p)
				}
			}
		}
		if t.Name == "Go" {
			for _, c := range goCaches(ctx, found, env) {
				if !dirs[c.Dir] && !within(c.Dir, writable) {
					problems = append(problems, fmt.Sprintf("%s: Go keeps %s in %s (`go env %s`: set with `go env -w`?), which the sandbox does not let runs write: set %s=%s in the daemon's environment, or `sandbox.allow_write: [%s]` in .claude/ctxgraphd.yaml",
						name, c.What, c.Dir, c.Var, c.Var, c.Dir, c.Dir))
				}
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "\n"))
}

// marker is the first of t's markers at dir's top.
func marker(dir string, t toolchain.Toolchain) string {
	for _, m := range t.Markers {
		if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
			return m
		}
	}
	return t.Markers[0]
}

// onPath reports whether a PATH search for prog in path finds the program
// found.
func onPath(prog, found, path string) bool {
	at, ok := paths.LookPath(prog, path)
	return ok && at == found
}

// cacheProblem says why the sandbox cannot let runs write c, "" when it
// can: it must exist before a run starts (Policy.Prepare makes it, as is
// done here) and be the daemon's user's to write.
func cacheProblem(c Cache) string {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Sprintf("%s, %s, cannot be made (%v), and the sandbox leaves a missing directory read-only: make it, as the daemon's user, or point %s elsewhere in the daemon's environment",
			c.Dir, c.What, err, c.Var)
	}
	f, err := os.CreateTemp(c.Dir, ".ctxgraphd-check-*")
	if err != nil {
		return fmt.Sprintf("%s, %s, cannot be written by the daemon's user (%v), and the sandbox gives runs no more than the user has: make it the user's (`chown -R %d %s`), or point %s elsewhere in the daemon's environment",
			c.Dir, c.What, err, os.Getuid(), c.Dir, c.Var)
	}
	f.Close()
	os.Remove(f.Name())
	return ""
}

// goCaches are where Go itself says it keeps its caches, for env: with
// the settings `go env -w` wrote, which CacheDirs does not read. None when
// go cannot say (it is then reported missing, or broken, by its test
// runs). It runs outside the project, with GOTOOLCHAIN=local: a go.mod
// there could name a toolchain to download and run.
func goCaches(ctx context.Context, goBin string, env []string) []Cache {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "env", "GOCACHE", "GOMODCACHE")
	cmd.Env = append(append([]string(nil), env...), "GOTOOLCHAIN=local")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil
	}
	var cs []Cache
	for i, c := range []Cache{{Toolchain: "Go", What: "its build cache", Var: "GOCACHE"}, {Toolchain: "Go", What: "its module cache", Var: "GOMODCACHE"}} {
		if d := strings.TrimSpace(lines[i]); filepath.IsAbs(d) {
			c.Dir = filepath.Clean(d)
			cs = append(cs, c)
		}
	}
	return cs
}
