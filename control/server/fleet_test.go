package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/fleet"
)

// fleetBackend is a fake daemon whose workers are a real fleet's, or
// fleet.Local's.
type fleetBackend struct {
	gateBackend
	control.Fleet
}

// Workers, AddWorker and RevokeWorker are the fleet's, not the fake's.
func (f *fleetBackend) Workers(ctx context.Context) (control.WorkerList, error) {
	return f.Fleet.Workers(ctx)
}

func (f *fleetBackend) AddWorker(ctx context.Context, name string) (control.NewWorker, error) {
	return f.Fleet.AddWorker(ctx, name)
}

func (f *fleetBackend) RevokeWorker(ctx context.Context, name string) error {
	return f.Fleet.RevokeWorker(ctx, name)
}

// startFleet starts a fleet's server with its state in a directory of
// the test's, stopped when the test ends.
func startFleet(t *testing.T) (*fleet.Server, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := fleet.Start(t.Context(), fleet.Config{Dir: dir, Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, dir
}

// workerCall is one call of the workers routes, answering what the
// client got: the list's names, the new worker's credentials, or nothing.
type workerCall func(context.Context, *control.Client) (string, error)

func listWorkers(ctx context.Context, c *control.Client) (string, error) {
	l, err := c.Workers(ctx)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(l.URL, "nats://127.0.0.1:") || l.Workers == nil {
		return "", errors.New("the list has no URL or no array: " + l.URL)
	}
	var names []string
	for _, w := range l.Workers {
		if w.PublicKey == "" || filepath.Base(w.Credentials) != w.Name+".creds" {
			return "", errors.New("worker " + w.Name + " without key or credentials")
		}
		names = append(names, w.Name)
	}
	return "[" + strings.Join(names, " ") + "]", nil
}

func addWorker(name string) workerCall {
	return func(ctx context.Context, c *control.Client) (string, error) {
		w, err := c.AddWorker(ctx, name)
		if err != nil {
			return "", err
		}
		if w.Name != name || w.PublicKey == "" || !strings.HasPrefix(w.URL, "nats://127.0.0.1:") {
			return "", errors.New("incomplete answer")
		}
		if _, err := os.Stat(w.Credentials); err != nil {
			return "", err
		}
		return filepath.Base(w.Credentials), nil
	}
}

func revokeWorker(name string) workerCall {
	return func(ctx context.Context, c *control.Client) (string, error) { return "", c.RevokeWorker(ctx, name) }
}

// TestWorkerRoutes: a person lists, adds and revokes workers of the
// daemon's fleet, each refusal with its status, its code and a message
// that says what to do; in turn, on one fleet.
func TestWorkerRoutes(t *testing.T) {
	sock := socketIn(t)
	s, _ := startFleet(t)
	b := &fleetBackend{Fleet: s.Control()}
	serve(t, sock, b, nil)
	c := control.NewClient(sock)

	for _, step := range []struct {
		name    string
		call    workerCall
		want    string
		status  int
		code    string
		message string
	}{
		{"none yet", listWorkers, "[]", 200, "", ""},
		{"add", addWorker("build-1"), "build-1.creds", 200, "", ""},
		{"add another", addWorker("b2"), "b2.creds", 200, "", ""},
		{"listed by name", listWorkers, "[b2 build-1]", 200, "", ""},
		{"a name taken", addWorker("build-1"), "", 409, control.CodeConflict, `worker "build-1" exists: revoke it first`},
		{"upper case", addWorker("Build-1"), "", 400, control.CodeBadRequest, "want 1 to 63 lower-case letters, digits and '-'"},
		{"a path", addWorker("../x"), "", 400, control.CodeBadRequest, "want 1 to 63 lower-case letters, digits and '-'"},
		{"no name", addWorker(""), "", 400, control.CodeBadRequest, "want 1 to 63 lower-case letters, digits and '-'"},
		{"revoke", revokeWorker("build-1"), "", 200, "", ""},
		{"gone", listWorkers, "[b2]", 200, "", ""},
		{"revoke again", revokeWorker("build-1"), "", 404, control.CodeUnknownWorker, "`ctxgraphd ctl workers` lists them"},
		{"revoke a bad name", revokeWorker("B 2"), "", 400, control.CodeBadRequest, "want 1 to 63 lower-case letters"},
	} {
		got, err := step.call(t.Context(), c)
		if step.status == 200 {
			if err != nil || got != step.want {
				t.Fatalf("%s: %q, %v; want %q", step.name, got, err, step.want)
			}
			continue
		}
		var ae *control.APIError
		if !errors.As(err, &ae) || ae.HTTPStatus != step.status || ae.Code != step.code || !strings.Contains(ae.Message, step.message) {
			t.Errorf("%s: %v (%+v), want %d %s saying %q", step.name, err, ae, step.status, step.code, step.message)
		}
	}
}

// TestWorkerRoutesAreForPeople: a run's token or a run's process is
// refused every workers route, the list too (it names the credentials),
// and the fleet is untouched; a person's same requests go through.
func TestWorkerRoutesAreForPeople(t *testing.T) {
	calls := []struct {
		name string
		call workerCall
	}{
		{"list", listWorkers},
		{"add", addWorker("w")},
		{"revoke", revokeWorker("w")},
	}
	for _, by := range []string{"token", "process"} {
		t.Run(by, func(t *testing.T) {
			sock := socketIn(t)
			s, dir := startFleet(t)
			b := &fleetBackend{Fleet: s.Control()}
			serve(t, sock, b, nil)
			c := control.NewClient(sock)
			if by == "token" {
				c.RunToken = "secret-of-run-1"
			} else {
				b.runPID = os.Getpid() // this test process plays the agent
			}
			for _, call := range calls {
				_, err := call.call(t.Context(), c)
				var ae *control.APIError
				if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusForbidden || !strings.Contains(ae.Message, "the workers is for people") {
					t.Errorf("%s by a run's %s = %v, want 403 saying the workers are for people", call.name, by, err)
				}
			}
			if creds, _ := filepath.Glob(filepath.Join(dir, "workers", "*.creds")); len(creds) != 0 {
				t.Errorf("a refused add issued credentials: %v", creds)
			}
			c.RunToken, b.runPID = "", 0
			for _, call := range calls {
				if _, err := call.call(t.Context(), c); err != nil {
					t.Errorf("%s by a person: %v", call.name, err)
				}
			}
		})
	}
}

// TestWorkerRoutesWithoutAFleet: a daemon whose lanes run on its own
// machine answers every workers route 409 no_fleet, naming the setting
// that gives it workers and where it goes.
func TestWorkerRoutesWithoutAFleet(t *testing.T) {
	sock := socketIn(t)
	serve(t, sock, &fleetBackend{Fleet: fleet.Local}, nil)
	c := control.NewClient(sock)
	for _, call := range []struct {
		name string
		call workerCall
	}{
		{"list", listWorkers},
		{"add", addWorker("w")},
		{"revoke", revokeWorker("w")},
	} {
		_, err := call.call(t.Context(), c)
		var ae *control.APIError
		if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusConflict || ae.Code != control.CodeNoFleet ||
			!strings.Contains(ae.Message, "executor: nats in .claude/ctxgraphd.yaml") {
			t.Errorf("%s without a fleet = %v, want 409 no_fleet naming executor: nats in .claude/ctxgraphd.yaml", call.name, err)
		}
	}
}
