package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The start-up check names each toolchain of the project that cannot run
// confined, with the fix; a toolchain the project does not use is not
// asked about. Programs are stand-ins on a PATH of the test's own: a `go`
// that answers `go env GOCACHE GOMODCACHE` as the test says.
func TestCheckToolchains(t *testing.T) {
	type setup struct {
		home, bin, agentBin, project string
	}
	for _, tc := range []struct {
		name     string
		markers  []string
		programs []string // in bin, on PATH
		agents   []string // in agentBin: on PATH, but a directory agents can write
		goEnv    string   // what the stand-in go prints for `go env GOCACHE GOMODCACHE`; "" for the defaults
		confined bool
		allow    []string // sandbox.allow_write
		prepare  func(t *testing.T, s setup)
		want     []string // a substring of each problem, in order; none for no problem
	}{
		{name: "no toolchain", confined: true},
		{name: "every toolchain there", markers: []string{"go.mod", "package.json", "requirements.txt", "Cargo.toml"},
			programs: []string{"go", "node", "python3", "cargo"}, confined: true},
		{name: "python by either name", markers: []string{"pyproject.toml"}, programs: []string{"python"}, confined: true},
		{name: "a program missing", markers: []string{"go.mod", "Cargo.toml"}, programs: []string{"go"}, confined: true,
			want: []string{"Rust (the project has Cargo.toml): `cargo` is not on the PATH the agents and the daemon's test runs get"}},
		{name: "every name of a program missing", markers: []string{"requirements.txt"}, confined: true,
			want: []string{"Python (the project has requirements.txt): `python3` or `python` is not on the PATH"}},
		{name: "a program only in a directory agents can write", markers: []string{"package.json"}, agents: []string{"node"}, confined: true,
			want: []string{"Node (the project has package.json): `node` is " + "AGENTBIN/node, in a directory agents can write, which the daemon's test runs leave off PATH"}},
		{name: "a cache that cannot be made", markers: []string{"go.mod"}, programs: []string{"go"}, confined: true,
			prepare: func(t *testing.T, s setup) {
				writeFile(t, filepath.Join(s.home, ".cache"), "a file where a directory should be")
			},
			want: []string{"Go (the project has go.mod): HOME/.cache/go-build, its build cache, cannot be made", "point GOCACHE elsewhere"}},
		{name: "unconfined, caches are not asked about", markers: []string{"go.mod"}, programs: []string{"go"},
			prepare: func(t *testing.T, s setup) {
				writeFile(t, filepath.Join(s.home, ".cache"), "a file where a directory should be")
			}},
		{name: "Go keeps its cache elsewhere (go env -w)", markers: []string{"go.mod"}, programs: []string{"go"}, goEnv: "/srv/gocache\nHOME/go/pkg/mod", confined: true,
			want: []string{"Go (the project has go.mod): Go keeps its build cache in /srv/gocache (`go env GOCACHE`", "set GOCACHE=/srv/gocache in the daemon's environment, or `sandbox.allow_write: [/srv/gocache]`"}},
		{name: "elsewhere, but allowed", markers: []string{"go.mod"}, programs: []string{"go"}, goEnv: "/srv/gocache\nHOME/go/pkg/mod", confined: true,
			allow: []string{"/srv/gocache"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup{home: t.TempDir(), bin: t.TempDir(), agentBin: t.TempDir(), project: t.TempDir()}
			for _, m := range tc.markers {
				writeFile(t, filepath.Join(s.project, m), "")
			}
			goEnv := strings.ReplaceAll(tc.goEnv, "HOME", s.home)
			if goEnv == "" {
				goEnv = filepath.Join(s.home, ".cache", "go-build") + "\n" + filepath.Join(s.home, "go", "pkg", "mod")
			}
			for _, p := range tc.programs {
				writeFile(t, filepath.Join(s.bin, p), "#!/bin/sh\nprintf '%s\\n' '"+goEnv+"'\n")
				os.Chmod(filepath.Join(s.bin, p), 0o755)
			}
			for _, p := range tc.agents {
				writeFile(t, filepath.Join(s.agentBin, p), "#!/bin/sh\n")
				os.Chmod(filepath.Join(s.agentBin, p), 0o755)
			}
			if tc.prepare != nil {
				tc.prepare(t, s)
			}
			env := []string{"HOME=" + s.home, "PATH=" + s.agentBin + ":" + s.bin}
			writable := append(append(cacheDirs(env, "linux"), s.agentBin), tc.allow...)
			err := checkToolchains(t.Context(), s.project, env, writable, tc.confined, "linux")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("problems:\n%v\nwant none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no problem, want %q", tc.want)
			}
			got := strings.NewReplacer(s.home, "HOME", s.agentBin, "AGENTBIN").Replace(err.Error())
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems:\n%s\nwant one holding %q", got, w)
				}
			}
			if n := strings.Count(got, "\n") + 1; n != 1 {
				t.Errorf("%d problems, want one:\n%s", n, got)
			}
		})
	}
}

// The caches the start-up check asks about are each toolchain's own, by
// the same rules as CacheDirs.
func TestEssentialCaches(t *testing.T) {
	env := []string{"HOME=/home/u", "PATH=/usr/bin", "CARGO_HOME=/c/cargo"}
	var got []string
	for _, c := range caches(env, "linux") {
		if c.Essential {
			got = append(got, c.Toolchain+" "+c.Var+" "+c.Dir)
		}
	}
	want := []string{
		"Go GOCACHE /home/u/.cache/go-build", "Go GOMODCACHE /home/u/go/pkg/mod", "Go GOPATH /home/u/go/pkg/sumdb", "Node npm_config_cache /home/u/.npm",
		"Python PIP_CACHE_DIR /home/u/.cache/pip", "Rust CARGO_HOME /c/cargo/registry", "Rust CARGO_HOME /c/cargo/git",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("essential caches:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// writeFile writes content at path, making its directories.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
