package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/deploy"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// fakeManager stands in for systemctl and launchctl: it records every
// invocation and fails those fail picks.
type fakeManager struct {
	calls []string
	fail  func(call string) error
}

func (f *fakeManager) run(_ context.Context, name string, args ...string) error {
	call := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, call)
	if f.fail != nil {
		return f.fail(call)
	}
	return nil
}

// takeCalls returns the invocations since the last call and forgets them.
func (f *fakeManager) takeCalls() []string {
	c := f.calls
	f.calls = nil
	return c
}

// serviceFixture is a project, a binary, and a host whose directories are
// temporary and whose service manager is fake.
type serviceFixture struct {
	proj   paths.Project
	binary string
	mgr    *fakeManager
	host   *serviceHost
	out    *bytes.Buffer
}

func newServiceFixture(t *testing.T, manager string) *serviceFixture {
	t.Helper()
	proj := ctlProject(t)
	bin := filepath.Join(t.TempDir(), "ctxgraphd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PATH": "/home/alice/.local/bin:/usr/bin:/bin"}
	mgr := &fakeManager{}
	out := &bytes.Buffer{}
	return &serviceFixture{
		proj: proj, binary: bin, mgr: mgr, out: out,
		host: &serviceHost{
			manager: manager, uid: 501, configHome: t.TempDir(), home: t.TempDir(),
			getenv: func(k string) string { return env[k] }, run: mgr.run,
			lingering: func() bool { return true }, out: out, errOut: out,
		},
	}
}

func (f *serviceFixture) install(t *testing.T, opts installOptions) error {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = f.binary
	}
	return f.host.install(context.Background(), f.proj, opts)
}

// unitLines returns the directives of a unit file, comments left out.
func unitLines(data []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// requireDirectives fails unless every directive in want is a line of the
// unit, exactly.
func requireDirectives(t *testing.T, data []byte, want ...string) {
	t.Helper()
	lines := unitLines(data)
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("the unit lacks %q:\n%s", w, data)
		}
	}
}

func TestServiceInstallSystemd(t *testing.T) {
	f := newServiceFixture(t, managerSystemd)
	unit := deploy.UnitName(f.proj.ID)
	path := filepath.Join(f.host.configHome, "systemd", "user", unit)

	if err := f.install(t, installOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	requireDirectives(t, data,
		"Type=notify",
		"ExecStart="+f.binary+" run --project "+f.proj.Dir,
		"WorkingDirectory="+f.proj.Dir,
		`Environment="PATH=/home/alice/.local/bin:/usr/bin:/bin"`,
		"Restart=on-failure",
		"WantedBy=default.target",
	)
	if got, want := f.mgr.takeCalls(), []string{"systemctl --user daemon-reload", "systemctl --user enable --now " + unit}; !reflect.DeepEqual(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
	if !strings.Contains(f.out.String(), "journalctl --user -u "+unit) {
		t.Errorf("the output does not say where the logs are:\n%s", f.out)
	}

	t.Run("again, unchanged", func(t *testing.T) {
		if err := f.install(t, installOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, want := f.mgr.takeCalls(), []string{"systemctl --user daemon-reload", "systemctl --user enable --now " + unit}; !reflect.DeepEqual(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
	})

	t.Run("again, with another binary", func(t *testing.T) {
		// A running service keeps its old unit through enable --now: a
		// changed unit must be restarted to count.
		other := filepath.Join(t.TempDir(), "ctxgraphd")
		if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := f.install(t, installOptions{Binary: other}); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		requireDirectives(t, data, "ExecStart="+other+" run --project "+f.proj.Dir)
		if got, want := f.mgr.takeCalls(), []string{"systemctl --user daemon-reload", "systemctl --user enable " + unit, "systemctl --user restart " + unit}; !reflect.DeepEqual(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		if err := f.host.uninstall(context.Background(), f.proj); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", path, err)
		}
		want := []string{"systemctl --user disable --now " + unit, "systemctl --user reset-failed " + unit, "systemctl --user daemon-reload"}
		if got := f.mgr.takeCalls(); !reflect.DeepEqual(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
		// Again: nothing to do, and no error.
		if err := f.host.uninstall(context.Background(), f.proj); err != nil {
			t.Fatal(err)
		}
		if got := f.mgr.takeCalls(); len(got) != 0 {
			t.Errorf("uninstalling nothing ran %q", got)
		}
	})
}

func TestServiceInstallSystemdFailures(t *testing.T) {
	t.Run("start fails", func(t *testing.T) {
		f := newServiceFixture(t, managerSystemd)
		f.mgr.fail = func(call string) error {
			if strings.Contains(call, "enable") {
				return errors.New("Job for ctxgraphd.service failed because the control process exited with error code.")
			}
			return nil
		}
		err := f.install(t, installOptions{})
		if err == nil || !strings.Contains(err.Error(), "control process exited") || !strings.Contains(err.Error(), "journalctl --user -u "+deploy.UnitName(f.proj.ID)) {
			t.Fatalf("err = %v, want systemctl's message and where to look", err)
		}
		if _, err := os.Stat(f.host.unitPath(f.proj.ID)); err != nil {
			t.Errorf("the unit should stay written for the user to start: %v", err)
		}
	})
	t.Run("stop fails", func(t *testing.T) {
		f := newServiceFixture(t, managerSystemd)
		if err := f.install(t, installOptions{NoStart: true}); err != nil {
			t.Fatal(err)
		}
		f.mgr.fail = func(string) error { return errors.New("Failed to connect to bus: No medium found") }
		if err := f.host.uninstall(context.Background(), f.proj); err == nil || !strings.Contains(err.Error(), "left in place") {
			t.Fatalf("err = %v, want a refusal that leaves the unit", err)
		}
		if _, err := os.Stat(f.host.unitPath(f.proj.ID)); err != nil {
			t.Errorf("a service that may still run lost its unit: %v", err)
		}
	})
	t.Run("lingering off", func(t *testing.T) {
		f := newServiceFixture(t, managerSystemd)
		f.host.lingering = func() bool { return false }
		if err := f.install(t, installOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(f.out.String(), "loginctl enable-linger") {
			t.Errorf("no word about lingering:\n%s", f.out)
		}
	})
}

func TestServiceInstallNoStart(t *testing.T) {
	for _, manager := range []string{managerSystemd, managerLaunchd} {
		t.Run(manager, func(t *testing.T) {
			f := newServiceFixture(t, manager)
			if err := f.install(t, installOptions{NoStart: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(f.host.unitPath(f.proj.ID)); err != nil {
				t.Error(err)
			}
			if got := f.mgr.takeCalls(); len(got) != 0 {
				t.Errorf("--no-start ran %q", got)
			}
		})
	}
}

func TestServiceInstallLaunchd(t *testing.T) {
	f := newServiceFixture(t, managerLaunchd)
	label := deploy.Label(f.proj.ID)
	target := "gui/501/" + label
	path := filepath.Join(f.host.home, "Library", "LaunchAgents", label+".plist")
	loaded := false
	f.mgr.fail = func(call string) error {
		switch {
		case strings.HasPrefix(call, "launchctl print ") && !loaded:
			return errors.New("Could not find service")
		case strings.HasPrefix(call, "launchctl bootstrap "):
			loaded = true
		case strings.HasPrefix(call, "launchctl bootout "):
			loaded = false
		}
		return nil
	}

	if err := f.install(t, installOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(f.proj.StateDir, "daemon.log")
	for _, want := range []string{
		"<key>ProgramArguments</key>\n\t<array>\n\t\t<string>" + f.binary + "</string>\n\t\t<string>run</string>\n\t\t<string>--project</string>\n\t\t<string>" + f.proj.Dir + "</string>\n\t</array>",
		"<key>RunAtLoad</key>\n\t<true/>",
		"<key>KeepAlive</key>",
		"<key>StandardErrorPath</key>\n\t<string>" + logFile + "</string>",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the plist lacks\n%s\n---\n%s", want, data)
		}
	}
	if fi, err := os.Stat(f.proj.StateDir); err != nil || !fi.IsDir() {
		t.Errorf("the log's directory was not created: %v", err)
	}
	want := []string{"launchctl print " + target, "launchctl enable " + target, "launchctl bootstrap gui/501 " + path}
	if got := f.mgr.takeCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}

	t.Run("again, while loaded", func(t *testing.T) {
		if err := f.install(t, installOptions{}); err != nil {
			t.Fatal(err)
		}
		want := []string{"launchctl print " + target, "launchctl bootout " + target, "launchctl enable " + target, "launchctl bootstrap gui/501 " + path}
		if got := f.mgr.takeCalls(); !reflect.DeepEqual(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		if err := f.host.uninstall(context.Background(), f.proj); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", path, err)
		}
		want := []string{"launchctl print " + target, "launchctl bootout " + target}
		if got := f.mgr.takeCalls(); !reflect.DeepEqual(got, want) {
			t.Errorf("ran %q, want %q", got, want)
		}
	})
}

func TestServiceEnvironment(t *testing.T) {
	f := newServiceFixture(t, managerSystemd)
	env := map[string]string{
		"PATH":              "/usr/bin:/bin",
		"XDG_STATE_HOME":    "/home/alice/.state",
		"XDG_RUNTIME_DIR":   "/run/user/501",
		"TMPDIR":            "relative/is/ignored",
		"ANTHROPIC_API_KEY": "sk-never-written",
	}
	f.host.getenv = func(k string) string { return env[k] }
	data, _, err := f.host.render(f.proj, installOptions{Binary: f.binary})
	if err != nil {
		t.Fatal(err)
	}
	requireDirectives(t, data,
		`Environment="PATH=/usr/bin:/bin"`,
		`Environment="XDG_STATE_HOME=/home/alice/.state"`,
		`Environment="XDG_RUNTIME_DIR=/run/user/501"`,
	)
	for _, never := range []string{"TMPDIR", "sk-never-written"} {
		if bytes.Contains(data, []byte(never)) {
			t.Errorf("the unit holds %q:\n%s", never, data)
		}
	}
}

// TestServicePrint runs the command as people do: --print writes the unit
// for this platform to stdout and installs nothing.
func TestServicePrint(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no service manager support on " + runtime.GOOS)
	}
	proj := ctlProject(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	bin := filepath.Join(t.TempDir(), "ctxgraphd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := ctl(t, "service", "install", "--print", "--project", proj.Dir, "--binary", bin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if runtime.GOOS == "linux" {
		requireDirectives(t, []byte(stdout), "Type=notify", "ExecStart="+bin+" run --project "+proj.Dir)
	} else if !strings.Contains(stdout, "<string>"+bin+"</string>") {
		t.Errorf("the plist does not run %s:\n%s", bin, stdout)
	}
	for _, dir := range []string{os.Getenv("XDG_CONFIG_HOME"), os.Getenv("HOME")} {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Errorf("--print wrote into %s: %v", dir, entries)
		}
	}
}

func TestServiceRefuses(t *testing.T) {
	proj := ctlProject(t)
	notExec := filepath.Join(t.TempDir(), "ctxgraphd")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	goRun := filepath.Join(t.TempDir(), "go-build1234", "b001", "exe", "ctxgraphd")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"not a project", []string{"service", "install", "--print", "--project", t.TempDir(), "--binary", notExec}, exitFailure, "not a ctxgraphd project"},
		{"binary not executable", []string{"service", "install", "--print", "--project", proj.Dir, "--binary", notExec}, exitFailure, "not an executable file"},
		{"binary of go run", []string{"service", "install", "--print", "--project", proj.Dir, "--binary", goRun}, exitFailure, "temporary build of `go run`"},
		{"missing binary", []string{"service", "install", "--print", "--project", proj.Dir, "--binary", notExec + "-gone"}, exitFailure, "no such file"},
		{"stray argument", []string{"service", "install", "now"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"service", "install", "--bogus"}, exitUsage, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := ctl(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
