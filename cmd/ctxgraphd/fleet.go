package main

import (
	"context"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
)

// startFleet starts the NATS server embedded in the daemon when lanes run
// on workers through it (executor: nats, no nats.url), with its state in
// the project's state dir; nil, and no server, otherwise. The caller shuts
// it down once the loop has ended.
func startFleet(ctx context.Context, proj paths.Project, cfg *config.Config, log *zap.Logger) (*fleet.Server, error) {
	if cfg.Executor != config.ExecutorNATS || cfg.NATS.URL != "" {
		return nil, nil
	}
	name := fleetProject(proj.ID)
	srv, err := fleet.Start(ctx, fleet.Config{
		Dir:     filepath.Join(proj.StateDir, "fleet"),
		Project: name,
		Listen:  cfg.NATS.Listen,
		TLSCert: cfg.NATS.TLS.Cert,
		TLSKey:  cfg.NATS.TLS.Key,
		Log:     log.Named("fleet"),
	})
	if err != nil {
		return nil, err
	}
	// The URL is what a person needs to start a worker; `ctl workers`
	// says it too.
	log.Info("fleet started: workers connect to "+srv.ClientURL(), zap.String("url", srv.ClientURL()),
		zap.String("fleet", name))
	return srv, nil
}

// fleetControl is the fleet the control API serves: srv's workers, or,
// without a fleet, the answer that says how to have one.
func fleetControl(srv *fleet.Server) control.Fleet {
	if srv == nil {
		return fleet.Local
	}
	return srv.Control()
}

// fleetProject is the project's name in its fleet (fleet.Config.Project,
// which takes lower-case letters, digits and '-'): its id, lower-cased,
// with each run of other characters made one '-'. The id's hash, which
// stays, keeps two projects of one base name apart.
func fleetProject(id string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(id) {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}
