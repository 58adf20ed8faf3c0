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
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
	}
	if child == 0 || !Alive(cmd.Process.Pid) {
		t.Fatalf("the group %d did not start (child %d)", cmd.Process.Pid, child)
	}
	KillAndWait(cmd.Process.Pid, 5*time.Second)
	if Alive(cmd.Process.Pid) {
		t.Errorf("group %d is alive after KillAndWait", cmd.Process.Pid)
	}
	KillAndWait(0, time.Second) // no group: nothing to do, no signal to anyone
}
