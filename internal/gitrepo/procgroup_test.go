//go:build unix

package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// waitPID waits for a command to write its pid to file, and returns it.
func waitPID(t *testing.T, file string) int {
	t.Helper()
	var data []byte
	eventually.True(t, 30*time.Second, func() bool {
		var err error
		data, err = os.ReadFile(file)
		return err == nil && strings.HasSuffix(string(data), "\n")
	}, "a pid in %s", file)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %q", file, data)
	}
	return pid
}

// gone reports whether pid has ended (or is a zombie nobody reaped yet)
// within a few seconds.
func gone(pid int) bool {
	return eventually.Within(5*time.Second, func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return syscall.Kill(pid, 0) != nil
		}
		i := strings.LastIndexByte(string(stat), ')')
		return i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
	})
}

// Cancelling a git command kills what git started along with it (a filter
// driver of the user's, an alias): the whole process group, not git alone,
// so that nothing is left running or holding our pipes.
func TestCancelKillsWhatGitStarted(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runGit(ctx, dir, nil, nil, "-c", "alias.hang=!echo $$ > "+pidFile+"; exec sleep 300", "hang")
		done <- err
	}()
	child := waitPID(t, pidFile)
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	cancel()
	if err := <-done; err == nil || exitCode(err) != -1 {
		t.Errorf("runGit = %v, want an error of a git that did not run to its end", err)
	}
	if !gone(child) {
		t.Errorf("process %d that git started still runs after its command was cancelled", child)
	}
}

// A process that left git's group and holds its output open does not hold
// a cancelled command up for long: the pipes are closed a few seconds after
// the kill.
func TestCancelDoesNotWaitForAnEscapedProcess(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runGit(ctx, dir, nil, nil, "-c", "alias.hang=!setsid sh -c 'echo $$ > "+pidFile+"; exec sleep 60' & sleep 300", "hang")
		done <- err
	}()
	escaped := waitPID(t, pidFile)
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("runGit succeeded, want the error of a cancelled command")
		}
	case <-time.After(30 * time.Second):
		t.Error("runGit still waits 30s after its command was cancelled, for a process that left its group")
		syscall.Kill(escaped, syscall.SIGKILL)
		<-done
	}
}
