package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Run returns once the script has ended, with its exit status and its
// output: what it wrote is there when Run returns.
func TestRunWaitsForTheScript(t *testing.T) {
	dir := t.TempDir()
	j := TestJail{Checkout: dir, Mount: dir, Writable: []string{dir}, Env: []string{"PATH=/usr/bin:/bin"}}
	var out bytes.Buffer
	_, err := j.Run(t.Context(), "sleep 0.3; echo done > "+filepath.Join(dir, "f")+"; echo said; exit 3", &out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Run = %v, want the script's exit status 3", err)
	}
	if data, rerr := os.ReadFile(filepath.Join(dir, "f")); rerr != nil || strings.TrimSpace(string(data)) != "done" {
		t.Errorf("when Run returned, the script's file held %q (%v): it had not ended", data, rerr)
	}
	if !strings.Contains(out.String(), "said") {
		t.Errorf("output %q, want what the script said", out.String())
	}
	if _, err := j.Run(t.Context(), "true", nil); err != nil {
		t.Errorf("Run(true) = %v", err)
	}
}

// Run says the CPU time its processes took.
func TestRunSaysItsCPUTime(t *testing.T) {
	dir := t.TempDir()
	j := TestJail{Checkout: dir, Mount: dir, Env: []string{"PATH=/usr/bin:/bin"}}
	cpu, err := j.Run(t.Context(), "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done", nil)
	if err != nil || cpu < 50*time.Millisecond {
		t.Errorf("Run of a busy loop: %v of CPU, %v; want its time", cpu, err)
	}
}
