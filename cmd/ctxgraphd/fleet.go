package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/config"
	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/fleet"
	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/internal/spool"
	"github.com/ctxgraphd/ctxgraphd/judge"
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
		Monitor: cfg.NATS.Monitor,
		Log:     log.Named("fleet"),
	})
	if err != nil {
		return nil, err
	}
	// The URL is what a person needs to start a worker; `ctl workers`
	// says it too.
	log.Info("fleet started: workers connect to "+srv.ClientURL(), zap.String("url", srv.ClientURL()),
		zap.String("fleet", name))
	if a := srv.MonitorAddr(); a != nil {
		log.Info("the fleet's figures are served on http://"+a.String()+"/jsz (nats.monitor)", zap.Stringer("monitor", a))
	}
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

// newExecutor is the runner of a daemon whose lanes run on the fleet of
// laneRepos opens the repository of a run's work tree for the executor,
// with an index of its own in indexes: a lane's clone as the loop opens it
// (its objects the project's), or the project's own tree. lanes.copy's
// files (copies) are the person's: in no base a worker clones (they cross
// in the Assignment, to the worker bound to the run), nor any result.
func laneRepos(proj paths.Project, repo *gitrepo.Repo, indexes string, copies []string) func(context.Context, string) (*gitrepo.Repo, error) {
	return func(ctx context.Context, dir string) (*gitrepo.Repo, error) {
		sum := sha256.Sum256([]byte(dir))
		opts := gitrepo.Options{Dir: dir, Index: filepath.Join(indexes, hex.EncodeToString(sum[:8])), Exclude: append([]string{paths.ProgressDir}, copies...), Objects: repo.ObjectsDir()}
		if dir == proj.Dir {
			opts.Exclude, opts.Objects = append([]string{".claude"}, copies...), ""
		}
		return gitrepo.Open(ctx, opts)
	}
}

// srv: each run shipped to a worker, its result landed in the lane's work
// tree for the loop to judge. repo is the project's repository; a lane's
// clone is opened as the loop opens it (its objects the project's).
func newExecutor(ctx context.Context, srv *fleet.Server, proj paths.Project, cfg *config.Config, j *judge.Judge, repo *gitrepo.Repo, log *zap.Logger) (*fleet.Executor, error) {
	indexes := filepath.Join(proj.StateDir, "fleet", "index")
	if err := os.MkdirAll(indexes, 0o700); err != nil {
		return nil, err
	}
	ex, err := fleet.NewExecutor(ctx, srv.Conn(), srv.Subjects(), fleet.ExecutorOptions{
		Gates:      j,
		ProjectDir: proj.Dir,
		Copies:     j.Copies(),
		OpenRepo:   laneRepos(proj, repo, indexes, j.Copies().Names()),
		Run: fleet.RunOptions{
			Model: cfg.Agent.Model, Timeout: cfg.Agent.Timeout, IdleTimeout: cfg.Agent.IdleTimeout, MaxTurns: cfg.Agent.MaxTurns,
			MaxBudgetUSD: cfg.Budget.RunUSD, StuckAfter: cfg.Agent.StuckAfter,
			Processes: cfg.Sandbox.MaxProcesses, MemoryMB: cfg.Sandbox.MaxMemoryMB, FileMB: cfg.Sandbox.MaxFileMB,
		},
		Offline: func() ([]byte, error) { return os.ReadFile(filepath.Join(proj.StateDir, gates.OfflineFile)) },
		Spool: func(recs []spool.Record) {
			for _, r := range recs {
				if err := spool.Append(proj.StateDir, r); err != nil {
					log.Warn("could not keep what a worker's hooks decided alone", zap.Error(err))
				}
			}
		},
		Log: log,
	})
	if err != nil {
		return nil, err
	}
	srv.Attach(ex)
	return ex, nil
}
