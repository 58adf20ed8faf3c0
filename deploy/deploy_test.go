package deploy

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the files in examples/ from the templates")

// The examples people copy when they install by hand.
var (
	exampleLinux = Service{
		ProjectID:  "shop-4f1c2a9b7d3e",
		ProjectDir: "/home/alice/src/shop",
		Binary:     "/usr/local/bin/ctxgraphd",
		Env:        []EnvVar{{"PATH", "/home/alice/.local/bin:/usr/local/bin:/usr/bin:/bin"}},
	}
	exampleMac = Service{
		ProjectID:  "shop-4f1c2a9b7d3e",
		ProjectDir: "/Users/alice/src/shop",
		Binary:     "/opt/homebrew/bin/ctxgraphd",
		Env:        []EnvVar{{"PATH", "/Users/alice/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}},
		LogFile:    "/Users/alice/Library/Application Support/ctxgraphd/shop-4f1c2a9b7d3e/daemon.log",
	}
	// A worker of exampleLinux's daemon on another machine, as the
	// README's walkthrough starts it.
	exampleWorker = Worker{
		Name:      "build-1",
		Binary:    "/usr/local/bin/ctxgraphd",
		NATSURL:   "tls://daemon.example.com:4222",
		CredsFile: "/home/bob/.config/ctxgraphd/build-1.creds",
		Slots:     2,
		Dir:       "/home/bob/ctxgraphd-work",
		Env:       []EnvVar{{"PATH", "/home/bob/.local/bin:/usr/local/bin:/usr/bin:/bin"}},
	}
)

func TestExamplesAreCurrent(t *testing.T) {
	for _, ex := range []struct {
		file   string
		render func() ([]byte, error)
	}{
		{UnitName(exampleLinux.ProjectID), func() ([]byte, error) { return SystemdUnit(exampleLinux) }},
		{Label(exampleMac.ProjectID) + ".plist", func() ([]byte, error) { return LaunchdPlist(exampleMac) }},
		{WorkerUnitName(exampleWorker.Name), func() ([]byte, error) { return WorkerSystemdUnit(exampleWorker) }},
	} {
		got, err := ex.render()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("examples", ex.file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run `go test ./deploy -update` to write it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the template renders; run `go test ./deploy -update` and review the diff\n--- rendered:\n%s", path, got)
		}
	}
}

func TestNames(t *testing.T) {
	if got, want := UnitName("shop-4f1c2a9b7d3e"), "ctxgraphd-shop-4f1c2a9b7d3e.service"; got != want {
		t.Errorf("UnitName = %q, want %q", got, want)
	}
	if got, want := Label("shop-4f1c2a9b7d3e"), "com.github.ctxgraphd.shop-4f1c2a9b7d3e"; got != want {
		t.Errorf("Label = %q, want %q", got, want)
	}
	if got, want := WorkerUnitName("build-1"), "ctxgraphd-worker-build-1.service"; got != want {
		t.Errorf("WorkerUnitName = %q, want %q", got, want)
	}
}

func TestSystemdUnit(t *testing.T) {
	tests := []struct {
		name string
		s    Service
		// want are directives the unit must hold, as "Section.Key": values
		// (every value of a repeated key, in order).
		want map[string][]string
	}{
		{
			name: "plain paths stay unquoted",
			s:    exampleLinux,
			want: map[string][]string{
				"Service.Type":             {"notify"},
				"Service.NotifyAccess":     {"main"},
				"Service.ExecStart":        {"/usr/local/bin/ctxgraphd run --project /home/alice/src/shop"},
				"Service.WorkingDirectory": {"/home/alice/src/shop"},
				"Service.Environment":      {`"PATH=/home/alice/.local/bin:/usr/local/bin:/usr/bin:/bin"`},
				"Service.EnvironmentFile":  {"-%E/ctxgraphd/env", "-%E/ctxgraphd/shop-4f1c2a9b7d3e.env"},
				"Service.Restart":          {"on-failure"},
				"Service.KillMode":         {"mixed"},
				"Install.WantedBy":         {"default.target"},
			},
		},
		{
			name: "spaces are quoted",
			s:    Service{ProjectID: "my-project-0123456789ab", ProjectDir: "/home/alice/My Project", Binary: "/opt/my tools/ctxgraphd"},
			want: map[string][]string{
				"Service.ExecStart":        {`"/opt/my tools/ctxgraphd" run --project "/home/alice/My Project"`},
				"Service.WorkingDirectory": {"/home/alice/My Project"},
				"Unit.Description":         {"ctxgraphd: Claude Code feature loop for /home/alice/My Project"},
			},
		},
		{
			name: "specifiers and variables are escaped",
			s: Service{ProjectID: "p-0123456789ab", ProjectDir: "/home/alice/100%$HOME", Binary: "/usr/bin/ctxgraphd",
				Env: []EnvVar{{"PATH", "/a%b/$bin"}, {"XDG_STATE_HOME", "/s"}}},
			want: map[string][]string{
				"Service.ExecStart":        {`/usr/bin/ctxgraphd run --project "/home/alice/100%%$$HOME"`},
				"Service.WorkingDirectory": {"/home/alice/100%%$HOME"},
				"Service.Environment":      {`"PATH=/a%%b/$bin"`, `"XDG_STATE_HOME=/s"`},
				"Unit.Description":         {"ctxgraphd: Claude Code feature loop for /home/alice/100%%$HOME"},
			},
		},
		{
			name: "quotes and backslashes are escaped",
			s:    Service{ProjectID: "p-0123456789ab", ProjectDir: `/home/a"b\c; rm`, Binary: "/usr/bin/ctxgraphd"},
			want: map[string][]string{
				"Service.ExecStart": {`/usr/bin/ctxgraphd run --project "/home/a\"b\\c; rm"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := SystemdUnit(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			got := unitDirectives(t, data)
			for k, want := range tt.want {
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s = %q, want %q\n%s", k, got[k], want, data)
				}
			}
			// Whatever the paths, systemd must read back exactly the
			// command line the service is.
			words, err := splitExecStart(got["Service.ExecStart"][0])
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{tt.s.Binary, "run", "--project", tt.s.ProjectDir}; !reflect.DeepEqual(words, want) {
				t.Errorf("ExecStart reads back as %q, want %q", words, want)
			}
		})
	}
}

// TestSystemdHardening pins what the units promise operations.md, the
// daemon's and the worker's alike: hardening that works in any user
// manager and under which Claude Code's sandbox (bubblewrap, user
// namespaces made without privileges) still runs, and none of the settings
// that would hide the socket directory, the project or the toolchains, or
// refuse the sandbox its namespaces.
func TestSystemdHardening(t *testing.T) {
	for name, render := range map[string]func() ([]byte, error){
		"daemon": func() ([]byte, error) { return SystemdUnit(exampleLinux) },
		"worker": func() ([]byte, error) { return WorkerSystemdUnit(exampleWorker) },
	} {
		t.Run(name, func(t *testing.T) {
			data, err := render()
			if err != nil {
				t.Fatal(err)
			}
			got := unitDirectives(t, data)
			for k, want := range map[string]string{
				"NoNewPrivileges": "yes", "LockPersonality": "yes", "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes",
				// SIGTERM to the main process alone, which ends its
				// runs itself; the cgroup is killed after the timeout.
				"KillMode": "mixed", "Restart": "on-failure",
			} {
				if v := got["Service."+k]; !reflect.DeepEqual(v, []string{want}) {
					t.Errorf("Service.%s = %q, want %s", k, v, want)
				}
			}
			for _, k := range []string{"PrivateTmp", "ProtectHome", "ProtectSystem", "MemoryDenyWriteExecute", "PrivateUsers", "RestrictNamespaces", "ReadOnlyPaths", "DynamicUser", "User"} {
				if v, ok := got["Service."+k]; ok {
					t.Errorf("Service.%s = %q: it breaks the daemon, the worker or their agents (see the template's comment)", k, v)
				}
			}
		})
	}
}

func TestRenderRefuses(t *testing.T) {
	good := exampleMac
	tests := []struct {
		name   string
		change func(*Service)
		want   string
	}{
		{"relative binary", func(s *Service) { s.Binary = "bin/ctxgraphd" }, `binary "bin/ctxgraphd": want an absolute path`},
		{"empty project", func(s *Service) { s.ProjectDir = "" }, `project directory "": want an absolute path`},
		{"newline in project", func(s *Service) { s.ProjectDir = "/home/a\nb" }, "control characters"},
		{"relative log file", func(s *Service) { s.LogFile = "daemon.log" }, `log file "daemon.log": want an absolute path`},
		{"odd project id", func(s *Service) { s.ProjectID = "a b" }, `project id "a b"`},
		{"empty project id", func(s *Service) { s.ProjectID = "" }, `project id ""`},
		{"bad variable name", func(s *Service) { s.Env = []EnvVar{{"1PATH", "x"}} }, `environment variable "1PATH"`},
		{"newline in a value", func(s *Service) { s.Env = []EnvVar{{"PATH", "a\nb"}} }, "environment variable PATH: a value with control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.change(&s)
			for name, render := range map[string]func(Service) ([]byte, error){"systemd": SystemdUnit, "launchd": LaunchdPlist} {
				if _, err := render(s); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: err = %v, want one containing %q", name, err, tt.want)
				}
			}
		})
	}
}

func TestLaunchdPlist(t *testing.T) {
	tests := []struct {
		name string
		s    Service
	}{
		{"example", exampleMac},
		{"markup in paths", Service{ProjectID: "p-0123456789ab", ProjectDir: "/Users/a/<b> & 'c' \"d\" -- e", Binary: "/usr/local/bin/ctxgraphd",
			Env: []EnvVar{{"PATH", "/x&y:/bin"}, {"TMPDIR", "/var/folders/x/T/"}}, LogFile: "/Users/a/Library/Logs/c&d.log"}},
		{"no environment, no log", Service{ProjectID: "p-0123456789ab", ProjectDir: "/Users/a/p", Binary: "/usr/local/bin/ctxgraphd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := LaunchdPlist(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			got := parsePlist(t, data)
			want := map[string]any{
				"Label":            Label(tt.s.ProjectID),
				"ProgramArguments": []any{tt.s.Binary, "run", "--project", tt.s.ProjectDir},
				"WorkingDirectory": tt.s.ProjectDir,
				"RunAtLoad":        true,
				"KeepAlive":        map[string]any{"SuccessfulExit": false},
				"ExitTimeOut":      int64(30),
			}
			if len(tt.s.Env) > 0 {
				env := map[string]any{}
				for _, e := range tt.s.Env {
					env[e.Name] = e.Value
				}
				want["EnvironmentVariables"] = env
			}
			if tt.s.LogFile != "" {
				want["StandardOutPath"] = tt.s.LogFile
				want["StandardErrorPath"] = tt.s.LogFile
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("plist reads back as\n%#v\nwant\n%#v\n%s", got, want, data)
			}
		})
	}
}

func TestWorkerSystemdUnit(t *testing.T) {
	tests := []struct {
		name string
		w    Worker
		// want are directives the unit must hold, as in TestSystemdUnit.
		want map[string][]string
		// argv is the command line systemd must read back from ExecStart.
		argv []string
	}{
		{
			name: "example",
			w:    exampleWorker,
			want: map[string][]string{
				"Service.Type":            {"exec"},
				"Service.ExecStart":       {"/usr/local/bin/ctxgraphd worker --nats tls://daemon.example.com:4222 --creds /home/bob/.config/ctxgraphd/build-1.creds --slots 2 --dir /home/bob/ctxgraphd-work"},
				"Service.Environment":     {`"PATH=/home/bob/.local/bin:/usr/local/bin:/usr/bin:/bin"`},
				"Service.EnvironmentFile": {"-%E/ctxgraphd/env", "-%E/ctxgraphd/worker-build-1.env"},
				"Service.TimeoutStopSec":  {"30s"},
				"Unit.Description":        {"ctxgraphd worker build-1: lanes from tls://daemon.example.com:4222"},
				"Install.WantedBy":        {"default.target"},
			},
			argv: []string{"/usr/local/bin/ctxgraphd", "worker", "--nats", "tls://daemon.example.com:4222",
				"--creds", "/home/bob/.config/ctxgraphd/build-1.creds", "--slots", "2", "--dir", "/home/bob/ctxgraphd-work"},
		},
		{
			name: "no directory, no CLI: the worker's own defaults",
			w:    Worker{Name: "w", Binary: "/usr/bin/ctxgraphd", NATSURL: "nats://127.0.0.1:4222", CredsFile: "/c/w.creds", Slots: 1},
			want: map[string][]string{
				"Service.ExecStart":   {"/usr/bin/ctxgraphd worker --nats nats://127.0.0.1:4222 --creds /c/w.creds --slots 1"},
				"Service.Environment": nil,
			},
			argv: []string{"/usr/bin/ctxgraphd", "worker", "--nats", "nats://127.0.0.1:4222", "--creds", "/c/w.creds", "--slots", "1"},
		},
		{
			name: "a CA of its own and the CLI's path",
			w: Worker{Name: "w", Binary: "/usr/bin/ctxgraphd", NATSURL: "tls://daemon:4222", CredsFile: "/c/w.creds", Slots: 3,
				CAFile: "/c/ca.pem", Claude: "/home/bob/.local/bin/claude"},
			argv: []string{"/usr/bin/ctxgraphd", "worker", "--nats", "tls://daemon:4222", "--creds", "/c/w.creds", "--slots", "3",
				"--ca", "/c/ca.pem", "--claude", "/home/bob/.local/bin/claude"},
		},
		{
			name: "spaces, specifiers, variables and quotes are escaped",
			w: Worker{Name: "w", Binary: "/opt/my tools/ctxgraphd", NATSURL: "tls://h:4222/?a=100%", CredsFile: `/home/b"o\b/$HOME.creds`,
				Slots: 2, Dir: "/work dir/%h", Claude: "/c/claude"},
			want: map[string][]string{
				"Unit.Description": {"ctxgraphd worker w: lanes from tls://h:4222/?a=100%%"},
			},
			argv: []string{"/opt/my tools/ctxgraphd", "worker", "--nats", "tls://h:4222/?a=100%", "--creds", `/home/b"o\b/$HOME.creds`,
				"--slots", "2", "--dir", "/work dir/%h", "--claude", "/c/claude"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := WorkerSystemdUnit(tt.w)
			if err != nil {
				t.Fatal(err)
			}
			got := unitDirectives(t, data)
			for k, want := range tt.want {
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s = %q, want %q\n%s", k, got[k], want, data)
				}
			}
			words, err := splitExecStart(got["Service.ExecStart"][0])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(words, tt.argv) {
				t.Errorf("ExecStart reads back as %q, want %q", words, tt.argv)
			}
		})
	}
}

func TestWorkerRenderRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Worker)
		want   string
	}{
		{"empty name", func(w *Worker) { w.Name = "" }, `worker name ""`},
		{"name with a slash", func(w *Worker) { w.Name = "../x" }, `worker name "../x"`},
		{"relative binary", func(w *Worker) { w.Binary = "ctxgraphd" }, `binary "ctxgraphd": want an absolute path`},
		{"no URL", func(w *Worker) { w.NATSURL = "" }, `NATS URL "": want the URL`},
		{"newline in the URL", func(w *Worker) { w.NATSURL = "tls://h:4222\nExecStartPre=/bin/sh" }, "NATS URL"},
		{"relative credentials", func(w *Worker) { w.CredsFile = "build-1.creds" }, `credentials file "build-1.creds": want an absolute path`},
		{"no credentials", func(w *Worker) { w.CredsFile = "" }, `credentials file "": want an absolute path`},
		{"no slot", func(w *Worker) { w.Slots = 0 }, "slots 0: want 1 or more"},
		{"negative slots", func(w *Worker) { w.Slots = -2 }, "slots -2"},
		{"relative CA", func(w *Worker) { w.CAFile = "ca.pem" }, `CA file "ca.pem": want an absolute path`},
		{"relative directory", func(w *Worker) { w.Dir = "work" }, `work directory "work": want an absolute path`},
		{"relative CLI", func(w *Worker) { w.Claude = "claude" }, `Claude Code CLI "claude": want an absolute path`},
		{"newline in the directory", func(w *Worker) { w.Dir = "/a\nb" }, "control characters"},
		{"bad variable name", func(w *Worker) { w.Env = []EnvVar{{"A-B", "x"}} }, `environment variable "A-B"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := exampleWorker
			tt.change(&w)
			if _, err := WorkerSystemdUnit(w); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	// The honest side: every optional field may be empty.
	w := exampleWorker
	w.CAFile, w.Dir, w.Claude, w.Env = "", "", "", nil
	if _, err := WorkerSystemdUnit(w); err != nil {
		t.Errorf("a worker without CA, directory, CLI or environment: %v", err)
	}
}

// unitDirectives reads a unit file the way systemd's parser splits it:
// sections, comments, "Key=value" lines (no continuation lines are used).
func unitDirectives(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("line %d: %q is not a directive in a section", i+1, line)
			}
			key := section + "." + strings.TrimSpace(k)
			out[key] = append(out[key], strings.TrimSpace(v))
		}
	}
	return out
}

// splitExecStart splits a command line as systemd does: words separated by
// blanks, double quotes, C escapes, then %% and $$ undone.
func splitExecStart(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == '"':
			quoted = !quoted
			inWord = true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, w.String())
	}
	unescape := strings.NewReplacer("%%", "%", "$$", "$")
	for i := range words {
		words[i] = unescape.Replace(words[i])
	}
	return words, nil
}

// parsePlist decodes an XML property list into Go values: string, bool,
// int64, []any and map[string]any.
func parsePlist(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	root, err := nextElement(d)
	if err != nil || root == nil || root.Name.Local != "plist" {
		t.Fatalf("no <plist> element (%v)", err)
	}
	top, err := nextElement(d)
	if err != nil || top == nil {
		t.Fatalf("empty <plist> (%v)", err)
	}
	v, err := plistValue(d, *top)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("top-level value is %T, want a dict", v)
	}
	return m
}

// nextElement returns the next start element, or nil at an end element.
func nextElement(d *xml.Decoder) (*xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			return &tok, nil
		case xml.EndElement:
			return nil, nil
		case xml.CharData:
			if len(bytes.TrimSpace(tok)) > 0 {
				return nil, fmt.Errorf("stray text %q", tok)
			}
		}
	}
}

func plistValue(d *xml.Decoder, start xml.StartElement) (any, error) {
	switch start.Name.Local {
	case "string":
		var s string
		err := d.DecodeElement(&s, &start)
		return s, err
	case "integer":
		var s string
		if err := d.DecodeElement(&s, &start); err != nil {
			return nil, err
		}
		return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	case "true", "false":
		return start.Name.Local == "true", d.Skip()
	case "array":
		out := []any{}
		for {
			el, err := nextElement(d)
			if err != nil || el == nil {
				return out, err
			}
			v, err := plistValue(d, *el)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	case "dict":
		out := map[string]any{}
		for {
			el, err := nextElement(d)
			if err != nil || el == nil {
				return out, err
			}
			if el.Name.Local != "key" {
				return nil, fmt.Errorf("<%s> where a <key> belongs", el.Name.Local)
			}
			var k string
			if err := d.DecodeElement(&k, el); err != nil {
				return nil, err
			}
			vel, err := nextElement(d)
			if err != nil || vel == nil {
				return nil, fmt.Errorf("key %q without a value (%v)", k, err)
			}
			if out[k], err = plistValue(d, *vel); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("unexpected <%s>", start.Name.Local)
}
