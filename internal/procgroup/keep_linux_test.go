package procgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/dev/eventually"
)

// The test binary is its own keeper, and its own starter: with
// testKeeper set it is Keep, with testStarter set a process that starts
// a keeper of COMMAND and waits, to be killed with -9.
const (
	testKeeper  = "CTXGRAPHD_TEST_KEEPER"
	testStarter = "CTXGRAPHD_TEST_STARTER"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(testKeeper) == "1":
		os.Unsetenv(testKeeper)
		Keep(os.Args[2:]) // after "--"
	case os.Getenv(testStarter) == "1":
		os.Unsetenv(testStarter)
		cmd, end := keeperOf(os.Args[1:]...) // "--" and the command
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		end.close()
		// Until killed. Not select {}: with no goroutine left to wake it,
		// the runtime ends a process blocked so ("all goroutines are
		// asleep"), and the keeper sees its starter die before the test
		// kills it.
		time.Sleep(time.Hour)
		runtime.KeepAlive(end) // its end of the pipe stays open till then
	}
	os.Exit(m.Run())
}

// starterEnd is a starter's end of its keeper's pipe.
type starterEnd struct{ keeper, ours *os.File }

// close closes the keeper's end, once the keeper has its own.
func (e starterEnd) close() { e.keeper.Close() }

// keeperOf is the command that runs argv under a keeper (this test
// binary), in a group of its own, with the keeper's pipe as a starter
// gives it; the starter's end of the pipe stays open as long as the
// returned end is not closed, or the process lives.
func keeperOf(argv ...string) (*exec.Cmd, starterEnd) {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(os.Environ(), testKeeper+"=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, starterEnd{keeper: r, ours: w}
}

// marked lists the live processes whose environment holds mark: what is
// left of a test's tree.
func marked(mark string) []int {
	want := []byte(mark + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// newMark is an environment entry only this test's processes carry.
func newMark(t *testing.T) string {
	t.Cleanup(func() {
		for _, pid := range marked("CTXGRAPHD_TEST_MARK=" + t.Name()) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return "CTXGRAPHD_TEST_MARK=" + t.Name()
}

// escapees is a shell command that leaves three processes that no process
// group holds: one in a session of its own, one double-forked (its parent
// gone, init's were it not for the keeper), one with nohup; then it waits
// until they run.
const escapees = `setsid sleep 600 </dev/null >/dev/null 2>&1 &
( sleep 601 </dev/null >/dev/null 2>&1 & ) 
nohup sleep 602 </dev/null >/dev/null 2>&1 &
sleep 0.3`

// TestKeepEndsWhatItsChildLeft: the child exits, leaving processes in
// other sessions and orphans; none outlives the keeper, and the keeper
// exits as its child did.
func TestKeepEndsWhatItsChildLeft(t *testing.T) {
	mark := newMark(t)
	cmd, end := keeperOf("--", "sh", "-c", escapees+"\nexit 3")
	cmd.Env = append(cmd.Env, mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	end.close()
	defer end.ours.Close()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("the keeper ended %v, want exit status 3 as its child", err)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v of the child outlived its keeper", left)
	}
}

// TestKeepEndsTheTreeWhenItsStarterIsKilled: the starter (a daemon, a
// worker) is killed with -9 while the child and what it left run: the
// whole tree ends with it.
func TestKeepEndsTheTreeWhenItsStarterIsKilled(t *testing.T) {
	mark := newMark(t)
	starter := exec.Command(os.Args[0], "--", "sh", "-c", escapees+"\nsleep 600")
	starter.Env = append(os.Environ(), testStarter+"=1", mark)
	starter.Stderr = os.Stderr
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	// The keeper, sh, the three sleepers and sh's own sleep.
	if !eventually.Within(10*time.Second, func() bool { return len(marked(mark)) >= 6 }) {
		t.Fatalf("the tree did not start: %v", marked(mark))
	}
	starter.Process.Signal(syscall.SIGKILL)
	starter.Wait()
	if !eventually.Within(5*time.Second, func() bool { return len(marked(mark)) == 0 }) {
		t.Errorf("processes %v outlived their starter, killed with -9", marked(mark))
	}
}

// TestKeepExitsAsItsChild: whoever started the keeper sees the child's
// end: its exit status, or the signal that killed it.
func TestKeepExitsAsItsChild(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		signal syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"kill -TERM $$", -1, syscall.SIGTERM},
		{"kill -KILL $$", -1, syscall.SIGKILL},
		{"kill -INT $$", -1, syscall.SIGINT},
	} {
		t.Run(tc.script, func(t *testing.T) {
			cmd, end := keeperOf("--", "sh", "-c", tc.script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			end.close()
			defer end.ours.Close()
			cmd.Wait()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case tc.signal != 0 && (!ws.Signaled() || ws.Signal() != tc.signal):
				t.Errorf("the keeper ended %v, want killed by %v as its child", cmd.ProcessState, tc.signal)
			case tc.signal == 0 && (!ws.Exited() || ws.ExitStatus() != tc.code):
				t.Errorf("the keeper ended %v, want exit status %d as its child", cmd.ProcessState, tc.code)
			}
		})
	}
}

// TestKeepOutlivesTheSignalToItsGroup: a run is stopped by SIGTERM to its
// process group, which the keeper leads: the child ends by it (here with
// a trap, as claude flushes its session), the keeper lives on to end
// what the child left, and then exits as the child did.
func TestKeepOutlivesTheSignalToItsGroup(t *testing.T) {
	mark := newMark(t)
	cmd, end := keeperOf("--", "sh", "-c", "trap 'exit 7' TERM\n"+escapees+"\nwhile :; do sleep 0.1; done")
	cmd.Env = append(cmd.Env, mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	end.close()
	defer end.ours.Close()
	if !eventually.Within(10*time.Second, func() bool { return len(marked(mark)) >= 5 }) {
		t.Fatalf("the tree did not start: %v", marked(mark))
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("the keeper ended %v, want exit status 7 as its child", err)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v outlived the group's SIGTERM", left)
	}
}

// TestKeepWithoutAStartersPipeRunsItsChild: a keeper run with no pipe on
// its descriptor (by hand) does not take whatever is there for its
// starter's death: the child runs to its end.
func TestKeepWithoutAStartersPipeRunsItsChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--", "sh", "-c", "sleep 0.5; exit 4")
	cmd.Env = append(os.Environ(), testKeeper+"=1")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("the keeper without a pipe ended %v, want its child's exit status 4", err)
	}
}
