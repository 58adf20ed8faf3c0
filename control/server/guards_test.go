package server_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/control/controltest"
)

// guardBackend adds the guard routes to the fake backend.
type guardBackend struct {
	controltest.Backend
	promoted, retired []string
}

var sampleGuard = control.Guard{ID: "g-1a2b3c4d", Status: "warn", Source: "pattern failing_command", Rule: "agents, Bash: command ~ /make deploy/ → deny",
	Tool: "Bash", Match: control.GuardMatch{Command: "make deploy"}, Message: "m", WouldBe: 2}

func (g *guardBackend) Guards(context.Context) (control.GuardList, error) {
	return control.GuardList{Guards: []control.Guard{sampleGuard}, File: "/p/.claude/ctxgraphd/guards.yaml", Problem: "line 3: bad"}, nil
}

func (g *guardBackend) PromoteGuard(_ context.Context, id string) (control.Guard, error) {
	if id != sampleGuard.ID {
		return control.Guard{}, &control.APIError{HTTPStatus: http.StatusNotFound, Code: "unknown_guard", Message: "no guard " + id}
	}
	g.promoted = append(g.promoted, id)
	out := sampleGuard
	out.Status = "enforce"
	return out, nil
}

func (g *guardBackend) RetireGuard(_ context.Context, id string) (control.Guard, error) {
	g.retired = append(g.retired, id)
	out := sampleGuard
	out.Status = "retired"
	return out, nil
}

// The guard routes carry the list, a promotion and a retirement whole; a
// backend's error reaches the client as it was; and promoting or retiring
// is for people: a request with a run's token is refused before the
// backend hears of it.
func TestGuardRoutes(t *testing.T) {
	sock := socketIn(t)
	g := &guardBackend{}
	controltest.Serve(t, sock, g)
	c := control.NewClient(sock)
	ctx := t.Context()

	l, err := c.Guards(ctx)
	if err != nil || !reflect.DeepEqual(l.Guards, []control.Guard{sampleGuard}) || l.Problem != "line 3: bad" || l.File == "" {
		t.Fatalf("Guards() = %+v, %v", l, err)
	}
	if got, err := c.PromoteGuard(ctx, sampleGuard.ID); err != nil || got.Status != "enforce" {
		t.Fatalf("PromoteGuard() = %+v, %v", got, err)
	}
	if got, err := c.RetireGuard(ctx, sampleGuard.ID); err != nil || got.Status != "retired" {
		t.Fatalf("RetireGuard() = %+v, %v", got, err)
	}
	var apiErr *control.APIError
	if _, err := c.PromoteGuard(ctx, "g-nope"); !errors.As(err, &apiErr) || apiErr.Code != "unknown_guard" {
		t.Fatalf("PromoteGuard(unknown) = %v, want the backend's unknown_guard", err)
	}

	agent := control.NewClient(sock)
	agent.RunToken = "secret-of-run-1"
	if _, err := agent.PromoteGuard(ctx, sampleGuard.ID); !errors.As(err, &apiErr) || apiErr.Code != control.CodeForbidden {
		t.Errorf("an agent's PromoteGuard = %v, want forbidden", err)
	}
	if _, err := agent.RetireGuard(ctx, sampleGuard.ID); !errors.As(err, &apiErr) || apiErr.Code != control.CodeForbidden {
		t.Errorf("an agent's RetireGuard = %v, want forbidden", err)
	}
	if len(g.promoted) != 1 || len(g.retired) != 1 {
		t.Errorf("the backend saw promotions %v and retirements %v, want one each (the agent's refused)", g.promoted, g.retired)
	}
}
