package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// watchProgressDir reports changes of the files under dir on changed, one
// name per settled change. It watches the directory, not the files: editors
// and atomic writers replace a file by renaming over it, which a watch on
// the file itself would lose. Events for one name are debounced, so that a
// write in several chunks is read once, whole. On an overflow it reports
// every name it was told to care about, since any of them may have changed.
func watchProgressDir(ctx context.Context, dir string, names []string, debounce time.Duration, changed chan<- string, log *zap.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return err
	}
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	timers := map[string]*time.Timer{}
	fire := make(chan string, len(names))
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	schedule := func(name string) {
		if t, ok := timers[name]; ok {
			t.Reset(debounce)
			return
		}
		timers[name] = time.AfterFunc(debounce, func() {
			select {
			case fire <- name:
			case <-ctx.Done():
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			if !wanted[name] || ev.Op == fsnotify.Chmod {
				continue
			}
			schedule(name)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				log.Warn("watch queue overflowed; rescanning", zap.String("dir", dir))
				for n := range wanted {
					schedule(n)
				}
				continue
			}
			log.Warn("watch error", zap.Error(err))
		case name := <-fire:
			select {
			case changed <- name:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
