// Package deploy renders the files that run one project's daemon as a
// service: a systemd user unit on Linux, a launchd agent on macOS.
//
// The templates are the .tmpl files beside this one, embedded, so that what
// `ctxgraphd service install` writes and the examples in deploy/examples,
// for people who install by hand, come from one source (a test keeps the
// examples current). Rendering is a pure function of a Service: it reads no
// environment and touches no file, so that it can be tested to the byte.
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

//go:embed systemd.service.tmpl launchd.plist.tmpl
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

func render(name string, s Service) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, s); err != nil {
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
	for _, p := range []struct{ what, path string }{{"project directory", s.ProjectDir}, {"binary", s.Binary}, {"log file", s.LogFile}} {
		if p.what == "log file" && p.path == "" {
			continue
		}
		if !filepath.IsAbs(p.path) {
			errs = append(errs, fmt.Errorf("%s %q: want an absolute path", p.what, p.path))
		} else if hasControl(p.path) {
			errs = append(errs, fmt.Errorf("%s %q: a path with control characters (a newline, …) cannot be written in a unit file", p.what, p.path))
		}
	}
	for _, e := range s.Env {
		if !envNameRe.MatchString(e.Name) {
			errs = append(errs, fmt.Errorf("environment variable %q: not a valid name", e.Name))
		}
		if hasControl(e.Value) {
			errs = append(errs, fmt.Errorf("environment variable %s: a value with control characters cannot be written in a unit file", e.Name))
		}
	}
	return errors.Join(errs...)
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
