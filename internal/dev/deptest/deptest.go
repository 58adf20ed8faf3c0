// Package deptest holds what a binary links to the rules written for it,
// each with its reason: the packages it must never link, and, where every
// package counts, the whole list of what it links beyond the standard
// library. It asks `go list -deps` for each system ctxgraphd is built for,
// so that a file built on one of them only cannot bring in what the rules
// keep out. Modelled on tailscale's tstest/deptest.
package deptest

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Platform is a system the binaries are built for.
type Platform struct{ GOOS, GOARCH string }

// Platforms are the systems ctxgraphd is built for: Linux, where the daemon
// runs under systemd, and macOS, where it runs under launchd, each on both
// architectures.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// DepChecker is the rules for what Packages link, together with
// everything they import.
type DepChecker struct {
	// Packages are import paths: a binary's main package, or the packages
	// a part of one is held to.
	Packages []string

	// BadDeps are the packages none of Packages may link, each with why.
	// A key ending in "/..." is the package and every package under it.
	BadDeps map[string]string

	// WantDeps, when not nil, is everything Packages link outside the
	// standard library, each with why it is linked: a package linked and
	// not listed fails, so that a new dependency is justified where a
	// reviewer sees it; one listed and linked on no platform fails too.
	WantDeps map[string]string
}

// Check holds c's packages to its rules on every platform, built as `make
// build` builds them (CGO_ENABLED=0). Every package BadDeps names must
// exist, so that a rename does not leave a rule that keeps out nothing.
func (c DepChecker) Check(t *testing.T) {
	t.Helper()
	if len(c.Packages) == 0 {
		t.Fatal("deptest: no package to check")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for pattern, why := range c.BadDeps {
		if strings.TrimSpace(why) == "" {
			t.Errorf("BadDeps[%q] has no reason", pattern)
		}
	}
	for pkg, why := range c.WantDeps {
		if strings.TrimSpace(why) == "" {
			t.Errorf("WantDeps[%q] has no reason", pkg)
		}
	}
	c.checkBadDepsExist(t, gobin)

	var mu sync.Mutex
	linkedSomewhere := map[string]bool{}
	listed := 0 // platforms whose list came back
	t.Run("platforms", func(t *testing.T) {
		for _, p := range Platforms {
			t.Run(p.GOOS+"_"+p.GOARCH, func(t *testing.T) {
				t.Parallel()
				deps := list(t, gobin, p, c.Packages)
				mu.Lock()
				listed++
				mu.Unlock()
				for _, dep := range deps {
					for pattern, why := range c.BadDeps {
						if Match(pattern, dep.path) {
							t.Errorf("%s links %s on %s/%s: %s", strings.Join(c.Packages, ", "), dep.path, p.GOOS, p.GOARCH, why)
						}
					}
					if c.WantDeps != nil && !dep.standard {
						if _, ok := c.WantDeps[dep.path]; !ok {
							t.Errorf("%s links %s on %s/%s, which WantDeps does not list: add it there with why it is needed, or take it out", strings.Join(c.Packages, ", "), dep.path, p.GOOS, p.GOARCH)
						}
						mu.Lock()
						linkedSomewhere[dep.path] = true
						mu.Unlock()
					}
				}
			})
		}
	})
	for _, pkg := range slices.Sorted(maps.Keys(c.WantDeps)) {
		if !linkedSomewhere[pkg] && listed == len(Platforms) {
			t.Errorf("WantDeps lists %s, which %s no longer link on any platform: take it out of the list", pkg, strings.Join(c.Packages, ", "))
		}
	}
}

// Match reports whether pattern (an import path, or one ending in "/..."
// for a package and everything under it) names pkg.
func Match(pattern, pkg string) bool {
	if root, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == root || strings.HasPrefix(pkg, root+"/")
	}
	return pkg == pattern
}

// dep is one package a list linked.
type dep struct {
	path     string
	standard bool
}

// list is what pkgs link on p, themselves included.
func list(t *testing.T, gobin string, p Platform, pkgs []string) []dep {
	t.Helper()
	cmd := exec.Command(gobin, append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOOS="+p.GOOS, "GOARCH="+p.GOARCH, "CGO_ENABLED=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s on %s/%s: %v\n%s", strings.Join(pkgs, " "), p.GOOS, p.GOARCH, err, stderr.String())
	}
	var deps []dep
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		deps = append(deps, dep{path: path, standard: std == "true"})
	}
	if len(deps) < len(pkgs) {
		t.Fatalf("go list printed %d packages for %d asked: the check would pass for nothing", len(deps), len(pkgs))
	}
	return deps
}

// checkBadDepsExist fails for a BadDeps key that names no package.
func (c DepChecker) checkBadDepsExist(t *testing.T, gobin string) {
	t.Helper()
	if len(c.BadDeps) == 0 {
		return
	}
	patterns := slices.Sorted(maps.Keys(c.BadDeps))
	out, err := exec.Command(gobin, append([]string{"list", "-e", "-f", "{{.ImportPath}} {{if .Error}}missing{{end}}"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list of the banned packages: %v", err)
	}
	var found []string
	for line := range strings.Lines(string(out)) {
		if pkg, missing := strings.CutSuffix(strings.TrimSpace(line), " missing"); !missing {
			found = append(found, strings.TrimSpace(pkg))
		}
	}
	for _, pattern := range patterns {
		if !slices.ContainsFunc(found, func(pkg string) bool { return Match(pattern, pkg) }) {
			t.Errorf("BadDeps names %s, which is no package any more: update the rule", pattern)
		}
	}
}
