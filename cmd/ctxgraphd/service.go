package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/deploy"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

func init() { subcommands = append(subcommands, newServiceCmd) }

// Service managers, by GOOS.
const (
	managerSystemd = "systemd"
	managerLaunchd = "launchd"
)

// pathEnv are the variables the daemon's paths depend on (internal/paths):
// the socket and the state directory. The service gets the installer's
// values so that the daemon listens where `ctxgraphd ctl`, run from the
// installer's shell, looks. launchd, for one, does not give its agents the
// TMPDIR of a Terminal session, and the socket falls back to the temp dir.
var pathEnv = []string{"XDG_STATE_HOME", "XDG_RUNTIME_DIR", "TMPDIR"}

func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run the project's daemon as a systemd user service (Linux) or a launchd agent (macOS)",
		Long: `service installs the project's daemon as a service of the current user: a systemd
user unit (Type=notify) on Linux, a launchd agent on macOS. One service per
project, named after the project id (ctxgraphd-<project-id>.service,
com.github.ctxgraphd.<project-id>). See docs/operations.md.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitUsage, err) })
	cmd.AddCommand(newServiceInstallCmd(), newServiceUninstallCmd())
	return cmd
}

func newServiceInstallCmd() *cobra.Command {
	var projectDir, binary string
	var noStart, printOnly bool
	cmd := &cobra.Command{
		Use:   "install [--project DIR] [--no-start] [--print]",
		Short: "Install and start the project's daemon as a service of this user",
		Long: `install writes a systemd user unit under $XDG_CONFIG_HOME/systemd/user/ and runs
systemctl --user daemon-reload and enable --now (Linux), or a launchd agent under
~/Library/LaunchAgents/ and loads it with launchctl bootstrap gui/<uid> (macOS).
The service runs ` + "`ctxgraphd run --project DIR`" + ` with this binary and this shell's PATH.
Installing again replaces the file and restarts the service if it changed.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			proj, err := findProject(projectDir)
			if err != nil {
				return err
			}
			h, err := defaultServiceHost(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			bin, err := serviceBinary(binary)
			if err != nil {
				return err
			}
			opts := installOptions{Binary: bin, NoStart: noStart}
			if printOnly {
				data, _, err := h.render(proj, opts)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			h.preflight(proj)
			return h.install(cmd.Context(), proj, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&projectDir, "project", "", "project directory (default: the project around the current directory)")
	f.BoolVar(&noStart, "no-start", false, "write the unit (or plist) but do not load or start it")
	f.BoolVar(&printOnly, "print", false, "print the unit (or plist) instead of installing it")
	f.StringVar(&binary, "binary", "", "the ctxgraphd binary the service runs (default: this one)")
	return cmd
}

func newServiceUninstallCmd() *cobra.Command {
	var projectDir string
	cmd := &cobra.Command{
		Use:   "uninstall [--project DIR]",
		Short: "Stop the project's service and remove its unit (or plist)",
		Long: `uninstall stops and disables the project's service and removes its unit (or plist).
The project and the daemon's state are left as they are.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The project need not be a ctxgraphd project any more (its
			// .claude/progress may be gone): its path alone names the service.
			var proj paths.Project
			var err error
			if projectDir != "" {
				proj, err = paths.ForProject(projectDir)
			} else {
				proj, err = findProject("")
			}
			if err != nil {
				return err
			}
			h, err := defaultServiceHost(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return h.uninstall(cmd.Context(), proj)
		},
	}
	cmd.Flags().StringVar(&projectDir, "project", "", "project directory (default: the project around the current directory)")
	return cmd
}

// installOptions are the choices of `service install`.
type installOptions struct {
	Binary  string // absolute path of the ctxgraphd the service runs
	NoStart bool   // write the file only
}

// serviceHost is what installing a service touches, gathered so that a test
// can point it at temporary directories and a fake systemctl/launchctl.
type serviceHost struct {
	manager    string // managerSystemd or managerLaunchd
	uid        int
	configHome string // $XDG_CONFIG_HOME or ~/.config: systemd user units go under it
	home       string // launchd agents go under ~/Library/LaunchAgents
	getenv     func(string) string
	// run runs systemctl or launchctl; its error carries what the command
	// printed.
	run func(ctx context.Context, name string, args ...string) error
	// lingering reports whether the user's systemd manager outlives their
	// sessions (loginctl enable-linger).
	lingering   func() bool
	out, errOut io.Writer
}

// defaultServiceHost is the host this process runs on.
func defaultServiceHost(out, errOut io.Writer) (*serviceHost, error) {
	var manager string
	switch runtime.GOOS {
	case "linux":
		manager = managerSystemd
	case "darwin":
		manager = managerLaunchd
	default:
		return nil, fmt.Errorf("service: no service manager support on %s (only systemd on Linux and launchd on macOS); run `ctxgraphd run --project DIR` under your own supervisor", runtime.GOOS)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("service: cannot find the home directory: %w", err)
	}
	configHome := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(configHome) { // unset, or relative and so invalid (XDG spec)
		configHome = filepath.Join(home, ".config")
	}
	return &serviceHost{
		manager: manager, uid: os.Getuid(), configHome: configHome, home: home,
		getenv: os.Getenv, run: runCommand, lingering: lingering, out: out, errOut: errOut,
	}, nil
}

// runCommand runs name with args and folds what it printed into the error.
func runCommand(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg != "" {
			return fmt.Errorf("`%s %s` failed: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return fmt.Errorf("`%s %s` failed: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// lingering reads logind's marker file, which is what `loginctl
// enable-linger` creates; asking logind over D-Bus would need a client
// library for one bit.
func lingering() bool {
	u, err := user.Current()
	if err != nil {
		return true // unknown: say nothing rather than something wrong
	}
	_, err = os.Stat(filepath.Join("/var/lib/systemd/linger", u.Username))
	return err == nil
}

// serviceBinary is the binary the service runs: flag, or this one.
func serviceBinary(flag string) (string, error) {
	bin := flag
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("service: cannot find this binary (%w); pass --binary PATH", err)
		}
		bin = exe
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("service: --binary %q: %w", bin, err)
	}
	// `go run` and `go test` build into a temporary directory that is gone
	// when they end: a unit pointing there fails at its next start.
	if strings.Contains(abs, string(filepath.Separator)+"go-build") {
		return "", fmt.Errorf("service: this ctxgraphd (%s) is a temporary build of `go run`; install a binary first (make build, or go install ./cmd/ctxgraphd) and run its `service install`, or pass --binary PATH", abs)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("service: binary %s: %w", abs, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("service: binary %s is not an executable file", abs)
	}
	return abs, nil
}

// service describes the project's daemon as the service runs it.
func (h *serviceHost) service(proj paths.Project, opts installOptions) deploy.Service {
	s := deploy.Service{ProjectID: proj.ID, ProjectDir: proj.Dir, Binary: opts.Binary}
	// Service managers start with a bare PATH (launchd's is /usr/bin:/bin:
	// /usr/sbin:/sbin), where `claude`, installed with npm or in
	// ~/.local/bin, is rarely found.
	if p := h.getenv("PATH"); p != "" {
		s.Env = append(s.Env, deploy.EnvVar{Name: "PATH", Value: p})
	}
	for _, name := range pathEnv {
		if v := h.getenv(name); v != "" && filepath.IsAbs(v) {
			s.Env = append(s.Env, deploy.EnvVar{Name: name, Value: v})
		}
	}
	if h.manager == managerLaunchd {
		// launchd has no journal: the daemon's log goes beside its state.
		s.LogFile = filepath.Join(proj.StateDir, "daemon.log")
	}
	return s
}

// render returns the unit (or plist) of the project and where it goes.
func (h *serviceHost) render(proj paths.Project, opts installOptions) (data []byte, path string, err error) {
	s := h.service(proj, opts)
	switch h.manager {
	case managerSystemd:
		data, err = deploy.SystemdUnit(s)
	case managerLaunchd:
		data, err = deploy.LaunchdPlist(s)
	default:
		err = fmt.Errorf("service: unknown service manager %q", h.manager)
	}
	if err != nil {
		return nil, "", fmt.Errorf("service for %s: %w", proj.Dir, err)
	}
	return data, h.unitPath(proj.ID), nil
}

// unitPath is where the project's unit (or plist) lives.
func (h *serviceHost) unitPath(projectID string) string {
	if h.manager == managerLaunchd {
		return filepath.Join(h.home, "Library", "LaunchAgents", deploy.Label(projectID)+".plist")
	}
	return filepath.Join(h.configHome, "systemd", "user", deploy.UnitName(projectID))
}

// preflight warns about what would make the service fail after a
// successful install; none of it stops the install, since the user may fix
// it afterwards.
func (h *serviceHost) preflight(proj paths.Project) {
	cfg, _, err := config.Load(config.Sources{ProjectDir: proj.Dir})
	if err != nil {
		fmt.Fprintf(h.errOut, "warning: the project's configuration is invalid, and the daemon will not start until it is fixed:\n%v\n", err)
		return
	}
	if cfg.Agent.Command != "" && !h.findsCommand(proj.Dir, cfg.Agent.Command) {
		fmt.Fprintf(h.errOut, "warning: agent.command %q is not found on this PATH; the daemon will stop at its first run (install Claude Code, or set agent.command to its path)\n", cfg.Agent.Command)
	}
	if os.Geteuid() == 0 && !cfg.Agent.AllowRoot && h.getenv("IS_SANDBOX") != "1" {
		fmt.Fprintln(h.errOut, "warning: running as root: the daemon refuses to run agents as root unless agent.allow_root is true or IS_SANDBOX=1 is in its environment (see docs/operations.md)")
	}
}

// findsCommand looks command up as the service will: on the PATH it is
// given, relative to the project directory.
func (h *serviceHost) findsCommand(dir, command string) bool {
	if strings.ContainsRune(command, filepath.Separator) {
		if !filepath.IsAbs(command) {
			command = filepath.Join(dir, command)
		}
		fi, err := os.Stat(command)
		return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
	}
	for _, d := range filepath.SplitList(h.getenv("PATH")) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if fi, err := os.Stat(filepath.Join(d, command)); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}

// install writes the project's unit (or plist) and, unless NoStart, loads
// and starts it.
func (h *serviceHost) install(ctx context.Context, proj paths.Project, opts installOptions) error {
	data, path, err := h.render(proj, opts)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("service: %w", err)
	}
	replaced := err == nil && !bytes.Equal(old, data)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if h.manager == managerLaunchd {
		// launchd opens the log file but does not create its directory.
		if err := os.MkdirAll(proj.StateDir, 0o700); err != nil {
			return fmt.Errorf("service: %w", err)
		}
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	fmt.Fprintf(h.out, "wrote %s\n", path)
	if h.manager == managerLaunchd {
		return h.installLaunchd(ctx, proj, path, opts.NoStart)
	}
	return h.installSystemd(ctx, proj, opts.NoStart, replaced)
}

func (h *serviceHost) installSystemd(ctx context.Context, proj paths.Project, noStart, replaced bool) error {
	unit := deploy.UnitName(proj.ID)
	if noStart {
		fmt.Fprintf(h.out, "start it with: systemctl --user daemon-reload && systemctl --user enable --now %s\n", unit)
		return nil
	}
	if err := h.run(ctx, "systemctl", "--user", "daemon-reload"); err != nil {
		return fmt.Errorf("service: the unit is written but systemd did not take it: %w\n%s, or install with --no-start and start the unit later", err, noUserManagerHint)
	}
	// enable --now leaves a running service on its old unit: a changed unit
	// needs a restart to take effect.
	steps := [][]string{{"enable", "--now", unit}}
	if replaced {
		steps = [][]string{{"enable", unit}, {"restart", unit}}
	}
	for _, args := range steps {
		if err := h.run(ctx, "systemctl", append([]string{"--user"}, args...)...); err != nil {
			return h.startFailed(err, unit)
		}
	}
	fmt.Fprintf(h.out, "started %s for %s\nstatus: ctxgraphd ctl status --project %s (or systemctl --user status %s)\nlogs:   journalctl --user -u %s -f\n",
		unit, proj.Dir, proj.Dir, unit, unit)
	if !h.lingering() {
		fmt.Fprintln(h.out, "note: lingering is off for this user, so the daemon stops when your last session ends; keep it running with: loginctl enable-linger")
	}
	return nil
}

// noUserManagerHint explains the usual reason systemctl --user fails at
// once: the shell has no user manager to talk to.
const noUserManagerHint = "systemctl --user needs this user's systemd manager: run it from a login session of the user (ssh, a desktop), not through su or sudo"

func (h *serviceHost) startFailed(err error, unit string) error {
	return fmt.Errorf("service: the unit is written but not running: %w\nsee: journalctl --user -u %s -n 50", err, unit)
}

func (h *serviceHost) installLaunchd(ctx context.Context, proj paths.Project, path string, noStart bool) error {
	domain := fmt.Sprintf("gui/%d", h.uid)
	target := domain + "/" + deploy.Label(proj.ID)
	if noStart {
		fmt.Fprintf(h.out, "load it with: launchctl bootstrap %s %s (or log in again)\n", domain, path)
		return nil
	}
	// bootstrap refuses a job that is already loaded: take the old one out
	// first, so that installing again applies the new plist.
	if h.run(ctx, "launchctl", "print", target) == nil {
		if err := h.run(ctx, "launchctl", "bootout", target); err != nil {
			return fmt.Errorf("service: the plist is written but the old agent could not be unloaded: %w", err)
		}
	}
	// A job once disabled (launchctl disable) stays disabled across
	// bootstraps until enabled again.
	for _, args := range [][]string{{"enable", target}, {"bootstrap", domain, path}} {
		if err := h.run(ctx, "launchctl", args...); err != nil {
			return fmt.Errorf("service: the plist is written but not loaded: %w\nsee: %s", err, filepath.Join(proj.StateDir, "daemon.log"))
		}
	}
	fmt.Fprintf(h.out, "loaded %s for %s\nstatus: ctxgraphd ctl status --project %s (or launchctl print %s)\nlogs:   %s\n",
		deploy.Label(proj.ID), proj.Dir, proj.Dir, target, filepath.Join(proj.StateDir, "daemon.log"))
	return nil
}

// uninstall stops the project's service and removes its unit (or plist).
// Nothing installed is not an error: uninstall is safe to repeat.
func (h *serviceHost) uninstall(ctx context.Context, proj paths.Project) error {
	path := h.unitPath(proj.ID)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h.out, "no service installed for %s (no %s)\n", proj.Dir, path)
		return nil
	}
	switch h.manager {
	case managerLaunchd:
		target := fmt.Sprintf("gui/%d/%s", h.uid, deploy.Label(proj.ID))
		if h.run(ctx, "launchctl", "print", target) == nil {
			if err := h.run(ctx, "launchctl", "bootout", target); err != nil {
				return fmt.Errorf("service: could not unload %s, so %s is left in place: %w", target, path, err)
			}
		}
	default:
		unit := deploy.UnitName(proj.ID)
		if err := h.run(ctx, "systemctl", "--user", "disable", "--now", unit); err != nil {
			return fmt.Errorf("service: could not stop %s, so %s is left in place: %w\n%s; if the service is not running, remove the file by hand", unit, path, err, noUserManagerHint)
		}
		// A unit that had failed would stay listed as failed, and not found,
		// after its file is gone.
		_ = h.run(ctx, "systemctl", "--user", "reset-failed", unit)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("service: %w", err)
	}
	if h.manager == managerSystemd {
		if err := h.run(ctx, "systemctl", "--user", "daemon-reload"); err != nil {
			return fmt.Errorf("service: removed %s, but: %w", path, err)
		}
	}
	fmt.Fprintf(h.out, "removed %s; the project and the daemon's state (%s) are left as they are\n", path, proj.StateDir)
	return nil
}
