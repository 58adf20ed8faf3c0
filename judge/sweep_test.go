package judge

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/internal/inputs"
)

// TestSweepRemovesTheViewsOfAKilledDaemon: a daemon killed with -9
// during a recorded test run leaves the run's view mounted in its
// scratch directory, with no one to serve it ("transport endpoint is
// not connected" to a removal). The next daemon's Sweep detaches every
// such view and removes the directory whole, however many runs (and so
// views) were in flight.
func TestSweepRemovesTheViewsOfAKilledDaemon(t *testing.T) {
	f := newFixture(t, nil)
	base := filepath.Join(f.proj.StateDir, "checkouts")
	for range 3 {
		scratch, err := f.j.scratchDir()
		if err != nil {
			t.Fatal(err)
		}
		tree := filepath.Join(scratch, "checkout")
		if err := os.MkdirAll(filepath.Join(tree, "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(scratch, viewDir)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		daemon := exec.Command(os.Args[0], "-test.run=^$")
		daemon.Env = append(os.Environ(), holdViewEnv+"="+dir)
		out, err := daemon.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := daemon.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "serving\n" {
			daemon.Process.Kill()
			daemon.Wait()
			if _, err := inputs.Mount(tree, t.TempDir()); errors.Is(err, inputs.ErrNoFUSE) && os.Getenv("CI") == "" {
				t.Skip(err)
			}
			t.Fatalf("the daemon did not serve its view: %q", line)
		}
		// Should Sweep fail to, the test's own cleanup detaches it.
		t.Cleanup(func() { inputs.Detach(dir) })
		daemon.Process.Signal(syscall.SIGKILL)
		daemon.Wait()
		if _, err := os.ReadDir(dir); !errors.Is(err, syscall.ENOTCONN) {
			inputs.Detach(dir)
			t.Fatalf("a view whose server was killed: reading it gave %v, want ENOTCONN (the case to mend)", err)
		}
	}
	if err := f.j.Sweep(); err != nil {
		t.Fatalf("Sweep after a killed daemon: %v", err)
	}
	if _, err := os.Stat(base); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the scratch directory is still there after Sweep: %v", err)
	}
}
