package judge

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// IsRunProcess reports whether pid belongs to a run of this daemon, an
// agent's or one of the daemon's own test runs. An agent's run is known by
// its token (control.RunTokenEnv, which its processes present anyway), or
// a run's process among its ancestors. A test run carries nothing of the
// kind, so that its code cannot tell it runs for the daemon: its processes
// are those whose ancestors include its first process, or whose process
// group is the one it leads, read from /proc, which the test's code cannot
// change. In its jail every process it starts stays below its first (the
// pid namespace's orphans go to the test's shell); unconfined, one that
// leaves the group and its parent is taken for a person's. The control API
// refuses such a process what is for people (defense in depth: in the
// sandbox and the jail a run cannot reach the socket at all).
func (j *Judge) IsRunProcess(pid int) bool {
	j.mu.Lock()
	pids := map[int]bool{}
	tokens := map[string]bool{}
	for _, r := range j.runs {
		if r.pid > 0 {
			pids[r.pid] = true
		}
		tokens[r.token] = true
	}
	groups := map[int]bool{}
	for p := range j.tests {
		pids[p] = true
		groups[p] = true
	}
	j.mu.Unlock()
	if len(tokens) == 0 && len(groups) == 0 {
		return false
	}
	if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil {
		prefix := []byte(control.RunTokenEnv + "=")
		for _, kv := range bytes.Split(env, []byte{0}) {
			if t, ok := bytes.CutPrefix(kv, prefix); ok && tokens[string(t)] {
				return true
			}
		}
	}
	for p, hops := pid, 0; p > 1 && hops < 64; hops++ {
		if pids[p] {
			return true
		}
		parent, group := statOf(p)
		if groups[group] {
			return true
		}
		p = parent
	}
	return false
}

// parentOf reads a process's parent from /proc; 0 when it cannot.
func parentOf(pid int) int {
	ppid, _ := statOf(pid)
	return ppid
}

// statOf reads a process's parent and process group from /proc; 0s when
// it cannot.
func statOf(pid int) (ppid, pgrp int) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// The command name is in parentheses and may hold anything: fields
	// are counted from the last ')'. After it: state, ppid, pgrp.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return ppid, pgrp
}

// statChange is fi's change time and inode number, which no process sets
// as it likes (a touch sets the modification time back, not these).
func statChange(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return strconv.FormatInt(st.Ctim.Nano(), 10) + " " + strconv.FormatUint(st.Ino, 10)
}
