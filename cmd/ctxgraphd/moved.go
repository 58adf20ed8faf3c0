package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/ctxgraphd/ctxgraphd/internal/paths"
	"github.com/ctxgraphd/ctxgraphd/progress"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// carryOver keeps a project's state when its directory was moved or
// renamed. The state lives outside the project, under an id made from its
// path, so a moved project would start over as a new one: its session,
// counters, runs and traces left behind. session-state.json, which moves
// with the project, names the directory it was written in; when that
// directory is gone and its state is there, the state moves too. A copy (the
// former directory still holds the project) starts with a state of its own,
// and the log says how to carry the state over instead.
func carryOver(p paths.Project, log *zap.Logger) error {
	if _, err := os.Stat(filepath.Join(p.StateDir, store.FileName)); err == nil {
		return nil // it has its own state
	}
	data, err := os.ReadFile(filepath.Join(p.Progress(), progress.SessionStateFile))
	if err != nil {
		return nil // never run, or the mirror is gone: nothing to go by
	}
	var mirror struct {
		Project string `json:"project"`
	}
	if json.Unmarshal(data, &mirror) != nil || mirror.Project == "" || mirror.Project == p.Dir || !filepath.IsAbs(mirror.Project) {
		return nil
	}
	former, err := paths.Former(mirror.Project)
	if err != nil || former.StateDir == p.StateDir {
		return nil
	}
	if _, err := os.Stat(filepath.Join(former.StateDir, store.FileName)); err != nil {
		return nil // its state is gone too
	}
	if _, err := os.Stat(former.Progress()); err == nil {
		log.Warn("this project looks like a copy of another: it starts with a state of its own",
			zap.String("copy_of", former.Dir),
			zap.String("to_carry_the_state_over_instead", fmt.Sprintf("stop both daemons, then: mkdir -p %s && cp -a %s/. %s/", p.StateDir, former.StateDir, p.StateDir)))
		return nil
	}
	// Moved: the state follows, unless a daemon still holds it (one
	// started before the move runs on).
	st, err := store.Open(former.StateDir, 100*time.Millisecond)
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("this project was moved from %s, and the daemon started there still runs (%v): stop it, then start this one, which carries the state over", former.Dir, err)
		}
		return fmt.Errorf("this project was moved from %s, whose state could not be read: %w", former.Dir, err)
	}
	st.Close()
	if err := os.MkdirAll(filepath.Dir(p.StateDir), 0o700); err != nil {
		return err
	}
	os.Remove(p.StateDir) // an empty one, made before the move was seen, is no state
	if err := os.Rename(former.StateDir, p.StateDir); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("this project was moved from %s; carrying its state over failed: %w (move %s to %s by hand)", former.Dir, err, former.StateDir, p.StateDir)
	}
	log.Info("the project moved: its state came with it", zap.String("from", former.Dir), zap.String("to", p.Dir), zap.String("state", p.StateDir))
	return nil
}
