package gates

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/atomicfile"
)

// OfflineFile is the file in the daemon's state directory where the daemon
// leaves what a hook needs to judge alone when the daemon does not answer:
// what only the daemon knows, and that the files of the project do not say.
const OfflineFile = "gates.json"

// Offline is the content of OfflineFile.
type Offline struct {
	Frozen         []string `json:"frozen"`          // the acceptance tests, project-relative
	ProtectedGlobs []string `json:"protected_globs"` // gates.protected
	Writable       []string `json:"writable"`        // directories outside the project agents may write
	Network        Network  `json:"network"`         // the hosts a run's WebFetch may reach
	// Guards are the active guards (warn and enforce), so that a hook
	// deciding alone holds agents to them too: no gate fails open. The
	// daemon reads guards.yaml and writes them here as JSON, so the hook
	// never parses YAML.
	Guards []guards.Rule `json:"guards,omitempty"`
}

// SaveOffline writes o to dir's OfflineFile, atomically.
func SaveOffline(dir string, o Offline) error {
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, OfflineFile), append(data, '\n'), 0o600)
}

// LoadOffline reads dir's OfflineFile. A missing file is an empty record: a
// daemon that never ran froze nothing and allowed nothing outside the
// project.
func LoadOffline(dir string) (Offline, error) {
	var o Offline
	data, err := os.ReadFile(filepath.Join(dir, OfflineFile))
	if errors.Is(err, fs.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return o, fmt.Errorf("%s: %w", filepath.Join(dir, OfflineFile), err)
	}
	return o, nil
}

// Apply puts the record into s.
func (o Offline) Apply(s *State) {
	s.Frozen = make(map[string]bool, len(o.Frozen))
	for _, p := range o.Frozen {
		s.Frozen[p] = true
	}
	s.ProtectedGlobs = slices.Clone(o.ProtectedGlobs)
	s.Writable = slices.Clone(o.Writable)
	s.Network = Network{Unconfined: o.Network.Unconfined, Hosts: slices.Clone(o.Network.Hosts)}
}
