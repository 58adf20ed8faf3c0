// Package deploy renders the files that run ctxgraphd as a service: one
// project's daemon as a systemd user unit on Linux or a launchd agent on
// macOS, and a worker of a daemon that runs lanes on workers (executor:
// nats) as a systemd user unit.
//
// The templates are the .tmpl files beside this one, embedded, so that what
// `ctxgraphd service install` writes and the examples in deploy/examples,
// for people who install by hand, come from one source (a test keeps the
// examples current). Rendering is a pure function of a Service or a
// Worker: it reads no environment and touches no file, so that it can be
// tested to the byte.
//
// The worker's image recipe (container/) and its Kubernetes files
// (kubernetes/) are not rendered; this package's tests hold them to the
// Makefile's Claude Code version, to each other and to the fleet's names.
package deploy

import (
	"bytes"
	"embed"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

//go:embed systemd.service.tmpl launchd.plist.tmpl systemd-worker.service.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("deploy").Funcs(template.FuncMap{
	"execArg":   systemdExecArg,
	"envAssign": systemdEnvAssign,
	"specifier": systemdNoSpecifiers,
	"xml":       xmlText,
}).ParseFS(templateFS, "*.tmpl"))

// Service is one project's daemon as a service manager runs it:
// `Binary run --project ProjectDir`, in ProjectDir, with Env.
type Service struct {
	// ProjectID names the unit and the launchd label (internal/paths
	// derives it from the project's real path).
	ProjectID string
	// ProjectDir is the absolute real path of the project.
	ProjectDir string
	// Binary is the absolute path of the ctxgraphd binary.
	Binary string
	// Env is set in the daemon's environment, in this order.
	Env []EnvVar
	// LogFile receives the daemon's stdout and stderr under launchd, which
	// has no journal; systemd ignores it. Empty means no log file.
	LogFile string
}

// EnvVar is one variable of the daemon's environment.
type EnvVar struct {
	Name, Value string
}

// UnitName returns the systemd unit of a project, e.g.
// "ctxgraphd-shop-4f1c2a9b7d3e.service": one per project, so that several
// projects of one user each have their own daemon.
func UnitName(projectID string) string { return "ctxgraphd-" + projectID + ".service" }

// Label returns the launchd label of a project, e.g.
// "com.github.ctxgraphd.shop-4f1c2a9b7d3e"; the plist file is the label
// plus ".plist".
func Label(projectID string) string { return "com.github.ctxgraphd." + projectID }

// UnitName is UnitName(s.ProjectID), for the templates.
func (s Service) UnitName() string { return UnitName(s.ProjectID) }

// Label is Label(s.ProjectID), for the templates.
func (s Service) Label() string { return Label(s.ProjectID) }

// SystemdUnit renders s as a systemd user unit (Type=notify).
func SystemdUnit(s Service) ([]byte, error) {
	return render("systemd.service.tmpl", s)
}

// LaunchdPlist renders s as a launchd agent property list.
func LaunchdPlist(s Service) ([]byte, error) {
	return render("launchd.plist.tmpl", s)
}

// Worker is one worker of a daemon's fleet as a service manager runs it:
// `Binary worker --nats NATSURL --creds CredsFile --slots Slots`, with
// `--ca CAFile`, `--dir Dir` and `--claude Claude` when set, and Env.
type Worker struct {
	// Name is the worker's name, as `ctxgraphd ctl workers add NAME`
	// issued its credentials; it names the unit and its environment file,
	// so that one machine can run workers of several daemons.
	Name string
	// Binary is the absolute path of the ctxgraphd binary.
	Binary string
	// NATSURL is the daemon's NATS listener, as `ctxgraphd ctl workers`
	// shows it.
	NATSURL string
	// CredsFile is the absolute path of the worker's credentials, the
	// NAME.creds file copied from the daemon's machine.
	CredsFile string
	// CAFile is the absolute path of the CA that signed the daemon's
	// nats.tls.cert, when the system does not trust it; empty: the
	// system's.
	CAFile string
	// Slots is how many lanes the worker runs at once.
	Slots int
	// Dir is where the worker makes its clones; empty: the worker's
	// default, in the user's state directory.
	Dir string
	// Claude is the absolute path of the Claude Code CLI; empty: claude,
	// found on PATH.
	Claude string
	// Env is set in the worker's environment, in this order.
	Env []EnvVar
}

// WorkerUnitName returns the systemd unit of a worker, e.g.
// "ctxgraphd-worker-build-1.service".
func WorkerUnitName(name string) string { return "ctxgraphd-worker-" + name + ".service" }

// UnitName is WorkerUnitName(w.Name), for the template.
func (w Worker) UnitName() string { return WorkerUnitName(w.Name) }

// WorkerSystemdUnit renders w as a systemd user unit.
func WorkerSystemdUnit(w Worker) ([]byte, error) {
	return render("systemd-worker.service.tmpl", w)
}

// validate refuses what a unit file cannot carry, as Service.validate
// does, and a worker with no lane to run.
func (w Worker) validate() error {
	var errs []error
	if !idRe.MatchString(w.Name) {
		errs = append(errs, fmt.Errorf("worker name %q: want the name its credentials were issued to (`ctxgraphd ctl workers add NAME`), of letters, digits, '.', '_' and '-' only", w.Name))
	}
	switch {
	case w.NATSURL == "":
		errs = append(errs, errors.New(`NATS URL "": want the URL the worker connects to, such as tls://daemon.example.com:4222`))
	case hasControl(w.NATSURL):
		errs = append(errs, fmt.Errorf("NATS URL %q: a value with control characters cannot be written in a unit file", w.NATSURL))
	}
	if w.Slots < 1 {
		errs = append(errs, fmt.Errorf("slots %d: want 1 or more lanes at once", w.Slots))
	}
	errs = append(errs, checkPath("binary", w.Binary, false), checkPath("credentials file", w.CredsFile, false),
		checkPath("CA file", w.CAFile, true), checkPath("work directory", w.Dir, true), checkPath("Claude Code CLI", w.Claude, true))
	errs = append(errs, checkEnv(w.Env)...)
	return errors.Join(errs...)
}

func render(name string, data interface{ validate() error }) ([]byte, error) {
	if err := data.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.Bytes(), nil
}

var (
	idRe      = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validate refuses what neither format can carry: a unit file has no way to
// write a newline inside a value, and a relative path would be resolved
// against whatever directory the service manager happens to use.
func (s Service) validate() error {
	var errs []error
	if !idRe.MatchString(s.ProjectID) {
		errs = append(errs, fmt.Errorf("project id %q: want letters, digits, '.', '_' and '-' only", s.ProjectID))
	}
	errs = append(errs, checkPath("project directory", s.ProjectDir, false), checkPath("binary", s.Binary, false),
		checkPath("log file", s.LogFile, true))
	errs = append(errs, checkEnv(s.Env)...)
	return errors.Join(errs...)
}

// checkPath refuses a path that is relative or that a unit file cannot
// carry; an optional path may be empty.
func checkPath(what, path string, optional bool) error {
	switch {
	case optional && path == "":
		return nil
	case !filepath.IsAbs(path):
		return fmt.Errorf("%s %q: want an absolute path", what, path)
	case hasControl(path):
		return fmt.Errorf("%s %q: a path with control characters (a newline, …) cannot be written in a unit file", what, path)
	}
	return nil
}

// checkEnv refuses variables that a service's environment cannot carry.
func checkEnv(env []EnvVar) []error {
	var errs []error
	for _, e := range env {
		if !envNameRe.MatchString(e.Name) {
			errs = append(errs, fmt.Errorf("environment variable %q: not a valid name", e.Name))
		}
		if hasControl(e.Value) {
			errs = append(errs, fmt.Errorf("environment variable %s: a value with control characters cannot be written in a unit file", e.Name))
		}
	}
	return errs
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// systemdSafe is what a word of ExecStart may hold unquoted.
var systemdSafe = regexp.MustCompile(`^[A-Za-z0-9_@+=:,./-]+$`)

// systemdExecArg writes one word of ExecStart. systemd expands %
// specifiers and $VARIABLES in ExecStart, and splits on blanks outside
// quotes; a word with anything but plain path characters is double-quoted
// with C escapes.
func systemdExecArg(s string) string {
	s = strings.ReplaceAll(systemdNoSpecifiers(s), "$", "$$")
	if systemdSafe.MatchString(s) {
		return s
	}
	return systemdQuote(s)
}

// systemdEnvAssign writes one assignment of Environment=, always quoted:
// PATH and its friends often hold characters ExecStart-style splitting
// would break on. Environment= expands % specifiers but not $VARIABLES.
func systemdEnvAssign(e EnvVar) string {
	return systemdQuote(e.Name + "=" + systemdNoSpecifiers(e.Value))
}

// systemdNoSpecifiers escapes %, which systemd expands in most settings
// (WorkingDirectory= among them, which takes no quotes).
func systemdNoSpecifiers(s string) string { return strings.ReplaceAll(s, "%", "%%") }

func systemdQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// xmlText escapes s for the text of a plist element.
func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}
