package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// On a fresh home none of the caches exist; after Prepare every one of them
// does, as a private directory, and configuration next to them was not made.
func TestPrepareFreshHome(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(t.TempDir(), "p")
	if err := os.MkdirAll(filepath.Join(project, ".claude", "progress"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	env := []string{"HOME=" + home, "PATH=" + t.TempDir(), "RUSTUP_HOME=" + filepath.Join(home, ".rustup")}
	caches := cacheDirs(env, "linux")
	for _, want := range []string{".cache/go-build", "go/pkg/mod", ".npm", ".cache/pip", ".cache/uv", ".cargo/registry", ".cargo/git"} {
		if !slices.Contains(caches, filepath.Join(home, want)) {
			t.Fatalf("CacheDirs(%q) = %q, lacks ~/%s", env, caches, want)
		}
	}
	for _, d := range caches {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s exists before Prepare: not a fresh home", d)
		}
	}
	evidence := filepath.Join(project, ".claude", "progress", "evidence", "F-001")
	p := Policy{
		ProjectDir: project,
		AllowWrite: append(slices.Clone(caches), evidence, filepath.Join(state, "cache")),
		DenyRead:   []string{state},
	}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	for _, d := range caches {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory after Prepare (%v)", d, err)
			continue
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s: mode %o, want 700", d, perm)
		}
	}
	if fi, err := os.Stat(evidence); err != nil || fi.Mode().Perm()&0o755 != 0o755 {
		t.Errorf("the project's allowed directory: %v, %v; want a 755 directory", fi, err)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("Prepare made a directory inside a denied path")
	}
	for _, conf := range []string{".config", ".cargo/bin", ".cargo/config.toml", ".npmrc"} {
		if _, err := os.Stat(filepath.Join(home, conf)); err == nil {
			t.Errorf("~/%s was made: configuration, not a cache", conf)
		}
	}
	// A second time it finds them all and changes nothing.
	if err := os.Chmod(caches[0], 0o750); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(caches[0]); fi.Mode().Perm() != 0o750 {
		t.Errorf("an existing directory's mode changed to %o", fi.Mode().Perm())
	}
}

// A directory it cannot make is reported, and the others are made anyway.
func TestPrepareGoesOnPastAnError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "z", "cache")
	err := Policy{AllowWrite: []string{filepath.Join(file, "below"), ok, "relative"}}.Prepare()
	if err == nil {
		t.Error("no error for a directory below a file")
	}
	if fi, statErr := os.Stat(ok); statErr != nil || !fi.IsDir() {
		t.Errorf("%s was not made after the error: %v", ok, statErr)
	}
	if _, statErr := os.Stat("relative"); statErr == nil {
		t.Error("a relative path was made")
	}
}

// Rust counts as around when ~/.cargo exists or cargo is on PATH, and not
// otherwise: a home without Rust gets no ~/.cargo.
func TestRustAround(t *testing.T) {
	home, bin := t.TempDir(), t.TempDir()
	env := func(kv ...string) []string { return append([]string{"HOME=" + home, "GOCACHE=off"}, kv...) }
	has := func(env []string) bool {
		return slices.Contains(cacheDirs(env, "linux"), filepath.Join(home, ".cargo", "registry"))
	}
	if has(env("PATH=" + bin)) {
		t.Error("Cargo's registry without Rust around")
	}
	if err := os.WriteFile(filepath.Join(bin, "cargo"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !has(env("PATH=relative:" + bin)) {
		t.Error("cargo on PATH: no registry")
	}
	if has(env("PATH=" + t.TempDir())) {
		t.Error("Cargo's registry without cargo on PATH")
	}
	if err := os.Mkdir(filepath.Join(home, ".cargo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !has(env()) {
		t.Error("~/.cargo exists: no registry")
	}
}
