package toolchain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SetupInputs are the files at a project's top whose content decides what
// its setup makes: manifests and locks. A setup runs again in a tree where
// one of them changed.
var SetupInputs = []string{
	"go.mod", "go.sum",
	"package.json", "package-lock.json", "npm-shrinkwrap.json",
	"requirements.txt", "pyproject.toml", "setup.py", "setup.cfg",
}

// manifests are the names of the files that decide what a toolchain
// fetches or installs, and how it builds, beyond the tree's own files:
// SetupInputs, and the manifests, locks and workspace files of the other
// package managers the toolchains use.
var manifests = append(slices.Clip(SetupInputs),
	"go.work", "go.work.sum",
	"yarn.lock", "pnpm-lock.yaml", "pnpm-workspace.yaml", ".npmrc", ".yarnrc", ".yarnrc.yml", "bun.lockb", "bun.lock",
	"Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock", "requirements-dev.txt", "constraints.txt",
	"Cargo.toml", "Cargo.lock",
)

// IsManifest reports whether the slash-separated path p, at any depth, is
// a manifest, a lock or a package manager's setting (manifests): a change
// to it can change what a test runs with outside the tree (the modules,
// packages or virtualenv the dependencies are in), which no record of the
// tree's files covers.
func IsManifest(p string) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	return slices.Contains(manifests, base) || strings.HasPrefix(base, "requirements") && strings.HasSuffix(base, ".txt")
}

// SafeSetup is what the daemon runs in a tree before the first check of a
// test there when the person gave no setup: the fetches of what the
// committed manifests name that run none of the project's code nor any
// package's. Go's modules are verified against go.sum as Go downloads
// them, with the toolchain the machine has (GOTOOLCHAIN=local: a go line
// that asks for a newer one would download and run it); npm installs what
// the committed lock names, with no package's install scripts; pip installs
// wheels only into the project's .venv (a source distribution runs its
// build to install). Where such a fetch would need code run, Ask says so
// in plain words, and nothing is guessed.
type SafeSetup struct {
	// Script is the shell command of the steps, "" when there is none.
	Script string
	// Steps are its commands, one per toolchain.
	Steps []string
	// Ask are the manifests it could not fetch for without running code,
	// each with what to write in setup: instead.
	Ask []string
}

// SafeSetupOf reads the manifests at dir's top.
func SafeSetupOf(dir string) SafeSetup {
	var s SafeSetup
	has := func(name string) bool {
		fi, err := os.Stat(filepath.Join(dir, name))
		return err == nil && !fi.IsDir()
	}
	if has("go.mod") {
		switch {
		case has("go.sum"):
			s.Steps = append(s.Steps, "GOTOOLCHAIN=local go mod download")
		case goRequires(filepath.Join(dir, "go.mod")):
			s.Ask = append(s.Ask, "go.mod requires modules but no go.sum is committed, so nothing would verify what is downloaded: commit go.sum (`go mod tidy`), or give `setup: go mod download`")
		}
	}
	if has("package.json") {
		lock := ""
		for _, l := range []string{"npm-shrinkwrap.json", "package-lock.json"} {
			if has(l) {
				lock = l
				break
			}
		}
		switch scripts := installScripts(filepath.Join(dir, lock)); {
		case lock == "" && npmDepends(filepath.Join(dir, "package.json")):
			s.Ask = append(s.Ask, "package.json names dependencies but no package-lock.json is committed, so the daemon would have to choose their versions: commit the lock (`npm install`), or give `setup: npm install --ignore-scripts`")
		case lock == "":
		case len(scripts) > 0:
			s.Ask = append(s.Ask, fmt.Sprintf("%s names packages with install scripts (%s), which the daemon does not run by itself: give `setup: npm ci` to run them, or `setup: npm ci --ignore-scripts` to go without", lock, strings.Join(scripts, ", ")))
		default:
			s.Steps = append(s.Steps, "npm ci --ignore-scripts --no-audit --no-fund")
		}
	}
	switch {
	case has("requirements.txt"):
		step := "python3 -m venv .venv && "
		if fi, err := os.Stat(filepath.Join(dir, ".venv", "bin", "python")); err == nil && !fi.IsDir() {
			step = ""
		}
		s.Steps = append(s.Steps, step+".venv/bin/python -m pip install --only-binary=:all: --no-input --disable-pip-version-check -r requirements.txt")
	case has("pyproject.toml") || has("setup.py"):
		s.Ask = append(s.Ask, "the project is a Python package (pyproject.toml or setup.py) with no requirements.txt: installing it runs its build, which the daemon does not do by itself; give a setup, such as `setup: python3 -m venv .venv && .venv/bin/pip install -e .`")
	}
	s.Script = strings.Join(s.Steps, " && ")
	return s
}

// goRequires reports whether the go.mod at path has a require directive.
func goRequires(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "require" {
			return true
		}
	}
	return false
}

// npmDepends reports whether package.json names any dependency to install.
func npmDepends(path string) bool {
	var m map[string]json.RawMessage
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &m) != nil {
		return false
	}
	for _, k := range []string{"dependencies", "devDependencies", "optionalDependencies"} {
		if v := bytes.TrimSpace(m[k]); len(v) > 0 && !bytes.Equal(v, []byte("{}")) && !bytes.Equal(v, []byte("null")) {
			return true
		}
	}
	return false
}

// installScripts are the packages the npm lock at path marks as having
// install scripts (preinstall, install, postinstall), sorted; nil for no
// lock or one npm cannot have written.
func installScripts(path string) []string {
	var lock struct {
		Packages map[string]struct {
			HasInstallScript bool `json:"hasInstallScript"`
		} `json:"packages"`
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &lock) != nil {
		return nil
	}
	var out []string
	for name, p := range lock.Packages {
		if p.HasInstallScript {
			if name == "" {
				name = "the project itself"
			}
			out = append(out, strings.TrimPrefix(name, "node_modules/"))
		}
	}
	slices.Sort(out)
	return out
}
