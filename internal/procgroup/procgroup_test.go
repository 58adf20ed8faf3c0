package procgroup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// KillAndWait returns only once nothing of the group runs on: the command
// and what it left in the background.
func TestKillAndWait(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.CommandContext(context.Background(), "sh", "-c", "sleep 300 & echo $! > "+dir+"/tmp; mv "+dir+"/tmp "+dir+"/pid; sleep 300")
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var child int
	eventually.Within(10*time.Second, func() bool {
		data, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		return child != 0
	})
	if child == 0 || !Alive(cmd.Process.Pid) {
		t.Fatalf("the group %d did not start (child %d)", cmd.Process.Pid, child)
	}
	KillAndWait(cmd.Process.Pid, 5*time.Second)
	if Alive(cmd.Process.Pid) {
		t.Errorf("group %d is alive after KillAndWait", cmd.Process.Pid)
	}
	KillAndWait(0, time.Second) // no group: nothing to do, no signal to anyone
}
